"""The records an episode produces, and the collector that turns them into results.

The records themselves (what a stream's process tells the controller, by kind) are
run documents: :mod:`pytest_evomemory.rundocs.wire` declares them, and this module
re-exports them. Here they are made (:func:`error_record`, ...) and collected
(:class:`ResultCollector`) into the run directory and the summary.

A failed episode is a scored item too (wrong, with ``error`` set), so the scores
alone say every task's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..analysis.summary import (
    METHODS,
    ResponseTally,
    StreamMetrics,
    ThresholdResult,
    is_cached,
    outcome,
    summarize,
)
from ..core.types import BenchmarkSample
from ..models.identity import reported_models
from ..rundocs import (
    Failure,
    ModelIdentity,
    Refusal,
    Response,
    Score,
    SkippedFeedback,
    StreamRan,
    StreamStarted,
    WriteFailure,
)
from ..rundocs.base import as_model
from ..rundocs.records import Phase
from ..rundocs.wire import (
    ARM_FIELD,
    ErrorRecord,
    Event,
    FeedbackErrorRecord,
    FeedbackRecord,
    FeedbackSkippedRecord,
    IngestionRecord,
    Record,
    RecordError,
    RefusalRecord,
    StreamErrorRecord,
    StreamStartedRecord,
    TaskRecord,
    WriteFailedRecord,
    from_wire,
    from_wires,
)

#: a document with a ``stream`` (and, for scores, a ``position``), ordered by :meth:`ResultCollector.ordered`
_Ordered = TypeVar("_Ordered")

if TYPE_CHECKING:
    from ..rundir import RunWriter
    from ..rundocs.summary import Completion, Summary


# --------------------------------------------------------------------------- making records


def error_record(
    sample: BenchmarkSample,
    reason: str,
    response: Response | None = None,
    traceback: str | None = None,
) -> ErrorRecord:
    """A task whose episode failed: scored as wrong, with the failure as the reason."""
    scored = Score(
        stream=sample.stream, task_id=sample.task_id, position=sample.position, correct=False, value=0.0,
        raw_answer=None, extracted=None, target=sample.target, match_mode=sample.match_mode,
        reason=f"episode failed: {reason}", details={}, error=reason, group=sample.group,
        traceback=traceback or None,
    )
    return ErrorRecord(scored=scored, response=response)


def feedback_error_record(
    sample: BenchmarkSample,
    reason: str,
    response: Response | None = None,
    traceback: str | None = None,
) -> FeedbackErrorRecord:
    failure = Failure(stream=sample.stream, task_id=sample.task_id, position=sample.position, phase="feedback",
                      reason=reason, traceback=traceback or None)
    return FeedbackErrorRecord(failure=failure, response=response)


def feedback_skipped_record(sample: BenchmarkSample, reason: str) -> FeedbackSkippedRecord:
    return FeedbackSkippedRecord(skipped=SkippedFeedback(
        stream=sample.stream, task_id=sample.task_id, position=sample.position, reason=reason
    ))


def stream_started_record(stream: str, identity: Mapping[str, Any]) -> StreamStartedRecord:
    return StreamStartedRecord(started=StreamStarted.model_validate({"stream": stream, **dict(identity)}))


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
    return WriteFailedRecord(failure=WriteFailure(stream=stream, reason=reason))


def stream_error_record(stream: str, reason: str, phase: Phase = "teardown") -> StreamErrorRecord:
    """A stream that failed outside any episode (``phase``: ``start`` or ``teardown``):
    it names no task and no position."""
    return StreamErrorRecord(failure=Failure(stream=stream, phase=phase, reason=reason))


def refusal_record(key: str, message: str) -> RefusalRecord:
    """A stream's first build refused the session (in a process that does not write)."""
    return RefusalRecord(refusal=Refusal(key=key, message=message))


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
    #: what the summary counts of each score (analysis.summary.outcome; whole in scores.jsonl)
    scores: list[Score] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    feedback_skipped: list[SkippedFeedback] = field(default_factory=list)
    #: stream -> what ran for it (agent, memory, model), from stream-started records
    ran: dict[str, StreamRan] = field(default_factory=dict)
    #: stream -> the model names the server reported in the stream's replies, in order
    reported_models: dict[str, dict[str, None]] = field(default_factory=dict)
    #: stream -> what ran for it in the interrupted run a resume continues (its run.json's)
    ran_before: dict[str, StreamRan] = field(default_factory=dict)
    _scored: set[tuple[str, str]] = field(default_factory=set)
    #: (stream, task id) of every failed episode so far, kept as records arrive: a run
    #: checks it after every record (max errors), so it must not rescan
    _failed: set[tuple[str, str | None]] = field(default_factory=set)

    def add(self, record: Record) -> None:
        if isinstance(record, WriteFailedRecord):
            if self.writer:
                self.writer.fail(record.failure.reason)
            return
        if isinstance(record, StreamStartedRecord):
            self.ran.setdefault(record.started.stream, record.started.ran())
            return
        if isinstance(record, TaskRecord | ErrorRecord):
            scored = record.scored
            key = (scored.stream, scored.task_id)
            if key in self._scored:
                self.add(FeedbackErrorRecord(failure=Failure(
                    stream=scored.stream, task_id=scored.task_id, position=scored.position, phase="feedback",
                    reason=str(scored.error or "the episode failed after its task was scored"),
                )))
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
            self.failures.append(record.failure)
            if self.writer:
                self.writer.add_event(record)
        elif isinstance(record, FeedbackSkippedRecord):
            self.feedback_skipped.append(record.skipped)
            if self.writer:
                self.writer.add_event(record)

    def _add_response(self, given: Response | Mapping[str, Any]) -> None:
        response = as_model(Response, given)
        names = reported_models(response.messages or ())
        if names:
            self.reported_models.setdefault(response.stream, {}).update(dict.fromkeys(names))
        cached = is_cached(response)  # once: the tally counts it too
        if cached and not response.cached:
            # said on the record itself: responses.jsonl leaves the messages (where the
            # cache marks each replayed reply) to the transcripts, and a merge or a
            # resume counts the summary from responses.jsonl alone
            response = response.model_copy(update={"cached": True})
        self.responses.add(response, cached)
        if self.writer:
            self.writer.add_response(response)

    def preload(
        self,
        responses: Sequence[Response],
        scores: Sequence[Score],
        events: Sequence[Event] = (),
        ran: Mapping[str, StreamRan | Mapping[str, Any]] | None = None,
    ) -> None:
        """Resume: count the completed episodes' records without writing them again;
        ``ran`` is what ran in the interrupted run (its run.json's), kept for the
        streams this process does not start again."""
        writer, self.writer = self.writer, None
        self.ran_before = {stream: as_model(StreamRan, parts) for stream, parts in (ran or {}).items()}
        try:
            for scored in scores:
                self._scored.add((scored.stream, scored.task_id))
                self.scores.append(outcome(scored))
                if scored.error:
                    self._failed.add((scored.stream, scored.task_id))
            for response in responses:
                self.responses.add(response)
            for event in events:
                self.add(event)
        finally:
            self.writer = writer

    def what_ran(self) -> dict[str, StreamRan]:
        """Per stream, what ran (its stream-started record), its model with the names
        the server reported in its replies (``model.reported``) once any reply came.

        After a resume, a stream this process did not start again keeps what ran for
        it in the interrupted run, and a stream started again keeps the names its
        earlier replies reported: the run is one run, whichever process ran a part."""
        ran: dict[str, StreamRan] = {}
        streams = [*self.ran_before, *(name for name in self.ran if name not in self.ran_before)]
        order = {name: index for index, name in enumerate(self.stream_order)}
        for stream in sorted(streams, key=lambda name: order.get(name, len(order))):
            parts = self.ran.get(stream) or self.ran_before[stream]
            before = self.ran_before.get(stream)
            earlier = before.model.reported if before is not None and before.model is not None and stream in self.ran else None
            names = list(dict.fromkeys([*(earlier or ()), *self.reported_models.get(stream, ())]))
            if names and parts.model is not None:
                model = ModelIdentity.model_validate({**parts.model.written(), "reported": names})
                parts = parts.model_copy(update={"model": model})
            ran[stream] = parts
        return ran

    @property
    def failed_episode_count(self) -> int:
        """Failed episodes (a task whose task and feedback turns both failed is one)."""
        return len(self._failed)

    @property
    def failed_episodes(self) -> list[Failure]:
        return self._failed_episodes(self.ordered(self.scores, by_position=True))

    def _failed_episodes(self, scores_in_order: Sequence[Score]) -> list[Failure]:
        task_failures = [
            Failure(stream=s.stream, task_id=s.task_id, position=s.position, phase="task", reason=s.error,
                    traceback=s.traceback or None)
            for s in scores_in_order if s.error
        ]
        return task_failures + self.ordered(self.failures)

    def ordered(self, documents: Sequence[_Ordered], *, by_position: bool = False) -> list[_Ordered]:
        """``documents`` (scores, failures) in stream order, each stream's as they came
        (one stream runs in order) or ``by_position``: the order of a serial run,
        however the streams ran (xdist workers, ``evomemory run``'s chains at once),
        so every figure computed from them (a bootstrap interval resamples them in
        order) is the serial run's."""
        rank = {name: index for index, name in reversed(list(enumerate(self.stream_order)))}

        def key(document: _Ordered) -> tuple[int, int]:
            position = getattr(document, "position", None) if by_position else None
            stream = getattr(document, "stream", None)
            return rank.get(str(stream), len(rank)), position if isinstance(position, int) else 0

        return sorted(documents, key=key)

    def metrics(self, scores_in_order: Sequence[Score] | None = None) -> dict[str, StreamMetrics]:
        """Per stream and overall; ``scores_in_order``: the scores already put in a
        serial run's order (:meth:`ordered`), when the caller has them."""
        if scores_in_order is None:
            scores_in_order = self.ordered(self.scores, by_position=True)
        return summarize(self.stream_order, scores_in_order, self.responses)

    def summary(
        self,
        thresholds: list[ThresholdResult],
        started: str,
        finished: str,
        completion: Completion,
        extra: Mapping[str, Any] | None = None,
        metrics: Mapping[str, StreamMetrics] | None = None,
    ) -> Summary:
        """The summary document: metrics, thresholds, failures, and whether the run is
        complete. ``passed`` needs every threshold met, no failed episode and a
        complete run: a run that did not run its tasks never passes. ``metrics``:
        :meth:`metrics` of the scores as they are now, when the caller has them (it
        judged the thresholds on them)."""
        # summary.json's models and the categories' table (with its intervals' module)
        # only where a summary is written: not in an xdist worker
        from ..analysis.categories import category_table
        from ..rundocs.summary import Summary

        scores = self.ordered(self.scores, by_position=True)  # once: metrics, failures and categories read it
        if metrics is None:
            metrics = self.metrics(scores)
        failed = self._failed_episodes(scores)
        thresholds_met = all(t.met for t in thresholds) and (completion.complete or not thresholds)
        return Summary.model_validate({
            "started": started,
            "finished": finished,
            "streams": {name: m.document() for name, m in metrics.items() if name != "overall"},
            "overall": metrics["overall"].document(),
            "thresholds": [t.document() for t in thresholds],
            # the headline mean figure per category (LoCoMo's F1), None for accuracy
            "categories": category_table(scores, metrics["overall"].headline),
            "thresholds_met": thresholds_met,
            "passed": thresholds_met and not failed and completion.complete,
            "failed_episodes": failed,
            "skipped_feedback": self.ordered(self.feedback_skipped),
            "completion": completion,
            "ran": self.what_ran(),
            "methods": METHODS,
            **(extra or {}),
        })


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
    "WriteFailedRecord",
    "error_record",
    "feedback_error_record",
    "feedback_skipped_record",
    "from_wire",
    "from_wires",
    "refusal_record",
    "stream_error_record",
    "stream_started_record",
]
