"""``backend: dense``: pure embedding retrieval, the retriever the paper's ExpRAG uses.

The Evo-Memory paper retrieves experiences by embedding similarity alone
(BAAI/bge-base-en-v1.5, top-k 4, most similar first). The SQLite and PostgreSQL
backends fuse BM25 with cosine instead, which is a different retriever; this one
ranks by the cosine between the query's and each record's embedding and nothing
else, so an ExpRAG run measures what the paper's does (with whatever encoder the
memory config names: the bundled all-MiniLM-L6-v2 by default, bge-base-en-v1.5
when it is in the local cache).

Records live in the process (like ``inprocess``) and are snapshotted with their
embeddings (:class:`~.snapshot.RecordLog`), so a resumed stream ranks exactly as
the uninterrupted one without encoding anything again.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import MemoryConfig
from ..core.errors import MemoryBackendError
from ..core.types import MemoryHit
from ._ranking import query_terms
from .backend import MemoryBase
from .base import MemoryBackend, MemoryContext
from .embedders import Embedder, SentenceTransformerEmbedder, Vectors, build_embedder, embedder_check
from .recordlog import LoggedRecord, RecordLog
from .vectorindex import VectorIndex


@dataclass(frozen=True)
class _Record:
    number: int
    content: str
    metadata: Mapping[str, Any]
    vector: Vectors


class DenseMemory(MemoryBase):
    """Cosine top-k over one embedder's unit vectors; ties go to the older record."""

    KIND = "dense"
    CLOSED = "this {what} was closed at stream teardown"

    def __init__(self, embedder: Embedder, default_top_k: int = 4) -> None:
        super().__init__(default_top_k)
        self.embedder = embedder
        self._next_id = 1
        self._records: dict[int, _Record] = {}
        self._index = VectorIndex(embedder.dim)

    # ------------------------------------------------------------------ protocol

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        if not isinstance(content, str):
            raise MemoryBackendError(f"retain: content must be a string, got {type(content).__name__}")
        vector = self.embedder.embed([content])[0]
        number = self._next_id
        self._next_id += 1
        self._add(_Record(number, content, dict(metadata or {}), vector))
        return str(number)

    def _add(self, record: _Record) -> None:
        self._records[record.number] = record
        self._index.add(record.number, record.vector)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        limit = self._checked_limit(top_k)
        if not query_terms(query) or not self._records:
            return []  # no word to search for: not even the encoder is asked to guess
        ranked = self._index.search(self.embedder.embed([query])[0], limit)
        return [self._hit(self._records[number], score) for number, score in ranked]

    def reset(self) -> None:
        self._check_open()
        self._records.clear()
        self._index.clear()

    def close(self) -> None:
        self._closed = True
        self._records.clear()
        self._index.clear()

    def __len__(self) -> int:
        return len(self._records)

    # ------------------------------------------------------------------ optional capabilities

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The ``limit`` records retained last, newest first."""
        self._check_open()
        count = self._recent_limit(limit)
        # Ids only grow and forget only removes, so insertion order is id order.
        numbers = itertools.islice(reversed(self._records), count)
        return [self._hit(self._records[number], 0.0) for number in numbers]

    def forget(self, record_id: str) -> bool:
        self._check_open()
        try:
            number = int(record_id)
        except (TypeError, ValueError):
            return False
        if self._records.pop(number, None) is None:
            return False
        self._index.remove(number)
        return True

    # ------------------------------------------------------------------ resume

    #: snapshot() writes its directory only through one RecordLog (recordlog.RECORD_LOG_ONLY)
    snapshot_writes_only_a_record_log = True

    def snapshot(self, directory: Path) -> None:
        """Append the records stored since the last snapshot (RecordLog, with embeddings)."""
        self._check_open()

        def records_after(last_id: int) -> list[LoggedRecord]:
            return [
                {
                    "id": number,
                    "content": record.content,
                    "metadata": dict(record.metadata),
                    "embedding": base64.b64encode(record.vector.astype(np.float32).tobytes()).decode("ascii"),
                }
                for number, record in sorted(self._records.items())
                if number > last_id
            ]

        RecordLog(directory, "dense").save(
            len(self._records), records_after, {"next_id": self._next_id, "embedder": self.embedder.name}
        )

    def restore(self, directory: Path) -> None:
        """Replace this memory's records with the snapshot in ``directory`` (same ids)."""
        self._check_open()
        records, state = RecordLog(directory, "dense").load()
        if state.get("embedder") != self.embedder.name:
            raise MemoryBackendError(
                f"dense memory snapshot {directory} was made with embedder {state.get('embedder')!r}, "
                f"not {self.embedder.name!r}; it cannot be restored into this memory"
            )
        self.reset()
        for record in records:
            vector = np.frombuffer(base64.b64decode(record["embedding"]), dtype=np.float32).copy()
            self._add(_Record(int(record["id"]), record["content"], record["metadata"], vector))
        self._next_id = int(state["next_id"])

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _hit(record: _Record, score: float) -> MemoryHit:
        return MemoryHit(str(record.number), record.content, score, record.metadata)


def open_dense_memory(config: MemoryConfig, context: MemoryContext) -> DenseMemory:
    """The ``dense`` backend for one stream. Embeddings are the whole point of it:
    without an ``embedder`` it uses sentence-transformers (the bundled all-MiniLM-L6-v2
    unless ``embedder_model`` names another)."""
    embedder = build_embedder(config) or SentenceTransformerEmbedder(config.embedder_model)
    return DenseMemory(embedder, default_top_k=config.top_k)


#: In-process like ``inprocess``: no location outside the process to share.
BACKEND = MemoryBackend("dense", open=open_dense_memory, check=embedder_check("sentence-transformers"))


__all__ = ["BACKEND", "DenseMemory", "open_dense_memory"]
