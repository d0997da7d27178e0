"""The agents a config can name, and the building of one stream's agent."""

from __future__ import annotations

from typing import cast

from ..config import AgentConfig
from ..core.factories import check_protocol, load_factory
from ..core.registry import Registry, is_reference, lazy
from ..memory.base import MemorySystem
from .base import Agent, AgentKind

#: Every agent kind an agent config may name besides a ``module:factory`` reference.
#: Built-in agents load on first use (TinyAgent brings the model clients).
AGENTS: Registry[AgentKind] = Registry("agent kind")
AGENTS.builtin(
    "recall_baseline",
    AgentKind("recall_baseline", lazy("pytest_evomemory.agents.baseline:RecallBaselineAgent")),  # type: ignore[arg-type]
    owner=__name__,
)
AGENTS.builtin(
    "tiny",
    AgentKind(
        "tiny", lazy("pytest_evomemory.agents.tiny:TinyAgent"),  # type: ignore[arg-type]
        needs_model=True, reads=frozenset({"full_context"}),
    ),
    owner=__name__,
)
# The Evo-Memory paper's reference methods, as TinyAgent presets (docs/reference-agents.md):
# TinyAgent reads its preset from ``config.kind``; the kind fixes the memory strategy.
AGENTS.builtin(
    "exprag",
    AgentKind(
        "exprag", lazy("pytest_evomemory.agents.tiny:TinyAgent"), needs_model=True,  # type: ignore[arg-type]
        memory_strategy="deterministic_recall", defaults={"experience_format": "labelled"},
    ),
    owner=__name__,
)
AGENTS.builtin(
    "exprecent",
    AgentKind(
        "exprecent", lazy("pytest_evomemory.agents.tiny:TinyAgent"), needs_model=True,  # type: ignore[arg-type]
        memory_strategy="deterministic_recall", defaults={"experience_format": "labelled"},
    ),
    owner=__name__,
)
AGENTS.builtin(
    "remem",
    AgentKind(
        "remem", lazy("pytest_evomemory.agents.tiny:TinyAgent"), needs_model=True,  # type: ignore[arg-type]
        memory_strategy="tool_use",
    ),
    owner=__name__,
)


def agent_kind(name: str) -> AgentKind | None:
    """The registered kind called ``name``; ``None`` for a ``module:factory`` reference."""
    return None if is_reference(name) else AGENTS.get(name)


def build_agent(config: AgentConfig, memory: MemorySystem | None) -> Agent:
    """Build the agent; ``memory`` is passed on only for ``deterministic_recall``.

    ``none`` agents get no memory at all and ``tool_use`` agents reach it only
    through the tools registered in each turn.
    """
    given = memory if config.memory_strategy == "deterministic_recall" else None
    kind = agent_kind(config.kind)
    factory = kind.build if kind is not None else load_factory(config.kind, "agent")
    agent: object = factory(config, given)
    check_protocol(agent, Agent, f"agent factory {config.kind!r}")
    return cast(Agent, agent)


__all__ = ["AGENTS", "agent_kind", "build_agent"]
