"""The engine of a benchmark session, usable without pytest.

:class:`Session` owns everything a session decides, in parts: its plan (arms,
resume, shards), its stream driver (episodes) and its collector (records, gates,
the end); :class:`BenchmarkRun` loads one run config's streams and opens them,
:class:`Run` owns one run directory, :class:`Episode` drives every episode (task,
feedback, reset). The pytest plugin and the ``evomemory run`` command are thin
drivers of these; :func:`run_session` is the serial one.
"""

from __future__ import annotations

from .memory import ObservedMemory
from .records import Record, ResultCollector
from .run import (
    AgentFactoryFn,
    BenchmarkRun,
    MemoryFactoryFn,
    Run,
    RunResult,
    config_fingerprint,
    evaluate_thresholds,
)
from .serial import run_session
from .session import Outcome, Session, SessionSetup
from .stream import Episode, StreamRun, TaskOutcome, run_episode, run_stream
from .turn import RuntimeTurn

__all__ = [
    "AgentFactoryFn",
    "BenchmarkRun",
    "Episode",
    "MemoryFactoryFn",
    "ObservedMemory",
    "Outcome",
    "Record",
    "ResultCollector",
    "Run",
    "RunResult",
    "RuntimeTurn",
    "Session",
    "SessionSetup",
    "StreamRun",
    "TaskOutcome",
    "config_fingerprint",
    "evaluate_thresholds",
    "run_episode",
    "run_session",
    "run_stream",
]
