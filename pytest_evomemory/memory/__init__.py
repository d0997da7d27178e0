"""Memory systems: the protocol, the built-in backends and the factory.

``InProcessMemory`` is imported on first use: it needs numpy, which a process
that only reports on a run (the xdist controller) or uses another backend never
has to load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import MemorySystem, RecordRejected
from .factory import build_memory, open_with_timeout
from .guard import IsolationGuard
from .observed import ObservedMemory
from .snapshot import ResumeRefused, SnapshotCapable, SnapshotDamaged, StreamSnapshots
from .tools import MemoryTool, instrument_memory_tools, memory_tools, tool_role

if TYPE_CHECKING:
    from .inprocess import InProcessMemory

__all__ = [
    "InProcessMemory",
    "IsolationGuard",
    "MemorySystem",
    "MemoryTool",
    "ObservedMemory",
    "RecordRejected",
    "ResumeRefused",
    "SnapshotCapable",
    "SnapshotDamaged",
    "StreamSnapshots",
    "build_memory",
    "instrument_memory_tools",
    "memory_tools",
    "open_with_timeout",
    "tool_role",
]


def __getattr__(name: str) -> Any:
    if name == "InProcessMemory":
        from .inprocess import InProcessMemory

        return InProcessMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
