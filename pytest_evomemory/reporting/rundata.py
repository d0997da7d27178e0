"""A finished run as the reports read it: loaded from its run directory.

Kept apart from the page rendering (:mod:`.html`) and the statistics
(:mod:`.compare`), which both work on :class:`RunData`; the directory is read by
:mod:`pytest_evomemory.rundir` (:class:`~..rundir.FinishedRun`: typed, checked,
adding up to its summary), the one owner of its format, and every problem it finds
is a :class:`ReportError` here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..core.errors import ReportError as ReportError  # declared with the errors; read from here too
from ..evaluation.modes import headline_metric
from ..models.identity import recorded_identity, typed_identity
from ..rundir import RUN_DOCUMENT, SCORES, SUMMARY, FinishedRun, open_finished_run
from ..rundocs import Response, RunFile, Score, StreamRan, StreamSummary, Summary, TranscriptEntry
from ..rundocs.records import as_score
from ..util.filestamp import Stamp, file_stamp


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
    summary: Summary
    run: RunFile = field(default_factory=RunFile)
    #: Given scores (a comparison built in memory); ``None``: read scores.jsonl.
    given_scores: Sequence[Score] | None = None
    #: The first whole read of scores.jsonl (:meth:`iter_scores`, the page's) also
    #: keeps each task's outcome (:attr:`scores`): a run read for its page and then
    #: for a comparison reads its scores once for both (:func:`load_for_comparison`).
    outcomes_on_the_way: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # a run built in memory (a comparison of given figures) may be given as plain
        # documents: they are read as the models, as a run directory's files are
        if not isinstance(self.summary, Summary):
            object.__setattr__(self, "summary", Summary.model_validate(self.summary))
        if not isinstance(self.run, RunFile):
            object.__setattr__(self, "run", RunFile.model_validate(self.run))
        if self.given_scores is not None and not all(isinstance(s, Score) for s in self.given_scores):
            object.__setattr__(self, "given_scores", [as_score(scored) for scored in self.given_scores])

    @property
    def streams(self) -> dict[str, StreamSummary]:
        """Per-stream metrics in the benchmark's stream order.

        summary.json is written with sorted keys, so its own order is alphabetical;
        the run order comes from run.json's stream list, else from scores.jsonl.
        """
        streams = self.summary.streams
        return {name: streams[name] for name in self._stream_order}

    @cached_property
    def _stream_order(self) -> tuple[str, ...]:
        """The names of :attr:`streams`, in order: worked out once (a comparison of
        many arms asks each run for its streams many times)."""
        streams = self.summary.streams
        order = [s.name for s in self.run.streams]
        if any(name not in order for name in streams):
            order += [s.stream for s in self.scores]
        rank: dict[object, int] = {}
        for name in order:
            rank.setdefault(name, len(rank))
        return tuple(sorted(streams, key=lambda name: rank.get(name, len(rank))))

    @cached_property
    def identity(self) -> dict[str, Any]:
        """What ran, as compare.json's run entry records it
        (:func:`..models.identity.recorded_identity`), worked out once: a session's
        arm, kept from its page for the comparison, shows it on its page, in the
        comparison page's list of runs and in compare.json. Read, never changed."""
        return recorded_identity(self.summary, self.run)

    @cached_property
    def ran(self) -> StreamRan:
        """:attr:`identity` as the typed identities the pages show
        (:func:`..models.identity.typed_identity`): each part None when the run
        records none of it."""
        return typed_identity(self.identity)

    @property
    def overall(self) -> StreamSummary:
        return self.summary.overall

    @cached_property
    def scores(self) -> Sequence[Score]:
        """Each scored task's stream, id, position and outcome, in file order:
        what a comparison pairs (the rest of a score is read by the report as it goes)."""
        if self.given_scores is not None:
            return self.given_scores
        return [_outcome(scored) for scored in self.iter_scores()]

    def iter_scores(self) -> Iterator[Score]:
        """scores.jsonl, each record checked; read to its end, it must add up to the
        summary (what is paired and shown is what the summary counts)."""
        if self.given_scores is not None:
            return iter(self.given_scores)
        if self.outcomes_on_the_way and "scores" not in self.__dict__:
            return self._keeping_outcomes(self.finished.scores())
        return self.finished.scores()

    def _keeping_outcomes(self, records: Iterator[Score]) -> Iterator[Score]:
        """``records``, each one's outcome kept on the way; read to their end (and so
        checked: they add up to the summary), the outcomes are :attr:`scores`."""
        outcomes: list[Score] = []
        for scored in records:
            outcomes.append(_outcome(scored))
            yield scored
        self.__dict__.setdefault("scores", outcomes)  # a cached_property's own slot

    def iter_responses(self) -> Iterator[Response]:
        """responses.jsonl: every agent response, task and feedback turns (adding up
        to the summary, as :meth:`iter_scores`)."""
        return self.finished.responses()

    @property
    def finished(self) -> FinishedRun:
        """The run directory's records, read checked by :mod:`..rundir` (each problem
        a :class:`ReportError`)."""
        return FinishedRun(run_dir=self.run_dir, summary=self.summary, run=self.run, error=ReportError)

    def transcript_streams(self) -> list[str]:
        """The streams with a transcripts/<stream>.jsonl file."""
        return self.finished.transcript_streams()

    def iter_transcripts(self, stream: str) -> Iterator[TranscriptEntry]:
        """transcripts/<stream>.jsonl: each turn's messages and tool calls."""
        return self.finished.transcripts(stream)


def _outcome(scored: Score) -> Score:
    """What a comparison keeps of a score: its stream, task, position, outcome,
    ``recall_similarity`` (the gain versus similarity analysis), ``match_mode`` and
    ``value`` (a continuous headline figure's paired statistics, :mod:`.compare`),
    and of ``details`` only the mode's headline figure (LoCoMo's ``f1``), not the
    stems and evidence."""
    metric = headline_metric(scored.match_mode)
    details = {metric.detail: scored.details[metric.detail]} if metric is not None and metric.detail in scored.details else {}
    return scored.model_copy(update={
        "raw_answer": None, "extracted": None, "target": None, "reason": "", "details": details, "group": None,
        "traceback": None,
    })


# --------------------------------------------------------------------------- loading


#: What a comparison reads of a run: summary.json's, run.json's and scores.jsonl's stamps.
_Stamps = tuple[Stamp | None, ...]
#: Runs read ahead for a comparison in this process (:func:`load_for_comparison`),
#: by their directory, with the stamps their files had when they were read.
_KEPT: dict[Path, tuple[_Stamps, RunData]] = {}
_KEPT_LOCK = threading.Lock()


def _stamps(run_dir: Path) -> _Stamps:
    return tuple(file_stamp(run_dir / name) for name in (SUMMARY, RUN_DOCUMENT, SCORES))


def load_for_comparison(run_dir: Path | str) -> tuple[RunData, Callable[[], None]]:
    """``run_dir`` read for its page (:func:`load_run`), and what then keeps it for
    the session's comparison without reading it again: a session's arm, finished
    while other arms' chains run, is not read again after the last reply. Kept are
    its summary and run.json as read here, and each task's outcome as its page's
    first read of scores.jsonl keeps it on the way (:attr:`RunData.outcomes_on_the_way`;
    read then if the page did not, checked against the summary). :func:`load_run`
    takes the kept run (once) only while its files are the ones read (same inode,
    size, modification and change times, stamped before this read); else it reads them again."""
    path = Path(run_dir).absolute()
    stamps = _stamps(path)
    run = load_run(run_dir, outcomes_on_the_way=True)

    def keep() -> None:
        # under its absolute directory, as the comparison names it (compare.json's run_dir)
        _keep(path, stamps, run if run.run_dir == path else _renamed(run, run_dir=path))

    return run, keep


def _keep(path: Path, stamps: _Stamps, run: RunData) -> None:
    _ = run.scores  # what the comparison pairs: read now (unless the page read them)
    with _KEPT_LOCK:
        _KEPT[path] = (stamps, run)


def _kept(run_dir: Path | str, label: str | None) -> RunData | None:
    path = Path(run_dir).absolute()
    with _KEPT_LOCK:
        kept = _KEPT.pop(path, None) if _KEPT else None
    if kept is None or kept[0] != _stamps(path):
        return None
    run = kept[1]
    return run if label is None or label == run.label else _renamed(run, label=label)


def _renamed(run: RunData, *, run_dir: Path | None = None, label: str | None = None) -> RunData:
    """``run`` under another directory name or label, with the outcomes already read
    (:attr:`RunData.scores`, a cached_property's own slot) and what ran: they are not
    read or worked out again."""
    renamed = RunData(
        run_dir=run.run_dir if run_dir is None else run_dir, label=run.label if label is None else label,
        summary=run.summary, run=run.run,
    )
    for name in ("scores", "identity", "ran"):  # what was worked out of its files (not of its name)
        if name in run.__dict__:
            renamed.__dict__[name] = run.__dict__[name]
    return renamed


def load_run(run_dir: Path | str, label: str | None = None, *, outcomes_on_the_way: bool = False) -> RunData:
    """Read a finished run's artefacts; ``summary.json`` is the one that must exist.
    A run kept for a comparison (:func:`load_for_comparison`) is taken as it was read
    while its files are unchanged."""
    kept = _kept(run_dir, label)
    if kept is not None:
        return kept
    finished = open_finished_run(run_dir, ReportError)
    name = label if label is not None else _run_name(finished.summary, finished.run, finished.run_dir)
    return RunData(run_dir=finished.run_dir, label=name, summary=finished.summary, run=finished.run,
                   outcomes_on_the_way=outcomes_on_the_way)


def _run_name(summary: Summary, run: RunFile, directory: Path) -> str:
    name = summary.run or run.run.name
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
