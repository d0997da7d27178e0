"""The per-task records of a run: a line of scores.jsonl, of responses.jsonl, of a
transcript, and the failures and skips events.jsonl and summary.json list.

A response carries its messages while it travels (from the stream's process to the
controller); the writer puts them in ``transcripts/<stream>.jsonl``
(:class:`TranscriptEntry`) and leaves them out of responses.jsonl.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from .base import RunDoc, as_model
from .fields import Amount, Count, Flag, Fraction, Scalar, Seconds, Text
from .identity import StreamRan

#: Every stimulus an agent receives is one of these kinds (:data:`..core.types.StimulusKind`).
Kind = Literal["task", "feedback", "ingestion"]


class Score(RunDoc):
    """One line of scores.jsonl: one scored original task (a failed episode is wrong, with error set)."""

    OMIT_NONE = frozenset({"error", "traceback", "recall_similarity"})
    NOT_REQUIRED = frozenset({"group"})
    CLOSED = True

    stream: Text = ""
    task_id: Text = ""
    position: Count = Field(default=0, description="0-based position in the stream.")
    correct: Flag = False
    value: Fraction = 0.0
    raw_answer: str | None = None
    extracted: str | None = None
    target: Any = None
    match_mode: Text = ""
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    group: Scalar = None
    #: why the episode failed (a failed episode is scored wrong)
    error: str | None = None
    traceback: str | None = None
    recall_similarity: Fraction | None = Field(default=None,
        description="How similar the task was to what its task turn's recalls returned (absent without a recall); "
        "docs/artefacts.md.",
    )


class Usage(RunDoc):
    """Token counts as the model server reported them."""

    NOT_REQUIRED = frozenset({"total_tokens"})

    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    total_tokens: Count = 0


class ToolCallDoc(RunDoc):
    """One tool call of a turn, with what the tool returned."""

    NOT_REQUIRED = frozenset({"name", "arguments", "result", "error"})

    name: Scalar = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: bool = False


class Response(RunDoc):
    """One line of responses.jsonl: an agent response to a task, feedback or ingestion turn (its messages are in transcripts/<stream>.jsonl)."""

    OMIT_NONE = frozenset({"messages", "cached", "memory_unstored"})
    NOT_REQUIRED = frozenset({"final_answer", "protocol_violation", "memory_writes", "memory_recalled", "cost_usd"})

    stream: Text = ""
    task_id: Text = ""
    kind: Kind = "task"
    final_answer: str | None = None
    agent_turns: Count = 0
    tool_calls: list[ToolCallDoc] = Field(default_factory=list)
    #: the turn's messages: carried to the writer, written to the transcript only
    messages: list[dict[str, Any]] | None = None
    usage: Usage = Field(default_factory=Usage)
    memory_retains: Count = 0
    memory_recalls: Count = 0
    seconds: Seconds = 0.0
    protocol_violation: str | None = None
    memory_writes: list[dict[str, Any]] = Field(default_factory=list)
    memory_recalled: list[dict[str, Any]] = Field(default_factory=list)
    cost_usd: Amount | None = Field(default=None, description="US dollars, priced by the agent config's model.pricing; null when the model has no pricing."
    )
    #: a response that says itself it was served from the response cache
    cached: Flag | None = Field(
        default=None,
        description="true: served from the response cache (every model call of the turn replayed); absent otherwise.",
    )
    memory_unstored: Count | None = Field(default=None, description=(
        "Retains of this turn the memory stored nothing for (a library's own extraction, e.g. Mem0's or LangMem's "
        "with infer: true, kept nothing); absent when none did."))

    def line(self) -> dict[str, Any]:
        """The response as responses.jsonl holds it: without its messages."""
        data = self.written()
        data.pop("messages", None)
        return data

    def transcript(self) -> TranscriptEntry:
        """The response's entry in ``transcripts/<stream>.jsonl``."""
        return TranscriptEntry(
            task_id=self.task_id, kind=self.kind, messages=self.messages or [], tool_calls=self.tool_calls
        )

    def written_lines(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``line()`` and ``transcript().written()``, from one serialization of the
        response: the writer writes both for every response, and building the
        transcript entry anew validated and serialized its messages and tool calls
        a second time. The messages are not serialized at all: validated as JSON
        values (a list of dicts of plain values, which an agent's turn or a
        worker's wire made), they are what serializing them would give, and a
        turn's transcript is most of a response."""
        data: dict[str, Any] = self.model_dump(by_alias=True, exclude={"messages"})
        entry = {"task_id": data["task_id"], "kind": data["kind"], "messages": self.messages or [],
                 "tool_calls": data["tool_calls"]}
        return data, entry


class TranscriptEntry(RunDoc):
    """One line of transcripts/<stream>.jsonl: one stimulus's messages and tool calls."""

    task_id: Text = ""
    kind: Text = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCallDoc] = Field(default_factory=list)


#: Where an episode, or a stream outside any episode, failed.
Phase = Literal["task", "feedback", "start", "teardown"]


#: How the reason of a task begins when the process running it died (an xdist worker
#: killed, out of memory): the machine's failure, not the agent's. A resume runs that
#: episode again (rundir/resumestate.py), as after a kill of the whole run.
CRASHED = "the test process crashed"


def crashed(reason: str | None) -> bool:
    """Whether a failure's reason is a crash of the process that ran the task."""
    return bool(reason) and str(reason).startswith(CRASHED)


class Failure(RunDoc):
    """A failed episode (phase task or feedback) or a stream's failure outside any episode (start, teardown: task_id and position null)."""

    OMIT_NONE = frozenset({"traceback"})
    CLOSED = True

    stream: Text = ""
    task_id: str | None = None
    position: Count | None = None
    phase: Phase = "task"
    reason: Text = ""
    traceback: Text | None = None

    @property
    def crashed(self) -> bool:
        """The process running the task died (:data:`CRASHED`): a resume runs it again."""
        return crashed(self.reason)


class SkippedFeedback(RunDoc):
    """A feedback turn that could not be given (its task turn failed so that no answer exists)."""

    CLOSED = True

    stream: Text = ""
    task_id: str | None = None
    position: Count | None = None
    reason: str = ""


class WriteFailure(RunDoc):
    """A run file the stream's process writes itself (a memory snapshot) could not be written."""

    stream: Text = ""
    reason: str = ""


class StreamStarted(StreamRan):
    """What a stream's process built: its agent, memory and model (run.json's ``ran``)."""

    CLOSED = False

    stream: Text = ""

    def ran(self) -> StreamRan:
        """What ran, without the stream's name."""
        return StreamRan.model_validate(self.model_dump(by_alias=True, exclude={"stream"}))


class Refusal(RunDoc):
    """A stream's first build refused the session in a process that does not write."""

    key: str = ""
    message: str = ""


def as_score(scored: Score | Mapping[str, Any]) -> Score:
    """A scored item as its model (a mapping is validated: a caller's own dict)."""
    return as_model(Score, scored)


def as_response(response: Response | Mapping[str, Any]) -> Response:
    """A response as its model (a mapping is validated: a caller's own dict)."""
    return as_model(Response, response)


__all__ = [
    "CRASHED",
    "Failure",
    "Kind",
    "Phase",
    "Refusal",
    "Response",
    "Score",
    "SkippedFeedback",
    "StreamStarted",
    "ToolCallDoc",
    "TranscriptEntry",
    "Usage",
    "WriteFailure",
    "as_response",
    "as_score",
    "crashed",
]
