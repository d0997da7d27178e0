"""pytest-evomemory: the Evo-Memory single-turn benchmark as a pytest plugin.

The core (streams, episodes, agents, memory, evaluation, reporting) is usable
without pytest; :mod:`pytest_evomemory.plugin` adapts it to pytest.

The names below are imported on first use. pytest imports the plugin, and with it
this package, in every run of every project that has it installed, and in each
xdist worker; loading pydantic, numpy and the agents there before they are needed
would slow down test runs that never touch the benchmark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agents.base import Agent, AgentFactory, Turn
    from .cli.run import run_benchmark
    from .config import AgentConfig, BenchmarkConfig, MemoryConfig, RunConfig
    from .configs.load import load_run_config
    from .core.errors import (
        ConfigError,
        DataError,
        EpisodeError,
        EvoMemoryError,
        MemoryBackendError,
        ModelError,
        ProtocolViolation,
    )
    from .core.tools import Tool
    from .core.types import (
        FEEDBACK_ACKNOWLEDGEMENT,
        INGESTION_ACKNOWLEDGEMENT,
        AgentResponse,
        BenchmarkSample,
        ConversationSession,
        DialogueTurn,
        IngestionStimulus,
        MemoryHit,
        Score,
        ScoredItem,
        TaskView,
        ToolCall,
        ToolSpec,
        Usage,
        UserStimulus,
    )
    from .evaluation import Evaluator, EvoMemoryEvaluator, TaskQAEvaluator, register_match_mode
    from .memory.base import Ingestible, MemoryContext, MemorySystem
    from .memory.tools import memory_tools
    from .runtime import (
        BenchmarkRun,
        Episode,
        Run,
        Session,
        StreamRun,
        run_episode,
        run_stream,
    )

from .util.version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    "Agent": ".agents.base",
    "AgentConfig": ".config",
    "AgentFactory": ".agents.base",
    "AgentResponse": ".core.types",
    "BenchmarkConfig": ".config",
    "BenchmarkRun": ".runtime",
    "Episode": ".runtime",
    "Run": ".runtime",
    "run_episode": ".runtime",
    "BenchmarkSample": ".core.types",
    "ConfigError": ".core.errors",
    "DataError": ".core.errors",
    "EpisodeError": ".core.errors",
    "Evaluator": ".evaluation",
    "EvoMemoryError": ".core.errors",
    "EvoMemoryEvaluator": ".evaluation",
    "FEEDBACK_ACKNOWLEDGEMENT": ".core.types",
    "INGESTION_ACKNOWLEDGEMENT": ".core.types",
    "ConversationSession": ".core.types",
    "DialogueTurn": ".core.types",
    "IngestionStimulus": ".core.types",
    "Ingestible": ".memory.base",
    "MemoryBackendError": ".core.errors",
    "MemoryConfig": ".config",
    "MemoryContext": ".memory.base",
    "MemoryHit": ".core.types",
    "MemorySystem": ".memory.base",
    "ModelError": ".core.errors",
    "ProtocolViolation": ".core.errors",
    "RunConfig": ".config",
    "Score": ".core.types",
    "ScoredItem": ".core.types",
    "Session": ".runtime",
    "StreamRun": ".runtime",
    "TaskQAEvaluator": ".evaluation",
    "TaskView": ".core.types",
    "Tool": ".core.tools",
    "ToolCall": ".core.types",
    "ToolSpec": ".core.types",
    "Turn": ".agents.base",
    "Usage": ".core.types",
    "UserStimulus": ".core.types",
    "load_run_config": ".configs.load",
    "memory_tools": ".memory.tools",
    "register_match_mode": ".evaluation",
    "run_benchmark": ".cli.run",
    "run_stream": ".runtime",
}

__all__ = [
    "FEEDBACK_ACKNOWLEDGEMENT",
    "INGESTION_ACKNOWLEDGEMENT",
    "Agent",
    "AgentConfig",
    "AgentFactory",
    "AgentResponse",
    "BenchmarkConfig",
    "BenchmarkRun",
    "BenchmarkSample",
    "ConfigError",
    "ConversationSession",
    "DataError",
    "DialogueTurn",
    "Episode",
    "EpisodeError",
    "Evaluator",
    "EvoMemoryError",
    "EvoMemoryEvaluator",
    "Ingestible",
    "IngestionStimulus",
    "MemoryBackendError",
    "MemoryConfig",
    "MemoryContext",
    "MemoryHit",
    "MemorySystem",
    "ModelError",
    "ProtocolViolation",
    "Run",
    "RunConfig",
    "Score",
    "ScoredItem",
    "Session",
    "StreamRun",
    "TaskQAEvaluator",
    "TaskView",
    "Tool",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "Usage",
    "UserStimulus",
    "load_run_config",
    "memory_tools",
    "register_match_mode",
    "run_benchmark",
    "run_episode",
    "run_stream",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
