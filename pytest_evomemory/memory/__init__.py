"""Memory systems: the protocol, the built-in backends and the factory."""

from .base import MemorySystem
from .factory import build_memory
from .inprocess import InProcessMemory
from .tools import memory_tools

__all__ = ["InProcessMemory", "MemorySystem", "build_memory", "memory_tools"]
