"""The records an episode produces, and the collector that turns them into results.

A record says one thing that happened, by its class:

* :class:`TaskRecord`: a task turn ended with an answer (``response`` and ``scored``);
* :class:`ErrorRecord`: a task turn failed (``scored`` is wrong with ``error`` set;
  ``response`` when the turn produced one);
* :class:`FeedbackRecord`: a feedback turn (``response``);
* :class:`FeedbackErrorRecord`: a feedback turn failed (``failure``; ``response`` if any);
* :class:`FeedbackSkippedRecord`: no feedback turn was possible (``skipped``);
* :class:`IngestionRecord`: an unscored ingestion turn of a conversation stream
  (LoCoMo with ``ingest: agent``; ``response``, of kind ``ingestion``), counted in
  the efficiency figures like a feedback turn and never scored;
* :class:`StreamStartedRecord`: what a stream's process built (agent, memory, model);
* :class:`StreamErrorRecord`: a stream failed outside any episode, e.g. at its start
  or in its teardown (``failure``), charged to that stream;
* :class:`WriteFailedRecord`: a file of the run (a memory snapshot) could not be
  written in the process that ran the stream (``failure``): the session stops as it
  stops when the controller's own results cannot be written.
* :class:`RefusalRecord`: a stream's first build refused the session in an xdist
  worker (``refusal``); the controller's session decides, and never writes it.

Records travel: from an xdist worker to the controller on a test report, and from
the controller into the run directory. On the way they are plain JSON mappings
(:meth:`Record.to_wire`, with a ``type`` field and, in a session of several arms,
the ``arm``); :func:`from_wire` makes the typed record again. Their payloads
(``response``, ``scored``, ``failure``) are the artefacts' own JSON documents.

A failed episode is a scored item too (wrong, with ``error`` set), so the scores
alone say every task's outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..identity import reported_models
from ..reporting.categories import category_table
from ..reporting.summary import ResponseTally, StreamMetrics, ThresholdResult, is_cached, outcome, summarize
from ..types import BenchmarkSample

if TYPE_CHECKING:
    from ..rundir import RunWriter

#: A record's arm while it travels from the process that ran it to the controller.
ARM_FIELD = "evomemory_arm"

Document = dict[str, Any]


@dataclass(frozen=True)
class Record:
    """Something that happened in a stream; ``arm`` names its arm in a session of several."""

    TYPE: ClassVar[str] = ""
    #: payload fields, in the order they appear on the wire
    FIELDS: ClassVar[tuple[str, ...]] = ()

    arm: str | None = field(default=None, kw_only=True)

    def to_wire(self) -> Document:
        wire: Document = {"type": self.TYPE}
        for name in self.FIELDS:
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        if self.arm is not None:
            wire[ARM_FIELD] = self.arm
        return wire

    def for_arm(self, arm: str | None) -> Record:
        return self if arm == self.arm else replace(self, arm=arm)

    @property
    def stream(self) -> str:
        """The stream the record belongs to."""
        raise NotImplementedError

    @property
    def failed_episode(self) -> tuple[str, str | None] | None:
        """``(stream, task id)`` when this record says an episode (or a stream) failed."""
        return None


@dataclass(frozen=True)
class TaskRecord(Record):
    TYPE = "task"
    FIELDS = ("response", "scored")

    response: Document
    scored: Document

    @property
    def stream(self) -> str:
        return str(self.scored["stream"])


@dataclass(frozen=True)
class ErrorRecord(Record):
    """A task whose episode failed: scored as wrong, with the failure as the reason."""

    TYPE = "error"
    FIELDS = ("scored", "response")

    scored: Document
    response: Document | None = None

    @property
    def stream(self) -> str:
        return str(self.scored["stream"])

    @property
    def failed_episode(self) -> tuple[str, str | None]:
        return str(self.scored["stream"]), str(self.scored["task_id"])


@dataclass(frozen=True)
class FeedbackRecord(Record):
    TYPE = "feedback"
    FIELDS = ("response",)

    response: Document

    @property
    def stream(self) -> str:
        return str(self.response["stream"])


@dataclass(frozen=True)
class FeedbackErrorRecord(Record):
    TYPE = "feedback_error"
    FIELDS = ("failure", "response")

    failure: Document
    response: Document | None = None

    @property
    def stream(self) -> str:
        return str(self.failure["stream"])

    @property
    def failed_episode(self) -> tuple[str, str | None]:
        task = self.failure.get("task_id")
        return str(self.failure["stream"]), None if task is None else str(task)


@dataclass(frozen=True)
class FeedbackSkippedRecord(Record):
    TYPE = "feedback_skipped"
    FIELDS = ("skipped",)

    skipped: Document

    @property
    def stream(self) -> str:
        return str(self.skipped["stream"])


@dataclass(frozen=True)
class IngestionRecord(Record):
    """One ingestion turn (runtime/ingestion.py): the agent was given one session of
    the conversation to remember before the first question. Its task id is the
    session's (``session_<N>``), which no task of the stream has."""

    TYPE = "ingestion"
    FIELDS = ("response",)

    response: Document

    @property
    def stream(self) -> str:
        return str(self.response["stream"])


@dataclass(frozen=True)
class StreamStartedRecord(Record):
    """What a stream's process built (agent, memory, model): run.json says what ran."""

    TYPE = "stream_started"
    FIELDS = ("started",)

    started: Document

    @property
    def stream(self) -> str:
        return str(self.started["stream"])


@dataclass(frozen=True)
class StreamErrorRecord(Record):
    """A stream that failed outside any episode (at its start, in its teardown)."""

    TYPE = "stream_error"
    FIELDS = ("failure",)

    failure: Document

    @property
    def stream(self) -> str:
        return str(self.failure["stream"])

    @property
    def failed_episode(self) -> tuple[str, str | None]:
        return str(self.failure["stream"]), None


@dataclass(frozen=True)
class WriteFailedRecord(Record):
    """A run file the stream's process writes itself (a memory snapshot) failed."""

    TYPE = "write_failed"
    FIELDS = ("failure",)

    failure: Document

    @property
    def stream(self) -> str:
        return str(self.failure["stream"])


@dataclass(frozen=True)
class RefusalRecord(Record):
    """A stream's first build refused the session in a process that does not write
    (an xdist worker): the session that writes decides what it means
    (:meth:`~.session.Session.refuse`). Never written to a run."""

    TYPE = "refusal"
    FIELDS = ("refusal",)

    #: ``key``: the stream key; ``message``: why
    refusal: Document

    @property
    def stream(self) -> str:
        return str(self.refusal["key"])


_TYPES: dict[str, type[Record]] = {
    kind.TYPE: kind
    for kind in (
        TaskRecord, ErrorRecord, FeedbackRecord, FeedbackErrorRecord, FeedbackSkippedRecord,
        IngestionRecord, StreamStartedRecord, StreamErrorRecord, WriteFailedRecord, RefusalRecord,
    )
}


class RecordError(ValueError):
    """A wire record that is not one of ours (a damaged report, another version)."""


def from_wire(wire: Mapping[str, Any]) -> Record:
    """The typed record a wire mapping (:meth:`Record.to_wire`) holds."""
    kind = _TYPES.get(str(wire.get("type")))
    if kind is None:
        raise RecordError(f"unknown record type {wire.get('type')!r}")
    arm = wire.get(ARM_FIELD)
    values = {name: wire.get(name) for name in kind.FIELDS}
    if any(not isinstance(value, dict) for name, value in values.items() if name in _REQUIRED[kind]):
        raise RecordError(f"a {kind.TYPE} record without its {', '.join(_REQUIRED[kind])}")
    return kind(**values, arm=None if arm is None else str(arm))


def from_wires(wires: Iterable[Mapping[str, Any]] | None) -> list[Record]:
    """The typed records of the wire mappings a driver received (on a test report),
    passing over any that is not one of ours: a damaged report loses that record,
    the session goes on."""
    records = []
    for wire in wires or ():
        try:
            records.append(from_wire(wire))
        except RecordError:
            continue
    return records


_REQUIRED: dict[type[Record], tuple[str, ...]] = {
    TaskRecord: ("response", "scored"), ErrorRecord: ("scored",), FeedbackRecord: ("response",),
    FeedbackErrorRecord: ("failure",), FeedbackSkippedRecord: ("skipped",), IngestionRecord: ("response",),
    StreamStartedRecord: ("started",),
    StreamErrorRecord: ("failure",), WriteFailedRecord: ("failure",), RefusalRecord: ("refusal",),
}


# --------------------------------------------------------------------------- making records


def _where(sample: BenchmarkSample) -> Document:
    return {"stream": sample.stream, "task_id": sample.task_id, "position": sample.position}


def error_record(
    sample: BenchmarkSample,
    reason: str,
    response: Mapping[str, Any] | None = None,
    traceback: str | None = None,
) -> ErrorRecord:
    """A task whose episode failed: scored as wrong, with the failure as the reason."""
    scored: Document = {
        **_where(sample),
        "correct": False,
        "value": 0.0,
        "raw_answer": None,
        "extracted": None,
        "target": sample.target,
        "match_mode": sample.match_mode,
        "reason": f"episode failed: {reason}",
        "details": {},
        "error": reason,
        "group": sample.group,
    }
    if traceback:
        scored["traceback"] = traceback
    return ErrorRecord(scored, None if response is None else dict(response))


def feedback_error_record(
    sample: BenchmarkSample,
    reason: str,
    response: Mapping[str, Any] | None = None,
    traceback: str | None = None,
) -> FeedbackErrorRecord:
    failure: Document = {**_where(sample), "phase": "feedback", "reason": reason}
    if traceback:
        failure["traceback"] = traceback
    return FeedbackErrorRecord(failure, None if response is None else dict(response))


def feedback_skipped_record(sample: BenchmarkSample, reason: str) -> FeedbackSkippedRecord:
    return FeedbackSkippedRecord({**_where(sample), "reason": reason})


def stream_started_record(stream: str, identity: Mapping[str, Any]) -> StreamStartedRecord:
    return StreamStartedRecord({"stream": stream, **dict(identity)})


def write_failed_record(stream: str, error: BaseException) -> WriteFailedRecord:
    """What a failed write of the stream's own files (its memory snapshots) says."""
    if isinstance(error, OSError):
        filename = error.filename
        detail = f"{error.strerror or error}{f' ({filename})' if filename else ''}"
    else:
        detail = str(error)  # ArtefactWriteError: already names the path and the reason
    reason = (
        f"writing the memory snapshot of stream {stream!r} failed: {detail}; "
        "results written before this point are kept"
    )
    return WriteFailedRecord({"stream": stream, "reason": reason})


def stream_error_record(stream: str, reason: str, phase: str = "teardown") -> StreamErrorRecord:
    """A stream that failed outside any episode (``phase``: ``start`` or ``teardown``)."""
    return StreamErrorRecord({"stream": stream, "task_id": None, "position": None, "phase": phase, "reason": reason})


# --------------------------------------------------------------------------- collecting


@dataclass
class ResultCollector:
    """Gathers records (from any process) into results and the run directory.

    Each task is scored once: a second scored record for a task already scored
    (an xdist worker that died in the task's feedback turn is reported as a failed
    test) becomes a failed feedback turn instead of a second score.
    """

    stream_order: list[str]
    writer: RunWriter | None = None
    #: what the summary counts of the responses (they are in responses.jsonl)
    responses: ResponseTally = field(default_factory=ResponseTally)
    #: what the summary counts of each score (reporting.summary.outcome; whole in scores.jsonl)
    scores: list[Document] = field(default_factory=list)
    failures: list[Document] = field(default_factory=list)
    feedback_skipped: list[Document] = field(default_factory=list)
    #: stream -> what ran for it (agent, memory, model), from stream-started records
    ran: dict[str, Document] = field(default_factory=dict)
    #: stream -> the model names the server reported in the stream's replies, in order
    reported_models: dict[str, dict[str, None]] = field(default_factory=dict)
    #: stream -> what ran for it in the interrupted run a resume continues (its run.json's)
    ran_before: dict[str, Document] = field(default_factory=dict)
    _scored: set[tuple[str, str]] = field(default_factory=set)
    #: (stream, task id) of every failed episode so far, kept as records arrive: a run
    #: checks it after every record (max errors), so it must not rescan
    _failed: set[tuple[str, str | None]] = field(default_factory=set)

    def add(self, record: Record) -> None:
        if isinstance(record, WriteFailedRecord):
            if self.writer:
                self.writer.fail(str(record.failure.get("reason")))
            return
        if isinstance(record, StreamStartedRecord):
            started = dict(record.started)
            self.ran.setdefault(str(started.pop("stream")), started)
            return
        if isinstance(record, TaskRecord | ErrorRecord):
            key = (str(record.scored["stream"]), str(record.scored["task_id"]))
            if key in self._scored:
                self.add(FeedbackErrorRecord({
                    "stream": record.scored["stream"], "task_id": record.scored["task_id"],
                    "position": record.scored["position"], "phase": "feedback",
                    "reason": str(record.scored.get("error") or "the episode failed after its task was scored"),
                }))
                return
            self._scored.add(key)
        response = getattr(record, "response", None)
        if response is not None:
            self._add_response(response)
        if isinstance(record, TaskRecord | ErrorRecord):
            self.scores.append(outcome(record.scored))
            if record.failed_episode is not None:
                self._failed.add(record.failed_episode)
            if self.writer:
                self.writer.add_score(record.scored)
        elif isinstance(record, FeedbackErrorRecord | StreamErrorRecord):
            self._failed.add(record.failed_episode)
            self.failures.append(dict(record.failure))
            if self.writer:
                self.writer.add_event(record.to_wire())
        elif isinstance(record, FeedbackSkippedRecord):
            self.feedback_skipped.append(dict(record.skipped))
            if self.writer:
                self.writer.add_event(record.to_wire())

    def _add_response(self, response: Mapping[str, Any]) -> None:
        names = reported_models(response.get("messages") or ())
        if names:
            self.reported_models.setdefault(str(response.get("stream")), {}).update(dict.fromkeys(names))
        if not response.get("cached") and is_cached(response):
            # said on the record itself: responses.jsonl leaves the messages (where the
            # cache marks each replayed reply) to the transcripts, and a merge or a
            # resume counts the summary from responses.jsonl alone
            response = {**response, "cached": True}
        self.responses.add(response)
        if self.writer:
            self.writer.add_response(response)

    def preload(
        self,
        responses: Sequence[Mapping[str, Any]],
        scores: Sequence[Mapping[str, Any]],
        events: Sequence[Mapping[str, Any]] = (),
        ran: Mapping[str, Any] | None = None,
    ) -> None:
        """Resume: count the completed episodes' records without writing them again;
        ``ran`` is what ran in the interrupted run (its run.json's), kept for the
        streams this process does not start again."""
        writer, self.writer = self.writer, None
        self.ran_before = {
            str(stream): dict(parts) for stream, parts in (ran or {}).items() if isinstance(parts, Mapping)
        }
        try:
            for scored in scores:
                self._scored.add((str(scored["stream"]), str(scored["task_id"])))
                self.scores.append(outcome(scored))
                if scored.get("error"):
                    self._failed.add((str(scored["stream"]), str(scored["task_id"])))
            for response in responses:
                self.responses.add(response)
            for event in events:
                try:
                    self.add(from_wire(event))
                except RecordError:
                    continue
        finally:
            self.writer = writer

    def what_ran(self) -> dict[str, Document]:
        """Per stream, what ran (its stream-started record), its model with the names
        the server reported in its replies (``model.reported``) once any reply came.

        After a resume, a stream this process did not start again keeps what ran for
        it in the interrupted run, and a stream started again keeps the names its
        earlier replies reported: the run is one run, whichever process ran a part."""
        ran: dict[str, Document] = {}
        streams = [*self.ran_before, *(name for name in self.ran if name not in self.ran_before)]
        order = {name: index for index, name in enumerate(self.stream_order)}
        for stream in sorted(streams, key=lambda name: order.get(name, len(order))):
            parts = self.ran.get(stream) or self.ran_before[stream]
            before = self.ran_before.get(stream, {}).get("model")
            earlier = before.get("reported") if isinstance(before, Mapping) and stream in self.ran else None
            names = list(dict.fromkeys([
                *(name for name in (earlier if isinstance(earlier, list) else []) if isinstance(name, str)),
                *self.reported_models.get(stream, ()),
            ]))
            model = parts.get("model")
            ran[stream] = {**parts, "model": {**model, "reported": names}} if names and isinstance(model, Mapping) else parts
        return ran

    @property
    def failed_episode_count(self) -> int:
        """Failed episodes (a task whose task and feedback turns both failed is one)."""
        return len(self._failed)

    @property
    def failed_episodes(self) -> list[Document]:
        task_failures = [
            {"stream": s["stream"], "task_id": s["task_id"], "position": s["position"],
             "phase": "task", "reason": s["error"], **({"traceback": s["traceback"]} if s.get("traceback") else {})}
            for s in self.ordered(self.scores, by_position=True) if s.get("error")
        ]
        return task_failures + [dict(failure) for failure in self.ordered(self.failures)]

    def ordered(self, documents: Sequence[Document], *, by_position: bool = False) -> list[Document]:
        """``documents`` (scores, failures) in stream order, each stream's as they came
        (one stream runs in order) or ``by_position``: the order of a serial run,
        however the streams ran (xdist workers, ``evomemory run``'s chains at once),
        so every figure computed from them (a bootstrap interval resamples them in
        order) is the serial run's."""
        rank = {name: index for index, name in reversed(list(enumerate(self.stream_order)))}

        def key(document: Document) -> tuple[int, int]:
            position = document.get("position") if by_position else None
            return rank.get(str(document.get("stream")), len(rank)), position if isinstance(position, int) else 0

        return sorted(documents, key=key)

    def metrics(self) -> dict[str, StreamMetrics]:
        return summarize(self.stream_order, self.ordered(self.scores, by_position=True), self.responses)

    def summary(
        self,
        thresholds: list[ThresholdResult],
        started: str,
        finished: str,
        completion: Mapping[str, Any],
        extra: Mapping[str, Any] | None = None,
    ) -> Document:
        """The summary document: metrics, thresholds, failures, and whether the run is
        complete. ``passed`` needs every threshold met, no failed episode and a
        complete run: a run that did not run its tasks never passes."""
        metrics = self.metrics()
        failed = self.failed_episodes
        thresholds_met = all(t.met for t in thresholds) and (bool(completion.get("complete")) or not thresholds)
        return {
            "started": started,
            "finished": finished,
            "streams": {name: m.to_dict() for name, m in metrics.items() if name != "overall"},
            "overall": metrics["overall"].to_dict(),
            "thresholds": [t.to_dict() for t in thresholds],
            # the headline mean figure per category (LoCoMo's F1), None for accuracy
            "categories": category_table(self.ordered(self.scores, by_position=True), metrics["overall"].headline),
            "thresholds_met": thresholds_met,
            "passed": thresholds_met and not failed and bool(completion.get("complete")),
            "failed_episodes": failed,
            "skipped_feedback": [dict(s) for s in self.ordered(self.feedback_skipped)],
            "completion": dict(completion),
            "ran": self.what_ran(),
            **(extra or {}),
        }


__all__ = [
    "ARM_FIELD",
    "ErrorRecord",
    "FeedbackErrorRecord",
    "FeedbackRecord",
    "FeedbackSkippedRecord",
    "IngestionRecord",
    "Record",
    "RecordError",
    "RefusalRecord",
    "ResultCollector",
    "StreamErrorRecord",
    "StreamStartedRecord",
    "TaskRecord",
    "error_record",
    "feedback_error_record",
    "feedback_skipped_record",
    "from_wire",
    "from_wires",
    "stream_error_record",
    "stream_started_record",
]
