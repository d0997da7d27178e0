"""The embedded default: an in-process, lexical (TF-IDF cosine) memory.

It needs no file, server or model, so the main job runs anywhere; it lives only
as long as its stream, which makes cross-stream leaks impossible by construction.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MemoryBackendError
from ..text import tokens
from ..tools import Tool
from ..types import MemoryHit
from .tools import memory_tools


@dataclass
class _Record:
    record_id: str
    content: str
    metadata: Mapping[str, Any]
    bag: Counter[str] = field(default_factory=Counter)


class InProcessMemory:
    """TF-IDF weighted bag-of-words recall over records held in a list."""

    def __init__(self, default_top_k: int = 4) -> None:
        if default_top_k < 1:
            raise MemoryBackendError("memory top_k must be at least 1")
        self.default_top_k = default_top_k
        self._records: list[_Record] = []
        self._document_frequency: Counter[str] = Counter()
        self._ids = itertools.count(1)
        self._closed = False

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        record = _Record(f"mem-{next(self._ids)}", content, dict(metadata or {}))
        record.bag = Counter(tokens(content))
        self._document_frequency.update(record.bag.keys())
        self._records.append(record)
        return record.record_id

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        limit = self.default_top_k if top_k is None else top_k
        query_bag = Counter(tokens(query))
        if not query_bag or not self._records:
            return []
        total = len(self._records)

        def weight(word: str) -> float:
            return math.log(1 + total / (1 + self._document_frequency[word])) + 1.0

        query_vector = {word: count * weight(word) for word, count in query_bag.items()}
        query_norm = math.sqrt(sum(v * v for v in query_vector.values()))
        scored: list[tuple[float, int, _Record]] = []
        for index, record in enumerate(self._records):
            shared = query_vector.keys() & record.bag.keys()
            if not shared:
                continue
            vector = {word: count * weight(word) for word, count in record.bag.items()}
            norm = math.sqrt(sum(v * v for v in vector.values()))
            dot = sum(query_vector[word] * vector[word] for word in shared)
            scored.append((dot / (query_norm * norm), -index, record))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [
            MemoryHit(record.record_id, record.content, score, record.metadata)
            for score, _, record in scored[:limit]
        ]

    def reset(self) -> None:
        self._check_open()
        self._records.clear()
        self._document_frequency.clear()

    def close(self) -> None:
        self._closed = True
        self._records.clear()

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)

    def __len__(self) -> int:
        return len(self._records)

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError("this in-process memory was closed at stream teardown")
