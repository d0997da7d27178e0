"""The stream's memory as the runtime hands it to the agent: observed, never altered.

:class:`~pytest_evomemory.memory.observed.ObservedMemory` counts operations by role,
keeps the transcript of writes and checks isolation; it never stores or recalls
anything on the agent's behalf. One :class:`IsolationGuard` per run (per process
under xdist) sees every stream the run opens, so a record of an earlier stream that
shows up in a later one is caught.
"""

from __future__ import annotations

from typing import NamedTuple

from ..memory.base import MemorySystem
from ..memory.guard import IsolationGuard
from ..memory.observed import ObservedMemory, OperationCounts


def observe(backend: MemorySystem, stream: str, guard: IsolationGuard) -> ObservedMemory:
    return ObservedMemory(backend, stream, guard)


class Mark(NamedTuple):
    """Where a stream's memory stood when a turn began (or ended): the difference of
    two marks is what the turn did to it. (A named tuple: built twice a turn, and a
    frozen dataclass costs a Python-level ``__setattr__`` per field.)"""

    counts: OperationCounts
    writes: int
    recalled: int


def mark(memory: ObservedMemory | None) -> Mark:
    """Where the memory stands as a turn begins or ends; entries older than the
    previous mark are dropped (a turn only reads its own: see ObservedMemory.mark)."""
    if memory is None:
        return Mark(OperationCounts(), 0, 0)
    writes, recalled = memory.mark()
    return Mark(memory.counts.copy(), writes, recalled)


__all__ = ["IsolationGuard", "Mark", "ObservedMemory", "OperationCounts", "mark", "observe"]
