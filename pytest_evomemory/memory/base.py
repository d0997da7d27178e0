"""The MemorySystem protocol: what the benchmark needs from the memory under test.

A memory system is owned by one stream: it is created when the stream starts,
persists across that stream's episodes, and is reset and closed at stream
teardown. The framework never calls ``recall`` or ``retain`` itself; only the
agent does, directly (``deterministic_recall``) or through the tools the memory
system declares (``tool_use``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..tools import Tool
from ..types import MemoryHit


@runtime_checkable
class MemorySystem(Protocol):
    """Adapter interface for a memory backend (SQLite, PostgreSQL, mem0, ...)."""

    @property
    def default_top_k(self) -> int:
        """How many records ``recall`` returns when the caller passes no ``top_k``."""
        ...

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a record and return its id."""
        ...

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        """Return up to ``top_k`` records, most similar first."""
        ...

    def reset(self) -> None:
        """Forget every record (stream teardown)."""
        ...

    def close(self) -> None:
        """Release files, connections and threads; later calls must fail clearly."""
        ...

    def tools(self) -> Sequence[Tool]:
        """The tools a ``tool_use`` agent is given (at least ``retain`` and ``recall``)."""
        ...
