"""What every memory backend shipped with the package shares, declared once.

The six backends (``inprocess``, ``dense``, ``sqlite``, ``postgres``, ``mem0``,
``langmem``) store records in very different places, but the rules around the
store are the same: ``top_k`` is at least 1, a closed store refuses every call
with one line naming it, ``recent(limit)`` takes at least one record, the agent is
given the standard ``retain``/``recall`` tools (plus ``forget``/``update`` with
``editing_tools``) unless the backend declares its own, and a conversation is
ingested one record per turn. :class:`MemoryBase` holds those rules, so that a
message or a limit is changed in one place for all of them.

A user's adapter may subclass it too (docs/memory.md, "A complete adapter to
copy"): it is not required, since the runtime only ever checks the protocols
in :mod:`.base`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..core.errors import MemoryBackendError
from ..core.tools import Tool
from ..core.types import ConversationSession, MemoryHit
from .ingestion import ingest_turns
from .tools import memory_tools


class MemoryBase(ABC):
    """The open check, the limits, the standard tools and turn-by-turn ingestion.

    A subclass sets :attr:`KIND` (what messages call it: ``"sqlite"`` gives
    "sqlite memory ...") and calls ``super().__init__(default_top_k)`` first;
    :meth:`_described` may add where the store lives, and :attr:`CLOSED` may word
    the closed-store refusal otherwise. ``close`` sets ``_closed``.
    """

    #: What messages call this memory: "<KIND> memory".
    KIND: ClassVar[str] = "this"
    #: The refusal of a call after ``close`` (``{what}`` is :meth:`_described`).
    CLOSED: ClassVar[str] = "{what} is closed (stream teardown closed it); it cannot be used any more"
    #: Offer ``forget``/``update`` tools too (set by the factory for ``editing_tools: true``).
    editing_tools = False

    @classmethod
    def load_ahead(cls) -> None:
        """Import what this backend imports at its first use rather than with its
        module (the in-process memory's numpy). A driver calls it on a thread of its
        own while its chains' first model calls are in flight (:mod:`..runtime.ahead`),
        so that no chain waits on it after a reply. Loading twice is harmless."""
        return None  # most backends import what they use with their module

    def __init__(self, default_top_k: int) -> None:
        # The memory config's top_k is checked when the config is read (ge=1), but a
        # backend class can also be built directly (a user's factory, a test).
        if default_top_k < 1:
            raise MemoryBackendError("memory top_k must be at least 1")
        self.default_top_k = default_top_k
        self._closed = False

    # ------------------------------------------------------------------ the protocol's own

    @abstractmethod
    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a record and return its id."""

    @abstractmethod
    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        """Up to ``top_k`` records, most similar first."""

    @abstractmethod
    def reset(self) -> None:
        """Forget every record."""

    @abstractmethod
    def close(self) -> None:
        """Release what the store holds and set ``_closed``; closing twice is harmless."""

    # ------------------------------------------------------------------ shared rules

    def _described(self) -> str:
        """The memory as messages name it (the store's place may follow the kind)."""
        return f"{self.KIND} memory"

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError(self.CLOSED.format(what=self._described()))

    def _limit(self, top_k: int | None) -> int:
        """How many records a recall returns: ``top_k``, or the config's when None."""
        return self.default_top_k if top_k is None else top_k

    def _checked_limit(self, top_k: int | None, operation: str = "recall", argument: str = "top_k") -> int:
        """:meth:`_limit`, refused below 1: a caller passing its own (the agent, an
        observer) is not checked by the config."""
        limit = self.default_top_k if top_k is None else top_k
        if limit < 1:
            raise MemoryBackendError(f"{operation}: {argument} must be at least 1, got {limit}")
        return limit

    def _recent_limit(self, limit: int | None) -> int:
        """How many records ``recent`` returns (:class:`~.base.RecencyRecall`)."""
        return self._checked_limit(limit, "recent", "limit")

    def tools(self) -> Sequence[Tool]:
        """The standard ``retain``/``recall`` tools (:func:`.tools.memory_tools`)."""
        return memory_tools(self)

    def ingest(self, session: ConversationSession) -> None:
        """A conversation session, one record per turn with the turn's metadata (:mod:`.ingestion`)."""
        ingest_turns(self, session)


__all__ = ["MemoryBase"]
