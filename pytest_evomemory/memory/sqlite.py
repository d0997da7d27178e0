"""The embedded persistent backend: one SQLite file per run and stream.

Recall is lexical BM25 over an FTS5 index (Porter-stemmed, diacritics folded),
optionally fused with exact cosine search over embeddings when the memory config
names an embedder (see :mod:`._ranking` for the fusion). The file is deleted and
recreated when the stream opens it, so nothing from an earlier stream or run can
be recalled; it stays in the run's output directory afterwards for inspection.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..config import MemoryConfig, sqlite_path_problem
from ..errors import MemoryBackendError
from ..tools import Tool
from ..types import ConversationSession, MemoryHit
from ._ranking import TermStatistics, VectorIndex, hybrid_ranking, prepare_recall
from .base import RecordRejected, unstorable_reason
from .embedders import Embedder, build_embedder
from .factory import MemoryContext
from .ingestion import ingest_turns
from .snapshot import LoggedRecord, RecordLog
from .tools import memory_tools

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB
);
CREATE VIRTUAL TABLE records_fts USING fts5(
    content, content='records', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def open_sqlite_memory(config: MemoryConfig, context: MemoryContext) -> SqliteMemory:
    """The ``sqlite`` backend for one stream (the factory's entry point)."""
    return SqliteMemory(
        stream_database_path(config, context),
        default_top_k=config.top_k,
        embedder=build_embedder(config),
    )


def stream_database_path(config: MemoryConfig, context: MemoryContext) -> Path:
    """``<run_dir>/memory/<stream>.sqlite3``, or ``sqlite.path`` with ``{stream}``
    (and optionally ``{run_name}``) filled in; a relative path is taken from the
    run's output directory."""
    stream = _UNSAFE_FILENAME.sub("_", context.stream)
    template = config.sqlite.path
    if template is None:
        return context.run_dir / "memory" / f"{stream}.sqlite3"
    problem = sqlite_path_problem(template)
    if problem:
        raise MemoryBackendError(f"sqlite.path {problem}")
    filled = template.format(stream=stream, run_name=_UNSAFE_FILENAME.sub("_", context.run_name))
    path = Path(filled).expanduser()
    return path if path.is_absolute() else context.run_dir / path


class SqliteMemory:
    """A stream's memory in a fresh SQLite file: FTS5 BM25, optionally hybrid."""

    def __init__(self, path: Path, default_top_k: int = 4, embedder: Embedder | None = None) -> None:
        if default_top_k < 1:
            raise MemoryBackendError("memory top_k must be at least 1")
        self.default_top_k = default_top_k
        self.path = path
        self.embedder = embedder
        self._lock = threading.RLock()
        self._index = VectorIndex(embedder.dim) if embedder else None
        self._terms = TermStatistics()
        self._count = 0
        self._closed = False
        self._lock_file = _lock_exclusively(path)
        try:
            self._connection = self._open(path)
        except BaseException:
            self._lock_file.close()
            raise

    def _open(self, path: Path) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = None
        try:
            for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
                stale.unlink(missing_ok=True)
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            # The file is rebuilt for every stream, so a crash loses nothing worth an fsync.
            connection.execute("PRAGMA synchronous=OFF")
            connection.executescript(_SCHEMA)
            connection.execute(
                "INSERT INTO meta VALUES ('embedder', ?)",
                (self.embedder.name if self.embedder else "none",),
            )
        except (OSError, sqlite3.Error) as error:
            if connection is not None:
                connection.close()
            hint = " (is FTS5 compiled into this SQLite?)" if "fts5" in str(error).lower() else ""
            raise MemoryBackendError(
                f"sqlite memory could not be opened at {str(path)!r}: {type(error).__name__}: {error}{hint}; "
                "check sqlite.path and that the output directory is writable"
            ) from None
        return connection

    # ------------------------------------------------------------------ protocol

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        if not isinstance(content, str):
            raise MemoryBackendError(f"retain: content must be a string, got {type(content).__name__}")
        meta = json.dumps(dict(metadata or {}), ensure_ascii=False, default=str)
        for part, text in (("content", content), ("metadata", meta)):
            reason = unstorable_reason(text, nul_allowed=True)
            if reason:
                raise RecordRejected(f"sqlite memory: this record was not stored: its {part} {reason}")
        vector = self.embedder.embed([content])[0] if self.embedder else None
        blob = vector.tobytes() if vector is not None else None
        with self._lock:
            self._check_open()
            try:
                self._connection.execute("BEGIN")
                cursor = self._connection.execute(
                    "INSERT INTO records (content, metadata, embedding) VALUES (?, ?, ?)",
                    (content, meta, blob),
                )
                record_id = int(cursor.lastrowid or 0)
                self._connection.execute(
                    "INSERT INTO records_fts (rowid, content) VALUES (?, ?)", (record_id, content)
                )
                self._connection.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise MemoryBackendError(
                    f"sqlite memory {str(self.path)!r}: retain failed: {error}"
                ) from None
            self._count += 1
            if self._index is not None and vector is not None:
                self._index.add(record_id, vector)
        return str(record_id)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        request = prepare_recall(query, top_k, self.default_top_k, self.embedder)
        if request is None:
            return []
        limit, terms, vector = request
        try:
            with self._lock:
                self._check_open()
                ranked = hybrid_ranking(
                    lambda depth: self._lexical(terms, depth, limit), self._index, vector, limit
                )
                if not ranked:
                    return []
                ids = [record_id for record_id, _ in ranked]
                found = {
                    int(row[0]): row
                    for row in self._connection.execute(
                        f"SELECT id, content, metadata FROM records WHERE id IN ({','.join('?' * len(ids))})",
                        ids,
                    )
                }
        except sqlite3.Error as error:
            raise MemoryBackendError(f"sqlite memory {str(self.path)!r}: recall failed: {error}") from None
        return [
            _hit(record_id, found[record_id][1], found[record_id][2], score)
            for record_id, score in ranked
            if record_id in found
        ]

    def _lexical(self, terms: Sequence[str], depth: int, enough: int) -> list[tuple[int, float]]:
        """BM25 ranking (higher is better), informative terms first (TermStatistics)."""
        informative = self._terms.informative(terms, self._count, self._document_frequencies)
        if informative and len(informative) < len(terms):
            ranked = self._match(informative, depth)
            # Records matching only common terms carry no lexical evidence; they
            # are worth a second, slower query only to fill the caller's top_k.
            if len(ranked) >= enough:
                return ranked
        return self._match(terms, depth)

    def _match(self, terms: Sequence[str], depth: int) -> list[tuple[int, float]]:
        rows = self._connection.execute(
            "SELECT rowid, -bm25(records_fts) FROM records_fts WHERE records_fts MATCH ? "
            "ORDER BY bm25(records_fts), rowid LIMIT ?",
            (_match_expression(terms), depth),
        )
        return [(int(row[0]), float(row[1])) for row in rows]

    def _document_frequencies(self, terms: Sequence[str]) -> list[int]:
        counts: list[int] = []
        for term in terms:
            row = self._connection.execute(
                "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", (_match_expression([term]),)
            ).fetchone()
            counts.append(int(row[0]) if row else 0)
        return counts

    def reset(self) -> None:
        self._check_open()
        with self._lock:
            try:
                self._connection.execute("BEGIN")
                self._connection.execute("INSERT INTO records_fts (records_fts) VALUES ('delete-all')")
                self._connection.execute("DELETE FROM records")
                self._connection.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise MemoryBackendError(f"sqlite memory {str(self.path)!r}: reset failed: {error}") from None
            self._count = 0
            self._terms.clear()
            if self._index is not None:
                self._index.clear()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._index is not None:
                self._index.clear()
            self._connection.close()
            self._lock_file.close()

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)

    def ingest(self, session: ConversationSession) -> None:
        """A conversation session, one record per turn (:mod:`.ingestion`)."""
        ingest_turns(self, session)

    def __len__(self) -> int:
        self._check_open()
        return self._count

    # ------------------------------------------------------------------ resume

    def snapshot(self, directory: Path) -> None:
        """Append the records stored since the last snapshot to ``directory`` (RecordLog).

        The database file itself is not the snapshot: it goes on changing during
        the next episode, and a crash there must not leak into the resumed run.
        """
        self._check_open()

        def records_after(last_id: int) -> list[LoggedRecord]:
            rows = self._connection.execute(
                "SELECT id, content, metadata, embedding FROM records WHERE id > ? ORDER BY id", (last_id,)
            )
            return [
                {
                    "id": int(row[0]), "content": row[1], "metadata": row[2],
                    "embedding": base64.b64encode(row[3]).decode("ascii") if row[3] is not None else None,
                }
                for row in rows
            ]

        with self._lock:
            try:
                row = self._connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
                RecordLog(directory, "sqlite").save(
                    self._count, records_after, {"last_issued_id": int(row[0]) if row else 0}
                )
            except sqlite3.Error as error:
                raise MemoryBackendError(f"sqlite memory {str(self.path)!r}: snapshot failed: {error}") from None

    def restore(self, directory: Path) -> None:
        """Replace this memory's records with the snapshot in ``directory`` (same ids)."""
        self._check_open()
        records, state = RecordLog(directory, "sqlite").load()
        self.reset()
        with self._lock:
            try:
                self._connection.execute("BEGIN")
                for record in records:
                    blob = base64.b64decode(record["embedding"]) if record.get("embedding") else None
                    self._connection.execute(
                        "INSERT INTO records (id, content, metadata, embedding) VALUES (?, ?, ?, ?)",
                        (record["id"], record["content"], record["metadata"], blob),
                    )
                    self._connection.execute(
                        "INSERT INTO records_fts (rowid, content) VALUES (?, ?)", (record["id"], record["content"])
                    )
                    if self._index is not None and blob is not None:
                        self._index.add(int(record["id"]), np.frombuffer(blob, dtype=np.float32))
                self._connection.execute("DELETE FROM sqlite_sequence WHERE name = 'records'")
                self._connection.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES ('records', ?)", (state["last_issued_id"],)
                )
                self._connection.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise MemoryBackendError(f"sqlite memory {str(self.path)!r}: restore failed: {error}") from None
            self._count = len(records)
            self._terms.clear()

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError(
                f"sqlite memory {str(self.path)!r} is closed (stream teardown closed it); "
                "it cannot be used any more"
            )

    def _rollback(self) -> None:
        try:
            if self._connection.in_transaction:
                self._connection.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _lock_exclusively(path: Path) -> IO[bytes]:
    """Hold ``<path>.lock`` for the memory's lifetime, or refuse to open.

    The file is deleted and recreated on open, so two runs (or streams) given
    the same path would wreck each other's records; the second one is told so.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(f"{path}.lock", "a+b")
    except OSError as error:
        raise MemoryBackendError(
            f"sqlite memory could not be opened at {str(path)!r}: {error}; "
            "check sqlite.path and that the output directory is writable"
        ) from None
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; SQLite's own locking is all there is
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise MemoryBackendError(
            f"sqlite memory file {str(path)!r} is already in use by another run or stream; "
            "every run needs its own file: put '{run_name}' in sqlite.path (e.g. "
            "'memory/{run_name}-{stream}.sqlite3') or give the runs different output directories"
        ) from None
    return handle


def _match_expression(terms: Sequence[str]) -> str:
    """An FTS5 OR of quoted terms: terms hold only letters and digits, so quoting
    makes every one a plain token and nothing in them is FTS5 syntax."""
    return " OR ".join(f'"{term}"' for term in terms)


def _hit(record_id: int, content: str, metadata: str, score: float) -> MemoryHit:
    return MemoryHit(str(record_id), content, score, json.loads(metadata))


__all__ = ["SqliteMemory", "open_sqlite_memory", "stream_database_path"]
