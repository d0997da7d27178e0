"""The MemorySystem protocol: what the benchmark needs from the memory under test.

A memory system is owned by one stream: it is created when the stream starts,
persists across that stream's episodes, and is reset and closed at stream
teardown. The framework never calls ``recall`` or ``retain`` itself; only the
agent does, directly (``deterministic_recall``) or through the tools the memory
system declares (``tool_use``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import MemoryBackendError
from ..tools import Tool
from ..types import ConversationSession, MemoryHit

if TYPE_CHECKING:
    from ..config import BackendOptions, MemoryConfig


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


@runtime_checkable
class Ingestible(Protocol):
    """Optional: a memory system that ingests a conversation by its own means.

    A static-memory benchmark (LoCoMo, ``ingest: memory``) hands it each session of
    a conversation in order, dates included, before the first question; what it
    stores, and how (one record per turn, per session, facts extracted by a model
    as Mem0's ``add(messages)`` does), is the memory system's own business.
    :func:`pytest_evomemory.memory.ingestion.ingest_turns` is the built-in
    backends' way: one record per turn, with the date and ``dia_id`` in metadata.
    """

    def ingest(self, session: ConversationSession) -> None:
        """Store what this memory keeps of one session (called once per session, in order)."""
        ...


class RecordRejected(MemoryBackendError):
    """This one record cannot be stored (e.g. text the database cannot hold).

    The memory stays usable: a tool call that hits it is answered with a tool
    error, and the stream goes on. Any other MemoryBackendError means the memory
    itself is broken.
    """


def unstorable_reason(text: str, *, nul_allowed: bool) -> str | None:
    """Why a database text column cannot hold ``text`` exactly, or None if it can."""
    if not nul_allowed and "\x00" in text:
        return "contains a NUL character (\\x00), which the database's text type cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"contains a lone surrogate ({error.object[error.start:error.end]!r}), which is not valid UTF-8"
    return None


@dataclass(frozen=True)
class MemoryContext:
    """Where a memory system lives: its stream and the run's output directory."""

    stream: str
    run_dir: Path
    run_name: str


MemoryOpener = Callable[["MemoryConfig", MemoryContext], MemorySystem]


@dataclass(frozen=True)
class MemoryBackend:
    """A memory backend as configs name it (``memory: {backend: NAME}``).

    Declared once, beside the backend's code, and registered in
    :data:`pytest_evomemory.memory.factory.MEMORY_BACKENDS`: how to open it for a
    stream, the settings model of its own section (``sqlite: {...}``), the keys of
    the free-form ``memory.options`` it reads (any other is refused, never ignored),
    and the optional extra that provides its library (checked before any task).
    """

    name: str
    open: MemoryOpener
    options: type[BackendOptions] | None = None
    reads_options: frozenset[str] = frozenset()
    #: ``pip install 'pytest-evomemory[EXTRA]'`` provides it; ``requires`` are the
    #: modules that extra installs (their absence is one clear error up front).
    extra: str | None = None
    requires: tuple[str, ...] = ()
    #: Where a stream's state lives (files, tables), when the backend keeps it outside
    #: the process: two streams (or arms) naming one location would share a memory,
    #: so the session refuses that before any task.
    locations: Callable[[MemoryConfig, MemoryContext], Sequence[str]] | None = None
