"""The value objects that flow between streams, agents, memory and evaluators.

They are plain frozen dataclasses with ``to_dict`` helpers so that every artefact,
xdist report and JSON summary is built from the same shape, and so the core stays
importable without pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

#: Every stimulus an agent receives is one of these two kinds. Only ``task``
#: stimuli are ever scored; ``feedback`` stimuli carry the corrective target.
StimulusKind = Literal["task", "feedback"]

#: The acknowledgement that must end every feedback turn (DESIGN.md).
FEEDBACK_ACKNOWLEDGEMENT = "Feedback recorded"


@dataclass(frozen=True)
class BenchmarkSample:
    """One task of a stream, as the agent sees it and as it is scored.

    ``target`` is the canonical answer exactly as the source dataset supplies it;
    ``match_mode`` names the evaluator mode that the source's own evaluation uses.
    ``choices`` holds the rendered option texts for multiple-choice sets (option
    ``i`` is labelled ``chr(ord("A") + i)`` in ``prompt``).
    """

    task_id: str
    stream: str
    position: int
    prompt: str
    target: str
    match_mode: str = "exact"
    choices: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: The value of the stream's breakdown field (MMLU-Pro: ``category``), so that
    #: reports can give accuracy per group; ``None`` when the stream has no breakdown.
    group: str | None = None

    @property
    def kind(self) -> StimulusKind:
        return "task"

    @property
    def test_id(self) -> str:
        return f"{self.stream}/{self.task_id}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = list(self.choices)
        data["metadata"] = dict(self.metadata)
        return data


@dataclass(frozen=True)
class UserStimulus:
    """The unscored corrective feedback that follows a task in the same conversation.

    ``target`` is the source's canonical answer, byte for byte; ``submitted_answer``
    is what the agent's ``final_answer`` said in the task turn.
    """

    task_id: str
    stream: str
    content: str
    target: str
    submitted_answer: str | None

    @property
    def kind(self) -> StimulusKind:
        return "feedback"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Stimulus = BenchmarkSample | UserStimulus


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model sees it: name, description and a JSON-schema for arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One tool invocation inside an agent turn, with what the tool returned."""

    name: str
    arguments: Mapping[str, Any]
    result: str
    error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": dict(self.arguments),
            "result": self.result,
            "error": self.error,
        }


@dataclass(frozen=True)
class Usage:
    """Token counts as reported by the model server (zero for model-free agents)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class MemoryHit:
    """One recalled record. ``score`` is backend-specific: higher is more similar."""

    record_id: str
    content: str
    score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_id": self.record_id,
            "content": self.content,
            "score": self.score,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class AgentResponse:
    """Everything one stimulus produced: the answer, the transcript and the costs.

    Built by the episode runner from what it observed, never self-reported by
    the agent, so that a buggy agent cannot misreport tool calls or turns.
    """

    stream: str
    task_id: str
    kind: StimulusKind
    final_answer: str | None
    agent_turns: int
    tool_calls: tuple[ToolCall, ...]
    messages: tuple[Mapping[str, Any], ...]
    usage: Usage
    memory_retains: int
    memory_recalls: int
    seconds: float
    protocol_violation: str | None = None
    #: Every record the agent stored during this stimulus, in order; a resumed run
    #: replays these into a fresh memory system to restore the exact state.
    memory_writes: tuple[Mapping[str, Any], ...] = ()
    #: Every hit the stream's memory returned during this stimulus (``MemoryHit``
    #: dicts, in order), so a report can show what was recalled into the prompt.
    memory_recalled: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "task_id": self.task_id,
            "kind": self.kind,
            "final_answer": self.final_answer,
            "agent_turns": self.agent_turns,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "messages": [dict(message) for message in self.messages],
            "usage": self.usage.to_dict(),
            "memory_retains": self.memory_retains,
            "memory_recalls": self.memory_recalls,
            "seconds": self.seconds,
            "protocol_violation": self.protocol_violation,
            "memory_writes": [dict(write) for write in self.memory_writes],
            "memory_recalled": [dict(hit) for hit in self.memory_recalled],
        }


@dataclass(frozen=True)
class Score:
    """The evaluator's verdict on one answer, with enough detail to explain it."""

    correct: bool
    raw_answer: str | None
    extracted: str | None
    target: str
    match_mode: str
    reason: str
    value: float = field(default=-1.0)
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value < 0:
            object.__setattr__(self, "value", 1.0 if self.correct else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "correct": self.correct,
            "value": self.value,
            "raw_answer": self.raw_answer,
            "extracted": self.extracted,
            "target": self.target,
            "match_mode": self.match_mode,
            "reason": self.reason,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class ScoredItem:
    """One original task's score, in stream position order: the unit of accuracy."""

    stream: str
    task_id: str
    position: int
    score: Score
    #: The task's ``BenchmarkSample.group`` (per-group accuracy in reports).
    group: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "task_id": self.task_id,
            "position": self.position,
            "group": self.group,
            **self.score.to_dict(),
        }
