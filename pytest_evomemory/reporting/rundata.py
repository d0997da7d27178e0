"""A finished run as the reports read it: loaded from its run directory.

Kept apart from the page rendering (:mod:`.html`) and the statistics
(:mod:`.compare`), which both work on :class:`RunData`; the file names come from
:mod:`pytest_evomemory.rundir`, the one owner of the directory's format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvoMemoryError
from ..rundir import RESPONSES, RUN_DOCUMENT, SCHEMA_VERSION, SCORES, SUMMARY, TRANSCRIPTS, read_jsonl
from ..text import shorten
from . import artefactcheck as read


class ReportError(EvoMemoryError):
    """A run directory cannot be turned into a report (missing or unreadable artefacts)."""


@dataclass(frozen=True)
class RunData:
    """What a report needs from one run directory."""

    run_dir: Path
    label: str
    summary: Mapping[str, Any]
    run: Mapping[str, Any] = field(default_factory=dict)
    scores: Sequence[Mapping[str, Any]] = ()
    #: responses.jsonl: every agent response, task and feedback turns.
    responses: Sequence[Mapping[str, Any]] = ()
    #: transcripts/<stream>.jsonl, by stream.
    transcripts: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)

    @property
    def streams(self) -> dict[str, Mapping[str, Any]]:
        """Per-stream metrics in the benchmark's stream order.

        summary.json is written with sorted keys, so its own order is alphabetical;
        the run order comes from run.json's stream list, else from scores.jsonl.
        """
        streams = self.summary.get("streams")
        if not isinstance(streams, Mapping):
            return {}
        listed = self.run.get("streams")
        order = [s.get("name") for s in listed if isinstance(s, Mapping)] if isinstance(listed, list) else []
        order += [s.get("stream") for s in self.scores]
        rank: dict[object, int] = {}
        for name in order:
            rank.setdefault(name, len(rank))
        names = sorted(streams, key=lambda name: rank.get(name, len(rank)))
        return {name: streams[name] for name in names}

    @property
    def overall(self) -> Mapping[str, Any]:
        overall = self.summary.get("overall")
        return overall if isinstance(overall, Mapping) else {}


# --------------------------------------------------------------------------- loading


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error.strerror or error}") from None
    except (ValueError, RecursionError) as error:  # invalid JSON, not UTF-8, an integer of 5,000 digits
        raise ReportError(
            f"{path} is not valid JSON ({shorten(str(error), 120) if str(error) else 'nested too deeply'}); "
            "was the run interrupted while writing it?"
        ) from None
    if not isinstance(document, dict):
        raise ReportError(f"{path} does not hold a JSON object")
    return document


def load_run(run_dir: Path | str, label: str | None = None) -> RunData:
    """Read a finished run's artefacts; ``summary.json`` is the one that must exist."""
    directory = Path(run_dir)
    if not directory.is_dir():
        raise ReportError(
            f"{directory} is not a directory; pass a run directory such as evomemory-results/<run name>"
        )
    summary_path = directory / SUMMARY
    if not summary_path.is_file():
        raise ReportError(
            f"{directory} has no summary.json; it is not a finished evomemory run "
            "(the file is written when the pytest session ends)"
        )
    summary = _read_json(summary_path)
    version = summary.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ReportError(
            f"{summary_path} has schema version {version}, newer than this pytest-evomemory "
            f"understands ({SCHEMA_VERSION}); upgrade pytest-evomemory"
        )
    if not isinstance(summary.get("streams"), Mapping):
        raise ReportError(f"{summary_path} has no 'streams' object; it is not an evomemory summary")
    run = _read_json(directory / RUN_DOCUMENT) if (directory / RUN_DOCUMENT).is_file() else {}
    scores = list(read_jsonl(directory / SCORES))
    responses = list(read_jsonl(directory / RESPONSES))
    transcripts_dir = directory / TRANSCRIPTS
    transcripts = (
        {path.stem: read_jsonl(path) for path in sorted(transcripts_dir.glob("*.jsonl"))}
        if transcripts_dir.is_dir()
        else {}
    )
    problem = (
        read.damaged(summary_path, summary, read.SUMMARY)
        or read.damaged(directory / RUN_DOCUMENT, run, read.RUN_DOCUMENT)
        or read.damaged_record(directory / SCORES, scores, read.SCORE)
        or read.damaged_record(directory / RESPONSES, responses, read.RESPONSE)
        or next(
            (found for stream, records in transcripts.items()
             if (found := read.damaged_record(transcripts_dir / f"{stream}.jsonl", records, read.TRANSCRIPT))),
            None,
        )
    )
    if problem is not None:
        raise ReportError(problem)
    name = label if label is not None else _run_name(summary, run, directory)
    return RunData(
        run_dir=directory, label=name, summary=summary, run=run, scores=scores,
        responses=responses, transcripts=transcripts,
    )


def _run_name(summary: Mapping[str, Any], run: Mapping[str, Any], directory: Path) -> str:
    name = summary.get("run")
    if not name:
        config = run.get("run")
        name = config.get("name") if isinstance(config, Mapping) else None
    return str(name) if name else directory.name


def load_runs(run_dirs: Sequence[Path | str], labels: Sequence[str] | None = None) -> list[RunData]:
    """Load several runs; labels default to run names, made unique so legends are unambiguous."""
    if labels is not None and len(labels) != len(run_dirs):
        raise ReportError(
            f"{len(labels)} label(s) given for {len(run_dirs)} run directories; give one label per run"
        )
    if labels is not None and any(not label.strip() for label in labels):
        raise ReportError("labels must not be empty")
    runs = [load_run(d, labels[i] if labels is not None else None) for i, d in enumerate(run_dirs)]
    if labels is None:
        seen: dict[str, int] = {}
        unique = []
        for run in runs:
            count = seen.get(run.label, 0) + 1
            seen[run.label] = count
            unique.append(run if count == 1 else _relabel(run, f"{run.label} #{count}"))
        runs = unique
    return runs


def _relabel(run: RunData, label: str) -> RunData:
    return RunData(
        run_dir=run.run_dir, label=label, summary=run.summary, run=run.run, scores=run.scores,
        responses=run.responses, transcripts=run.transcripts,
    )


# --------------------------------------------------------------------------- formatting
