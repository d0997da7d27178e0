"""A Hugging Face Hub stand-in on 127.0.0.1 and upstream-shaped test data.

The server answers the routes huggingface_hub 2.x uses for ``hf_hub_download``
(``HEAD``/``GET /datasets/<repo>/resolve/<rev>/<path>``, with the ``X-Repo-Commit``
and ``ETag`` headers it requires, and ``X-Error-Code`` on errors) plus the
``/api/datasets/<repo>/revision/<rev>`` info route, serving files in the exact
upstream layout and format. Every record below is invented for these tests.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pytest_evomemory.streams.evomemory import catalog
from pytest_evomemory.streams.evomemory.stream import HubStream

GOOD_TOKEN = "hf_test_token_with_access"

# --------------------------------------------------------------------------- records

AIME_RECORDS: list[dict[str, Any]] = [
    {
        "id": 60,
        "problem": "Find the remainder when $7^{2}$ is divided by $10$.",
        "solution": "It is 49, so 9.",
        "answer": "9",
        "url": "https://example.invalid/aime/1",
        "year": "2024",
    },
    {
        "id": 61,
        "problem": "Compute $3 \\cdot 4 + 1$.",
        "solution": "Twelve plus one.",
        "answer": "13",
        "url": "https://example.invalid/aime/2",
        "year": "2024",
    },
    {
        "id": 62,
        "problem": "What is $100 - 1$?",
        "solution": "Subtract.",
        "answer": "099",
        "url": "https://example.invalid/aime/3",
        "year": "2024",
    },
]

GPQA_FIELDS = [
    "Pre-Revision Question",
    "Pre-Revision Correct Answer",
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
    "Explanation",
    "Record ID",
    "High-level domain",
    "Subdomain",
    "Writer's Difficulty Estimate",
]


def _gpqa(
    record_id: str, question: str, correct: str, wrong: list[str], domain: str, sub: str
) -> dict[str, str]:
    return {
        "Pre-Revision Question": question,
        "Pre-Revision Correct Answer": correct,
        "Question": question,
        "Correct Answer": correct,
        "Incorrect Answer 1": wrong[0],
        "Incorrect Answer 2": wrong[1],
        "Incorrect Answer 3": wrong[2],
        "Explanation": "Invented for a test.",
        "Record ID": record_id,
        "High-level domain": domain,
        "Subdomain": sub,
        "Writer's Difficulty Estimate": "Hard graduate level",
    }


GPQA_RECORDS = [
    _gpqa(
        "recTEST0000000001",
        'Which invented particle, "zorblon", has spin 1/2?\nPick one.',
        " The zorblon ",
        ["The quibit", "The flarn", "The snark"],
        "Physics",
        "Quantum Mechanics",
    ),
    _gpqa(
        "recTEST0000000002",
        "Which made-up reagent turns blue, in acid?",
        "Bluezine",
        ["Redzine", "Greenzine", "Grayzine"],
        "Chemistry",
        "Organic Chemistry",
    ),
    _gpqa(
        "recTEST0000000003",
        "Which fictional organelle stores glimmer?",
        "Glimmersome",
        ["Ribosome", "Lysosome", "Peroxisome"],
        "Biology",
        "Molecular Biology",
    ),
]

MMLU_RECORDS: list[dict[str, Any]] = [
    {
        "question_id": 70,
        "question": "An invented economy taxes gizmos; supply falls. What happens to price?",
        "options": ["Rises", "Falls", "Unchanged"],
        "answer": "A",
        "answer_index": 0,
        "cot_content": "",
        "category": "economics",
        "src": "ori_mmlu-high_school_macroeconomics",
    },
    {
        "question_id": 71,
        "question": "Which invented law concerns widgets?",
        "options": ["Law W", "Law X", "Law Y", "Law Z"],
        "answer": "D",
        "answer_index": 3,
        "cot_content": "",
        "category": "law",
        "src": "ori_mmlu-professional_law",
    },
    {
        "question_id": 72,
        "question": "A made-up beam carries 10 N; what is twice that?",
        "options": ["5 N", "10 N", "20 N", "40 N", "80 N", "1 N", "2 N", "4 N", "8 N", "16 N"],
        "answer": "C",
        "answer_index": 2,
        "cot_content": "",
        "category": "engineering",
        "src": "stemez-Mechanics",
    },
    {
        "question_id": 73,
        "question": "Which invented philosopher wrote 'On Nothing Much'?",
        "options": ["Ada Q", "Bo R", "Cy S", "Di T"],
        "answer": "B",
        "answer_index": 1,
        "cot_content": "",
        "category": "philosophy",
        "src": "ori_mmlu-philosophy",
    },
]


def _toolbench(instruction: str, repo: str, model: str, domain: str, api_name: str) -> dict[str, Any]:
    call = f"torch.hub.load(repo_or_dir='{repo}', model='{model}', pretrained=True)"
    return {
        "code": f"###Instruction: {instruction}\n###Output: {{'domain': '{domain}', 'api_call': "
        f"\"model = torch.hub.load('{repo}', '{model}', pretrained=True)\", 'api_provider': 'PyTorch'}}\n",
        "api_call": call,
        "provider": "PyTorch",
        "api_data": {
            "domain": domain,
            "framework": "PyTorch",
            "functionality": "Invented",
            "api_name": api_name,
            "api_call": call,
            "api_arguments": {"pretrained": "True"},
            "python_environment_requirements": ["torch"],
            "example_code": ["import torch"],
            "performance": {"dataset": "None", "accuracy": "n/a"},
            "description": "Invented.",
        },
    }


TOOLBENCH_RECORDS = [
    _toolbench(
        "Give me an API that labels invented fruit in photos.",
        "acme/fruitnets",
        "fruit_r18",
        "Classification",
        "FruitNet",
    ),
    _toolbench(
        "I need an API to segment made-up street scenes.",
        "acme/vision",
        "seg_tiny",
        "Semantic Segmentation",
        "SegTiny",
    ),
]

# --------------------------------------------------------------------------- encoders


def parquet_bytes(records: list[dict[str, Any]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(records), sink)
    return sink.getvalue()


def csv_bytes(records: list[dict[str, str]], fields: list[str]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue().encode("utf-8")


def jsonl_bytes(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode("utf-8")


def upstream_files() -> dict[str, bytes]:
    """Stream name -> file content in the upstream format."""
    return {
        "aime_2024": parquet_bytes(AIME_RECORDS),
        "gpqa_diamond": csv_bytes(GPQA_RECORDS, GPQA_FIELDS),
        "mmlu_pro": parquet_bytes(MMLU_RECORDS),
        "toolbench": jsonl_bytes(TOOLBENCH_RECORDS),
    }


# --------------------------------------------------------------------------- server


@dataclass
class FakeHub:
    """What the stand-in serves and what it was asked; tests mutate it freely."""

    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    revisions: dict[str, str] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)
    tokens: set[str] = field(default_factory=lambda: {GOOD_TOKEN})
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""
    #: File name -> how its download misbehaves: ``"500"`` (a server error), ``"cut"``
    #: (the connection closes halfway through the announced body), ``"html"`` (a
    #: login page served as the file, status 200).
    faults: dict[str, str] = field(default_factory=dict)

    def put(self, stream: HubStream, content: bytes) -> None:
        source = stream.source
        self.files[(source.repo_id, source.filename)] = content
        self.revisions[source.repo_id] = source.revision
        if source.gated:
            self.gated.add(source.repo_id)

    def remove(self, stream: HubStream) -> None:
        self.files.pop((stream.source.repo_id, stream.source.filename), None)

    def downloads(self) -> list[str]:
        return [path for method, path in self.requests if method == "GET" and "/resolve/" in path]


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(
            self,
            status: int,
            body: bytes = b"",
            headers: dict[str, str] | None = None,
            head: bool = False,
            cut: bool = False,
        ) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body[: len(body) // 2] if cut else body)
            if cut:
                self.close_connection = True

        def _error(self, status: int, code: str, message: str, head: bool) -> None:
            body = json.dumps({"error": message}).encode()
            self._send(
                status,
                body,
                {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"},
                head,
            )

        def _repo_and_rest(self, path: str, prefix: str, marker: str) -> tuple[str, str, str] | None:
            if not path.startswith(prefix) or marker not in path:
                return None
            repo, rest = path[len(prefix) :].split(marker, 1)
            revision, _, filename = rest.partition("/")
            return repo, unquote(revision), unquote(filename)

        def _authorized(self, repo: str, head: bool) -> bool:
            if repo not in hub.gated:
                return True
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to dataset {repo} is restricted. You must be authenticated to access it.",
                    head,
                )
                return False
            if auth[len("Bearer ") :] not in hub.tokens:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to dataset {repo} is restricted and you are not in the authorized list.",
                    head,
                )
                return False
            return True

        def _serve(self, head: bool) -> None:
            path = self.path.split("?", 1)[0]
            hub.requests.append(("HEAD" if head else "GET", path))
            info = self._repo_and_rest(path, "/api/datasets/", "/revision/")
            if info is not None:
                repo, revision, _ = info
                if repo not in hub.revisions:
                    return self._error(404, "RepoNotFound", f"Repository {repo} not found", head)
                if not self._authorized(repo, head):
                    return
                siblings = [{"rfilename": name} for (r, name) in hub.files if r == repo]
                body = json.dumps(
                    {
                        "id": repo,
                        "sha": hub.revisions[repo],
                        "private": False,
                        "gated": "manual" if repo in hub.gated else False,
                        "siblings": siblings,
                    }
                ).encode()
                return self._send(200, body, {"Content-Type": "application/json"}, head)
            resolved = self._repo_and_rest(path, "/datasets/", "/resolve/")
            if resolved is None:
                return self._error(404, "RepoNotFound", "unknown route", head)
            repo, revision, filename = resolved
            if repo not in hub.revisions:
                return self._error(404, "RepoNotFound", f"Repository {repo} not found", head)
            if revision not in (hub.revisions[repo], "main"):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            if not self._authorized(repo, head):
                return
            content = hub.files.get((repo, filename))
            if content is None:
                return self._error(404, "EntryNotFound", f"{filename} does not exist", head)
            fault = hub.faults.get(filename)
            if fault == "500":
                return self._error(500, "", "Internal Server Error", head)
            if fault == "html":
                content = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>\n"
            etag = hashlib.sha256(content).hexdigest()
            self._send(
                200,
                content,
                {
                    "X-Repo-Commit": hub.revisions[repo],
                    "ETag": f'"{etag}"',
                    "Content-Type": "application/octet-stream",
                    "Accept-Ranges": "bytes",
                },
                head,
                cut=fault == "cut",
            )

        def do_HEAD(self) -> None:
            self._serve(head=True)

        def do_GET(self) -> None:
            self._serve(head=False)

    return Handler


def pin_to(monkeypatch: pytest.MonkeyPatch, name: str, content: bytes | None) -> HubStream:
    """Replace the catalog's pin of ``name`` with the hash of ``content`` (``None``:
    no pinned hash). The genuine files are not available to tests, so the streams
    whose genuine hash is pinned are re-pinned to our invented files."""
    stream = catalog.STREAMS[name]
    size = None if content is None else len(content)
    digest = None if content is None else hashlib.sha256(content).hexdigest()
    changed = replace(stream, source=replace(stream.source, size=size, sha256=digest, rows=None))
    monkeypatch.setitem(catalog.STREAMS, name, changed)
    return changed


def count_to(monkeypatch: pytest.MonkeyPatch, name: str, rows: int | None) -> HubStream:
    """Replace the catalog's record count of ``name`` (``None``: not checked): the
    invented files hold a few records, the genuine ones hundreds."""
    stream = catalog.STREAMS[name]
    changed = replace(stream, source=replace(stream.source, rows=rows))
    monkeypatch.setitem(catalog.STREAMS, name, changed)
    return changed


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A running hub stand-in holding all four upstream files; the environment points
    huggingface_hub and the data dir at it and at ``tmp_path``. The streams pinned
    by hash upstream (GPQA, MMLU-Pro) are pinned to the invented files; AIME and
    APIBench stay unpinned, as in the catalog, and no stream's record count is checked."""
    state = FakeHub()
    for name, content in upstream_files().items():
        if catalog.STREAMS[name].source.pinned:
            pin_to(monkeypatch, name, content)
        else:
            count_to(monkeypatch, name, None)
        state.put(catalog.STREAMS[name], content)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", state.url)
    monkeypatch.setenv("EVOMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    from huggingface_hub import constants

    # read once, when huggingface_hub is first imported: a test that set HF_HUB_OFFLINE
    # then would leave every later test offline
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def data_dir(hub: FakeHub, tmp_path: Path) -> Path:
    return tmp_path / "data"
