"""Pick and build the configured agent for one stream."""

from __future__ import annotations

from ..config import MODEL_AGENT_KINDS, AgentConfig
from ..errors import ConfigError
from ..factories import load_factory
from ..memory.base import MemorySystem
from .base import Agent


def build_agent(config: AgentConfig, memory: MemorySystem | None) -> Agent:
    """Build the agent; ``memory`` is passed on only for ``deterministic_recall``.

    ``none`` agents get no memory at all and ``tool_use`` agents reach it only
    through the tools registered in each turn.
    """
    given = memory if config.memory_strategy == "deterministic_recall" else None
    if config.kind == "recall_baseline":
        from .baseline import RecallBaselineAgent

        agent: object = RecallBaselineAgent(config, given)
    elif config.kind in MODEL_AGENT_KINDS:  # tiny and the paper's reference presets
        from .tiny import TinyAgent

        agent = TinyAgent(config, given)
    else:
        agent = load_factory(config.kind, "agent")(config, given)
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"agent factory {config.kind!r} returned {type(agent).__name__}, which does not "
            "implement the Agent protocol (respond(stimulus, turn) and reset())"
        )
    return agent
