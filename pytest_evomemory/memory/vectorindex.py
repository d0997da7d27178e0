"""Exact cosine search over one stream's embeddings: the dense half of a hybrid recall.

A module of its own because it is the numpy half of :mod:`._ranking`: the SQL
backends with an embedder rank with it, while the in-process backend, which never
embeds, imports the pure-Python half only (numpy is off a run's start-up path).
"""

from __future__ import annotations

import threading

import numpy as np

from .embedders import Vectors


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


__all__ = ["VectorIndex"]
