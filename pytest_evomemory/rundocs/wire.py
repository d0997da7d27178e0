"""Records: what a stream's process tells the controller, one model per kind.

A record says one thing that happened, by its ``type``:

* ``task``: a task turn ended with an answer (``response`` and ``scored``);
* ``error``: a task turn failed (``scored`` is wrong with ``error`` set;
  ``response`` when the turn produced one);
* ``feedback``: a feedback turn (``response``);
* ``feedback_error``: a feedback turn failed (``failure``; ``response`` if any);
* ``feedback_skipped``: no feedback turn was possible (``skipped``);
* ``ingestion``: an unscored ingestion turn of a conversation stream (LoCoMo with
  ``ingest: agent``; ``response``, of kind ``ingestion``);
* ``stream_started``: what a stream's process built (agent, memory, model);
* ``stream_error``: a stream failed outside any episode (at its start, in its
  teardown: ``failure``);
* ``write_failed``: a run file the stream's process writes itself (a memory
  snapshot) failed (``failure``);
* ``refusal``: a stream's first build refused the session in an xdist worker
  (``refusal``); never written.

Records travel from an xdist worker to the controller on a test report, as
:meth:`Record.wire` (``model_dump``, with ``evomemory_arm`` in a session of several
arms); :func:`from_wire` validates them back. The failure and skip records are
also events.jsonl's lines, as they travelled.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from .base import RunDoc
from .records import Failure, Refusal, Response, Score, SkippedFeedback, StreamStarted, WriteFailure

#: A record's arm while it travels from the process that ran it to the controller.
ARM_FIELD = "evomemory_arm"


class Record(RunDoc):
    """Something that happened in a stream; ``arm`` names its arm in a session of several."""

    model_config = ConfigDict(frozen=True)
    OMIT_NONE = frozenset({"arm", "response"})

    type: str
    arm: str | None = Field(default=None, alias="evomemory_arm")

    def wire(self) -> dict[str, Any]:
        """The record as it travels (and as events.jsonl holds a failure or skip)."""
        return self.written()

    def for_arm(self, arm: str | None) -> Record:
        return self if arm == self.arm else self.model_copy(update={"arm": arm})

    @property
    def stream(self) -> str:
        """The stream the record belongs to."""
        raise NotImplementedError

    @property
    def failed_episode(self) -> tuple[str, str | None] | None:
        """``(stream, task id)`` when this record says an episode (or a stream) failed."""
        return None


class TaskRecord(Record):
    type: Literal["task"] = "task"
    response: Response
    scored: Score

    @property
    def stream(self) -> str:
        return self.scored.stream


class ErrorRecord(Record):
    """A task whose episode failed: scored as wrong, with the failure as the reason."""

    type: Literal["error"] = "error"
    scored: Score
    response: Response | None = None

    @property
    def stream(self) -> str:
        return self.scored.stream

    @property
    def failed_episode(self) -> tuple[str, str | None]:
        return self.scored.stream, self.scored.task_id


class FeedbackRecord(Record):
    type: Literal["feedback"] = "feedback"
    response: Response

    @property
    def stream(self) -> str:
        return self.response.stream


class FeedbackErrorRecord(Record):
    type: Literal["feedback_error"] = "feedback_error"
    failure: Failure
    response: Response | None = None

    @property
    def stream(self) -> str:
        return self.failure.stream

    @property
    def failed_episode(self) -> tuple[str, str | None]:
        return self.failure.stream, self.failure.task_id


class FeedbackSkippedRecord(Record):
    type: Literal["feedback_skipped"] = "feedback_skipped"
    skipped: SkippedFeedback

    @property
    def stream(self) -> str:
        return self.skipped.stream


class IngestionRecord(Record):
    """One ingestion turn (runtime/ingestion.py): the agent was given one session of
    the conversation to remember before the first question. Its task id is the
    session's (``session_<N>``), which no task of the stream has."""

    type: Literal["ingestion"] = "ingestion"
    response: Response

    @property
    def stream(self) -> str:
        return self.response.stream


class StreamStartedRecord(Record):
    """What a stream's process built (agent, memory, model): run.json says what ran."""

    type: Literal["stream_started"] = "stream_started"
    started: StreamStarted

    @property
    def stream(self) -> str:
        return self.started.stream


class StreamErrorRecord(Record):
    """A stream that failed outside any episode (at its start, in its teardown)."""

    type: Literal["stream_error"] = "stream_error"
    failure: Failure

    @property
    def stream(self) -> str:
        return self.failure.stream

    @property
    def failed_episode(self) -> tuple[str, str | None]:
        return self.failure.stream, None


class WriteFailedRecord(Record):
    """A run file the stream's process writes itself (a memory snapshot) failed."""

    type: Literal["write_failed"] = "write_failed"
    failure: WriteFailure

    @property
    def stream(self) -> str:
        return self.failure.stream


class RefusalRecord(Record):
    """A stream's first build refused the session in a process that does not write
    (an xdist worker): the session that writes decides what it means
    (:meth:`~..runtime.driver.StreamDriver.refuse`). Never written to a run."""

    type: Literal["refusal"] = "refusal"
    #: ``key``: the stream key; ``message``: why
    refusal: Refusal

    @property
    def stream(self) -> str:
        return self.refusal.key


AnyRecord = Annotated[
    TaskRecord | ErrorRecord | FeedbackRecord | FeedbackErrorRecord | FeedbackSkippedRecord | IngestionRecord
    | StreamStartedRecord | StreamErrorRecord | WriteFailedRecord | RefusalRecord,
    Field(discriminator="type"),
]


@functools.cache
def _records() -> TypeAdapter[Record]:
    """The validator of every record kind, built on first use: a run reads no
    wire record before its first model call, and building it is start-up time."""
    return TypeAdapter(AnyRecord)


#: An events.jsonl line: a failed or skipped feedback turn, or a failed stream.
Event = Annotated[FeedbackErrorRecord | FeedbackSkippedRecord | StreamErrorRecord, Field(discriminator="type")]


@functools.cache
def _events() -> TypeAdapter[Event]:
    return TypeAdapter(Event)


def event_or_none(wire: object) -> Event | None:
    """An events.jsonl line as its record; None for one that is not (a resume and a
    merge pass over it). The validator is built on first use, not at start-up."""
    try:
        return _events().validate_python(wire)
    except ValidationError:
        return None


class RecordError(ValueError):
    """A wire record that is not one of ours (a damaged report, another version)."""


def from_wire(wire: Mapping[str, Any] | object) -> Record:
    """The typed record a wire mapping (:meth:`Record.wire`) holds."""
    try:
        return _records().validate_python(wire)
    except ValidationError as error:
        first = error.errors()[0]
        raise RecordError(f"not a record: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


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


__all__ = [
    "ARM_FIELD", "AnyRecord", "ErrorRecord", "Event", "FeedbackErrorRecord", "FeedbackRecord", "FeedbackSkippedRecord",
    "IngestionRecord", "Record", "RecordError", "RefusalRecord", "StreamErrorRecord", "StreamStartedRecord",
    "TaskRecord", "WriteFailedRecord", "event_or_none", "from_wire", "from_wires",
]
