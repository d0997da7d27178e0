"""pytest-evomemory: the Evo-Memory single-turn benchmark as a pytest plugin.

The core (streams, episodes, agents, memory, evaluation, reporting) is usable
without pytest; :mod:`pytest_evomemory.plugin` adapts it to pytest.
"""

from .agents.base import Agent, AgentFactory, Turn
from .config import AgentConfig, BenchmarkConfig, MemoryConfig, RunConfig, load_run_config
from .episode import StreamRun, run_stream
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
from .memory.base import MemorySystem
from .memory.factory import MemoryContext
from .memory.tools import memory_tools
from .run import BenchmarkRun, run_benchmark
from .tools import Tool
from .types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    AgentResponse,
    BenchmarkSample,
    MemoryHit,
    Score,
    ScoredItem,
    ToolCall,
    ToolSpec,
    Usage,
    UserStimulus,
)

__version__ = "0.1.0"

__all__ = [
    "FEEDBACK_ACKNOWLEDGEMENT",
    "Agent",
    "AgentConfig",
    "AgentFactory",
    "AgentResponse",
    "BenchmarkConfig",
    "BenchmarkRun",
    "BenchmarkSample",
    "ConfigError",
    "DataError",
    "EpisodeError",
    "Evaluator",
    "EvoMemoryError",
    "EvoMemoryEvaluator",
    "MemoryBackendError",
    "MemoryConfig",
    "MemoryContext",
    "MemoryHit",
    "MemorySystem",
    "ModelError",
    "ProtocolViolation",
    "RunConfig",
    "Score",
    "ScoredItem",
    "StreamRun",
    "TaskQAEvaluator",
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
    "run_stream",
]
