"""Pieces the SQLite and PostgreSQL backends share: safe query terms, a vector
index, and hybrid (lexical + vector) rank fusion.

Hybrid ranking is reciprocal rank fusion (Cormack et al., 2009): each record's
fused score is ``sum(1 / (RRF_K + rank))`` over the lexical and the vector
rankings it appears in (rank counted from 1). RRF needs no calibration between
BM25 / ts_rank_cd scores and cosines, which live on unrelated scales, and a
record ranked well by both signals beats one ranked first by only one.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import MemoryBackendError
from ..text import STOPWORDS
from .embedders import Vectors

#: The customary RRF constant; it damps the influence of the very top ranks.
RRF_K = 60

#: Cap on distinct query terms: an agent may pass a whole task (or a 1 MB record)
#: as the query, and an OR over thousands of terms only costs time.
MAX_QUERY_TERMS = 64

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(query: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """Distinct content words of ``query``, in order, holding only letters and digits.

    Query languages (FTS5 MATCH, to_tsquery) give meaning to quotes, parentheses,
    ``*``, ``-``, ``:`` and AND/OR/NEAR; words made only of letters and digits can
    be quoted safely, and users' text never becomes query syntax.
    """
    words = _WORD.findall(unicodedata.normalize("NFKC", query).casefold())
    content = [word for word in words if word not in STOPWORDS] or words
    return list(dict.fromkeys(content))[:limit]


#: A term found in more than this share of the records is left out of the match
#: expression while enough records match without it (see TermStatistics).
COMMON_TERM_SHARE = 0.5


#: Up to this many records, TermStatistics counts document frequencies exactly on
#: every recall, so a restored memory ranks exactly as the uninterrupted one; above
#: it, cached estimates keep recall fast (and near-ties may rank differently after a
#: resume).
EXACT_COUNT_RECORDS = 1000


#: PostgreSQL only: candidates are first gathered with the terms in at most this
#: share of the records (ts_rank_cd must read every candidate's tsvector).
RARE_TERM_SHARE = 0.05


class TermStatistics:
    """Document frequencies of query terms, counted on demand and cached.

    Why: a term present in most records (``answer`` in every stored experience)
    makes the full-text engine score nearly the whole store on every recall —
    the dominant cost at 10k+ records. Such a term carries no ranking signal:
    FTS5's BM25 clamps its IDF to ~0 once it is in more than half the records,
    and PostgreSQL's ts_rank_cd (which has no IDF) would let it drown the
    informative words. Backends therefore first match on the informative terms
    only, and repeat with every term when that finds fewer records than asked
    for, so small stores rank exactly as without the shortcut.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frequencies: dict[str, tuple[int, int]] = {}

    def clear(self) -> None:
        with self._lock:
            self._frequencies.clear()

    def informative(
        self,
        terms: Sequence[str],
        total: int,
        count: Callable[[Sequence[str]], Sequence[int]],
        share: float = COMMON_TERM_SHARE,
    ) -> list[str]:
        """The terms in at most ``share`` of ``total`` records.

        ``count(terms)`` (one call, so a server answers in one round trip) is
        asked only about terms not seen since the store grew by a quarter:
        document frequencies change slowly, and an estimate suffices.
        """
        if total < 8:
            return list(terms)
        if total <= EXACT_COUNT_RECORDS:
            # Counted afresh: the estimate depends on when a term was last counted, so a
            # memory restored on resume (empty cache) would rank near-ties differently
            # from the uninterrupted run. Below this size counting costs next to nothing.
            return [term for term, n in zip(terms, count(terms), strict=True) if int(n) <= total * share]
        with self._lock:
            known = {term: self._frequencies.get(term) for term in terms}
        stale = [term for term, seen in known.items() if seen is None or total > seen[1] * 1.25 + 8]
        if stale:
            fresh = {term: (int(n), total) for term, n in zip(stale, count(stale), strict=True)}
            with self._lock:
                self._frequencies.update(fresh)
            known.update(fresh)
        return [term for term in terms if (known[term] or (0, 0))[0] <= total * share]


def candidate_count(top_k: int) -> int:
    """How deep each ranking goes before fusion: deep enough that a record ranked
    modestly by both signals can still make the fused top ``top_k``."""
    return max(50, 4 * top_k)


def reciprocal_rank_fusion(rankings: Iterable[Sequence[int]]) -> list[tuple[int, float]]:
    """Fuse ranked id lists; ties keep the order in which ids were first seen
    (the lexical ranking is passed first, so it breaks ties)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, record_id in enumerate(ranking, start=1):
            scores[record_id] = scores.get(record_id, 0.0) + 1.0 / (RRF_K + rank)
    order = {record_id: index for index, record_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


class VectorIndex:
    """Exact (brute-force) cosine search over one stream's embeddings.

    A matrix product over 100k x 256 float32 rows takes a few milliseconds, which
    is well inside the latency budget, and exact search keeps results
    reproducible. The backing store (SQLite file, PostgreSQL table) holds the
    embeddings durably; this is the process-local copy that ranks them.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, record_id: int, vector: Vectors) -> None:
        with self._lock:
            if self._size == len(self._ids):
                capacity = max(1024, 2 * self._size)
                ids = np.zeros(capacity, dtype=np.int64)
                matrix = np.zeros((capacity, self.dim), dtype=np.float32)
                ids[: self._size] = self._ids[: self._size]
                matrix[: self._size] = self._matrix[: self._size]
                self._ids, self._matrix = ids, matrix
            self._ids[self._size] = record_id
            self._matrix[self._size] = vector.reshape(self.dim)
            self._size += 1

    def remove(self, record_id: int) -> None:
        """Drop one record's row (a forgotten record); the rows after it move up."""
        with self._lock:
            size = self._size
            at = np.flatnonzero(self._ids[:size] == record_id)
            if at.size == 0:
                return
            row = int(at[0])
            self._ids[row : size - 1] = self._ids[row + 1 : size]
            self._matrix[row : size - 1] = self._matrix[row + 1 : size]
            self._size = size - 1

    def clear(self) -> None:
        with self._lock:
            self._ids = np.zeros(0, dtype=np.int64)
            self._matrix = np.zeros((0, self.dim), dtype=np.float32)
            self._size = 0

    def search(self, query: Vectors, limit: int) -> list[tuple[int, float]]:
        """Ids and cosines of the ``limit`` nearest records with a positive cosine."""
        with self._lock:
            size = self._size
            if size == 0 or limit < 1:
                return []
            # einsum, not ``@``: a BLAS matrix-vector product spreads over threads,
            # which on a busy few-core CI box is ten times slower than one core.
            scores = np.einsum("ij,j->i", self._matrix[:size], query.reshape(self.dim))
            ids = self._ids[:size]
        if limit < size:
            top = np.argpartition(-scores, limit - 1)[:limit]
        else:
            top = np.arange(size)
        # Stable order: best cosine first, older record first on ties.
        ordered = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), float(scores[i])) for i in ordered if scores[i] > 1e-6]


def hybrid_ranking(
    lexical: Callable[[int], list[tuple[int, float]]],
    index: VectorIndex | None,
    vector: Any,
    limit: int,
) -> list[tuple[int, float]]:
    """The ranked ``(record_id, score)`` list both SQL backends return.

    ``lexical(depth)`` ranks by the backend's full-text search. Without an embedder
    that is the answer; with one, the lexical and vector rankings (each ``depth``
    deep) are fused by reciprocal rank, so neither kind of score needs calibrating.
    """
    if vector is None or index is None:
        return lexical(limit)
    depth = candidate_count(limit)
    lexical_ids = [record_id for record_id, _ in lexical(depth)]
    semantic_ids = [record_id for record_id, _ in index.search(vector, depth)]
    return reciprocal_rank_fusion([lexical_ids, semantic_ids])[:limit]


def prepare_recall(
    query: str, top_k: int | None, default_top_k: int, embedder: Any
) -> tuple[int, list[str], Any] | None:
    """What both SQL backends check before a recall: ``(limit, terms, vector)``.

    ``None`` means there is no word to search for, so the recall returns nothing
    (not even a dense embedder is asked to guess).
    """
    limit = default_top_k if top_k is None else top_k
    if limit < 1:
        raise MemoryBackendError(f"recall: top_k must be at least 1, got {limit}")
    terms = query_terms(query)
    if not terms:
        return None
    vector = embedder.embed([query])[0] if embedder else None
    return limit, terms, vector
