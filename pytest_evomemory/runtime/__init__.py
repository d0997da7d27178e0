"""The engine of a run, usable without pytest.

:class:`BenchmarkRun` loads a benchmark and opens its streams, :class:`Run` owns one
run into one run directory (start, record, finish), :class:`Episode` drives every
episode (task, feedback, reset). The pytest plugin, :func:`run_benchmark` and the
``evomemory run`` command are thin drivers of these.
"""

from __future__ import annotations

from .memory import ObservedMemory
from .records import ResultCollector
from .run import (
    AgentFactoryFn,
    BenchmarkRun,
    MemoryFactoryFn,
    Run,
    RunResult,
    config_fingerprint,
    evaluate_thresholds,
    execute,
    parse_min_accuracy,
    run_benchmark,
)
from .stream import Episode, StreamRun, TaskOutcome, run_episode, run_stream
from .turn import RuntimeTurn

__all__ = [
    "AgentFactoryFn",
    "BenchmarkRun",
    "Episode",
    "MemoryFactoryFn",
    "ObservedMemory",
    "ResultCollector",
    "Run",
    "RunResult",
    "RuntimeTurn",
    "StreamRun",
    "TaskOutcome",
    "config_fingerprint",
    "evaluate_thresholds",
    "execute",
    "parse_min_accuracy",
    "run_benchmark",
    "run_episode",
    "run_stream",
]
