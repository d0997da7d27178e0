"""The embedded default: an in-process, lexical (TF-IDF cosine) memory.

It needs no file, server or model, so the main job runs anywhere; it lives only
as long as its stream, which makes cross-stream leaks impossible by construction.

Records are kept as flat numpy arrays (word id, count, owning record): IDF changes
with every retain, so each recall re-weights every stored word, and doing that with
two ``bincount`` calls instead of a Python loop over records is what keeps a
12,000-task stream from taking hours.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import MemoryBackendError
from ..text import tokens
from ..tools import Tool
from ..types import ConversationSession, MemoryHit
from .ingestion import ingest_turns
from .snapshot import LoggedRecord, RecordLog
from .tools import memory_tools


@dataclass(frozen=True)
class _Record:
    record_id: str
    content: str
    metadata: Mapping[str, Any]


class _GrowingArray:
    """An append-only numpy array that doubles its capacity when full."""

    def __init__(self, dtype: type[np.generic]) -> None:
        self._data: npt.NDArray[Any] = np.zeros(1024, dtype=dtype)
        self.size = 0

    def extend(self, values: Sequence[float] | Sequence[int]) -> None:
        needed = self.size + len(values)
        if needed > len(self._data):
            grown = np.zeros(max(needed, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : needed] = values
        self.size = needed

    @property
    def values(self) -> npt.NDArray[Any]:
        return self._data[: self.size]


class InProcessMemory:
    """TF-IDF weighted bag-of-words cosine recall; ties go to the older record."""

    def __init__(self, default_top_k: int = 4) -> None:
        if default_top_k < 1:
            raise MemoryBackendError("memory top_k must be at least 1")
        self.default_top_k = default_top_k
        self._ids = itertools.count(1)
        self._next_id = 1
        self._closed = False
        self._clear()

    def _clear(self) -> None:
        self._records: list[_Record] = []
        self._vocabulary: dict[str, int] = {}
        self._document_frequency = _GrowingArray(np.float64)
        self._word_ids = _GrowingArray(np.int64)
        self._counts = _GrowingArray(np.float64)
        self._owners = _GrowingArray(np.int64)

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        number = next(self._ids)
        self._next_id = number + 1
        record = _Record(f"mem-{number}", content, dict(metadata or {}))
        self._add(record)
        return record.record_id

    def _add(self, record: _Record) -> None:
        content = record.content
        index = len(self._records)
        bag = Counter(tokens(content))
        word_ids = []
        for word in bag:
            word_id = self._vocabulary.get(word)
            if word_id is None:
                word_id = self._vocabulary[word] = len(self._vocabulary)
                self._document_frequency.extend([0.0])
            self._document_frequency.values[word_id] += 1.0
            word_ids.append(word_id)
        self._word_ids.extend(word_ids)
        self._counts.extend([float(count) for count in bag.values()])
        self._owners.extend([index] * len(word_ids))
        self._records.append(record)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        limit = self.default_top_k if top_k is None else top_k
        query_bag = Counter(tokens(query))
        total = len(self._records)
        if not query_bag or not total:
            return []
        frequency = self._document_frequency.values
        weights = np.log(1.0 + total / (1.0 + frequency)) + 1.0
        query_vector = np.zeros(len(weights))
        query_norm_squared = 0.0
        for word, count in query_bag.items():
            word_id = self._vocabulary.get(word)
            if word_id is None:  # unknown to memory: document frequency 0
                value = count * (math.log(1.0 + total) + 1.0)
            else:
                value = count * float(weights[word_id])
                query_vector[word_id] = value
            query_norm_squared += value * value
        if not query_vector.any():
            return []
        word_ids, owners = self._word_ids.values, self._owners.values
        stored = self._counts.values * weights[word_ids]
        norms = np.sqrt(np.bincount(owners, weights=stored * stored, minlength=total))
        dots = np.bincount(owners, weights=stored * query_vector[word_ids], minlength=total)
        candidates = np.flatnonzero(dots > 0)
        if candidates.size == 0:
            return []
        scores = dots[candidates] / (math.sqrt(query_norm_squared) * norms[candidates])
        order = np.lexsort((candidates, -scores))[:limit]
        hits = []
        for position in order:
            record = self._records[int(candidates[position])]
            hits.append(MemoryHit(record.record_id, record.content, float(scores[position]), record.metadata))
        return hits

    def reset(self) -> None:
        self._check_open()
        self._clear()

    def close(self) -> None:
        self._closed = True
        self._clear()

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)

    def ingest(self, session: ConversationSession) -> None:
        """A conversation session, one record per turn (:mod:`.ingestion`)."""
        ingest_turns(self, session)

    def __len__(self) -> int:
        return len(self._records)

    # ------------------------------------------------------------------ resume

    def snapshot(self, directory: Path) -> None:
        """Append the records stored since the last snapshot to ``directory`` (RecordLog)."""
        self._check_open()

        def records_after(last_id: int) -> list[LoggedRecord]:
            start = len(self._records)
            while start and _number(self._records[start - 1]) > last_id:
                start -= 1
            return [
                {"id": _number(r), "content": r.content, "metadata": dict(r.metadata)}
                for r in self._records[start:]
            ]

        RecordLog(directory, "inprocess").save(len(self._records), records_after, {"next_id": self._next_id})

    def restore(self, directory: Path) -> None:
        """Replace this memory's records with the snapshot in ``directory``."""
        self._check_open()
        records, state = RecordLog(directory, "inprocess").load()
        self._clear()
        for record in records:
            self._add(_Record(f"mem-{record['id']}", record["content"], record["metadata"]))
        self._next_id = int(state["next_id"])
        self._ids = itertools.count(self._next_id)

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError("this in-process memory was closed at stream teardown")


def _number(record: _Record) -> int:
    return int(record.record_id.removeprefix("mem-"))
