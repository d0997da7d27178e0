"""LangMem as the memory under test: LangGraph's in-memory store with LangMem's tools.

``memory: {backend: langmem, langmem: {...}}`` (docs/memory.md, "LangMem") gives
every stream its own LangGraph ``InMemoryStore`` (a semantic index over each
memory's ``content``) and LangMem's own operations on it:

* a ``tool_use`` agent is given LangMem's tools under their own names,
  ``manage_memory`` (create, update or delete a memory) and ``search_memory``,
  built by ``create_manage_memory_tool`` / ``create_search_memory_tool`` and
  answering with LangMem's own text;
* ``recall`` is the store search those tools run; ``retain`` stores the text as
  ``manage_memory`` would (``infer: false``, the metadata kept beside it) or
  hands it to LangMem's memory manager (``create_memory_store_manager``), whose
  LLM decides what to insert, update or delete (``infer: true``);
* ``ingest`` (LoCoMo) retains one memory per turn with the turn's metadata, as
  the built-in backends do (with ``infer`` each turn goes to the memory manager,
  whose memories keep no metadata).

The store lives in the process, so a stream's memory is gone when it closes;
resume goes through :meth:`LangMemMemory.snapshot`, which appends to a record log
(:class:`~.snapshot.RecordLog`) what the store was written since the last
snapshot — every item put (value, timestamps, vectors) or deleted, in order, by
``retain``, LangMem's tools or its memory manager alike — and
:meth:`LangMemMemory.restore`, which replays it, so searches after a resume rank
and score exactly as before. A snapshot costs what was written since the last one,
not the whole store.
LangSmith tracing is off for every call (nothing leaves the machine).
"""

from __future__ import annotations

import json
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import SecretStr

from ..config import MemoryConfig, ModelConfig
from ..core import boundedread
from ..core.errors import MemoryBackendError
from ..core.tools import Tool, ToolArgumentError, require_string
from ..core.types import MemoryHit, ToolSpec
from .base import MemoryBackend, MemoryContext
from .embedders import Embedder
from .guard import SeenRecord
from .libraries import (
    NO_KEY,
    EmbeddingsEndpoint,
    LibraryClients,
    LibraryMemory,
    LibraryOptions,
    check_library_options,
    decode_floats,
    encode_floats,
    has_words,
    infer_calls,
    library_clients,
    metered_client,
    metered_price,
)
from .tools import MemoryTool

NAME = "langmem"
#: Each stream has a store of its own; one namespace in it holds the memories.
NAMESPACE = ("memories", "evomemory")
#: The value fields the store's index embeds: the memory, not its metadata.
INDEXED_FIELDS = ["content"]

_T = TypeVar("_T")


class LangMemOptions(LibraryOptions):
    """``memory.langmem``: the settings of backend ``langmem`` (docs/memory.md)."""

    SECTION = "langmem"


def check_langmem_config(memory: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
    """What is knowable before a stream opens (the backend's ``check``; the extra
    itself is checked from ``requires``): the embedder, the endpoints and their keys."""
    options = memory.section(LangMemOptions)
    check_library_options(memory, options, agent_model, NAME, source)


def open_langmem_memory(memory: MemoryConfig, context: MemoryContext) -> LangMemMemory:
    """The ``langmem`` backend for one stream (the backend's opener; the store lives in the process)."""
    source = "memory config"
    check_langmem_config(memory, context.agent_model, source)
    options = memory.section(LangMemOptions)
    return LangMemMemory(
        library_clients(memory, options, context, NAME, source), default_top_k=memory.top_k, infer=options.infer
    )


class LangMemMemory(LibraryMemory):
    """One stream's LangGraph store and LangMem tools behind the MemorySystem protocol."""

    KIND = NAME

    def __init__(self, clients: LibraryClients, *, default_top_k: int = 4, infer: bool = False) -> None:
        super().__init__(clients, default_top_k=default_top_k, infer=infer)
        self._libraries = import_langmem()
        embedder, endpoint = clients.embedder, clients.endpoint
        self._embeddings = (
            _package_embeddings(embedder) if embedder is not None else _endpoint_embeddings(endpoint, self._endpoint_api_key)
        )
        self._dims = embedder.dim if embedder is not None else _endpoint_dims(endpoint, self._embeddings)
        self._open_store()

    def _open_store(self) -> None:
        """A fresh store, with LangMem's tools (and, with ``infer``, its memory manager) bound to it."""
        lib = self._libraries
        self._store: Any = lib.InMemoryStore(
            index={"dims": self._dims, "embed": self._embeddings, "fields": INDEXED_FIELDS}, on_write=self._written
        )
        if not (isinstance(getattr(self._store, "_data", None), dict) and isinstance(getattr(self._store, "_vectors", None), dict)):
            raise MemoryBackendError(
                "langmem memory: this langgraph version's InMemoryStore keeps its items differently than the one "
                "this backend was built for (langgraph 1.x); install the versions the langmem extra pins"
            )
        #: Every write to the store, in order (see :meth:`_journal_writes`): what snapshots are made of.
        self._journal = []
        self._manage_tool = lib.create_manage_memory_tool(NAMESPACE, store=self._store)
        self._search_tool = lib.create_search_memory_tool(NAMESPACE, store=self._store)
        self._manager = None
        if self.infer:
            chat = self._chat
            assert chat is not None
            metered: dict[str, Any] = {}
            if self._meter is not None:
                metered["http_client"] = metered_client(self._meter)
            model = lib.ChatOpenAI(
                model=chat.model, base_url=chat.base_url, api_key=SecretStr(chat.api_key),
                temperature=chat.temperature, max_completion_tokens=chat.max_tokens, **metered,
            )
            self._manager = lib.create_memory_store_manager(model, namespace=NAMESPACE, store=self._store)

    # ------------------------------------------------------------------ protocol

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store ``content`` as ``manage_memory`` would (its key is the id), or, with
        ``infer``, let LangMem's memory manager turn it into memories (the first
        key it wrote; "" when it wrote none). Metadata is kept only without ``infer``."""
        self._check_open()
        self._check_text(content, "retain")
        if self._manager is not None:
            with self._lock, _untraced():
                # One worker: the manager writes in a thread pool, and the order of
                # the writes is the store's order, which must not vary between runs.
                try:
                    written = self._manager.invoke(
                        {"messages": [{"role": "user", "content": content}]}, config={"max_concurrency": 1}
                    )
                finally:
                    if self._meter is not None:
                        self._meter.raise_refusal()  # whatever LangChain made of it
            if not written:
                self.unstored_retains += 1  # the memory manager wrote nothing (SelectiveStore)
            return next((str(put["key"]) for put in written), "")
        key = str(uuid.uuid4())
        value: dict[str, Any] = {"content": content}
        if metadata:
            value["metadata"] = json.loads(json.dumps(dict(metadata), default=str))
        with self._lock, _untraced():
            self._store.put(NAMESPACE, key, value)
        return key

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        """The store search ``search_memory`` runs, most similar first."""
        self._check_open()
        limit = self._limit(top_k)
        if not has_words(query, self._embedder) or limit < 1:
            return []
        with self._lock, _untraced():
            items = self._store.search(NAMESPACE, query=query, limit=limit)
        return [
            MemoryHit(item.key, memory_text(item.value), float(item.score or 0.0), dict(item.value.get("metadata") or {}))
            for item in items
        ]

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The ``limit`` memories created last, newest first (:class:`~.base.RecencyRecall`).

        Exact: the store keeps its items in a dict in the order they were first put
        (an update by ``manage_memory`` or the memory manager keeps the item's place;
        a deletion removes it), and a restore replays the writes in that order.
        """
        self._check_open()
        count = self._recent_limit(limit)
        with self._lock:
            items = list(self._store._data.get(NAMESPACE, {}).values())[::-1][:count]
        return [MemoryHit(item.key, memory_text(item.value), 0.0, dict(item.value.get("metadata") or {})) for item in items]

    def forget(self, record_id: str) -> bool:
        """Delete one memory by key, as ``manage_memory``'s delete does (:class:`~.base.Forgetting`)."""
        self._check_open()
        with self._lock, _untraced():
            if not isinstance(record_id, str) or record_id not in self._store._data.get(NAMESPACE, {}):
                return False
            self._store.delete(NAMESPACE, record_id)
        return True

    def reset(self) -> None:
        self._check_open()
        with self._lock:
            self._open_store()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._store = None
            self._manager = None

    def tools(self) -> Sequence[Tool]:
        """LangMem's ``manage_memory`` and ``search_memory``, answering with LangMem's text."""

        def manage(arguments: Mapping[str, Any]) -> str:
            content = arguments.get("content")
            if isinstance(content, str):
                self._check_tool_text(content, "manage_memory")
            return self._call_tool(lambda: self._manage_tool.invoke(dict(arguments)), "manage_memory")

        def search(arguments: Mapping[str, Any]) -> str:
            query = require_string(arguments, "query", "search_memory")
            if not has_words(query, self._embedder):
                return "[]"
            return self._call_tool(
                lambda: self._search_tool.invoke({"query": query, "limit": self.default_top_k}), "search_memory"
            )

        return [
            MemoryTool(_manage_spec(self._manage_tool), manage, "retain"),
            MemoryTool(_search_spec(self._search_tool), search, "recall", read_search_result),
        ]

    def __len__(self) -> int:
        self._check_open()
        return len(self._store._data.get(NAMESPACE, {}))

    def _call_tool(self, call: Callable[[], _T], name: str) -> str:
        self._check_open()
        try:
            with self._lock, _untraced():
                result = call()
        except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
            raise ToolArgumentError(f"{name}: {error}") from None
        return result if isinstance(result, str) else json.dumps(result, default=str)

    # ------------------------------------------------------------------ resume

    def _written(self, ops: Sequence[Any]) -> None:
        """The store's write hook (:class:`_Libraries`' store calls it after every
        ``batch``, which ``put`` and ``delete`` go through, whoever calls them)."""
        put_op = self._libraries.PutOp
        self._journal_writes([str(op.key) for op in ops if isinstance(op, put_op) and tuple(op.namespace) == NAMESPACE])

    def _journal_writes(self, keys: Sequence[str]) -> None:
        """Append what the store now holds under each key just written: the item as
        stored (value, timestamps, vectors exact as base64 float64) or its deletion."""
        if not keys:
            return
        items = self._store._data.get(NAMESPACE, {})
        vectors = self._store._vectors.get(NAMESPACE, {})
        for key in dict.fromkeys(keys):
            item = items.get(key)
            if item is None:
                self._journal.append({"op": "delete", "key": key})
                continue
            self._journal.append({
                "op": "put", "key": key, "value": json.loads(json.dumps(item.value, default=str)),
                "created_at": item.created_at.isoformat(), "updated_at": item.updated_at.isoformat(),
                "vectors": {path: encode_floats(vector) for path, vector in vectors.get(key, {}).items()},
            })

    def snapshot(self, directory: Path) -> None:
        """Bring ``directory`` up to date with the journal (a :class:`RecordLog`: only
        the writes since the directory's last snapshot are appended)."""
        self._check_open()
        with self._lock:
            self._save_journal(directory, {})

    def restore(self, directory: Path) -> None:
        """Empty the store and replay the snapshot's writes into it, in order."""
        self._check_open()
        events, _ = self._load_journal(directory)
        item_class = self._libraries.Item
        with self._lock:
            self._open_store()
            data, vectors = self._store._data, self._store._vectors
            for event in events:
                key = str(event["key"])
                if event["op"] == "delete":
                    data[NAMESPACE].pop(key, None)
                    vectors[NAMESPACE].pop(key, None)
                    continue
                for field, vector in event["vectors"].items():  # the store inserts vectors first
                    vectors[NAMESPACE][key][field] = decode_floats(vector)
                data[NAMESPACE][key] = item_class(
                    value=event["value"], key=key, namespace=NAMESPACE,
                    created_at=datetime.fromisoformat(event["created_at"]),
                    updated_at=datetime.fromisoformat(event["updated_at"]),
                )
            self._replayed(events)


def memory_text(value: Mapping[str, Any]) -> str:
    """The text of a stored memory: ``manage_memory`` stores ``{"content": text}``,
    the memory manager ``{"kind": "Memory", "content": {"content": text}}``."""
    content = value.get("content")
    if isinstance(content, Mapping) and isinstance(content.get("content"), str):
        return str(content["content"])
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


def read_search_result(result: str) -> list[SeenRecord] | None:
    """The (key, text) records of ``search_memory``'s JSON list of items (for the isolation guard)."""
    try:
        value = boundedread.loads(result, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except (TypeError, ValueError):
        return None
    if not isinstance(value, list) or not all(isinstance(item, dict) and isinstance(item.get("value"), dict) for item in value):
        return None
    return [(None if item.get("key") is None else str(item["key"]), memory_text(item["value"])) for item in value]


def _manage_spec(tool: Any) -> ToolSpec:
    """``manage_memory`` as LangMem declares it (name, description, arguments)."""
    schema = _clean_schema(tool.tool_call_schema.model_json_schema())
    return ToolSpec(name=tool.name, description=tool.description, parameters=schema)


def _search_spec(tool: Any) -> ToolSpec:
    """``search_memory`` as LangMem declares it, with the query alone: how many
    memories come back is the memory config's ``top_k``, not the model's choice."""
    schema = _clean_schema(tool.tool_call_schema.model_json_schema())
    query = schema["properties"]["query"]
    parameters = {"type": "object", "properties": {"query": query}, "required": ["query"], "additionalProperties": False}
    return ToolSpec(name=tool.name, description=tool.description, parameters=parameters)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema as a tool's ``parameters`` (no titles, no top-level description)."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: strip(value) for key, value in node.items() if key != "title"}
        if isinstance(node, list):
            return [strip(value) for value in node]
        return node

    cleaned: dict[str, Any] = strip(schema)
    cleaned.pop("description", None)
    return cleaned


def _package_embeddings(embedder: Embedder) -> Callable[[Sequence[str]], list[list[float]]]:
    """The store's ``embed`` function over this package's embedder (loaded once per process)."""

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[float(value) for value in row] for row in embedder.embed(list(texts))]

    return embed


def _endpoint_embeddings(endpoint: EmbeddingsEndpoint | None, api_key: str | None) -> Any:
    """LangChain's OpenAI embeddings client for an OpenAI-compatible endpoint.

    ``check_embedding_ctx_length=False`` sends the texts as they are: with the
    check on, the client tokenises with tiktoken, which downloads its encoding
    from the internet on first use.
    """
    assert endpoint is not None
    from langchain_openai import OpenAIEmbeddings

    return OpenAIEmbeddings(
        model=endpoint.model, base_url=endpoint.base_url, api_key=SecretStr(api_key or NO_KEY),
        check_embedding_ctx_length=False,
    )


def _endpoint_dims(endpoint: EmbeddingsEndpoint | None, embeddings: Any) -> int:
    assert endpoint is not None
    if endpoint.dims is not None:
        return endpoint.dims
    try:
        return len(embeddings.embed_query("dimension probe"))
    except Exception as error:
        raise MemoryBackendError(
            f"langmem memory: the embeddings endpoint {endpoint.base_url} (model {endpoint.model!r}) did not "
            f"answer a first request: {type(error).__name__}: {error}; check langmem.embeddings, or set "
            "langmem.embeddings.dims"
        ) from None


@contextmanager
def _untraced() -> Iterator[None]:
    """No LangSmith tracing, whatever LANGSMITH_TRACING says: runs must not leave the machine.

    LangSmith's ``tracing_context`` costs about 75 µs (it sets a dozen context
    variables), four times a task; when tracing is not enabled at all (no variable, no
    enclosing context: ``tracing_is_enabled()``, 13 µs) there is nothing to turn off."""
    from langsmith import tracing_context
    from langsmith.utils import tracing_is_enabled

    if not tracing_is_enabled():
        yield
        return
    with tracing_context(enabled=False):
        yield


class _Libraries:
    """The LangChain/LangGraph/LangMem names this backend uses, imported once."""

    def __init__(self) -> None:
        try:
            with warnings.catch_warnings():
                # trustcall (LangMem's extraction library) imports a name LangGraph 1.x
                # deprecated; that is for LangMem to fix, not for a benchmark run to show.
                warnings.simplefilter("ignore", DeprecationWarning)
                from langchain_openai import ChatOpenAI
                from langgraph.store.base import Item, PutOp
                from langgraph.store.memory import InMemoryStore
                from langmem import (
                    create_manage_memory_tool,
                    create_memory_store_manager,
                    create_search_memory_tool,
                )
        except ImportError as error:
            raise MemoryBackendError(
                f"backend 'langmem' needs the langmem extra: pip install 'pytest-evomemory[langmem]' ({error})"
            ) from None
        self.ChatOpenAI = ChatOpenAI
        self.Item = Item
        self.PutOp = PutOp
        self.InMemoryStore = _journalled(InMemoryStore)
        self.create_manage_memory_tool = create_manage_memory_tool
        self.create_memory_store_manager = create_memory_store_manager
        self.create_search_memory_tool = create_search_memory_tool


def _journalled(store_class: Any) -> Any:
    """LangGraph's InMemoryStore telling its owner, after every ``batch`` (the one door
    of ``put`` and ``delete``), which operations it ran: the backend's journal."""

    class JournalledStore(store_class):  # type: ignore[misc]
        def __init__(self, *, on_write: Callable[[Sequence[Any]], None], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.on_write = on_write

        def batch(self, ops: Any) -> Any:
            ops = list(ops)
            result = super().batch(ops)
            self.on_write(ops)
            return result

        async def abatch(self, ops: Any) -> Any:
            ops = list(ops)
            result = await super().abatch(ops)
            self.on_write(ops)
            return result

    return JournalledStore


_LIBRARIES: list[_Libraries] = []
_IMPORT_LOCK = threading.Lock()


def import_langmem() -> _Libraries:
    with _IMPORT_LOCK:
        if not _LIBRARIES:
            _LIBRARIES.append(_Libraries())
        return _LIBRARIES[0]


BACKEND = MemoryBackend(
    NAME, open=open_langmem_memory, options=LangMemOptions, extra="langmem",
    requires=("langmem", "langgraph", "langchain_openai"), check=check_langmem_config,
    own_model_calls=infer_calls(LangMemOptions, NAME),
    concurrent=False,  # a library with process-wide state: its chains run one at a time
    own_model_price=metered_price(LangMemOptions, NAME),
)


__all__ = ["BACKEND", "LangMemMemory", "LangMemOptions", "check_langmem_config", "import_langmem", "open_langmem_memory"]
