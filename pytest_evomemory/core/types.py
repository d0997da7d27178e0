"""The value objects that flow between streams, agents, memory and evaluators.

They are plain frozen dataclasses with ``to_dict`` helpers so that every artefact,
xdist report and JSON summary is built from the same shape, and so the core stays
importable without pytest.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..rundocs import Response, ToolCallDoc
from ..rundocs import Score as ScoreLine
from ..rundocs import Usage as UsageDoc

#: Every stimulus an agent receives is one of these kinds. Only ``task`` stimuli
#: are ever scored; ``feedback`` stimuli carry the corrective target; ``ingestion``
#: stimuli (LoCoMo, ``ingest: agent``) give the agent one session of a conversation
#: to remember before the questions about it.
StimulusKind = Literal["task", "feedback", "ingestion"]

#: The acknowledgement that must end every feedback turn (docs/design.md).
FEEDBACK_ACKNOWLEDGEMENT = "Feedback recorded"

#: The acknowledgement that must end every ingestion turn (docs/locomo.md).
INGESTION_ACKNOWLEDGEMENT = "Session recorded"


#: The only metadata keys an agent sees in a task (an allow-list: a key that is not
#: here never reaches the agent, whatever a stream puts in its metadata). Each names
#: a property of the question, never of its answer: where it comes from, its subject
#: or category, its year; LoCoMo's ``question`` is the question alone, without the
#: prompt's instructions (a cleaner recall query). Answer keys (``target``, GPQA
#: ``correct_answer`` and ``permutation``, MMLU-Pro ``answer``/``answer_index``,
#: ToolBench ``api_name``, ``domain``, LoCoMo ``evidence`` and ``locomo_category``,
#: ...) and links that lead to a worked solution (AIME ``url``) are absent.
TASK_METADATA_KEYS: frozenset[str] = frozenset(
    {"source", "category", "src", "high_level_domain", "subdomain", "year", "topic", "question"}
)


@dataclass(frozen=True)
class BenchmarkSample:
    """One task of a stream, as it is scored and recorded.

    The agent never receives this object: it holds the answer key. It receives
    :meth:`task_view`, which holds only what the agent may see.

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
    def test_id(self) -> str:
        return f"{self.stream}/{self.task_id}"

    def task_view(self) -> TaskView:
        """What the agent receives in the task turn: no target, no answer metadata."""
        return TaskView(
            task_id=self.task_id,
            stream=self.stream,
            position=self.position,
            prompt=self.prompt,
            choices=tuple(self.choices),
            metadata={
                key: copy.deepcopy(value)
                for key, value in self.metadata.items()
                if key in TASK_METADATA_KEYS
            },
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = list(self.choices)
        data["metadata"] = dict(self.metadata)
        return data


@dataclass(frozen=True)
class DialogueTurn:
    """One turn of a LoCoMo-style conversation, as the source gives it.

    ``dia_id`` is the source's dialogue id (``D<session>:<turn>``), which the
    questions' ``evidence`` lists name; ``image_caption`` is the caption of an
    image the speaker shared (LoCoMo's ``blip_caption``; the images are not released).
    """

    dia_id: str
    speaker: str
    text: str
    image_caption: str | None = None

    def render(self) -> str:
        """``[D1:3] Caroline: text [shares a photo of ...]``: the one way a turn is
        written, in ingestion records, ingestion turns and full-context prompts alike
        (the leading ``[dia_id]`` tag lets evidence recall attribute a recalled record)."""
        shared = f" [shares {self.image_caption}]" if self.image_caption else ""
        return f"[{self.dia_id}] {self.speaker}: {self.text}{shared}"


@dataclass(frozen=True)
class ConversationSession:
    """One dated session of a conversation (LoCoMo ``session_<N>`` and its date)."""

    conversation: str
    index: int
    date_time: str
    turns: tuple[DialogueTurn, ...]

    @property
    def session_id(self) -> str:
        return f"session_{self.index}"

    def render(self) -> str:
        """The session as text: its date line, then one line per turn."""
        lines = [f"Session {self.index} ({self.date_time}):"]
        lines += [turn.render() for turn in self.turns]
        return "\n".join(lines)


@dataclass(frozen=True)
class IngestionStimulus:
    """One session of a conversation, given to the agent to remember (unscored).

    Delivered before the first question when a LoCoMo stream ingests through the
    agent (``ingest: agent``); the agent may store what it wants through its
    memory, then ends the turn with ``final_answer("Session recorded")``.
    """

    task_id: str
    stream: str
    content: str
    session: ConversationSession

    @property
    def kind(self) -> StimulusKind:
        return "ingestion"


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as the agent sees it: built by :meth:`BenchmarkSample.task_view`.

    It holds copies of the visible fields and no reference to the sample, so
    nothing reachable from it (attributes, ``repr``, ``to_dict``, pickling, the
    garbage collector's referents) contains the answer. ``metadata`` holds only the
    keys in :data:`TASK_METADATA_KEYS`. The answer reaches the agent only in the
    feedback turn, as a :class:`UserStimulus`.
    """

    task_id: str
    stream: str
    position: int
    prompt: str
    choices: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: The whole conversation the question is about, oldest session first, only for
    #: an agent configured with ``full_context: true`` (LoCoMo's full-context arm);
    #: empty for every other agent and stream.
    conversation: tuple[ConversationSession, ...] = ()

    @property
    def kind(self) -> StimulusKind:
        return "task"

    @property
    def test_id(self) -> str:
        return f"{self.stream}/{self.task_id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "stream": self.stream,
            "position": self.position,
            "prompt": self.prompt,
            "choices": list(self.choices),
            "metadata": copy.deepcopy(dict(self.metadata)),
        }


@dataclass(frozen=True)
class UserStimulus:
    """The unscored corrective feedback that follows a task in the same conversation.

    ``target`` is the stream's canonical answer (the scored target), byte for byte;
    ``submitted_answer`` is what the agent's ``final_answer`` said in the task turn.
    ``source_answer`` is the answer in the source dataset's own words where that
    differs from ``target`` (GPQA's "Correct Answer" text; MMLU-Pro's ``answer``
    letter and its option text), field name to verbatim value; empty otherwise.
    """

    task_id: str
    stream: str
    content: str
    target: str
    submitted_answer: str | None
    source_answer: Mapping[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> StimulusKind:
        return "feedback"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["source_answer"] = dict(self.source_answer)
        return data


#: What an agent receives: a task (no answer key), the feedback on it, or one
#: session of a conversation to remember (LoCoMo with ``ingest: agent``).
Stimulus = TaskView | UserStimulus | IngestionStimulus


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




#: More tokens than any model call uses: a count above it is no count (a server's or
#: an agent's bug) and would break every total and report built on it.
MAX_TOKEN_COUNT = 10**12


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
    #: What reached the memory during this stimulus other than recalls, in order
    #: (a transcript; resume restores the memory's own snapshot, never these).
    memory_writes: tuple[Mapping[str, Any], ...] = ()
    #: Every hit the stream's memory returned during this stimulus (``MemoryHit``
    #: dicts, in order), so a report can show what was recalled into the prompt.
    memory_recalled: tuple[Mapping[str, Any], ...] = ()
    #: ``usage`` priced by the model's ``pricing`` (:mod:`pytest_evomemory.config.pricing`),
    #: ``None`` when it has none.
    cost_usd: float | None = None
    #: Retains of this stimulus that the memory stored nothing for (its own count:
    #: :class:`pytest_evomemory.memory.base.SelectiveStore`).
    memory_unstored: int = 0

    def document(self) -> Response:
        """The response as the run records it (responses.jsonl and its transcript)."""
        return Response(
            stream=self.stream, task_id=self.task_id, kind=self.kind, final_answer=self.final_answer,
            agent_turns=self.agent_turns,
            tool_calls=[ToolCallDoc(name=call.name, arguments=dict(call.arguments), result=call.result, error=call.error)
                        for call in self.tool_calls],
            messages=[dict(message) for message in self.messages],
            usage=UsageDoc(prompt_tokens=self.usage.prompt_tokens, completion_tokens=self.usage.completion_tokens,
                        total_tokens=self.usage.total_tokens),
            memory_retains=self.memory_retains, memory_recalls=self.memory_recalls, seconds=self.seconds,
            protocol_violation=self.protocol_violation, memory_writes=[dict(write) for write in self.memory_writes],
            memory_recalled=[dict(hit) for hit in self.memory_recalled], cost_usd=self.cost_usd,
            memory_unstored=self.memory_unstored or None,
        )


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

    def document(self, recall_similarity: float | None = None) -> ScoreLine:
        """The score as scores.jsonl records it (``recall_similarity``: how similar the
        task was to what its recalls returned, when any returned something)."""
        score = self.score
        return ScoreLine(
            stream=self.stream, task_id=self.task_id, position=self.position, group=self.group, correct=score.correct,
            value=score.value, raw_answer=score.raw_answer, extracted=score.extracted, target=score.target,
            match_mode=score.match_mode, reason=score.reason, details=dict(score.details),
            recall_similarity=recall_similarity,
        )
