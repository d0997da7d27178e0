"""LoCoMo's data: the pinned upstream file, fetched from a stand-in of the raw host.

The stand-in serves ``/<owner>/<repo>/<commit>/<path>`` on 127.0.0.1, the layout
of raw.githubusercontent.com, with a zip written here in the upstream layout
(``data/multimodal_dialog/locomo10_v2/<n>.json``, the per-conversation schema);
a test source pins that zip's size and hash, as the catalog pins the genuine one.
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
import zipfile
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.core.errors import DataError
from pytest_evomemory.streams import get_source, load_benchmark
from pytest_evomemory.streams.locomo import LOCOMO10_CONVERSATIONS, LocomoBenchmark, read_file
from pytest_evomemory.streams.locomo.convert import to_stream
from pytest_evomemory.streams.locomo.materialize import local_path
from pytest_evomemory.streams.locomo.schema import read_samples, read_zip_member
from pytest_evomemory.streams.locomo.source import LOCOMO10, GitHubFile
from pytest_evomemory.streams.provenance import provenance_line

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def conversation(speakers: tuple[str, str], topic: str) -> dict[str, Any]:
    """One conversation in the zip's per-file schema (invented)."""
    a, b = speakers
    return {
        "speaker_a": a,
        "speaker_b": b,
        "session_1_date_time": "9:00 am on 1 May, 2023",
        "session_1": [
            {"speaker": a, "dia_id": "D1:1", "text": f"I started {topic} yesterday."},
            {"speaker": b, "dia_id": "D1:2", "text": "How exciting!", "blip_caption": "a photo of a cake",
             "img_url": ["https://example.invalid/x.jpg"], "query": "cake"},
        ],
        "session_2_date_time": "5:30 pm on 20 May, 2023",
        "session_2": [{"speaker": a, "dia_id": "D2:1", "text": f"{topic} is going well."}],
        "session_3_date_time": "1:00 pm on 2 June, 2023",  # a date without its session, as upstream has
        "qa": [
            {"question": f"What did {a} start?", "answer": topic, "evidence": ["D1:1"], "category": 4},
            {"question": f"When did {a} start {topic}?", "answer": "30 April 2023", "evidence": ["D1:1"], "category": 2},
            {"question": f"What did {b} bake?", "adversarial_answer": "a cake", "evidence": ["D1:2"], "category": 5},
        ],
        "session_1_observation": {}, "session_1_summary": "generated, unused",
    }


def make_zip(names: dict[str, dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/multimodal_dialog/locomo10_v2/", "")
        for stem, document in names.items():
            archive.writestr(f"data/multimodal_dialog/locomo10_v2/{stem}.json", json.dumps(document))
    return buffer.getvalue()


ZIP = make_zip({"7": conversation(("Ada", "Ben"), "knitting"), "12": conversation(("Cy", "Dee"), "rowing")})
SOURCE = GitHubFile(
    repo_id="snap-research/locomo", revision=COMMIT, filename="data/locomo10.zip", format="locomo_zip",
    size=len(ZIP), sha256=hashlib.sha256(ZIP).hexdigest(), license="CC BY-NC 4.0 (test)",
)


class RawHost:
    """A stand-in for raw.githubusercontent.com: files by ``/<repo>/<commit>/<path>``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.requests.append(self.path)
                body = host.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b"404: Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def serve(self, source: GitHubFile, body: bytes) -> None:
        self.files[f"/{source.repo_id}/{source.revision}/{source.filename}"] = body

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RawHost]:
    server = RawHost()
    monkeypatch.setenv("EVOMEMORY_LOCOMO_URL", server.url)
    monkeypatch.setenv("EVOMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("EVOMEMORY_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield server
    server.close()


def load(names: list[str] | None = None, **config: Any) -> list[Any]:
    benchmark = LocomoBenchmark(SOURCE, ("conv-7", "conv-12"))
    chosen = names or ["conv-7", "conv-12"]
    return benchmark.load(BenchmarkConfig(benchmark="locomo", **config), Path.cwd(), chosen)


def test_the_catalog_pins_the_genuine_file() -> None:
    assert LOCOMO10.repo_id == "snap-research/locomo"
    assert LOCOMO10.revision == "e76cdff4a04fce19090596d49862fe87a5c15aaa"
    assert (LOCOMO10.size, LOCOMO10.sha256[:12]) == (626_797, "5c342973da4b")
    assert "CC BY-NC 4.0" in LOCOMO10.license
    assert LOCOMO10.url("https://raw.githubusercontent.com") == (
        "https://raw.githubusercontent.com/snap-research/locomo/e76cdff4a04fce19090596d49862fe87a5c15aaa/data/locomo10.zip"
    )
    assert len(LOCOMO10_CONVERSATIONS) == 10 and LOCOMO10_CONVERSATIONS[0] == "conv-26"
    with pytest.raises(ValueError, match="40-hex"):
        GitHubFile("a/b", "main", "f", "locomo_zip", 1, "0" * 64, "")


def test_first_use_downloads_verifies_and_records_where_it_came_from(host: RawHost, tmp_path: Path) -> None:
    host.serve(SOURCE, ZIP)
    streams = load()
    assert host.requests == [f"/snap-research/locomo/{COMMIT}/data/locomo10.zip"]
    assert [s.name for s in streams] == ["conv-7", "conv-12"]
    first = streams[0]
    assert (len(first), len(first.sessions), first.feedback, first.ingest) == (3, 2, False, "memory")
    assert [turn.dia_id for session in first.sessions for turn in session.turns] == ["D1:1", "D1:2", "D2:1"]
    assert first.sessions[0].turns[1].image_caption == "a photo of a cake"
    assert first.provenance["sha256"] == SOURCE.sha256 and first.provenance["verified"]
    line = provenance_line(first)
    assert "snap-research/locomo@0123456789ab:data/locomo10.zip" in line and "license: CC BY-NC 4.0" in line
    assert local_path(SOURCE, tmp_path / "data").read_bytes() == ZIP


def test_a_file_in_place_is_used_without_network(host: RawHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.serve(SOURCE, ZIP)
    load()
    host.close()
    monkeypatch.setenv("EVOMEMORY_OFFLINE", "1")
    assert [s.name for s in load()] == ["conv-7", "conv-12"]
    assert len(host.requests) == 1


def test_bytes_other_than_the_pin_are_never_installed(host: RawHost, tmp_path: Path) -> None:
    host.serve(SOURCE, make_zip({"7": conversation(("Ada", "Ben"), "EDITED"), "12": conversation(("Cy", "Dee"), "x")}))
    with pytest.raises(DataError, match=r"not the pinned file: its sha256 is [0-9a-f]{64}.*the pin is sha256 " + SOURCE.sha256):
        load()
    assert not local_path(SOURCE, tmp_path / "data").exists()


def test_a_wrong_hand_placed_file_is_refused_with_both_hashes(host: RawHost, tmp_path: Path) -> None:
    path = local_path(SOURCE, tmp_path / "data")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not the file")
    with pytest.raises(DataError, match=r"is not the pinned file of .*delete it"):
        load()
    assert host.requests == []


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", r"answered HTTP 404; the file is not at that commit there; check EVOMEMORY_LOCOMO_URL"),
        ("offline", r"is missing, and EVOMEMORY_OFFLINE/HF_HUB_OFFLINE is set"),
        ("bad_url", r"EVOMEMORY_LOCOMO_URL: 'ftp://x' is not an http:// or https:// URL"),
        ("unreachable", r"could not be reached .*check the network or EVOMEMORY_LOCOMO_URL"),
    ],
)
def test_every_failure_says_what_to_do(host: RawHost, monkeypatch: pytest.MonkeyPatch, setup: str, message: str) -> None:
    if setup == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    elif setup == "bad_url":
        monkeypatch.setenv("EVOMEMORY_LOCOMO_URL", "ftp://x")
    elif setup == "unreachable":
        host.close()
    with pytest.raises(DataError, match=message):
        load()


def test_a_mirror_that_does_not_speak_http_is_one_line_not_a_traceback(
    host: RawHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An EVOMEMORY_LOCOMO_URL port answering with something other than HTTP used to
    escape as http.client.BadStatusLine (not an OSError) with a traceback."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)
            connection.sendall(b"GARBAGE\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    monkeypatch.setenv("EVOMEMORY_LOCOMO_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        with pytest.raises(DataError, match=r"could not be reached \(BadStatusLine: GARBAGE\); check the network or EVOMEMORY_LOCOMO_URL"):
            load()
    finally:
        thread.join(5)
        listener.close()


def test_selection_and_limit_keep_the_first_questions_and_every_session(host: RawHost) -> None:
    host.serve(SOURCE, ZIP)
    (stream,) = load(["conv-12"], limit=2, ingest="agent")
    assert [s.task_id for s in stream.samples] == ["q001", "q002"]
    assert len(stream.sessions) == 2 and stream.ingest == "agent"
    assert stream.ingestion_ids == ("session_1", "session_2")


def test_the_pinned_benchmark_is_registered_and_checks_names_before_the_network() -> None:
    from pytest_evomemory.core.errors import ConfigError

    assert list(get_source("locomo").stream_names(BenchmarkConfig(benchmark="locomo"))) == list(LOCOMO10_CONVERSATIONS)
    with pytest.raises(ConfigError, match=r"unknown stream\(s\) 'conv-1'.*conv-26"):
        load_benchmark(BenchmarkConfig(benchmark="locomo", streams=["conv-1"]), Path.cwd())


def test_evomemory_data_fetches_verifies_and_locates_locomo(
    host: RawHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evomemory data ... --benchmark locomo`` uses the run's own materializer: one
    line per conversation, naming the one pinned file."""
    from pytest_evomemory import streams
    from pytest_evomemory.cli import main

    monkeypatch.setattr(streams, "get_source", lambda name: LocomoBenchmark(SOURCE, ("conv-7", "conv-12")))
    path = local_path(SOURCE, tmp_path / "data")

    def data(*argv: str) -> tuple[int, list[str], list[str]]:
        status = main(["data", *argv, "--benchmark", "locomo"])
        captured = capsys.readouterr()
        return status, captured.out.splitlines(), captured.err.splitlines()

    assert data("where") == (0, [f"data_dir\t{tmp_path / 'data'}", f"conv-7\t{path}\tmissing",
                                 f"conv-12\t{path}\tmissing"], [])
    status, out, err = data("verify")
    assert status == 1 and out == [] and "is missing" in err[0] and "evomemory data fetch --benchmark locomo" in err[0]
    assert host.requests == []
    host.serve(SOURCE, ZIP)
    fetched = data("fetch")
    assert fetched == (0, [f"conv-7\tverified\tsha256 {SOURCE.sha256}\t3 questions\t{path}",
                           f"conv-12\tverified\tsha256 {SOURCE.sha256}\t3 questions\t{path}"], [])
    host.close()
    monkeypatch.setenv("EVOMEMORY_OFFLINE", "1")
    assert data("verify") == fetched and data("fetch", "--stream", "conv-12")[1] == fetched[1][1:]
    assert len(host.requests) == 1
    status, _, err = data("verify", "--stream", "conv-1")
    assert status == 2 and "unknown stream(s) 'conv-1' (did you mean 'conv-12'?); available: conv-7, conv-12" in err[0]


# ----------------------------------------------------------------------- the schema


def test_both_upstream_layouts_read_the_same_conversation() -> None:
    document = conversation(("Ada", "Ben"), "knitting")
    from_zip = read_zip_member("data/x/7.json", document)
    body = {key: value for key, value in document.items() if key.startswith(("speaker", "session_"))}
    from_list = read_samples([{"sample_id": "conv-7", "conversation": body, "qa": document["qa"]}], "f.json")[0]
    assert from_zip == from_list
    assert from_zip.questions[2].adversarial_answer == "a cake" and from_zip.questions[2].answer is None


def test_evidence_entries_with_several_ids_or_typos_give_the_ids_they_hold() -> None:
    document = conversation(("Ada", "Ben"), "x")
    document["qa"][0]["evidence"] = ["D8:6; D9:17", "D9:1 D4:4", "D:11:26", "D1:1"]
    question = read_zip_member("7.json", document).questions[0]
    assert question.evidence_ids == ("D8:6", "D9:17", "D9:1", "D4:4", "D:11:26", "D1:1")


def test_evidence_naming_no_turn_is_reported_and_left_out_of_recall_not_silently_capping_it() -> None:
    """The pinned file has evidence naming no turn (conv-42 q059 'D10:19', conv-47 q039
    'D4:36'), a bare 'D' (conv-42 q089) and 'D:11:26' for turn D11:26 (conv-43 q019).
    Counting an id that names no turn would cap the question's evidence recall below 1
    whatever the memory recalls; it is listed instead, on the question and the stream."""
    document = conversation(("Ada", "Ben"), "x")
    document["qa"][0]["evidence"] = ["D:1:1", "D01:02", "D", "D9:9", "D1:1"]
    document["qa"][1]["evidence"] = ["D7:7"]
    stream = to_stream(read_zip_member("7.json", document), seed=0, limit=None, ingest="memory",
                       provenance={}, source="t")
    first, second, third = stream.samples
    assert first.metadata["evidence_ids"] == ["D1:1", "D1:2"]
    assert first.metadata["evidence_unmatched"] == ["D", "D9:9"]
    assert second.metadata["evidence_ids"] == [] and second.metadata["evidence_unmatched"] == ["D7:7"]
    assert "evidence_unmatched" not in third.metadata
    assert stream.provenance["evidence_unmatched"] == 2
    assert "the evidence of 2 (first q001) names a turn the conversation lacks" in stream.description


def test_session_keys_with_leading_zeros_are_read_and_a_number_given_twice_is_refused() -> None:
    """'session_01' used to stop the reader with a KeyError traceback ('session_1')."""
    document = conversation(("Ada", "Ben"), "x")
    document["session_01"] = document.pop("session_1")
    document["session_01_date_time"] = document.pop("session_1_date_time")
    assert [s.index for s in read_zip_member("7.json", document).sessions] == [1, 2]
    document["session_1"] = document["session_2"]
    with pytest.raises(DataError, match=r"7.json: session_1: 'session_01' and 'session_1' are both session 1; keep one"):
        read_zip_member("7.json", document)


@pytest.mark.parametrize(("value", "message"), [
    (float("nan"), r"qa\[0\]: 'answer' is nan, not an answer"),
    (float("inf"), r"qa\[0\]: 'answer' is inf, not an answer"),
])
def test_a_gold_answer_that_is_not_a_finite_number_is_refused(value: float, message: str) -> None:
    """NaN used to become the gold text 'nan' and be scored against."""
    document = conversation(("Ada", "Ben"), "x")
    document["qa"][0]["answer"] = value
    with pytest.raises(DataError, match=message):
        read_zip_member("7.json", document)


@pytest.mark.parametrize(("where", "message"), [
    ("text", r"7.json: c: session_1\[0\]: key 'text' holds a lone surrogate \('\\ud800'\) at character 3"),
    ("answer", r"7.json: c: qa\[0\]: key 'answer' holds a lone surrogate"),
    ("caption", r"7.json: c: session_1\[1\]: key 'blip_caption' holds a lone surrogate"),
])
def test_a_lone_surrogate_is_refused_at_read_naming_the_turn_or_question(where: str, message: str) -> None:
    """JSON's "\\ud800" decodes to a lone surrogate: the in-process memory stored it and
    SQLite refused it mid-ingestion, failing the stream after others had run."""
    document = conversation(("Ada", "Ben"), "x")
    if where == "text":
        document["session_1"][0]["text"] = "ab \ud800"
    elif where == "answer":
        document["qa"][0]["answer"] = "x\ud800"
    else:
        document["session_1"][1]["blip_caption"] = "\udc00"
    with pytest.raises(DataError, match=message + r".*not valid Unicode; fix that escape in the file"):
        read_samples(json.loads(json.dumps([{"sample_id": "c", "conversation": document, "qa": document["qa"]}])), "7.json")


def test_an_empty_qa_list_is_refused_saying_so() -> None:
    document = conversation(("Ada", "Ben"), "x")
    document["qa"] = []
    with pytest.raises(DataError, match=r"7.json: key 'qa' is an empty list, so this conversation has no question"):
        read_zip_member("7.json", document)


def _broken(change: str) -> dict[str, Any]:
    document = conversation(("Ada", "Ben"), "x")
    if change == "no_date":
        del document["session_2_date_time"]
    elif change == "category":
        document["qa"][0]["category"] = 6
    elif change == "no_answer":
        del document["qa"][0]["answer"]
    elif change == "duplicate_dia":
        document["session_2"][0]["dia_id"] = "D1:1"
    elif change == "turn_text":
        document["session_1"][0]["text"] = 5
    elif change == "no_sessions":
        document = {k: v for k, v in document.items() if not k.startswith("session_")}
    return document


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("no_date", r"7.json: session_2: 'session_2_date_time' is missing"),
        ("category", r"qa\[0\]: 'category' must be 1, 2, 3, 4 or 5, got 6"),
        ("no_answer", r"qa\[0\]: a category 4 question needs a non-empty 'answer'"),
        ("duplicate_dia", r"dia_id 'D1:1' appears twice"),
        ("turn_text", r"session_1\[0\]: key 'text' must be text, got a number"),
        ("no_sessions", r"no non-empty 'session_<N>' list"),
    ],
)
def test_a_malformed_conversation_is_refused_naming_where(change: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        read_zip_member("7.json", _broken(change))


def test_the_bundled_sample_is_in_the_readme_layout_with_every_category() -> None:
    from pytest_evomemory.streams.locomo import SAMPLE_FILE

    conversations = read_file(SAMPLE_FILE)
    assert [c.sample_id for c in conversations] == ["conv-sample-1", "conv-sample-2"]
    for found in conversations:
        assert {q.category for q in found.questions} == {1, 2, 3, 4, 5}


# ----------------------------------------------------------------------- config keys


def test_ingest_is_refused_under_a_benchmark_that_does_not_read_it(write_run_config: Callable[..., Path]) -> None:
    from pytest_evomemory.configs.load import load_run_config
    from pytest_evomemory.core.errors import ConfigError

    with pytest.raises(ConfigError, match="key 'ingest' is read only by benchmark locomo or locomo_sample"):
        load_run_config(write_run_config(benchmark={"benchmark": "sample", "ingest": "memory"}))
    loaded = load_run_config(write_run_config(benchmark={"benchmark": "locomo_sample", "ingest": "agent"}))
    assert loaded.benchmark.ingest == "agent"
    with pytest.raises(ConfigError, match="key 'data_dir' is read only by benchmark evomemory_single_turn or locomo"):
        load_run_config(write_run_config(benchmark={"benchmark": "locomo_sample", "data_dir": "data"}))


def test_full_context_needs_an_arm_without_memory(write_run_config: Callable[..., Path]) -> None:
    from pytest_evomemory.configs.load import load_run_config
    from pytest_evomemory.core.errors import ConfigError

    model = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    with pytest.raises(ConfigError, match=r"key 'full_context'.*set memory_strategy to none"):
        load_run_config(write_run_config(
            benchmark={"benchmark": "locomo_sample"},
            agent={"kind": "tiny", "memory_strategy": "deterministic_recall", "full_context": True, "model": model},
        ))
    with pytest.raises(ConfigError, match=r"key 'full_context' is read by kind 'tiny'.*not by 'recall_baseline'"):
        load_run_config(write_run_config(
            benchmark={"benchmark": "locomo_sample"},
            agent={"kind": "recall_baseline", "memory_strategy": "none", "full_context": True},
        ))
    loaded = load_run_config(write_run_config(
        benchmark={"benchmark": "locomo_sample"},
        agent={"kind": "tiny", "memory_strategy": "none", "full_context": True, "model": model},
    ))
    assert loaded.agent.full_context
    from pytest_evomemory.models.identity import run_identity

    assert run_identity(loaded)["agent"]["full_context"] is True  # told apart from the control arm
    control = load_run_config(write_run_config(benchmark={"benchmark": "locomo_sample"},
                                               agent={"kind": "recall_baseline", "memory_strategy": "none"}))
    assert "full_context" not in run_identity(control)["agent"]
