"""Reading a run directory back, typed: its documents and records as the
:mod:`..rundocs` models, for every reader (report, compare, table, merge, resume).

A reader outside the package asks :class:`RunReader` (or one of the functions
here) and gets models (a document as recorded only where a check must see it
before its model: :meth:`RunReader.recorded_run`); what it must say when a file is missing or
damaged it says in its own error class (``error``: the report's
:class:`~..core.errors.ReportError`, the resume's :class:`.layout.RunDirError`),
with the messages these functions word. A finished run (:func:`open_finished_run`)
is read checked: each record as its model, and its record files adding up to its
summary.json, counted as :mod:`..analysis.summary` counts a run (the layer below).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..analysis.summary import RESPONSE_COUNTS, SCORE_COUNTS, StreamMetrics, records_disagree
from ..core import boundedread
from ..core.errors import named
from ..rundocs import DAMAGED_ADVICE, SCHEMA_VERSION, Response, RunFile, Score, TranscriptEntry
from ..rundocs.base import DamagedDocument, Doc, problem_line, read
from ..rundocs.run import task_order_digest
from ..rundocs.wire import Event, event_or_none
from ..util.text import shorten
from .jsonl import DamagedRecords, iter_documents, iter_jsonl, read_json
from .layout import EVENTS, RESPONSES, RUN_DOCUMENT, SCORES, SUMMARY, TRANSCRIPTS, RunDirError

if TYPE_CHECKING:
    from ..rundocs.summary import Summary

ErrorFactory = boundedread.ErrorFactory


@dataclass(frozen=True)
class RunReader:
    """One run directory's records, each read as its model as it is read (a long
    run's files need not fit in memory). A damaged record is
    :class:`~..rundocs.DamagedDocument` naming the file, the record and the key."""

    run_dir: Path

    def scores(self) -> Iterator[Score]:
        return iter_documents(self.run_dir / SCORES, Score)

    def responses(self) -> Iterator[Response]:
        return iter_documents(self.run_dir / RESPONSES, Response)

    def transcript_streams(self) -> list[str]:
        """The streams with a transcripts/<stream>.jsonl file."""
        directory = self.run_dir / TRANSCRIPTS
        if not directory.is_dir():
            return []
        return [path.stem for path in sorted(directory.glob("*.jsonl"))]

    def transcript_path(self, stream: str) -> Path:
        return self.run_dir / TRANSCRIPTS / f"{stream}.jsonl"

    def transcript(self, stream: str) -> Iterator[TranscriptEntry]:
        """transcripts/<stream>.jsonl: each turn's messages and tool calls (none for
        a stream without a transcript file)."""
        if stream not in self.transcript_streams():
            return iter(())
        return iter_documents(self.transcript_path(stream), TranscriptEntry)

    def events(self, *, strict: bool = False) -> list[Event]:
        """events.jsonl's failed and skipped turns; a line that is no event (edited by
        hand: a failure that is a string) is passed over, as a torn line is (a resume
        runs its episode again), or, ``strict``, refused (:func:`read_events`)."""
        return read_events(self.run_dir / EVENTS, strict=strict)

    @property
    def run_path(self) -> Path:
        return self.run_dir / RUN_DOCUMENT

    @property
    def summary_path(self) -> Path:
        return self.run_dir / SUMMARY

    def recorded_run(self) -> dict[str, Any] | None:
        """run.json as recorded, before it is read as its model (None: absent, or no
        JSON object): for a check whose own message must come first (a shard's plan)."""
        return read_json(self.run_path)

    def recorded_summary(self) -> dict[str, Any] | None:
        """summary.json as recorded (None: absent, or no JSON object)."""
        return read_json(self.summary_path)


def read_events(path: Path, *, strict: bool = False) -> list[Event]:
    """An events.jsonl file's records that are events (:meth:`RunReader.events`);
    ``strict`` (a merge, which copies them into the merged summary's failures): a
    record that is no event is :class:`.jsonl.DamagedRecords` naming the file and
    the record, since passing over it would drop a failed turn from the merged run."""
    events = []
    for number, record in enumerate(iter_jsonl(path), 1):
        event = event_or_none(record)
        if event is None and strict:
            raise DamagedRecords(f"{path}, record {number} is not a failed or skipped turn; {DAMAGED_ADVICE}")
        if event is not None:
            events.append(event)
    return events


def read_complete(path: Path, model: type[Doc], required: Sequence[str]) -> list[Doc]:
    """The records of ``path``, each with the keys ``required`` and read as ``model``
    (as the reports read it); one without is :class:`.jsonl.DamagedRecords` naming
    the file, the record and the key (the merge: a record it would count)."""
    records = []
    for number, record in enumerate(iter_jsonl(path), 1):
        missing = next((key for key in required if key not in record), None)
        if missing is not None:
            raise DamagedRecords(f"{path}, record {number}: key {missing!r} is missing; {DAMAGED_ADVICE}")
        try:
            records.append(read(model, path, record, number))
        except DamagedDocument as error:
            raise DamagedRecords(str(error)) from None
    return records


def read_run_document(run_dir: Path, purpose: str) -> RunFile:
    """The run.json of a run to continue or to check (``purpose``: the option that
    names it), refused as :class:`.layout.RunDirError` when absent, damaged or of a
    newer schema (a newer plugin's records may mean something else)."""
    path = run_dir / RUN_DOCUMENT
    document = read_json(path)
    if document is None:
        raise RunDirError(
            f"{purpose} {run_dir}: no readable {RUN_DOCUMENT} there; pass the output directory "
            f"of the interrupted run (and, if its run config moved, pass {named('config')} as well)"
        )
    version = document.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        # A newer plugin's records may mean something else: continuing would mix them.
        raise RunDirError(
            f"{purpose} {run_dir}: {path} has schema version {version!r}, which this "
            f"pytest-evomemory (schema {SCHEMA_VERSION}) cannot continue; upgrade pytest-evomemory, or start a new run"
        )
    try:
        run = RunFile.model_validate(document)
    except ValidationError as error:
        raise RunDirError(f"{purpose} {run_dir}: {problem_line(path, error)}") from None
    # a finished run's summary.json (an unreadable one is only rewritten) must be of
    # this run: continued under a run.json copied from another run, the records of
    # one would be summarised under the other's settings
    summary = read_json(run_dir / SUMMARY)
    problem = other_run(summary.get("config_fingerprint"), run, run_dir) if summary is not None else None
    if problem is not None:
        raise RunDirError(f"{purpose} {run_dir}: {problem}")
    return run


def read_document(path: Path, error: ErrorFactory) -> dict[str, Any]:
    """A run's JSON document through the bounded reader, or ``error`` in one line: a
    missing file, a device, a FIFO, a file of gigabytes, 200,000 brackets, a
    5,000-digit integer, invalid JSON or no JSON object."""
    try:
        text = boundedread.read_text(path, limit=boundedread.DOCUMENT_BYTES, what="a run document", error=error)
    except FileNotFoundError:
        raise error(f"cannot read {path}: it does not exist") from None
    try:
        document = boundedread.loads(text, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except ValueError as problem:  # invalid JSON, an integer of 5,000 digits, 200,000 brackets
        raise error(
            f"{path} is not valid JSON ({shorten(boundedread.json_problem(problem), 120)}); "
            "was the run interrupted while writing it?"
        ) from None
    if not isinstance(document, dict):
        raise error(f"{path} does not hold a JSON object")
    return document


def read_finished_run(directory: Path, error: ErrorFactory) -> tuple[Summary, RunFile]:
    """A finished run's summary.json (which must exist) and run.json (which may not:
    an empty one then), typed; ``error`` for a directory that holds no finished run,
    a summary of a newer schema or none at all, or a damaged document."""
    from ..rundocs.summary import (
        Summary,  # a reader's: a run's own processes write summary.json, never read it
    )

    if not directory.is_dir():
        raise error(f"{directory} is not a directory; pass a run directory such as evomemory-results/<run name>")
    summary_path = directory / SUMMARY
    if not summary_path.is_file():
        raise error(
            f"{directory} has no summary.json; it is not a finished evomemory run "
            "(the file is written when the pytest session ends)"
        )
    document = read_document(summary_path, error)
    newer = newer_schema(summary_path, document)
    if newer is not None:
        raise error(newer)
    if not isinstance(document.get("streams"), Mapping):
        raise error(f"{summary_path} has no 'streams' object; it is not an evomemory summary")
    run_path = directory / RUN_DOCUMENT
    run_document = read_document(run_path, error) if run_path.is_file() else {}
    newer = newer_schema(run_path, run_document)
    if newer is not None:
        raise error(newer)
    try:
        summary = read(Summary, summary_path, document)
        run = read(RunFile, run_path, run_document) if run_document else RunFile()
    except DamagedDocument as damaged:
        raise error(str(damaged)) from None
    problem = other_run(summary.config_fingerprint, run, directory)
    if problem is not None:
        raise error(problem)
    return summary, run


def newer_schema(path: Path, document: Mapping[str, Any] | None, current: int = SCHEMA_VERSION) -> str | None:
    """Why ``document`` (read from ``path``; its format's version now: ``current``)
    cannot be read by this version: a newer pytest-evomemory wrote it, and its
    records may mean something else; else None."""
    version = document.get("schema_version") if document is not None else None
    if isinstance(version, int) and not isinstance(version, bool) and version > current:
        return (
            f"{path} has schema version {version}, newer than this pytest-evomemory understands "
            f"({current}); upgrade pytest-evomemory"
        )
    return None


def other_run(summary_fingerprint: object, run: RunFile, directory: Path) -> str | None:
    """Why ``directory``'s summary.json and run.json are not of one run (their config
    fingerprints differ: one was copied in from another run), else None. Read
    together they would put one run's numbers under another's settings."""
    recorded = run.config_fingerprint
    if not (isinstance(summary_fingerprint, str) and summary_fingerprint and recorded):
        return None  # a document from before fingerprints were recorded
    if summary_fingerprint == recorded:
        return None
    return (
        f"{directory / SUMMARY} and {directory / RUN_DOCUMENT} are not of one run (config fingerprints "
        f"{summary_fingerprint[:12]} and {recorded[:12]}): one was copied from another run; {DAMAGED_ADVICE}"
    )


def misnamed_scores(run: RunFile, held: Mapping[str, Mapping[int, str]]) -> str | None:
    """Why scores that count right still do not name the run's tasks, else None.

    ``held``: each stream's scored task id by position. A stream run to its end has
    one score per position 0..N-1, and its task ids in position order are the ones
    run.json's ``streams[].order.tasks_sha256`` digests: a score whose task id was
    edited, two ids swapped, or a scores file of another order or task set copied in
    would otherwise be paired with the wrong task by a comparison or a merge."""
    entries = {str(entry.name): entry for entry in run.streams}
    for stream, positions in held.items():
        entry = entries.get(stream)
        if entry is None:
            if entries:
                return f"it holds scores of stream {stream!r}, which {RUN_DOCUMENT} does not list"
            continue
        digest, planned = entry.order.tasks_sha256, entry.tasks
        if not digest or len(positions) != planned:
            continue  # a stream stopped early (or a run.json from before digests): nothing to check against
        if set(positions) != set(range(planned)):
            wrong = min(set(positions) - set(range(planned)))
            return f"stream {stream!r} has {planned} tasks, but a score of it is at position {wrong}"
        if task_order_digest(positions[index] for index in range(planned)) != digest:
            return (
                f"the task ids of stream {stream!r}, in position order, are not the tasks {RUN_DOCUMENT} records "
                "(streams[].order.tasks_sha256)"
            )
    return None


@dataclass(frozen=True)
class FinishedRun:
    """A finished run read back checked: its summary.json and run.json typed, its
    record files read as they go (a long run's are hundreds of megabytes), each
    record as its model and, read to its end, adding up to the summary (what a
    report shows and a comparison pairs is what the summary counts). Every problem
    is one ``error`` naming the file, the record and the key."""

    run_dir: Path
    summary: Summary
    run: RunFile
    error: ErrorFactory

    @property
    def reader(self) -> RunReader:
        return RunReader(self.run_dir)

    def scores(self) -> Iterator[Score]:
        """scores.jsonl, each record checked, adding up to the summary and naming the
        run's tasks (:func:`misnamed_scores`)."""
        return self._adding_up(self._naming_tasks(self._checked(self.reader.scores)), SCORES, _count_score, SCORE_COUNTS)

    def responses(self) -> Iterator[Response]:
        """responses.jsonl: every agent response, task and feedback turns (adding up
        to the summary, as :meth:`scores`)."""
        return self._adding_up(self._checked(self.reader.responses), RESPONSES, _count_response, RESPONSE_COUNTS)

    def transcript_streams(self) -> list[str]:
        """The streams with a transcripts/<stream>.jsonl file."""
        return self.reader.transcript_streams()

    def transcripts(self, stream: str) -> Iterator[TranscriptEntry]:
        """transcripts/<stream>.jsonl: each turn's messages and tool calls, checked."""
        return self._checked(lambda: self.reader.transcript(stream))

    def _adding_up(
        self, records: Iterator[Doc], name: str,
        count: Callable[[dict[str, StreamMetrics], Doc], None], counts: Sequence[str],
    ) -> Iterator[Doc]:
        """``records`` as they are read, counted; at their end, one ``error`` when the
        counts are not the summary's: a record file cut, emptied, edited or copied
        from another run after the run ended (a page is written only whole)."""
        counted: dict[str, StreamMetrics] = {}
        for record in records:
            count(counted, record)
            yield record
        problem = records_disagree(self.summary, counted, counts)
        if problem is not None:
            raise self.error(f"{self.run_dir / name} does not add up to its {SUMMARY} ({problem}); {DAMAGED_ADVICE}")

    def _naming_tasks(self, scores: Iterator[Score]) -> Iterator[Score]:
        """``scores`` as they are read; at their end, one ``error`` when they do not
        name the run's tasks (:func:`misnamed_scores`)."""
        held: dict[str, dict[int, str]] = {}
        for scored in scores:
            held.setdefault(scored.stream, {})[scored.position] = scored.task_id
            yield scored
        problem = misnamed_scores(self.run, held)
        if problem is not None:
            raise self.error(f"{self.run_dir / SCORES}: {problem}; {DAMAGED_ADVICE}")

    def _checked(self, records: Callable[[], Iterator[Doc]]) -> Iterator[Doc]:
        """Records as :class:`RunReader` reads them (opened at the first one asked
        for), each as its model: a damaged one is one ``error`` naming the file, the
        record and the key (never a traceback from the page code)."""
        try:
            yield from records()
        except DamagedDocument as damaged:
            raise self.error(str(damaged)) from None


def open_finished_run(run_dir: Path | str, error: ErrorFactory) -> FinishedRun:
    """A finished run's documents read (:func:`read_finished_run`); its records are
    read checked when asked for (:class:`FinishedRun`)."""
    directory = Path(run_dir)
    summary, run = read_finished_run(directory, error)
    return FinishedRun(run_dir=directory, summary=summary, run=run, error=error)


def _metrics(counted: dict[str, StreamMetrics], stream: str) -> StreamMetrics:
    metrics = counted.get(stream)
    if metrics is None:
        metrics = counted[stream] = StreamMetrics(stream)
    return metrics


def _count_score(counted: dict[str, StreamMetrics], scored: Score) -> None:
    _metrics(counted, scored.stream).add_outcome(scored, with_groups=False)


def _count_response(counted: dict[str, StreamMetrics], response: Response) -> None:
    # a typed response, counted as it is: add_response reads nothing summary.counted
    # would blank out (see ResponseTally.add), so no copy of it and its tool calls
    _metrics(counted, response.stream).add_response(response)


__all__ = [
    "FinishedRun", "RunReader", "misnamed_scores", "newer_schema", "open_finished_run", "other_run", "read_complete", "read_document",
    "read_events", "read_finished_run", "read_run_document",
]
