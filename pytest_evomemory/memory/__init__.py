"""Memory systems: the protocol, the built-in backends and the factory.

``InProcessMemory`` is imported on first use: it needs numpy, which a process
that only reports on a run (the xdist controller) or uses another backend never
has to load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import MemorySystem
from .factory import build_memory
from .tools import memory_tools

if TYPE_CHECKING:
    from .inprocess import InProcessMemory

__all__ = ["InProcessMemory", "MemorySystem", "build_memory", "memory_tools"]


def __getattr__(name: str) -> Any:
    if name == "InProcessMemory":
        from .inprocess import InProcessMemory

        return InProcessMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
