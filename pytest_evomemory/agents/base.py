"""The Agent protocol: what the benchmark needs from the agent under test.

An agent answers one stimulus at a time through a :class:`Turn` that the runtime
hands it: the turn lists the tools it may call, executes and records every call,
and ends when the agent calls ``final_answer``. Between tasks the runtime calls
``reset`` to clear the agent's conversation state; the agent's memory system is
not the agent's state and is never touched by ``reset``.

The agent never holds the answer key while it answers: a task turn gives it a
:class:`~pytest_evomemory.core.types.TaskView`, and the evaluator keeps the full
:class:`~pytest_evomemory.core.types.BenchmarkSample`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.types import Stimulus, ToolSpec, Usage

if TYPE_CHECKING:
    from ..config import AgentConfig, MemoryStrategy
    from ..memory.base import MemorySystem


@runtime_checkable
class Turn(Protocol):
    """The runtime side of one agent turn (one stimulus)."""

    @property
    def tools(self) -> Sequence[ToolSpec]:
        """Tools the agent may call in this turn; ``final_answer`` is always one."""
        ...

    @property
    def finished(self) -> bool:
        """True once ``final_answer`` was called."""
        ...

    @property
    def final_answer(self) -> str | None: ...

    def begin_step(self) -> None:
        """Announce one model call; raises EpisodeError past the turn's step limit."""
        ...

    def record_usage(self, usage: Usage) -> None:
        """Add the token usage a model call reported."""
        ...

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Append a chat message to this turn's transcript."""
        ...

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run a tool and return its result text (an error text for bad calls)."""
        ...


@runtime_checkable
class Agent(Protocol):
    """An agent that can be benchmarked: it answers stimuli and can forget them."""

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        """Work on ``stimulus`` and end by calling ``turn.call_tool("final_answer", ...)``.

        A task arrives as a :class:`~pytest_evomemory.core.types.TaskView` (prompt,
        choices and question metadata, never the answer); its feedback as a
        :class:`~pytest_evomemory.core.types.UserStimulus` holding the target; on a
        LoCoMo stream with ``ingest: agent``, one session of the conversation as an
        :class:`~pytest_evomemory.core.types.IngestionStimulus` before the first question,
        ended with ``final_answer("Session recorded")``. Tell them apart by
        ``stimulus.kind`` (``"task"``, ``"feedback"`` or ``"ingestion"``).
        """
        ...

    def reset(self) -> None:
        """Clear ephemeral conversation state. Must not call a model or touch memory."""
        ...


#: Builds the agent for one stream. ``memory`` is the stream's memory system for
#: ``deterministic_recall`` agents, and ``None`` for ``none`` and ``tool_use``
#: agents (a ``tool_use`` agent reaches memory only through its turn's tools).
AgentFactory = Callable[["AgentConfig", "MemorySystem | None"], Agent]


@dataclass(frozen=True)
class AgentKind:
    """An agent as configs name it (``agent: {kind: NAME}``), registered in
    :data:`pytest_evomemory.agents.factory.AGENTS`.

    ``build`` makes the agent for one stream; ``needs_model``: the agent config must
    have a ``model:`` section; ``reads_options``: the keys of the free-form
    ``agent.options`` it reads (any other is refused up front, never ignored).
    ``memory_strategy``: the one strategy the kind is (a preset such as the paper's
    ExpRAG), the default of its configs and the only value they may set; ``None``:
    any. ``defaults``: other agent config keys the kind sets when a config does not
    (a key the config sets is kept, then validated like any). ``reads``: the agent
    config keys only some kinds read (``full_context``), which a kind that does not
    list them refuses.
    """

    name: str
    build: AgentFactory
    needs_model: bool = False
    reads_options: frozenset[str] = frozenset()
    memory_strategy: MemoryStrategy | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    reads: frozenset[str] = frozenset()
