"""The embedded persistent backend: one SQLite file per run and stream.

Recall is lexical BM25 over an FTS5 index (Porter-stemmed, diacritics folded),
optionally fused with exact cosine search over embeddings when the memory config
names an embedder (see :mod:`._ranking` for the fusion). The file is deleted and
recreated when the stream opens it, so nothing from an earlier stream or run can
be recalled; it stays in the run's output directory afterwards for inspection.

Recall reads a bounded part of the index whatever the store's size (see
:func:`._ranking.plan_gathering`): it needs each query word's document
frequency, which this memory counts exactly once per word and then brings up
to date with the records stored since (a count over the index's newest rowids,
which FTS5 seeks to), instead of counting the whole index on every recall. The
counts are a function of the stored records alone, so a restored memory ranks
exactly as the uninterrupted one.
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
from pydantic import field_validator

from ..config import BackendOptions, MemoryConfig, Text
from ..core.errors import MemoryBackendError
from ..core.types import MemoryHit
from ._ranking import gathered_ranking, hybrid_ranking, plan_gathering, prepare_recall
from .backend import MemoryBase
from .base import MemoryBackend, MemoryContext, RecordRejected, unstorable_reason
from .embedders import Embedder, build_embedder, embedder_check
from .recordlog import LoggedRecord, RecordLog
from .vectorindex import VectorIndex

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

#: The FTS5 index is merged into one segment once this share of the records (and
#: at least _MERGE_AFTER_RECORDS) was stored since the last merge. Every retain
#: commits a small segment; FTS5's own incremental merging keeps dozens of them
#: at 20,000 records, and every query reads each one (recall took 3x longer at
#: 20,000 records than at 1,000). Merging costs about one pass over the index, so
#: merging after a fixed share of new records keeps its cost per retain constant.
_MERGE_SHARE = 0.25
_MERGE_AFTER_RECORDS = 500

#: Query words whose document frequency is remembered (then only brought up to date).
_COUNTED_WORDS = 16_384

#: A word held by fewer records is counted afresh each time (that reads no more
#: than this many postings) instead of being remembered: a long stream of new
#: task words would otherwise make the cache grow with every task.
_REMEMBERED_FROM = 32

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


class SqliteOptions(BackendOptions):
    """``memory.sqlite``: where each stream's database file goes."""

    SECTION = "sqlite"

    path: Text | None = None

    @field_validator("path")
    @classmethod
    def _one_file_per_stream(cls, value: str | None) -> str | None:
        problem = None if value is None else sqlite_path_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def sqlite_path_problem(template: str) -> str | None:
    """Why ``sqlite.path`` cannot name one database per stream, or ``None``.

    Checked when the config is read (so the run is refused once, up front) and
    again by the backend when it fills the template in."""
    if "{stream}" not in template:
        return (
            f"{template!r} must contain '{{stream}}': every stream needs its own file, or one "
            "stream's records would be recalled in another; write e.g. memory/{stream}.sqlite3"
        )
    try:
        template.format(stream="s", run_name="r")
    except (KeyError, IndexError, ValueError, AttributeError) as error:
        return f"{template!r}: only {{stream}} and {{run_name}} may be used ({error}); remove the others"
    return None


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
    template = config.section(SqliteOptions).path
    if template is None:
        return context.run_dir / "memory" / f"{stream}.sqlite3"
    problem = sqlite_path_problem(template)
    if problem:
        raise MemoryBackendError(f"sqlite.path {problem}")
    filled = template.format(stream=stream, run_name=_UNSAFE_FILENAME.sub("_", context.run_name))
    path = Path(filled).expanduser()
    return path if path.is_absolute() else context.run_dir / path


class SqliteMemory(MemoryBase):
    """A stream's memory in a fresh SQLite file: FTS5 BM25, optionally hybrid."""

    KIND = "sqlite"

    def __init__(self, path: Path, default_top_k: int = 4, embedder: Embedder | None = None) -> None:
        super().__init__(default_top_k)
        self.path = path
        self.embedder = embedder
        self._lock = threading.RLock()
        self._index = VectorIndex(embedder.dim) if embedder else None
        #: query word -> (records holding it, counted over the ids up to this one)
        self._counted: dict[str, tuple[int, int]] = {}
        #: the largest id stored
        self._last_id = 0
        #: records stored since the index was last merged into one segment
        self._unmerged = 0
        self._count = 0
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
            self._last_id = record_id
            self._count += 1
            self._unmerged += 1
            if self._unmerged >= max(_MERGE_AFTER_RECORDS, int(self._count * _MERGE_SHARE)):
                self._merge_index()
            if self._index is not None and vector is not None:
                self._index.add(record_id, vector)
        return str(record_id)

    def _merge_index(self) -> None:
        """Merge the FTS5 index into one segment (what it holds is unchanged)."""
        try:
            self._connection.execute("INSERT INTO records_fts (records_fts) VALUES ('optimize')")
        except sqlite3.Error as error:
            raise MemoryBackendError(
                f"sqlite memory {str(self.path)!r}: merging the full-text index failed: {error}"
            ) from None
        self._unmerged = 0

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        limit = self._checked_limit(top_k)
        request = prepare_recall(query, self.embedder)
        if request is None:
            return []
        terms, vector = request
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

    def _lexical(self, words: Sequence[str], depth: int, enough: int) -> list[tuple[int, float]]:
        """BM25 ranking (higher is better) of the records holding the gathered
        words, followed when they are fewer than ``enough`` by the newest records
        holding another query word (``_ranking.plan_gathering``)."""
        frequencies: list[int | None] = list(self._frequencies(words))
        plan = plan_gathering(words, frequencies, self._count, enough, lambda taken: self._holders(taken, enough))
        return gathered_ranking(plan, depth, enough, self._match, self._newest)

    def _match(self, terms: Sequence[str], depth: int) -> list[tuple[int, float]]:
        rows = self._connection.execute(
            "SELECT rowid, -bm25(records_fts) FROM records_fts WHERE records_fts MATCH ? "
            "ORDER BY bm25(records_fts), rowid LIMIT ?",
            (_match_expression(terms), depth),
        )
        return [(int(row[0]), float(row[1])) for row in rows]

    def _holders(self, terms: Sequence[str], enough: int) -> int:
        """Records holding any of ``terms``, counted up to ``enough``."""
        row = self._connection.execute(
            "SELECT count(*) FROM (SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT ?)",
            (_match_expression(terms), enough),
        ).fetchone()
        return int(row[0]) if row else 0

    def _newest(self, terms: Sequence[str], count: int) -> list[int]:
        """Ids of the ``count`` newest records holding any of ``terms`` (FTS5 walks
        its doclists backwards and stops there)."""
        rows = self._connection.execute(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (_match_expression(terms), count),
        )
        return [int(row[0]) for row in rows]

    def _frequencies(self, words: Sequence[str]) -> list[int]:
        """How many records hold each word, exactly as MATCH finds them.

        A word counted before is brought up to date with a count over the ids
        stored since (FTS5 seeks its doclists to a rowid), all of a query's words in
        one statement; only a word never counted (or forgotten from the bounded
        cache) is counted over the whole index, once.
        """
        counted, last_id = self._counted, self._last_id
        found: dict[str, int] = {}
        stale = []
        for word in dict.fromkeys(words):
            known = counted.get(word)
            if known is not None and known[1] == last_id:
                found[word] = known[0]
            else:
                stale.append(word)
        if stale:
            if len(counted) + len(stale) > _COUNTED_WORDS:
                counted.clear()
            arguments: list[object] = []
            for word in stale:
                arguments += [_match_expression([word]), counted.get(word, (0, 0))[1]]
            one = "(SELECT count(*) FROM records_fts WHERE records_fts MATCH ? AND rowid > ?)"
            row = self._connection.execute("SELECT " + ", ".join([one] * len(stale)), arguments).fetchone()
            for word, more in zip(stale, row, strict=True):
                held = found[word] = counted.get(word, (0, 0))[0] + int(more)
                if held >= _REMEMBERED_FROM:
                    counted[word] = (held, last_id)
        return [found[word] for word in words]

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
            self._unmerged = 0
            self._counted.clear()
            if self._index is not None:
                self._index.clear()

    # ------------------------------------------------------------------ optional capabilities

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The ``limit`` records retained last, newest first (:class:`~.base.RecencyRecall`)."""
        self._check_open()
        count = self._recent_limit(limit)
        try:
            with self._lock:
                self._check_open()
                rows = self._connection.execute(
                    "SELECT id, content, metadata FROM records ORDER BY id DESC LIMIT ?", (count,)
                ).fetchall()
        except sqlite3.Error as error:
            raise MemoryBackendError(f"sqlite memory {str(self.path)!r}: recent failed: {error}") from None
        return [_hit(int(row[0]), row[1], row[2], 0.0) for row in rows]

    def forget(self, record_id: str) -> bool:
        """Delete one record (:class:`~.base.Forgetting`): row, full-text entry, vector."""
        self._check_open()
        try:
            number = int(record_id)
        except (TypeError, ValueError):
            return False
        if not 0 < number < 2**63:  # not an id this store ever issued (nor one SQL can hold)
            return False
        with self._lock:
            self._check_open()
            try:
                row = self._connection.execute("SELECT content FROM records WHERE id = ?", (number,)).fetchone()
                if row is None:
                    return False
                self._connection.execute("BEGIN")
                self._connection.execute(
                    "INSERT INTO records_fts (records_fts, rowid, content) VALUES ('delete', ?, ?)", (number, row[0])
                )
                self._connection.execute("DELETE FROM records WHERE id = ?", (number,))
                self._connection.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise MemoryBackendError(f"sqlite memory {str(self.path)!r}: forget failed: {error}") from None
            self._count -= 1
            # the remembered document frequencies count the deleted record: count afresh
            self._counted.clear()
            if self._index is not None:
                self._index.remove(number)
        return True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._index is not None:
                self._index.clear()
            self._connection.close()
            self._lock_file.close()

    def __len__(self) -> int:
        self._check_open()
        return self._count

    # ------------------------------------------------------------------ resume

    #: snapshot() writes its directory only through one RecordLog (recordlog.RECORD_LOG_ONLY)
    snapshot_writes_only_a_record_log = True

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
            self._unmerged = 0  # restored in one transaction: one segment
            self._counted.clear()
            self._last_id = max((int(record["id"]) for record in records), default=0)

    # ------------------------------------------------------------------ helpers

    def _described(self) -> str:
        return f"sqlite memory {str(self.path)!r}"

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


def _database_files(config: MemoryConfig, context: MemoryContext) -> list[str]:
    return [str(stream_database_path(config, context).resolve())]


BACKEND = MemoryBackend(
    "sqlite", open=open_sqlite_memory, options=SqliteOptions, locations=_database_files,
    location_kind="file", check=embedder_check(),
)


__all__ = ["BACKEND", "SqliteMemory", "SqliteOptions", "open_sqlite_memory", "stream_database_path"]
