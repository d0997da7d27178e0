"""A worked example of a third-party memory adapter: the "keyword notebook".

It is the smallest honest MemorySystem — a dict from keyword to record ids —
and is what docs/memory.md walks through. A run config selects it with

    memory:
      backend: tests.memory.example_adapter:create
      top_k: 4

and an agent repository could instead return ``create`` from its own
``evomemory_memory_factory`` fixture. A real adapter (mem0, Letta, LangMem, ...)
has the same shape: open the client in ``create``, translate the five calls.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.core.tools import Tool
from pytest_evomemory.core.types import MemoryHit
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.tools import memory_tools

_WORD = re.compile(r"[^\W_]{3,}")


class KeywordNotebook:
    """Records indexed by their words of three letters or more; a record's score
    is how many distinct query keywords it contains."""

    def __init__(self, default_top_k: int = 4) -> None:
        self.default_top_k = default_top_k
        self._records: dict[str, tuple[str, dict[str, Any]]] = {}
        self._index: dict[str, set[str]] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        record_id = f"note-{next(self._ids)}"
        self._records[record_id] = (content, dict(metadata or {}))
        for word in set(_WORD.findall(content.casefold())):
            self._index.setdefault(word, set()).add(record_id)
        return record_id

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        votes: Counter[str] = Counter()
        for word in set(_WORD.findall(query.casefold())):
            votes.update(self._index.get(word, ()))
        # Most keywords shared first; the newer note wins a tie (it has the latest lesson).
        ranked = sorted(votes.items(), key=lambda item: (-item[1], -int(item[0].split("-")[1])))
        limit = self.default_top_k if top_k is None else top_k
        return [
            MemoryHit(record_id, self._records[record_id][0], float(count), self._records[record_id][1])
            for record_id, count in ranked[:limit]
        ]

    def reset(self) -> None:
        self._check_open()
        self._records.clear()
        self._index.clear()

    def close(self) -> None:
        self._closed = True
        self._records.clear()
        self._index.clear()

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError("the keyword notebook was closed at stream teardown")


def create(config: MemoryConfig, context: MemoryContext) -> KeywordNotebook:
    """The factory a run config names (``module:create``): one notebook per stream."""
    return KeywordNotebook(default_top_k=config.top_k)
