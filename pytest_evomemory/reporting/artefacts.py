"""The output directory of a run, written as the run goes.

Layout (schema version in every JSON document, see docs/artefacts.md)::

    run.json                    resolved configs, versions, times, command line
    responses.jsonl             every agent response, task and feedback
    transcripts/<stream>.jsonl  every message and tool call, per stimulus
    scores.jsonl                one scored item per original task
    summary.json                metrics per stream and overall, thresholds

JSONL files are appended and flushed per record, so an interrupted run keeps all
that happened before the interruption; ``scores.jsonl`` is rewritten in stream
order at the end so that serial and parallel runs produce the same file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from .summary import SCHEMA_VERSION

_VERSIONED_PACKAGES = (
    "pytest-evomemory", "pytest", "pytest-xdist", "pluggy", "pyyaml", "pydantic",
    "datasets", "huggingface-hub", "openai", "math-verify", "pytest-json-report",
)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = sys.version.split()[0]
    return versions


def dumps(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)


def write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    """Write via a temporary file and rename, so readers never see half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)


class RunArtefacts:
    """Appends records to the run directory; only one process (the controller) writes."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "transcripts").mkdir(exist_ok=True)
        self._files: dict[str, IO[str]] = {}

    def _append(self, relative: str, record: Mapping[str, Any]) -> None:
        handle = self._files.get(relative)
        if handle is None:
            handle = (self.run_dir / relative).open("a", encoding="utf-8")
            self._files[relative] = handle
        handle.write(dumps(record) + "\n")
        handle.flush()

    def write_run(self, document: Mapping[str, Any]) -> None:
        write_json_atomically(self.run_dir / "run.json", {"schema_version": SCHEMA_VERSION, **document})

    def add_response(self, response: Mapping[str, Any]) -> None:
        without_transcript = {k: v for k, v in response.items() if k != "messages"}
        self._append("responses.jsonl", without_transcript)
        self._append(
            f"transcripts/{response['stream']}.jsonl",
            {
                "task_id": response["task_id"],
                "kind": response["kind"],
                "messages": response["messages"],
                "tool_calls": response["tool_calls"],
            },
        )

    def add_score(self, scored: Mapping[str, Any]) -> None:
        self._append("scores.jsonl", scored)

    def finalize_scores(self, scored: Sequence[Mapping[str, Any]], stream_order: Sequence[str]) -> None:
        """Rewrite scores.jsonl in stream order (arrival order differs under xdist)."""
        self._close("scores.jsonl")
        ordered = sorted(
            scored,
            key=lambda s: (stream_order.index(s["stream"]) if s["stream"] in stream_order else len(stream_order), s["position"]),
        )
        path = self.run_dir / "scores.jsonl"
        temporary = path.with_name(".scores.jsonl.tmp")
        temporary.write_text("".join(dumps(item) + "\n" for item in ordered), encoding="utf-8")
        os.replace(temporary, path)

    def restart_from(
        self, responses: Sequence[Mapping[str, Any]], scores: Sequence[Mapping[str, Any]]
    ) -> None:
        """Resume: keep only the completed episodes' records, dropping torn ones."""
        self.close()
        kept = {(r["stream"], r["task_id"]) for r in responses}
        _rewrite_jsonl(self.run_dir / "responses.jsonl", [
            {k: v for k, v in r.items() if k != "messages"} for r in responses
        ])
        _rewrite_jsonl(self.run_dir / "scores.jsonl", scores)
        for path in (self.run_dir / "transcripts").glob("*.jsonl"):
            stream = path.stem
            _rewrite_jsonl(path, [t for t in read_jsonl(path) if (stream, t.get("task_id")) in kept])

    def write_summary(self, document: Mapping[str, Any]) -> None:
        write_json_atomically(self.run_dir / "summary.json", {"schema_version": SCHEMA_VERSION, **document})

    def _close(self, relative: str) -> None:
        handle = self._files.pop(relative, None)
        if handle is not None:
            handle.close()

    def close(self) -> None:
        for relative in list(self._files):
            self._close(relative)


def _rewrite_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text("".join(dumps(record) + "\n" for record in records), encoding="utf-8")
    os.replace(temporary, path)


def read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    """Read a JSONL artefact, skipping a torn last line left by a killed process."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
