"""Mem0 (the ``mem0ai`` package) as the memory under test: the library's own ``Memory``.

``memory: {backend: mem0, mem0: {...}}`` (docs/memory.md, "Mem0") gives every
stream its own Mem0 store — an embedded Qdrant database and Mem0's SQLite
history database in ``<run dir>/memory/<stream>.mem0/`` — scoped to one agent id.
What the benchmark sees is Mem0's own behaviour:

* ``retain`` is ``Memory.add`` (with ``infer: true``, Mem0's LLM extracts facts
  from the text and stores those, deduplicated, instead of the text), ``recall``
  is ``Memory.search`` (semantic, Mem0's scoring and threshold), and a
  ``tool_use`` agent is given Mem0's operations as tools under their own names:
  ``add``, ``search``, ``delete``, answering with Mem0's own result dictionaries.
* Offline by construction: Mem0's telemetry is off (``MEM0_TELEMETRY=False``),
  its LLM and embedder clients only reach the configured endpoints, and the parts
  that would download models at run time (fastembed's BM25 encoder, spaCy's
  entity model) stay off, so the ranking is the same on every machine.
* Like the built-in backends: ``recent`` (ExpRecent's window, in the order Mem0
  created its memories, from the journal below), ``forget`` and ``ingest`` (LoCoMo:
  one ``Memory.add`` per dialogue turn with the turn's metadata).
* Under ``--evomemory-max-cost`` with ``infer``, Mem0's LLM client sends through the
  metering transport (:mod:`..models.metering`).
* An add that stored nothing (with ``infer``: Mem0's LLM extracted no new fact, or
  replied in a form Mem0 does not read, as a stub or a small model does) is counted
  (:attr:`Mem0Memory.unstored_retains`, :class:`~.base.SelectiveStore`): the run says
  so once per stream instead of showing an empty memory without a word.
* Resume: :meth:`Mem0Memory.snapshot` saves the Qdrant points exactly as stored
  (original vectors, payloads, storage order) and the history database's rows;
  :meth:`Mem0Memory.restore` writes them back in the same order, so the next
  searches rank and score exactly as in the uninterrupted run.
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Annotated, Any

from pydantic import Field, field_validator

from ..config import MemoryConfig, ModelConfig, Text
from ..core import boundedread
from ..core.errors import ConfigError, MemoryBackendError
from ..core.tools import Tool, ToolArgumentError, require_string
from ..core.types import MemoryHit
from .base import MemoryBackend, MemoryContext, RecordRejected
from .guard import SeenRecord
from .libraries import (
    NO_KEY,
    LibraryClients,
    LibraryMemory,
    LibraryOptions,
    check_library_options,
    claim_fresh_directory,
    decode_floats,
    encode_floats,
    has_words,
    infer_calls,
    library_clients,
    metered_price,
    path_template_problem,
    store_directory,
)
from .mem0_library import (
    PackageEmbedding,
    import_mem0,
    metered_openai_client,
    quiet_resets,
    unused_clients_not_built,
    without_fsync,
)
from .tools import MemoryTool, text_tool_spec

NAME = "mem0"
#: Each stream has a store of its own, so one scope (Mem0 needs a user, agent or run id) suffices.
AGENT_ID = "evomemory-agent"
COLLECTION = "evomemory"
DEFAULT_PATH = "memory/{stream}.mem0"
#: Payload keys Mem0 writes itself; metadata using one would be overwritten or misread.
RESERVED_METADATA = frozenset({
    "data", "hash", "created_at", "updated_at", "id", "text_lemmatized", "attributed_to",
    "user_id", "agent_id", "run_id", "actor_id", "role", "expiration_date", "memory_type",
})
#: Where Mem0's LLM client points when ``infer`` is off: it is never called, and an
#: address on this host could not send anything off it if it were.
_UNUSED_ENDPOINT = "http://127.0.0.1:9/v1"


class Mem0Options(LibraryOptions):
    """``memory.mem0``: the settings of backend ``mem0`` (docs/memory.md)."""

    SECTION = "mem0"

    #: Each stream's store directory, with ``{stream}`` (and optionally ``{run_name}``);
    #: relative paths are taken from the run directory.
    path: Text | None = None
    #: Mem0's minimum similarity for a search result (its own default: 0.1).
    search_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1

    @field_validator("path")
    @classmethod
    def _one_store_per_stream(cls, value: str | None) -> str | None:
        problem = None if value is None else path_template_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def check_mem0_config(memory: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
    """What is knowable before a stream opens (the backend's ``check``; the extra
    itself is checked from ``requires``): the embedder, the endpoints and their keys."""
    options = memory.section(Mem0Options)
    check_library_options(memory, options, agent_model, NAME, source)
    if options.infer and os.environ.get("OPENROUTER_API_KEY"):
        raise ConfigError(
            f"{source}: key 'mem0.infer': OPENROUTER_API_KEY is set, and Mem0 then sends its fact "
            "extraction to OpenRouter instead of the configured endpoint; unset it for this run",
            source=source, key="mem0.infer",
        )


def store_path(memory: MemoryConfig, context: MemoryContext) -> Path:
    """``<run_dir>/memory/<stream>.mem0``, or ``mem0.path`` filled in."""
    template = memory.section(Mem0Options).path
    return store_directory(template, DEFAULT_PATH, context.stream, context.run_name, context.run_dir)


def open_mem0_memory(memory: MemoryConfig, context: MemoryContext) -> Mem0Memory:
    """The ``mem0`` backend for one stream (the backend's opener)."""
    source = "memory config"
    check_mem0_config(memory, context.agent_model, source)
    options = memory.section(Mem0Options)
    return Mem0Memory(
        store_path(memory, context),
        library_clients(memory, options, context, NAME, source),
        default_top_k=memory.top_k,
        infer=options.infer,
        search_threshold=options.search_threshold,
    )


class Mem0Memory(LibraryMemory):
    """One stream's Mem0 ``Memory`` behind the MemorySystem protocol."""

    KIND = NAME

    def __init__(
        self,
        directory: Path,
        clients: LibraryClients,
        *,
        default_top_k: int = 4,
        infer: bool = False,
        search_threshold: float = 0.1,
    ) -> None:
        super().__init__(clients, default_top_k=default_top_k, infer=infer)
        self.search_threshold = search_threshold
        self.directory = directory
        #: The journal (see :meth:`_journal_writes`) holds points as stored, deletions and history rows.
        self._history_rowid = 0
        #: A read-only connection to Qdrant's point storage (see :meth:`_stored_points`).
        self._storage_reader: sqlite3.Connection | None = None
        self._lock_file: IO[bytes] = claim_fresh_directory(directory, NAME)
        try:
            self._mem0 = import_mem0()
            self._dims = self._embedder.dim if self._embedder is not None else self._endpoint_dims()
            self._memory = self._open()
        except BaseException:
            self._lock_file.close()
            raise

    # ------------------------------------------------------------------ opening

    def _config(self) -> dict[str, Any]:
        """Mem0's own configuration: embedded Qdrant on a local path, the history
        database beside it, OpenAI-compatible clients for the LLM and embeddings."""
        chat = self._chat
        llm = {
            "model": chat.model if chat else "unused",
            "api_key": chat.api_key if chat else NO_KEY,
            "openai_base_url": (chat.base_url if chat else _UNUSED_ENDPOINT),
            "temperature": chat.temperature if chat else 0.0,
            "max_tokens": chat.max_tokens if chat else 16,
        }
        if llm["openai_base_url"] is None:
            del llm["openai_base_url"]  # the agent's own client default (OpenAI's API)
        endpoint = self._endpoint
        embedder = (
            {"model": endpoint.model, "openai_base_url": endpoint.base_url, "api_key": self._endpoint_api_key}
            if endpoint is not None
            # Replaced by this package's embedder as soon as the Memory exists (see _open).
            else {"model": "unused", "openai_base_url": _UNUSED_ENDPOINT, "api_key": NO_KEY}
        )
        # No embedding_dims for Mem0's embedder: it would ask the server for vectors of
        # that size (the ``dimensions`` parameter), which most servers refuse.
        return {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": COLLECTION,
                    "path": str(self.directory / "qdrant"),
                    "embedding_model_dims": self._dims,
                },
            },
            "embedder": {"provider": "openai", "config": embedder},
            "llm": {"provider": "openai", "config": llm},
            "history_db_path": str(self.directory / "history.db"),
        }

    def _open(self) -> Any:
        embedding = PackageEmbedding(self._embedder) if self._embedder is not None else None
        try:
            with unused_clients_not_built(embedding, llm_unused=self._chat is None):
                memory = self._mem0.Memory.from_config(self._config())
        except Exception as error:
            raise MemoryBackendError(
                f"mem0 memory could not be opened in {str(self.directory)!r}: {type(error).__name__}: {error}"
            ) from None
        if embedding is not None:
            memory.embedding_model = embedding
        if self._meter is not None and self._chat is not None:
            memory.llm.client = metered_openai_client(self._chat, self._meter)
        # fastembed's BM25 encoder downloads its model from the Hugging Face hub on
        # first use: Mem0 treats False as "tried, not available" and searches semantically.
        if hasattr(memory.vector_store, "_bm25_encoder"):
            memory.vector_store._bm25_encoder = False
        without_fsync(memory)
        return memory

    def _endpoint_dims(self) -> int:
        """The embeddings endpoint's vector size: configured, or learnt from one call."""
        endpoint = self._endpoint
        assert endpoint is not None
        if endpoint.dims is not None:
            return endpoint.dims
        from mem0.configs.embeddings.base import BaseEmbedderConfig
        from mem0.embeddings.openai import OpenAIEmbedding

        try:
            client = OpenAIEmbedding(BaseEmbedderConfig(
                model=endpoint.model, openai_base_url=endpoint.base_url, api_key=self._endpoint_api_key
            ))
            return len(client.embed("dimension probe"))
        except Exception as error:
            raise MemoryBackendError(
                f"mem0 memory: the embeddings endpoint {endpoint.base_url} (model {endpoint.model!r}) did not "
                f"answer a first request: {type(error).__name__}: {error}; check mem0.embeddings, or set "
                "mem0.embeddings.dims"
            ) from None

    # ------------------------------------------------------------------ protocol

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        """``Memory.add``; the id of the first memory Mem0 added ("" when, with
        ``infer``, it extracted nothing new)."""
        self._check_open()
        self._check_text(content, "retain")
        extra = dict(metadata or {})
        clash = sorted(RESERVED_METADATA & set(extra))
        if clash:
            raise RecordRejected(
                f"mem0 memory: this record was not stored: metadata key(s) {clash} are fields Mem0 writes "
                "itself; rename them"
            )
        added = self._add(content, extra or None)
        return next((str(item["id"]) for item in added["results"] if item.get("event") == "ADD"), "")

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        """``Memory.search`` within this stream's scope, most similar first."""
        self._check_open()
        found = self._search(query, self._limit(top_k))
        return [
            MemoryHit(str(item["id"]), str(item["memory"]), float(item.get("score") or 0.0), dict(item.get("metadata") or {}))
            for item in found["results"]
        ]

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The ``limit`` memories Mem0 created last, newest first (:class:`~.base.RecencyRecall`).

        Exact: the order is the journal's (every point in the order Mem0 added it,
        which a restore replays), not Qdrant's, which keeps points by id; a memory
        deleted since (by ``delete`` or by Mem0's own extraction) is skipped, one
        Mem0 updated keeps its place with its new text.
        """
        self._check_open()
        count = self._recent_limit(limit)
        with self._lock:
            newest = _live_in_creation_order(self._journal)[::-1][:count]
            found = [self._memory.get(memory_id) for memory_id in newest]
        return [
            MemoryHit(str(item["id"]), str(item["memory"]), 0.0, dict(item.get("metadata") or {}))
            for item in found if item is not None
        ]

    def forget(self, record_id: str) -> bool:
        """``Memory.delete`` (:class:`~.base.Forgetting`); False for an id Mem0 does not hold."""
        self._check_open()
        with self._lock:
            if not isinstance(record_id, str) or record_id not in _live_in_creation_order(self._journal):
                return False
            self._delete(record_id)
        return True

    def reset(self) -> None:
        self._check_open()
        with self._lock, quiet_resets():
            self._drop_storage_reader()
            self._memory.reset()
            without_fsync(self._memory)
            self._journal, self._history_rowid = [], 0

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._release()
            finally:
                self._lock_file.close()

    def tools(self) -> Sequence[Tool]:
        """Mem0's operations, under their own names, answering with Mem0's own results."""

        def add(arguments: Mapping[str, Any]) -> str:
            messages = require_string(arguments, "messages", "add")
            self._check_tool_text(messages, "add")
            return json.dumps(self._add(messages, None), ensure_ascii=False, default=str)

        def search(arguments: Mapping[str, Any]) -> str:
            query = require_string(arguments, "query", "search")
            return json.dumps(self._search(query, self.default_top_k), ensure_ascii=False, default=str)

        def delete(arguments: Mapping[str, Any]) -> str:
            memory_id = require_string(arguments, "memory_id", "delete")
            try:
                outcome = self._delete(memory_id)
            except ValueError as error:  # Mem0: "Memory with id ... not found"
                raise ToolArgumentError(f"delete: {error}") from None
            return json.dumps(outcome, ensure_ascii=False, default=str)

        return [
            MemoryTool(ADD_SPEC, add, "retain"),
            MemoryTool(SEARCH_SPEC, search, "recall", read_search_result),
            MemoryTool(DELETE_SPEC, delete, "forget"),
        ]

    def __len__(self) -> int:
        self._check_open()
        with self._lock:
            return int(self._memory.vector_store.client.count(COLLECTION, exact=True).count)

    # ------------------------------------------------------------------ Mem0 calls

    def _add(self, messages: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
        self._check_open()
        with self._lock:
            try:
                result: dict[str, Any] = self._memory.add(messages, agent_id=AGENT_ID, metadata=metadata, infer=self.infer)
            finally:
                if self._meter is not None:
                    self._meter.raise_refusal()  # Mem0 logs and swallows a failed extraction
            events = [(str(item.get("event")), str(item["id"])) for item in result["results"] if "id" in item]
            self._journal_writes(events)
            if not any(event in ("ADD", "UPDATE") for event, _ in events):
                # with infer, Mem0's LLM found no new fact (or gave a reply Mem0 could not
                # read): nothing was stored, and Mem0 says so only in its own log
                self.unstored_retains += 1
        return result

    def _delete(self, memory_id: str) -> dict[str, Any]:
        self._check_open()
        with self._lock:
            outcome: dict[str, Any] = self._memory.delete(memory_id)
            self._journal_writes([("DELETE", memory_id)])
        return outcome

    def _search(self, query: str, top_k: int) -> dict[str, Any]:
        self._check_open()
        if not has_words(query, self._embedder) or top_k < 1:
            return {"results": []}  # Mem0 refuses a blank query; nothing is similar to "?!"
        with self._lock:
            result: dict[str, Any] = self._memory.search(
                query, top_k=top_k, filters={"agent_id": AGENT_ID}, threshold=self.search_threshold
            )
        return result

    # ------------------------------------------------------------------ resume

    def _journal_writes(self, events: Sequence[tuple[str, str]]) -> None:
        """Append what one add or delete did to the journal that snapshots are made of,
        in Mem0's order: each new or updated point as Qdrant stored it (its original
        vectors — Qdrant normalises cosine vectors in memory, and normalising twice is
        not exact — and payload), each deletion (``delete``, or Mem0's extraction
        deciding a memory is obsolete), and the history rows Mem0 wrote."""
        stored = [memory_id for event, memory_id in events if event in ("ADD", "UPDATE")]
        points = self._stored_points(stored) if stored else {}
        for event, memory_id in events:
            if event in ("ADD", "UPDATE"):
                self._journal.append({"op": event.lower(), "point": points[memory_id]})
            elif event == "DELETE":
                # "memory_id", not "id": a journal entry's "id" is its place in the record log
                self._journal.append({"op": "delete", "memory_id": memory_id})
        database = self._memory.db
        with database._lock:
            columns = [row[1] for row in database.connection.execute("PRAGMA table_info(history)")]
            rows = database.connection.execute(
                f"SELECT rowid, {', '.join(columns)} FROM history WHERE rowid > ? ORDER BY rowid", (self._history_rowid,)
            ).fetchall()
        for rowid, *values in rows:
            self._journal.append({"op": "history", "row": dict(zip(columns, values, strict=True))})
            self._history_rowid = rowid

    def snapshot(self, directory: Path) -> None:
        """Bring ``directory`` up to date with the journal (a :class:`RecordLog`: only
        what was written since the directory's last snapshot is appended), with the
        last few messages Mem0 keeps for its extraction prompt beside it.

        Restoring the journal gives Qdrant its points in the same order, deleted ones
        deleted again (Qdrant keeps a deleted point's row, and scores come out bit
        for bit only from the same rows), and the history database its rows.
        """
        self._check_open()
        with self._lock:
            database = self._memory.db
            with database._lock:
                columns = [row[1] for row in database.connection.execute("PRAGMA table_info(messages)")]
                messages = [
                    dict(zip(columns, row, strict=True))
                    for row in database.connection.execute(f"SELECT {', '.join(columns)} FROM messages ORDER BY rowid")
                ]
            self._save_journal(directory, {"messages": messages})

    def restore(self, directory: Path) -> None:
        """Empty the store and replay the snapshot's journal into it, in order."""
        self._check_open()
        events, state = self._load_journal(directory)
        with self._lock, quiet_resets():
            self._drop_storage_reader()
            self._memory.reset()
            without_fsync(self._memory)
            client = self._memory.vector_store.client
            models = _qdrant_models()
            # Points first, in the order they were added (Qdrant's storage order, which
            # ranks ties), then the updates (in place: an upsert keeps a point's row),
            # then the deletions (Qdrant keeps a deleted point's row as well).
            points = [event["point"] for event in events if event["op"] == "add"]
            points += [event["point"] for event in events if event["op"] == "update"]
            for start in range(0, len(points), 256):
                client.upsert(COLLECTION, points=[
                    models.PointStruct(id=point["id"], vector=_decode_vectors(point["vectors"]), payload=point["payload"])
                    for point in points[start:start + 256]
                ])
            deleted = [event["memory_id"] for event in events if event["op"] == "delete"]
            if deleted:
                client.delete(COLLECTION, points_selector=models.PointIdsList(points=deleted))
            history = [event["row"] for event in events if event["op"] == "history"]
            self._insert_rows("history", history)
            self._insert_rows("messages", state.get("messages") or [])
            self._replayed(events)
            database = self._memory.db
            with database._lock:
                row = database.connection.execute("SELECT max(rowid) FROM history").fetchone()
            self._history_rowid = int(row[0] or 0)

    def _stored_points(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The points with these ids as Qdrant's storage file holds them: as they were
        given (only this store ever wrote the file, in this run directory)."""
        from qdrant_client.local.persistence import CollectionPersistence
        from qdrant_client.local.utils import normalize_point_id

        storage = self.directory / "qdrant" / "collection" / COLLECTION / "storage.sqlite"
        keys = {CollectionPersistence.encode_key(normalize_point_id(memory_id)): memory_id for memory_id in ids}
        try:
            if self._storage_reader is None:  # one read-only connection while the store lives (reset drops it)
                self._storage_reader = sqlite3.connect(f"file:{storage}?mode=ro", uri=True, check_same_thread=False)
            rows = self._storage_reader.execute(
                f"SELECT id, point FROM points WHERE id IN ({', '.join('?' * len(keys))})", list(keys)
            ).fetchall()
        except sqlite3.Error as error:
            raise MemoryBackendError(f"mem0 memory: could not read Qdrant's storage {storage}: {error}") from None
        points = {}
        for key, blob in rows:
            point = pickle.loads(blob)  # Qdrant's own storage format, written by this store
            points[keys[key]] = {"id": str(point.id), "vectors": _encode_vectors(point.vector), "payload": point.payload}
        missing = [memory_id for memory_id in ids if memory_id not in points]
        if missing:
            raise MemoryBackendError(f"mem0 memory: Qdrant's storage {storage} does not hold the points Mem0 just added: {missing}")
        return points

    def _insert_rows(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        database = self._memory.db
        with database._lock:
            connection = database.connection
            known = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
            columns = list(rows[0])
            if not set(columns) <= known:
                raise MemoryBackendError(
                    f"mem0 memory snapshot: table {table!r} has columns this Mem0 version does not "
                    f"({sorted(set(columns) - known)}); resume with the Mem0 version that wrote it"
                )
            try:
                connection.execute("BEGIN")
                connection.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [[row[column] for column in columns] for row in rows],
                )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise

    # ------------------------------------------------------------------ helpers

    def _drop_storage_reader(self) -> None:
        if self._storage_reader is not None:
            self._storage_reader.close()
            self._storage_reader = None

    def _release(self) -> None:
        self._drop_storage_reader()
        memory = getattr(self, "_memory", None)
        if memory is None:
            return
        memory.close()
        client = getattr(memory.vector_store, "client", None)
        if client is not None:
            client.close()  # releases Qdrant's lock on the directory

    def _described(self) -> str:
        return f"mem0 memory {str(self.directory)!r}"


ADD_SPEC = text_tool_spec(
    "add",
    "Mem0 add: store a memory for later tasks of this stream (e.g. the task, your answer and the "
    "correct answer). Depending on the memory's configuration Mem0 stores the text as given, or its "
    "LLM extracts the facts worth keeping from it. Returns the memories Mem0 added.",
    "messages", "The text to remember.",
)
SEARCH_SPEC = text_tool_spec(
    "search",
    "Mem0 search: find the stored memories most similar to the query, most similar first, "
    "with their ids and scores.",
    "query", "What to look for.",
)
DELETE_SPEC = text_tool_spec(
    "delete",
    "Mem0 delete: remove one stored memory by its id (as search returned it), e.g. one that misled you.",
    "memory_id", "The id of the memory to delete.",
)


def read_search_result(result: str) -> list[SeenRecord] | None:
    """The (id, memory) records of Mem0's ``{"results": [...]}`` (for the isolation guard)."""
    try:
        value = boundedread.loads(result, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except (TypeError, ValueError):
        return None
    items = value.get("results") if isinstance(value, dict) else None
    if not isinstance(items, list) or not all(isinstance(item, dict) and isinstance(item.get("memory"), str) for item in items):
        return None
    return [(None if item.get("id") is None else str(item["id"]), item["memory"]) for item in items]


def _live_in_creation_order(journal: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids of the memories the journal leaves in the store, oldest first."""
    live: dict[str, None] = {}
    for event in journal:
        if event["op"] == "add":
            live[str(event["point"]["id"])] = None
        elif event["op"] == "delete":
            live.pop(str(event["memory_id"]), None)
    return list(live)


def _encode_vectors(vector: Any) -> dict[str, Any]:
    """A point's vectors for JSON: dense ones as base64 float64 (exact), sparse ones as lists."""
    named = vector if isinstance(vector, Mapping) else {"": vector}
    encoded: dict[str, Any] = {}
    for name, value in named.items():
        if isinstance(value, list):
            encoded[name] = {"dense": encode_floats(value)}
        else:  # a sparse vector
            encoded[name] = {"sparse": {"indices": list(value.indices), "values": list(value.values)}}
    return encoded


def _decode_vectors(encoded: Mapping[str, Any]) -> dict[str, Any]:
    models = _qdrant_models()
    decoded: dict[str, Any] = {}
    for name, value in encoded.items():
        if "dense" in value:
            decoded[name] = decode_floats(value["dense"])
        else:
            decoded[name] = models.SparseVector(indices=value["sparse"]["indices"], values=value["sparse"]["values"])
    return decoded


def _qdrant_models() -> Any:
    from qdrant_client import models

    return models


def _store_locations(memory: MemoryConfig, context: MemoryContext) -> list[str]:
    return [str(store_path(memory, context).resolve())]


BACKEND = MemoryBackend(
    NAME, open=open_mem0_memory, options=Mem0Options, extra="mem0", requires=("mem0", "qdrant_client"),
    locations=_store_locations, location_kind="directory", check=check_mem0_config, own_model_calls=infer_calls(Mem0Options, NAME),
    concurrent=False,  # a library with process-wide state: its chains run one at a time
    own_model_price=metered_price(Mem0Options, NAME),
)


__all__ = ["BACKEND", "Mem0Memory", "Mem0Options", "check_mem0_config", "import_mem0", "open_mem0_memory", "store_path"]
