"""A finished run as the reports read it: loaded from its run directory.

Kept apart from the page rendering (:mod:`.html`) and the statistics
(:mod:`.compare`), which both work on :class:`RunData`; the file names come from
:mod:`pytest_evomemory.rundir`, the one owner of the directory's format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import boundedread
from ..errors import EvoMemoryError
from ..evaluation.modes import headline_metric
from ..rundir import RESPONSES, RUN_DOCUMENT, SCHEMA_VERSION, SCORES, SUMMARY, TRANSCRIPTS, iter_jsonl
from ..text import shorten
from . import artefactcheck as read
from .summary import RESPONSE_COUNTS, SCORE_COUNTS, StreamMetrics, records_disagree
from .summary import counted as counted_figures


class ReportError(EvoMemoryError):
    """A run directory cannot be turned into a report (missing or unreadable artefacts)."""


@dataclass(frozen=True)
class RunData:
    """What a report needs from one run directory.

    summary.json and run.json are read at once; the per-task records are not: a
    long run's scores, responses and transcripts are hundreds of megabytes, so the
    report reads them as it goes (:meth:`iter_scores`, :meth:`iter_responses`,
    :meth:`iter_transcripts`) and a comparison keeps only each task's outcome
    (:attr:`scores`).
    """

    run_dir: Path
    label: str
    summary: Mapping[str, Any]
    run: Mapping[str, Any] = field(default_factory=dict)
    #: Given scores (a comparison built in memory); ``None``: read scores.jsonl.
    given_scores: Sequence[Mapping[str, Any]] | None = None

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
        if any(name not in order for name in streams):
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

    @cached_property
    def scores(self) -> Sequence[Mapping[str, Any]]:
        """Each scored task's stream, id, position and outcome, in file order:
        what a comparison pairs (the rest of a score is read by the report as it goes)."""
        if self.given_scores is not None:
            return self.given_scores
        return [_outcome(scored) for scored in self.iter_scores()]

    def iter_scores(self) -> Iterator[dict[str, Any]]:
        """scores.jsonl, each record checked; read to its end, it must add up to the
        summary (what is paired and shown is what the summary counts)."""
        if self.given_scores is not None:
            return (dict(scored) for scored in self.given_scores)
        return self._adding_up(_checked(self.run_dir / SCORES, read.SCORE), SCORES, _count_score, SCORE_COUNTS)

    def iter_responses(self) -> Iterator[dict[str, Any]]:
        """responses.jsonl: every agent response, task and feedback turns (adding up
        to the summary, as :meth:`iter_scores`)."""
        return self._adding_up(_checked(self.run_dir / RESPONSES, read.RESPONSE), RESPONSES, _count_response,
                               RESPONSE_COUNTS)

    def _adding_up(
        self, records: Iterator[dict[str, Any]], name: str,
        count: Callable[[dict[str, StreamMetrics], dict[str, Any]], None], counts: Sequence[str],
    ) -> Iterator[dict[str, Any]]:
        """``records`` as they are read, counted; at their end, one :class:`ReportError`
        when the counts are not the summary's: a record file cut, emptied, edited or
        copied from another run after the run ended (a page is written only whole)."""
        counted: dict[str, StreamMetrics] = {}
        for record in records:
            count(counted, record)
            yield record
        problem = records_disagree(self.summary, counted, counts)
        if problem is not None:
            raise ReportError(f"{self.run_dir / name} does not add up to its {SUMMARY} ({problem}); {read.ADVICE}")

    def transcript_streams(self) -> list[str]:
        """The streams with a transcripts/<stream>.jsonl file."""
        directory = self.run_dir / TRANSCRIPTS
        if not directory.is_dir():
            return []
        return [path.stem for path in sorted(directory.glob("*.jsonl"))]

    def iter_transcripts(self, stream: str) -> Iterator[dict[str, Any]]:
        """transcripts/<stream>.jsonl: each turn's messages and tool calls."""
        if stream not in self.transcript_streams():
            return iter(())
        return _checked(self.run_dir / TRANSCRIPTS / f"{stream}.jsonl", read.TRANSCRIPT)


def _count_score(counted: dict[str, StreamMetrics], scored: dict[str, Any]) -> None:
    name = str(scored.get("stream"))
    counted.setdefault(name, StreamMetrics(name)).add_outcome(scored, with_groups=False)


def _count_response(counted: dict[str, StreamMetrics], response: dict[str, Any]) -> None:
    name = str(response.get("stream"))
    counted.setdefault(name, StreamMetrics(name)).add_response(counted_figures(response))


def _checked(path: Path, spec: read.Check) -> Iterator[dict[str, Any]]:
    """The records of ``path`` as they are read, each checked for every field the
    reports read: a damaged one is one :class:`ReportError` naming the file, the
    record and the key (never a traceback from the page code)."""
    for number, record in enumerate(iter_jsonl(path), 1):
        problem = read.damaged(path, record, spec, number)
        if problem is not None:
            raise ReportError(problem)
        yield record


#: The fields of a score that a comparison reads (``recall_similarity``: the gain
#: versus similarity analysis, :data:`.similarity.SIMILARITY_KEY`; ``match_mode`` and
#: ``value``: a continuous headline figure's paired statistics, :mod:`.compare`).
_OUTCOME_KEYS = ("stream", "task_id", "position", "correct", "error", "recall_similarity", "match_mode", "value")


def _outcome(scored: Mapping[str, Any]) -> dict[str, Any]:
    """What a comparison keeps of a score: :data:`_OUTCOME_KEYS`, and of ``details``
    only the mode's headline figure (LoCoMo's ``f1``), not the stems and evidence."""
    kept = {key: scored.get(key) for key in _OUTCOME_KEYS}
    metric = headline_metric(scored.get("match_mode"))
    details = scored.get("details")
    if metric is not None and isinstance(details, Mapping) and metric.detail in details:
        kept["details"] = {metric.detail: details[metric.detail]}
    return kept


# --------------------------------------------------------------------------- loading


def _read_json(path: Path) -> dict[str, Any]:
    """A run document through the bounded reader: a device, a FIFO, a file of
    gigabytes, 200,000 brackets or a 5,000-digit integer is one line naming it."""
    try:
        text = boundedread.read_text(path, limit=boundedread.DOCUMENT_BYTES, what="a run document", error=ReportError)
    except FileNotFoundError:
        raise ReportError(f"cannot read {path}: it does not exist") from None
    try:
        document = boundedread.loads(text, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except ValueError as error:  # invalid JSON, an integer of 5,000 digits, 200,000 brackets
        raise ReportError(
            f"{path} is not valid JSON ({shorten(boundedread.json_problem(error), 120)}); "
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
    problem = (
        read.damaged(summary_path, summary, read.SUMMARY)
        or read.damaged(directory / RUN_DOCUMENT, run, read.RUN_DOCUMENT)
    )
    if problem is not None:
        raise ReportError(problem)
    name = label if label is not None else _run_name(summary, run, directory)
    return RunData(run_dir=directory, label=name, summary=summary, run=run)


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
    return RunData(run_dir=run.run_dir, label=label, summary=run.summary, run=run.run, given_scores=run.given_scores)


# --------------------------------------------------------------------------- formatting
