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
    from .config import AgentConfig, BenchmarkConfig, MemoryConfig, RunConfig
    from .configload import load_run_config
    from .errors import (
        ConfigError,
        DataError,
        EpisodeError,
        EvoMemoryError,
        MemoryBackendError,
        ModelError,
        ProtocolViolation,
    )
    from .evaluation import Evaluator, EvoMemoryEvaluator, TaskQAEvaluator, register_match_mode
    from .memory.base import Ingestible, MemoryContext, MemorySystem
    from .memory.tools import memory_tools
    from .cli.run import run_benchmark
    from .runtime import (
        BenchmarkRun,
        Episode,
        Run,
        Session,
        StreamRun,
        run_episode,
        run_stream,
    )
    from .tools import Tool
    from .types import (
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

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Agent": ".agents.base",
    "AgentConfig": ".config",
    "AgentFactory": ".agents.base",
    "AgentResponse": ".types",
    "BenchmarkConfig": ".config",
    "BenchmarkRun": ".runtime",
    "Episode": ".runtime",
    "Run": ".runtime",
    "run_episode": ".runtime",
    "BenchmarkSample": ".types",
    "ConfigError": ".errors",
    "DataError": ".errors",
    "EpisodeError": ".errors",
    "Evaluator": ".evaluation",
    "EvoMemoryError": ".errors",
    "EvoMemoryEvaluator": ".evaluation",
    "FEEDBACK_ACKNOWLEDGEMENT": ".types",
    "INGESTION_ACKNOWLEDGEMENT": ".types",
    "ConversationSession": ".types",
    "DialogueTurn": ".types",
    "IngestionStimulus": ".types",
    "Ingestible": ".memory.base",
    "MemoryBackendError": ".errors",
    "MemoryConfig": ".config",
    "MemoryContext": ".memory.base",
    "MemoryHit": ".types",
    "MemorySystem": ".memory.base",
    "ModelError": ".errors",
    "ProtocolViolation": ".errors",
    "RunConfig": ".config",
    "Score": ".types",
    "ScoredItem": ".types",
    "Session": ".runtime",
    "StreamRun": ".runtime",
    "TaskQAEvaluator": ".evaluation",
    "TaskView": ".types",
    "Tool": ".tools",
    "ToolCall": ".types",
    "ToolSpec": ".types",
    "Turn": ".agents.base",
    "Usage": ".types",
    "UserStimulus": ".types",
    "load_run_config": ".configload",
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
