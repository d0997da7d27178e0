"""The stream's memory as the runtime hands it to the agent: observed, never altered.

:class:`~pytest_evomemory.memory.observed.ObservedMemory` counts operations by role,
keeps the transcript of writes and checks isolation; it never stores or recalls
anything on the agent's behalf. One :class:`IsolationGuard` per run (per process
under xdist) sees every stream the run opens, so a record of an earlier stream that
shows up in a later one is caught.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..memory.base import MemorySystem
from ..memory.guard import IsolationGuard
from ..memory.observed import ObservedMemory


def observe(backend: MemorySystem, stream: str, guard: IsolationGuard) -> ObservedMemory:
    return ObservedMemory(backend, stream, guard)


@dataclass
class OperationCounts:
    retains: int = 0
    recalls: int = 0
    writes: int = 0
    recalled: int = 0


def operation_counts(memory: ObservedMemory | None) -> OperationCounts:
    if memory is None:
        return OperationCounts()
    return OperationCounts(memory.counts.retains, memory.counts.recalls, len(memory.writes), len(memory.recalled))


__all__ = ["IsolationGuard", "ObservedMemory", "OperationCounts", "observe", "operation_counts"]
