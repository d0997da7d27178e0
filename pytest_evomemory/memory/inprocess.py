"""The embedded default: an in-process, lexical (TF-IDF cosine) memory.

It needs no file, server or model, so the main job runs anywhere; it lives only
as long as its stream, which makes cross-stream leaks impossible by construction.

Records are kept as flat numpy arrays (word id, count; each record's words
contiguous), with a posting list per word. IDF changes with every retain, so a
recall weighs its candidates' words afresh; which records are candidates is
bounded whatever the store's size (:func:`._ranking.plan_gathering`: the records
holding the query's rarest words, then, if fewer than top_k, the newest records
holding another of its words), so a recall costs the same at record 20,000 as at
record 100. Candidates are scored by TF-IDF cosine over the whole query: many
with two ``bincount`` calls over all their words, a few short ones (a young stream's,
:data:`FEW_POSITIONS`) in plain Python, which is cheaper than numpy's two dozen
array calls there. Both paths do the same floating-point operations in the same
order (the logarithm is numpy's in both), so a score is the same to the bit either
way (tests/memory/test_memory_recall_exhaustive.py); ``np.unique`` is not used, as
its first call imports ``numpy.ma`` (30-100 ms, paid inside a chain).

numpy (some 50 ms of import) is imported where the arrays are first filled and
ranked, not with the module: a stream's memory opens empty, so a run reaches its
first model call without it, and a chain's first record waits on a model reply
anyway.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import MemoryConfig
from ..core.types import MemoryHit
from ..util.text import tokens
from ._ranking import Gathering, plan_gathering
from .backend import MemoryBase
from .base import MemoryContext
from .recordlog import LoggedRecord, RecordLog

if TYPE_CHECKING:
    import numpy.typing as npt

#: A recall whose candidates hold about this many words in all (their records counted
#: as postings, times the store's mean words per record) scores them in plain Python
#: (:meth:`InProcessMemory._scores_of_few`): for a few short records that costs less
#: than numpy's two dozen array calls of a few microseconds each, with the same
#: numbers; more go through numpy (:meth:`InProcessMemory._ranked_by_numpy`).
FEW_POSITIONS = 320


@dataclass(frozen=True)
class _Record:
    record_id: str
    content: str
    metadata: Mapping[str, Any]


class _GrowingArray:
    """An append-only numpy array that doubles its capacity when full (allocated at
    its first value)."""

    def __init__(self, dtype: str) -> None:
        self._dtype = dtype
        self._data: npt.NDArray[Any] | None = None
        self.size = 0

    def extend(self, values: Sequence[float] | Sequence[int]) -> None:
        data, size = self._data, self.size
        needed = size + len(values)
        if data is None or needed > len(data):
            data = self._grown(needed)
        data[size:needed] = values
        self.size = needed

    def _grown(self, needed: int) -> npt.NDArray[Any]:
        """The array with room for ``needed`` values (allocated, or doubled and copied)."""
        import numpy as np

        if self._data is None:
            self._data = np.zeros(max(needed, 1024), dtype=self._dtype)
        else:
            grown = np.zeros(max(needed, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        return self._data

    @property
    def values(self) -> npt.NDArray[Any]:
        if self._data is None:  # nothing stored yet
            import numpy as np

            return np.zeros(0, dtype=self._dtype)
        return self._data[: self.size]


class InProcessMemory(MemoryBase):
    """TF-IDF weighted bag-of-words cosine recall; ties go to the older record."""

    KIND = "in-process"
    CLOSED = "this {what} was closed at stream teardown"

    @classmethod
    def load_ahead(cls) -> None:
        import numpy  # noqa: F401  (what the first record and recall need)

    def __init__(self, default_top_k: int = 4) -> None:
        super().__init__(default_top_k)
        self._ids = itertools.count(1)
        self._next_id = 1
        self._clear()

    def _clear(self) -> None:
        self._records: list[_Record] = []
        self._vocabulary: dict[str, int] = {}
        self._document_frequency = _GrowingArray("float64")
        self._word_ids = _GrowingArray("int64")
        self._counts = _GrowingArray("float64")
        #: where each record's words start in _word_ids/_counts
        self._starts = _GrowingArray("int64")
        #: word id -> indexes of the records holding it, in storing order
        self._postings: list[list[int]] = []

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
        vocabulary, postings = self._vocabulary, self._postings
        word_ids = []
        for word in bag:
            word_id = vocabulary.get(word)
            if word_id is None:
                word_id = vocabulary[word] = len(vocabulary)
                postings.append([])
            postings[word_id].append(index)
            word_ids.append(word_id)
        frequency = self._document_frequency
        if len(vocabulary) > frequency.size:  # the new words, at frequency 0 until counted below
            frequency.extend([0.0] * (len(vocabulary) - frequency.size))
        if word_ids:  # a bag's words are distinct: one fancy-indexed add counts each once
            frequency.values[word_ids] += 1.0
        self._starts.extend([self._word_ids.size])
        self._word_ids.extend(word_ids)
        self._counts.extend([float(count) for count in bag.values()])
        self._records.append(record)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        limit = self._limit(top_k)
        query_bag = Counter(tokens(query))
        total = len(self._records)
        if not query_bag or not total:
            return []
        vocabulary = self._vocabulary
        known = [word_id for word in query_bag if (word_id := vocabulary.get(word)) is not None]
        if not known:
            return []
        plan = plan_gathering(
            known, [int(frequency) for frequency in self._document_frequency.values[known].tolist()], total, limit,
            lambda taken: len(set().union(*(self._postings[word_id] for word_id in taken))),
        )
        hits = self._ranked(plan, query_bag, known, limit)
        if len(hits) < limit and plan.fill:
            # fewer candidates than asked for: the newest records holding another query word
            seen = {hit.record_id for hit in hits}
            for index in self._newest(plan.fill, limit):
                record = self._records[index]
                if record.record_id not in seen:
                    hits.append(MemoryHit(record.record_id, record.content, 0.0, record.metadata))
                    if len(hits) >= limit:
                        break
        return hits

    def _weights(self, word_ids: list[int], total: int) -> dict[int, float]:
        """The IDF weight of each of ``word_ids``, ``log(1 + total / (1 + frequency)) + 1``,
        by numpy for all of them at once (the query's words and the stored ones alike)."""
        import numpy as np

        # The arithmetic around the log in Python floats (the same IEEE operations numpy
        # does elementwise, so the same numbers), the log itself by numpy: math.log may
        # differ from it in the last bit where numpy has its own SIMD log.
        frequencies = self._document_frequency.values[word_ids].tolist()
        logs = np.log([1.0 + total / (1.0 + frequency) for frequency in frequencies]).tolist()
        return {word_id: log + 1.0 for word_id, log in zip(word_ids, logs, strict=True)}

    def _query_vector(self, query_bag: Counter[str], weight_of: dict[int, float]) -> tuple[dict[int, float], float]:
        """The query's weight per known word and its norm (words unknown to memory count
        in the norm, at document frequency 0)."""
        total, vocabulary = len(self._records), self._vocabulary
        query_weights: dict[int, float] = {}
        query_norm_squared = 0.0
        for word, count in query_bag.items():
            word_id = vocabulary.get(word)
            if word_id is None:  # unknown to memory: document frequency 0
                value = count * (math.log(1.0 + total) + 1.0)
            else:
                value = count * weight_of[word_id]
                query_weights[word_id] = value
            query_norm_squared += value * value
        return query_weights, math.sqrt(query_norm_squared)

    def _ranked(self, plan: Gathering[int], query_bag: Counter[str], known: list[int], limit: int) -> list[MemoryHit]:
        """The gathered candidates by TF-IDF cosine with the whole query; ties go to the older record."""
        if not plan.gather:
            return []
        postings, total = self._postings, len(self._records)
        held = sum(len(postings[word_id]) for word_id in plan.gather)
        if held * self._word_ids.size <= FEW_POSITIONS * total:
            candidates = sorted(set().union(*(postings[word_id] for word_id in plan.gather)))
            scores = self._scores_of_few(candidates, query_bag, known)
            order = sorted(range(len(candidates)), key=lambda position: (-scores[position], candidates[position]))
            ranked = [(candidates[position], scores[position]) for position in order[:limit]]
        else:
            query_weights, query_norm = self._query_vector(query_bag, self._weights(known, total))
            ranked = self._ranked_by_numpy(plan.gather, query_weights, query_norm, limit)
        hits = []
        for index, score in ranked:
            record = self._records[index]
            hits.append(MemoryHit(record.record_id, record.content, score, record.metadata))
        return hits

    def _scores_of_few(self, candidates: list[int], query_bag: Counter[str], known: list[int]) -> list[float]:
        """The cosines of a few ``candidates`` (record indexes, ascending), summed in
        plain Python: the numbers :meth:`_ranked_by_numpy` computes, operation for
        operation (each sum from 0.0 in the record's word order, as ``bincount`` adds)."""
        import numpy as np

        total, count = len(self._records), len(candidates)
        # each candidate's first word and the next record's (the end of the arrays for the last record)
        edges = self._starts.values[candidates + [min(index + 1, total - 1) for index in candidates]].tolist()
        if candidates[-1] == total - 1:
            edges[-1] = self._word_ids.size
        positions = np.asarray([p for b, e in zip(edges[:count], edges[count:], strict=True) for p in range(b, e)])
        word_ids = self._word_ids.values[positions].tolist()
        counts = self._counts.values[positions].tolist()
        # one numpy call weighs the query's words and the candidates' together
        weight_of = self._weights(list(dict.fromkeys(known + word_ids)), total)
        query_weights, query_norm = self._query_vector(query_bag, weight_of)
        stored = [times * weight_of[word_id] for word_id, times in zip(word_ids, counts, strict=True)]
        # (position, query weight) of the query's words: a word the query lacks adds 0.0 to a dot product
        matches = [(at, query_weights[word_id]) for at, word_id in enumerate(word_ids) if word_id in query_weights]
        scores = []
        position = matched = 0
        for begin, end in zip(edges[:count], edges[count:], strict=True):
            after = position + end - begin
            norm_squared = dot = 0.0
            for value in stored[position:after]:
                norm_squared += value * value
            while matched < len(matches) and matches[matched][0] < after:
                at, query_weight = matches[matched]
                dot += stored[at] * query_weight
                matched += 1
            position = after
            scores.append(dot / (query_norm * math.sqrt(norm_squared)))
        return scores

    def _ranked_by_numpy(
        self, gather: list[int], query_weights: dict[int, float], query_norm: float, limit: int
    ) -> list[tuple[int, float]]:
        """The ``limit`` best records holding a ``gather`` word, as (record index, cosine),
        best first (ties to the older record), by numpy over all their words at once."""
        import numpy as np

        held = np.concatenate([np.asarray(self._postings[word_id]) for word_id in gather])
        held.sort()
        candidates = held[np.concatenate(([True], held[1:] != held[:-1]))]  # np.unique imports numpy.ma (30 ms)
        total = len(self._records)
        starts = self._starts.values
        ends = np.where(candidates + 1 < total, starts[np.minimum(candidates + 1, total - 1)], self._word_ids.size)
        begins = starts[candidates]
        lengths = ends - begins
        # every word position of every candidate, record by record
        positions = np.repeat(begins - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        owners = np.repeat(np.arange(len(candidates)), lengths)
        word_ids = self._word_ids.values[positions]
        weights = np.log(1.0 + total / (1.0 + self._document_frequency.values[word_ids])) + 1.0
        stored = self._counts.values[positions] * weights
        query_ids = np.asarray(sorted(query_weights), dtype=np.int64)
        query_values = np.asarray([query_weights[word_id] for word_id in query_ids.tolist()])
        slot = np.minimum(np.searchsorted(query_ids, word_ids), len(query_ids) - 1)
        query_vector = np.where(query_ids[slot] == word_ids, query_values[slot], 0.0)
        norms = np.sqrt(np.bincount(owners, weights=stored * stored, minlength=len(candidates)))
        dots = np.bincount(owners, weights=stored * query_vector, minlength=len(candidates))
        scores = dots / (query_norm * norms)
        order = np.lexsort((candidates, -scores))[:limit]
        return list(zip(candidates[order].tolist(), scores[order].tolist(), strict=True))

    def _newest(self, word_ids: list[int], count: int) -> list[int]:
        """Indexes of the ``count`` newest records holding any of ``word_ids``, newest first."""
        newest: set[int] = set()
        for word_id in word_ids:
            newest.update(self._postings[word_id][-count:])
        return sorted(newest, reverse=True)[:count]

    def reset(self) -> None:
        self._check_open()
        self._clear()

    # ------------------------------------------------------------------ optional capabilities

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The ``limit`` records retained last, newest first (:class:`~.base.RecencyRecall`)."""
        self._check_open()
        count = self._recent_limit(limit)
        return [MemoryHit(r.record_id, r.content, 0.0, r.metadata) for r in reversed(self._records[-count:])]

    def forget(self, record_id: str) -> bool:
        """Delete one record (:class:`~.base.Forgetting`); the word arrays are rebuilt
        without it, which costs one pass over the store: deletes are rare next to recalls."""
        self._check_open()
        kept = [record for record in self._records if record.record_id != record_id]
        if len(kept) == len(self._records):
            return False
        self._clear()
        for record in kept:
            self._add(record)
        return True

    def close(self) -> None:
        self._closed = True
        self._clear()

    def __len__(self) -> int:
        return len(self._records)

    # ------------------------------------------------------------------ resume

    #: snapshot() writes its directory only through one RecordLog (recordlog.RECORD_LOG_ONLY)
    snapshot_writes_only_a_record_log = True

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


def _number(record: _Record) -> int:
    return int(record.record_id.removeprefix("mem-"))


def open_inprocess_memory(config: MemoryConfig, context: MemoryContext) -> InProcessMemory:
    """The ``inprocess`` backend for one stream: nothing to configure but ``top_k``."""
    return InProcessMemory(default_top_k=config.top_k)

