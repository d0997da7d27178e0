"""The records an episode produces, and the collector that turns them into results.

A record is a plain JSON-able mapping, because it travels: from an xdist worker to
the controller on a test report, and from the controller into the run directory.
Its ``type`` says what happened:

* ``task``: a task turn ended with an answer (``response`` and ``scored``);
* ``error``: a task turn failed (``scored`` is wrong with ``error`` set; ``response``
  when the turn produced one);
* ``feedback``: a feedback turn (``response``);
* ``feedback_error``: a feedback turn failed (``failure``; ``response`` if any);
* ``feedback_skipped``: no feedback turn was possible (``skipped``);
* ``stream_error``: a stream failed outside any episode, e.g. in its teardown
  (``failure``), charged to that stream.

A failed episode is a scored item too (wrong, with ``error`` set), so the scores
alone say every task's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..identity import reported_models
from ..reporting.summary import StreamMetrics, ThresholdResult, summarize
from ..types import BenchmarkSample

if TYPE_CHECKING:
    from ..rundir import RunWriter


def task_record(response: Mapping[str, Any], scored: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "task", "response": dict(response), "scored": dict(scored)}


def feedback_record(response: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "feedback", "response": dict(response)}


def _where(sample: BenchmarkSample) -> dict[str, Any]:
    return {"stream": sample.stream, "task_id": sample.task_id, "position": sample.position}


def error_record(
    sample: BenchmarkSample,
    reason: str,
    response: Mapping[str, Any] | None = None,
    traceback: str | None = None,
) -> dict[str, Any]:
    """A task whose episode failed: scored as wrong, with the failure as the reason."""
    scored = {
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
    return _failed("error", "scored", scored, response, traceback)


def feedback_error_record(
    sample: BenchmarkSample,
    reason: str,
    response: Mapping[str, Any] | None = None,
    traceback: str | None = None,
) -> dict[str, Any]:
    failure: dict[str, Any] = {**_where(sample), "phase": "feedback", "reason": reason}
    return _failed("feedback_error", "failure", failure, response, traceback)


def _failed(
    kind: str, key: str, what: dict[str, Any], response: Mapping[str, Any] | None, traceback: str | None
) -> dict[str, Any]:
    """A failed turn's record: the user's traceback kept, the turn's response if any."""
    if traceback:
        what["traceback"] = traceback
    record: dict[str, Any] = {"type": kind, key: what}
    if response is not None:
        record["response"] = dict(response)
    return record


def feedback_skipped_record(sample: BenchmarkSample, reason: str) -> dict[str, Any]:
    return {"type": "feedback_skipped", "skipped": {**_where(sample), "reason": reason}}


def stream_started_record(stream: str, identity: Mapping[str, Any]) -> dict[str, Any]:
    """What a stream's process built (agent, memory, model): run.json says what ran."""
    return {"type": "stream_started", "started": {"stream": stream, **dict(identity)}}


def stream_error_record(stream: str, reason: str) -> dict[str, Any]:
    """A stream that failed outside any episode (its teardown): charged to the stream."""
    return {
        "type": "stream_error",
        "failure": {"stream": stream, "task_id": None, "position": None, "phase": "teardown", "reason": reason},
    }


@dataclass
class ResultCollector:
    """Gathers records (from any process) into results and the run directory.

    Each task is scored once: a second scored record for a task already scored
    (an xdist worker that died in the task's feedback turn is reported as a failed
    test) becomes a failed feedback turn instead of a second score.
    """

    stream_order: list[str]
    writer: RunWriter | None = None
    responses: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    feedback_skipped: list[dict[str, Any]] = field(default_factory=list)
    #: stream -> what ran for it (agent, memory, model), from ``stream_started`` records
    ran: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: stream -> the model names the server reported in the stream's replies, in order
    reported_models: dict[str, dict[str, None]] = field(default_factory=dict)
    _scored: set[tuple[str, str]] = field(default_factory=set)
    #: (stream, task id) of every failed episode so far, kept as records arrive: a run
    #: checks it after every record (--evomemory-max-errors), so it must not rescan
    _failed: set[tuple[str, str | None]] = field(default_factory=set)

    def add_record(self, record: Mapping[str, Any]) -> None:
        if "started" in record:
            started = dict(record["started"])
            self.ran.setdefault(str(started.pop("stream")), started)
            return
        if "scored" in record:
            scored = record["scored"]
            key = (str(scored["stream"]), str(scored["task_id"]))
            if key in self._scored:
                self.add_record({
                    "type": "feedback_error",
                    "failure": {
                        "stream": scored["stream"], "task_id": scored["task_id"],
                        "position": scored["position"], "phase": "feedback",
                        "reason": str(scored.get("error") or "the episode failed after its task was scored"),
                    },
                })
                return
            self._scored.add(key)
        if "response" in record:
            names = reported_models(record["response"].get("messages") or ())
            if names:
                self.reported_models.setdefault(str(record["response"].get("stream")), {}).update(dict.fromkeys(names))
            self.responses.append(dict(record["response"]))
            if self.writer:
                self.writer.add_response(record["response"])
        if "scored" in record:
            self.scores.append(dict(record["scored"]))
            if record["scored"].get("error"):
                self._failed.add((str(record["scored"]["stream"]), str(record["scored"]["task_id"])))
            if self.writer:
                self.writer.add_score(record["scored"])
        if "failure" in record:
            failure = record["failure"]
            task = failure.get("task_id")
            self._failed.add((str(failure.get("stream")), None if task is None else str(task)))
            self.failures.append(dict(failure))
            if self.writer:
                self.writer.add_event(record)
        if "skipped" in record:
            self.feedback_skipped.append(dict(record["skipped"]))
            if self.writer:
                self.writer.add_event(record)

    def preload(
        self,
        responses: Sequence[Mapping[str, Any]],
        scores: Sequence[Mapping[str, Any]],
        events: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Resume: count the completed episodes' records without writing them again."""
        writer, self.writer = self.writer, None
        try:
            for scored in scores:
                self.add_record({"scored": scored})
            for response in responses:
                self.add_record({"response": response})
            for event in events:
                self.add_record(event)
        finally:
            self.writer = writer

    def what_ran(self) -> dict[str, dict[str, Any]]:
        """Per stream, what ran (``stream_started``), its model with the names the
        server reported in its replies (``model.reported``) once any reply came."""
        ran: dict[str, dict[str, Any]] = {}
        for stream, parts in self.ran.items():
            names, model = list(self.reported_models.get(stream, ())), parts.get("model")
            ran[stream] = {**parts, "model": {**model, "reported": names}} if names and isinstance(model, Mapping) else parts
        return ran

    @property
    def failed_episode_count(self) -> int:
        """Failed episodes (a task whose task and feedback turns both failed is one)."""
        return len(self._failed)

    @property
    def failed_episodes(self) -> list[dict[str, Any]]:
        task_failures = [
            {"stream": s["stream"], "task_id": s["task_id"], "position": s["position"],
             "phase": "task", "reason": s["error"], **({"traceback": s["traceback"]} if s.get("traceback") else {})}
            for s in self.scores if s.get("error")
        ]
        return task_failures + [dict(failure) for failure in self.failures]

    def metrics(self) -> dict[str, StreamMetrics]:
        return summarize(self.stream_order, self.scores, self.responses)

    def summary(
        self,
        thresholds: list[ThresholdResult],
        started: str,
        finished: str,
        completion: Mapping[str, Any],
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
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
            "thresholds_met": thresholds_met,
            "passed": thresholds_met and not failed and bool(completion.get("complete")),
            "failed_episodes": failed,
            "skipped_feedback": [dict(s) for s in self.feedback_skipped],
            "completion": dict(completion),
            "ran": self.what_ran(),
            **(extra or {}),
        }


__all__ = [
    "ResultCollector",
    "error_record",
    "feedback_error_record",
    "feedback_record",
    "feedback_skipped_record",
    "stream_error_record",
    "stream_started_record",
    "task_record",
]
