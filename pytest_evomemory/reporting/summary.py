"""Turn the run's records into per-stream and overall metrics.

Accuracy counts only original task turns; a task whose episode failed counts as
wrong (it is in the denominator), so an unreachable model can never raise a score.
Stimulus, turn, token and memory counts include the feedback turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass
class StreamMetrics:
    """Counters for one stream (or, for ``overall``, all of them together)."""

    stream: str
    tasks: int = 0
    correct: int = 0
    errors: int = 0
    stimuli: int = 0
    feedback_turns: int = 0
    agent_turns: int = 0
    tool_calls: int = 0
    memory_retains: int = 0
    memory_recalls: int = 0
    protocol_violations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    curve: list[float] = field(default_factory=list)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.tasks if self.tasks else None

    def add_response(self, response: Mapping[str, Any]) -> None:
        self.stimuli += 1
        if response["kind"] == "feedback":
            self.feedback_turns += 1
        self.agent_turns += int(response["agent_turns"])
        self.tool_calls += len(response["tool_calls"])
        self.memory_retains += int(response["memory_retains"])
        self.memory_recalls += int(response["memory_recalls"])
        self.protocol_violations += 1 if response.get("protocol_violation") else 0
        usage = response["usage"]
        self.prompt_tokens += int(usage["prompt_tokens"])
        self.completion_tokens += int(usage["completion_tokens"])
        self.seconds += float(response["seconds"])

    def to_dict(self) -> dict[str, Any]:
        total_tokens = self.prompt_tokens + self.completion_tokens
        per = (lambda value: value / self.stimuli) if self.stimuli else (lambda value: None)
        return {
            "stream": self.stream,
            "tasks": self.tasks,
            "correct": self.correct,
            "errors": self.errors,
            "accuracy": self.accuracy,
            "stimuli": self.stimuli,
            "feedback_turns": self.feedback_turns,
            "agent_turns": self.agent_turns,
            "tool_calls": self.tool_calls,
            "memory_retains": self.memory_retains,
            "memory_recalls": self.memory_recalls,
            "protocol_violations": self.protocol_violations,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total_tokens,
            "seconds": round(self.seconds, 6),
            "per_stimulus": {
                "tokens": per(total_tokens),
                "agent_turns": per(self.agent_turns),
                "seconds": per(self.seconds),
            },
            "learning_curve": self.curve,
        }


def summarize(
    stream_order: Sequence[str],
    outcomes: Iterable[Mapping[str, Any]],
    responses: Iterable[Mapping[str, Any]],
) -> dict[str, StreamMetrics]:
    """Metrics keyed by stream name (in stream order), plus ``"overall"``.

    ``outcomes`` are scored items (``{"stream", "position", "correct", ...}``)
    with ``"error"`` set for failed episodes. ``responses`` are AgentResponse dicts.
    """
    metrics = {name: StreamMetrics(name) for name in stream_order}
    overall = StreamMetrics("overall")
    ordered = sorted(
        outcomes, key=lambda o: (_index(stream_order, o["stream"]), int(o["position"]))
    )
    for outcome in ordered:
        stream = metrics.setdefault(outcome["stream"], StreamMetrics(outcome["stream"]))
        for target in (stream, overall):
            target.tasks += 1
            if outcome.get("error"):
                target.errors += 1
            elif outcome["correct"]:
                target.correct += 1
        stream.curve.append(round(stream.correct / stream.tasks, 6))
    for response in responses:
        stream = metrics.setdefault(response["stream"], StreamMetrics(response["stream"]))
        stream.add_response(response)
        overall.add_response(response)
    overall.curve = []
    metrics["overall"] = overall
    return metrics


def _index(order: Sequence[str], name: str) -> int:
    return order.index(name) if name in order else len(order)


@dataclass(frozen=True)
class ThresholdResult:
    scope: str
    minimum: float
    accuracy: float | None

    @property
    def met(self) -> bool:
        return self.accuracy is not None and self.accuracy >= self.minimum

    def describe(self) -> str:
        shown = "n/a (no tasks ran)" if self.accuracy is None else f"{self.accuracy:.1%}"
        verdict = "met" if self.met else "MISSED"
        return f"{verdict}: {self.scope} accuracy {shown}, minimum {self.minimum:.1%}"

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "minimum": self.minimum, "accuracy": self.accuracy, "met": self.met}


def check_thresholds(
    metrics: Mapping[str, StreamMetrics],
    overall: float | None,
    per_stream: Mapping[str, float],
) -> list[ThresholdResult]:
    """Compare accuracies with the configured minimums (streams first, then overall)."""
    results = [
        ThresholdResult(name, minimum, metrics[name].accuracy if name in metrics else None)
        for name, minimum in per_stream.items()
    ]
    if overall is not None:
        results.append(ThresholdResult("overall", overall, metrics["overall"].accuracy))
    return results
