"""The PostgreSQL backend: a shared server holds each run+stream in its own table.

* Isolation: the table is ``<table_prefix>_<run>_<stream>_<hash>``: the readable
  part is lower-cased and cut to fit PostgreSQL's 63 bytes, and the hash of the
  exact prefix, run name and stream keeps names that fold together (``exp-1`` and
  ``Exp_1``) apart. It is dropped and recreated when the stream opens,
  emptied by ``reset`` and dropped by ``close``, so two streams (or two runs with
  different names) never see each other's records.
* Lexical recall: a stored generated ``tsvector`` column with a GIN index, ranked
  by ``ts_rank_cd`` (cover density, normalised to rank/(rank+1)). The tsquery is
  built from quoted letters-and-digits words joined by ``|`` — never from the raw
  query text — so user text cannot inject tsquery syntax, and a record matching
  any of the words can be recalled (``plainto_tsquery`` would require them all).
  Candidates are gathered with the query's rarest words only
  (:func:`._ranking.plan_gathering`), from document frequencies this process
  keeps per lexeme as rows are inserted (``RETURNING`` the row's lexemes), so a
  recall reads a bounded part of the table whatever its size.
  PostgreSQL caps a tsvector at 1 MB, so only the first ``TSVECTOR_CHARS``
  characters of a record are indexed; the whole record is stored and returned.
* Vector recall (when an embedder is configured): pgvector is not assumed.
  Embeddings are stored durably as ``float8[]`` and ranked by exact cosine in this
  process over a local copy kept in step with the table (this process is the
  table's only writer), then fused with the lexical ranking by RRF as in SQLite.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field, field_validator

from ..config import BackendOptions, MemoryConfig, Text, env_variable_name
from ..core.errors import MemoryBackendError
from ..core.types import MemoryHit
from ._ranking import (
    COMMON_TERM_SHARE,
    SMALL_STORE,
    gathered_ranking,
    hybrid_ranking,
    plan_gathering,
    prepare_recall,
)
from .backend import MemoryBase
from .base import MemoryBackend, MemoryContext, RecordRejected, unstorable_reason
from .embedders import Embedder, build_embedder, embedder_check
from .recordlog import LoggedRecord, RecordLog
from .vectorindex import VectorIndex

#: Characters of a record that go into its tsvector (PostgreSQL's limit is 1 MB
#: of lexemes and positions; 256k characters of prose stays well under it).
TSVECTOR_CHARS = 262_144

#: Query words whose lexemes are remembered (a deterministic function of the word;
#: emptied when full, so a long stream of new task words does not grow it).
_WORD_CACHE = 4_096

_IDENTIFIER_UNSAFE = re.compile(r"[^a-z0-9_]+")
_TEXT_SEARCH_CONFIG = re.compile(r"^[a-z_][a-z0-9_]*$")


class PostgresOptions(BackendOptions):
    """``memory.postgres``: the server (libpq settings; the password stays in a variable)."""

    SECTION = "postgres"

    host: Text = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 5432
    user: Text = "postgres"
    dbname: Text = "postgres"
    password_env: str | None = "PGPASSWORD"
    table_prefix: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]{0,30}$")] = "evomemory"
    connect_timeout_s: Annotated[float, Field(gt=0)] = 5.0

    @field_validator("password_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        return env_variable_name(value, "the password", "PGPASSWORD", "a server that needs no password")


def open_postgres_memory(config: MemoryConfig, context: MemoryContext) -> PostgresMemory:
    """The ``postgres`` backend for one stream (the factory's entry point)."""
    settings = config.section(PostgresOptions)
    password = os.environ.get(settings.password_env) if settings.password_env else None
    text_search_config = str(config.options.get("text_search_config", "english"))
    return PostgresMemory(
        conninfo={
            "host": settings.host,
            "port": settings.port,
            "user": settings.user,
            "dbname": settings.dbname,
            "password": password,
            "connect_timeout": max(1, math.ceil(settings.connect_timeout_s)),
        },
        table=table_name(settings.table_prefix, context.run_name, context.stream),
        default_top_k=config.top_k,
        embedder=build_embedder(config),
        text_search_config=text_search_config,
        password_env=settings.password_env,
    )


def table_name(prefix: str, run_name: str, stream: str) -> str:
    """A valid, unquoted-style identifier unique to the run and stream (<= 63 bytes)."""

    def slug(text: str) -> str:
        return _IDENTIFIER_UNSAFE.sub("_", text.lower()).strip("_") or "x"

    digest = hashlib.sha256(f"{prefix}\0{run_name}\0{stream}".encode()).hexdigest()[:10]
    readable = f"{prefix}_{slug(run_name)}_{slug(stream)}"[:52].rstrip("_")
    return f"{readable}_{digest}"


class PostgresMemory(MemoryBase):
    """A stream's memory in its own PostgreSQL table: ts_rank_cd, optionally hybrid."""

    KIND = "postgres"

    def __init__(
        self,
        conninfo: Mapping[str, Any],
        table: str,
        default_top_k: int = 4,
        embedder: Embedder | None = None,
        text_search_config: str = "english",
        password_env: str | None = None,
    ) -> None:
        super().__init__(default_top_k)
        if not _TEXT_SEARCH_CONFIG.match(text_search_config):
            raise MemoryBackendError(f"postgres memory: invalid text_search_config {text_search_config!r}")
        try:
            import psycopg
            from psycopg import sql
        except ImportError:
            raise MemoryBackendError(
                "memory backend 'postgres' needs psycopg 3: pip install 'pytest-evomemory[postgres]'"
            ) from None
        self._psycopg = psycopg
        self.table = table
        self.embedder = embedder
        self.where = (
            f"{conninfo.get('user')}@{conninfo.get('host')}:{conninfo.get('port')}/{conninfo.get('dbname')}"
        )
        self._lock = threading.RLock()
        self._index = VectorIndex(embedder.dim) if embedder else None
        #: lexeme -> rows holding it, kept exactly as rows are inserted
        self._frequencies: dict[str, int] = {}
        #: query word -> the lexemes it is (usually one)
        self._word_lexemes: dict[str, tuple[str, ...]] = {}
        #: the largest id handed out (ids only grow, also across reset)
        self._last_id = 0
        self._count = 0
        self._config = sql.Literal(text_search_config)
        self._text_search_config = text_search_config
        self._table = sql.Identifier(table)
        params = {key: value for key, value in conninfo.items() if value is not None}
        try:
            self._connection = psycopg.connect(**params, autocommit=True, application_name="pytest-evomemory")
        except psycopg.Error as error:
            missing = (
                f"; ${password_env} is not set" if password_env and password_env not in os.environ else ""
            )
            raise MemoryBackendError(
                f"postgres memory could not connect to {self.where}: {_server_said(error)}{missing}; "
                "check memory.postgres (host, port, user, dbname, password_env) and that the server is up"
            ) from None
        try:
            self._create_table()
        except psycopg.Error as error:
            self._connection.close()
            raise MemoryBackendError(
                f"postgres memory could not create table {table!r} on {self.where}: {_server_said(error)}"
            ) from None

    def _create_table(self) -> None:
        from psycopg import sql

        ddl = sql.SQL(
            """
            DROP TABLE IF EXISTS {table};
            CREATE TABLE {table} (
                id BIGSERIAL PRIMARY KEY,
                content TEXT NOT NULL,
                metadata JSONB NOT NULL DEFAULT '{{}}',
                tsv tsvector GENERATED ALWAYS AS
                    (to_tsvector({config}::regconfig, left(content, {chars}))) STORED,
                embedding float8[]
            );
            CREATE INDEX {index} ON {table} USING GIN (tsv);
            """
        ).format(
            table=self._table,
            config=self._config,
            chars=sql.Literal(TSVECTOR_CHARS),
            index=sql.Identifier(f"{self.table[:56]}_tsv"),
        )
        with self._connection.transaction():
            self._connection.execute(ddl)

    # ------------------------------------------------------------------ protocol

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        from psycopg import sql

        self._check_open()
        if not isinstance(content, str):
            raise MemoryBackendError(f"retain: content must be a string, got {type(content).__name__}")
        meta = json.dumps(dict(metadata or {}), ensure_ascii=False, default=str)
        for part, text in (("content", content), ("metadata", meta.replace("\\u0000", "\x00"))):
            reason = unstorable_reason(text, nul_allowed=False)
            if reason:
                raise RecordRejected(f"postgres memory: this record was not stored: its {part} {reason}")
        vector = self.embedder.embed([content])[0] if self.embedder else None
        embedding = [float(x) for x in vector] if vector is not None else None
        with self._lock:
            self._check_open()
            try:
                row = self._connection.execute(
                    sql.SQL(
                        "INSERT INTO {} (content, metadata, embedding) VALUES (%s, %s::jsonb, %s) "
                        "RETURNING id, tsvector_to_array(tsv)"
                    ).format(self._table),
                    (content, meta, embedding),
                ).fetchone()
            except self._psycopg.Error as error:
                raise MemoryBackendError(
                    f"postgres memory {self.table!r}: retain failed: {_server_said(error)}"
                ) from None
            assert row is not None
            record_id = int(row[0])
            frequencies = self._frequencies
            for lexeme in row[1]:
                frequencies[lexeme] = frequencies.get(lexeme, 0) + 1
            self._last_id = max(self._last_id, record_id)
            self._count += 1
            if self._index is not None and vector is not None:
                self._index.add(record_id, vector)
        return str(record_id)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        from psycopg import sql

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
                found = {
                    int(row[0]): row
                    for row in self._connection.execute(
                        sql.SQL("SELECT id, content, metadata FROM {} WHERE id = ANY(%s)").format(
                            self._table
                        ),
                        ([record_id for record_id, _ in ranked],),
                    )
                }
        except self._psycopg.Error as error:
            raise MemoryBackendError(
                f"postgres memory {self.table!r}: recall failed: {_server_said(error)}"
            ) from None
        return [
            MemoryHit(str(record_id), found[record_id][1], score, found[record_id][2])
            for record_id, score in ranked
            if record_id in found
        ]

    def _lexical(self, words: Sequence[str], depth: int, enough: int) -> list[tuple[int, float]]:
        """ts_rank_cd ranking of the rows holding the gathered (rarest) words, each
        scored against every informative query word; followed, when they are fewer
        than ``enough``, by the newest rows holding another query word.

        ts_rank_cd reads the tsvector of every row that matches, so matching on a
        word found in a tenth of a 100k-row table costs far more than ranking: the
        rows matched are bounded (``_ranking.plan_gathering``), the words scored
        are not (ts_rank_cd has no IDF: a common word would drown the others, so
        only words in at most half the rows are scored).
        """
        frequencies = self._frequencies_of(words)
        total = self._count
        informative = [
            word for word, held in zip(words, frequencies, strict=True)
            if held is not None and held > 0 and (total < SMALL_STORE or held <= total * COMMON_TERM_SHARE)
        ]
        plan = plan_gathering(words, frequencies, total, enough, lambda taken: self._holders(taken, enough))

        def rank(gathered: Sequence[str], limit: int) -> list[tuple[int, float]]:
            return self._match(gathered, informative or gathered, limit)

        return gathered_ranking(plan, depth, enough, rank, self._newest)

    def _match(
        self, match_terms: Sequence[str], rank_terms: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        from psycopg import sql

        rows = self._connection.execute(
            sql.SQL(
                "SELECT id, ts_rank_cd(tsv, to_tsquery({config}::regconfig, %s), 32) AS score "
                "FROM {table} WHERE tsv @@ to_tsquery({config}::regconfig, %s) "
                "ORDER BY score DESC, id LIMIT %s"
            ).format(table=self._table, config=self._config),
            (_tsquery(rank_terms), _tsquery(match_terms), depth),
        )
        return [(int(row[0]), float(row[1])) for row in rows]

    def _holders(self, terms: Sequence[str], enough: int) -> int:
        """Rows holding any of ``terms``, counted up to ``enough``."""
        from psycopg import sql

        row = self._connection.execute(
            sql.SQL(
                "SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ to_tsquery({config}::regconfig, %s) "
                "LIMIT %s) AS held"
            ).format(table=self._table, config=self._config),
            (_tsquery(terms), enough),
        ).fetchone()
        return int(row[0]) if row else 0

    def _newest(self, terms: Sequence[str], count: int) -> list[int]:
        """Ids of the ``count`` newest rows holding any of ``terms``, newest first.

        Looked for among the newest rows first, in a window that grows fourfold
        until it holds ``count`` of them or the whole table (the window is a
        materialized CTE, so the planner reads it by the primary key instead of
        collecting every row that matches a common word from the GIN index).
        """
        from psycopg import sql

        query = sql.SQL(
            "WITH recent AS MATERIALIZED (SELECT id, tsv FROM {table} WHERE id > %s) "
            "SELECT id FROM recent WHERE tsv @@ to_tsquery({config}::regconfig, %s) ORDER BY id DESC LIMIT %s"
        ).format(table=self._table, config=self._config)
        window = 4 * max(count, 16)
        while True:
            floor = max(self._last_id - window, 0)
            rows = [int(row[0]) for row in self._connection.execute(query, (floor, _tsquery(terms), count))]
            if len(rows) >= count or floor == 0:
                return rows
            window *= 4

    def _frequencies_of(self, words: Sequence[str]) -> list[int | None]:
        """Rows holding each word: 0 when it is no lexeme (a stopword), None when it
        is several (to_tsquery makes it a phrase, which no count is kept of)."""
        missing = [word for word in words if word not in self._word_lexemes]
        if missing:
            rows = self._connection.execute(
                "SELECT tsvector_to_array(to_tsvector(%s::regconfig, t.word)) "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(word, position) ORDER BY t.position",
                (self._text_search_config, missing),
            ).fetchall()
            if len(self._word_lexemes) >= _WORD_CACHE:
                self._word_lexemes.clear()
            for word, row in zip(missing, rows, strict=True):
                self._word_lexemes[word] = tuple(row[0])
        found: list[int | None] = []
        for word in words:
            lexemes = self._word_lexemes[word]
            found.append(0 if not lexemes else None if len(lexemes) > 1 else self._frequencies.get(lexemes[0], 0))
        return found

    def reset(self) -> None:
        from psycopg import sql

        self._check_open()
        with self._lock:
            try:
                self._connection.execute(sql.SQL("TRUNCATE {}").format(self._table))
            except self._psycopg.Error as error:
                raise MemoryBackendError(
                    f"postgres memory {self.table!r}: reset failed: {_server_said(error)}"
                ) from None
            self._count = 0
            self._frequencies.clear()
            if self._index is not None:
                self._index.clear()

    # ------------------------------------------------------------------ optional capabilities

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The ``limit`` records retained last, newest first (:class:`~.base.RecencyRecall`)."""
        from psycopg import sql

        self._check_open()
        count = self._recent_limit(limit)
        try:
            with self._lock:
                self._check_open()
                rows = self._connection.execute(
                    sql.SQL("SELECT id, content, metadata FROM {} ORDER BY id DESC LIMIT %s").format(self._table),
                    (count,),
                ).fetchall()
        except self._psycopg.Error as error:
            raise MemoryBackendError(f"postgres memory {self.table!r}: recent failed: {_server_said(error)}") from None
        return [MemoryHit(str(row[0]), row[1], 0.0, row[2]) for row in rows]

    def forget(self, record_id: str) -> bool:
        """Delete one record (:class:`~.base.Forgetting`): its row, its vector and its
        lexemes' counts (kept exactly, as :meth:`retain` keeps them)."""
        from psycopg import sql

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
                row = self._connection.execute(
                    sql.SQL("DELETE FROM {} WHERE id = %s RETURNING id, tsvector_to_array(tsv)").format(self._table),
                    (number,),
                ).fetchone()
            except self._psycopg.Error as error:
                raise MemoryBackendError(
                    f"postgres memory {self.table!r}: forget failed: {_server_said(error)}"
                ) from None
            if row is None:
                return False
            self._count -= 1
            frequencies = self._frequencies
            for lexeme in row[1]:
                held = frequencies.get(lexeme, 0) - 1
                if held > 0:
                    frequencies[lexeme] = held
                else:
                    frequencies.pop(lexeme, None)
            if self._index is not None:
                self._index.remove(number)
        return True

    def close(self) -> None:
        """Drop the stream's table (its records belong to the finished stream) and disconnect."""
        from psycopg import sql

        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._index is not None:
                self._index.clear()
            try:
                if not self._connection.closed:
                    self._connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._table))
            except self._psycopg.Error:
                pass  # the server went away; nothing of this stream is left to protect
            finally:
                self._connection.close()

    def __len__(self) -> int:
        self._check_open()
        return self._count

    # ------------------------------------------------------------------ resume

    #: snapshot() writes its directory only through one RecordLog (recordlog.RECORD_LOG_ONLY)
    snapshot_writes_only_a_record_log = True

    def snapshot(self, directory: Path) -> None:
        """Append the rows stored since the last snapshot to ``directory`` (RecordLog).

        The table is not its own snapshot: it changes during the next episode and
        is dropped when the stream closes (also on Ctrl-C), so the rows are copied out.
        """
        from psycopg import sql

        self._check_open()

        def records_after(last_id: int) -> list[LoggedRecord]:
            rows = self._connection.execute(
                sql.SQL("SELECT id, content, metadata::text, embedding FROM {} WHERE id > %s ORDER BY id").format(
                    self._table
                ),
                (last_id,),
            )
            return [
                {"id": int(row[0]), "content": row[1], "metadata": row[2], "embedding": row[3]} for row in rows
            ]

        with self._lock:
            try:
                row = self._connection.execute(
                    sql.SQL("SELECT last_value, is_called FROM {}").format(sql.SQL(self._sequence()))
                ).fetchone()
                assert row is not None
                last_issued = int(row[0]) if row[1] else 0
                RecordLog(directory, "postgres").save(self._count, records_after, {"last_issued_id": last_issued})
            except self._psycopg.Error as error:
                raise MemoryBackendError(
                    f"postgres memory {self.table!r}: snapshot failed: {_server_said(error)}"
                ) from None

    def restore(self, directory: Path) -> None:
        """Replace this table's rows with the snapshot in ``directory`` (same ids)."""
        from psycopg import sql

        self._check_open()
        records, state = RecordLog(directory, "postgres").load()
        self.reset()
        with self._lock:
            try:
                with self._connection.transaction():
                    with self._connection.cursor() as cursor:
                        cursor.executemany(
                            sql.SQL(
                                "INSERT INTO {} (id, content, metadata, embedding) VALUES (%s, %s, %s::jsonb, %s)"
                            ).format(self._table),
                            [(r["id"], r["content"], r["metadata"], r["embedding"]) for r in records],
                        )
                    last = int(state["last_issued_id"])
                    self._connection.execute(
                        "SELECT setval(%s::regclass, %s, %s)", (self._sequence(), max(last, 1), last > 0)
                    )
                # the table's own count of the rows holding each lexeme: exactly what
                # the uninterrupted memory kept up row by row
                counted = self._connection.execute(
                    sql.SQL(
                        "SELECT lexeme, count(*) FROM {}, unnest(tsvector_to_array(tsv)) AS lexeme GROUP BY lexeme"
                    ).format(self._table)
                ).fetchall()
            except self._psycopg.Error as error:
                raise MemoryBackendError(
                    f"postgres memory {self.table!r}: restore failed: {_server_said(error)}"
                ) from None
            self._frequencies = {str(lexeme): int(held) for lexeme, held in counted}
            self._last_id = max([last, *(int(r["id"]) for r in records)])
            self._count = len(records)
            if self._index is not None:
                for record in records:
                    if record["embedding"] is not None:
                        self._index.add(int(record["id"]), np.asarray(record["embedding"], dtype=np.float32))

    def _sequence(self) -> str:
        row = self._connection.execute("SELECT pg_get_serial_sequence(%s, 'id')", (self.table,)).fetchone()
        assert row is not None and row[0]
        return str(row[0])

    def _described(self) -> str:
        return f"postgres memory {self.table!r} on {self.where}"


def _server_said(error: BaseException) -> str:
    """The server's or driver's reason on one line: psycopg adds the failing query's
    excerpt (``LINE 1: ...``) and a caret line under it, and a connection failure
    spans lines; a failed episode's reason and the terminal line stay one line."""
    lines = [line.strip() for line in str(error).splitlines()]
    kept = [line for line in lines if line and not line.startswith("LINE ") and line.strip("^ ")]
    return " ".join(kept)


def _tsquery(terms: Sequence[str]) -> str:
    """``'w1' | 'w2'``: each term holds only letters and digits, so quoted it is a
    plain lexeme for to_tsquery, whatever the user typed around it."""
    return " | ".join(f"'{term}'" for term in terms)





BACKEND = MemoryBackend(
    "postgres", open=open_postgres_memory, options=PostgresOptions,
    reads_options=frozenset({"text_search_config"}), extra="postgres", requires=("psycopg",),
    check=embedder_check(),
)


__all__ = ["BACKEND", "PostgresMemory", "PostgresOptions", "open_postgres_memory", "table_name"]
