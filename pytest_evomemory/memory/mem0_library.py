"""Mem0 the library, made offline, quiet and quick to open for a benchmark run.

:mod:`.mem0` is the backend (what the benchmark sees of Mem0's ``Memory``); this
module is what it takes to build that ``Memory`` the way a run needs it: Mem0
imported with its telemetry and model downloads off, the clients it would build
and never use not built, this package's embedder in place of Mem0's, its chat
client metered under a cost cap, no fsync per write in a store that resume never
reads, and no warning per stream teardown.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..core.errors import MemoryBackendError
from .base import ModelMeter
from .embedders import Embedder
from .libraries import ResolvedChat, metered_client


class PackageEmbedding:
    """Mem0's embedding-model interface (``embed``, ``embed_batch``) over this
    package's embedder: the bundled MiniLM is loaded once per process, not once
    per stream, and never from the network."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

        class _Config:
            embedding_dims = embedder.dim

        self.config = _Config()

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return [float(value) for value in self.embedder.embed([text])[0]]

    def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
        return [[float(value) for value in row] for row in self.embedder.embed(list(texts))]


def metered_openai_client(chat: ResolvedChat, meter: ModelMeter) -> Any:
    """The OpenAI client Mem0's LLM is built with, sending through ``meter``: the same
    key and endpoint, an ``httpx.Client`` with the metering transport."""
    from openai import OpenAI

    return OpenAI(api_key=chat.api_key, base_url=chat.base_url, http_client=metered_client(meter))


_OPEN_LOCK = threading.Lock()


class _UnusedLLM:
    """Mem0's LLM when ``infer`` is off: Mem0 never calls it, and says so if it does."""

    def generate_response(self, *args: Any, **kwargs: Any) -> Any:
        raise MemoryBackendError("mem0 memory: Mem0 called its LLM although mem0.infer is false")


@contextmanager
def unused_clients_not_built(embedding: PackageEmbedding | None, *, llm_unused: bool) -> Iterator[None]:
    """While Mem0's ``Memory`` is built: the clients it would build and this backend
    never uses are not built. Mem0 makes an OpenAI client for its LLM and one for its
    embedder (each loading the system's TLS certificates, about 0.1 s, a third of a
    store's opening); with ``infer: false`` the LLM is never called, and with this
    package's embedder the embedder is replaced at once. The factories Mem0's
    ``main`` module looks up are swapped for the duration, under a lock."""
    import mem0.memory.main as main

    llm_factory, embedder_factory = main.LlmFactory, main.EmbedderFactory

    class _Llms:
        @staticmethod
        def create(*args: Any, **kwargs: Any) -> Any:
            return _UnusedLLM() if llm_unused else llm_factory.create(*args, **kwargs)

    class _Embedders:
        @staticmethod
        def create(*args: Any, **kwargs: Any) -> Any:
            return embedding if embedding is not None else embedder_factory.create(*args, **kwargs)

    with _OPEN_LOCK:
        main.LlmFactory, main.EmbedderFactory = _Llms, _Embedders
        try:
            yield
        finally:
            main.LlmFactory, main.EmbedderFactory = llm_factory, embedder_factory


def without_fsync(memory: Any) -> None:
    """No fsync per write in the store's SQLite files (Qdrant's point storage, Mem0's
    history): the live store is emptied when a stream opens it, and resume restores
    a snapshot, never these files, so durability buys nothing there — and two
    fsyncs per ``add`` made it about 50 times slower. Reached through Qdrant's local
    client internals; where they differ, the store just stays slower."""
    connections = [getattr(memory.db, "connection", None)]
    local = getattr(memory.vector_store.client, "_client", None)
    for collection in (getattr(local, "collections", None) or {}).values():
        storage = getattr(collection, "storage", None)
        connections.append(getattr(storage, "storage", None))
    for connection in connections:
        if isinstance(connection, sqlite3.Connection):
            connection.execute("PRAGMA synchronous=OFF")


_IMPORT_LOCK = threading.Lock()


def import_mem0() -> Any:
    """The ``mem0`` package with its telemetry off and no model downloads.

    ``MEM0_TELEMETRY`` is read when Mem0 is imported, so it is set first (for
    this process: a benchmark's memory must not report to anyone); a Mem0 that
    was imported before with telemetry on is switched off as well. spaCy's
    entity and lemma models are marked unavailable, so Mem0 never tries to
    download ``en_core_web_sm`` mid-run, keeps no entity collection beside the
    memories (which a snapshot would have to hold too) and ranks the same
    whether or not spaCy happens to be installed.
    """
    with _IMPORT_LOCK:
        os.environ["MEM0_TELEMETRY"] = "False"
        try:
            import mem0
            import mem0.memory.main as main
            import mem0.memory.telemetry as telemetry
            import mem0.utils.spacy_models as spacy_models
        except ImportError as error:
            raise MemoryBackendError(
                f"backend 'mem0' needs the mem0 extra: pip install 'pytest-evomemory[mem0]' ({error})"
            ) from None
        telemetry.MEM0_TELEMETRY = False
        main.MEM0_TELEMETRY = False
        spacy_models._load_failed_full = True
        spacy_models._load_failed_lemma = True
        return mem0


class _DropResetNotices(logging.Filter):
    """Mem0 logs every reset as a warning; a stream teardown is not worth one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Resetting", "Deleting"))


class quiet_resets:
    """While Mem0 resets a store, its "Resetting ..." warnings are dropped."""

    _LOGGERS = ("mem0.memory.main", "mem0.vector_stores.qdrant")
    _filter = _DropResetNotices()

    def __enter__(self) -> None:
        for name in self._LOGGERS:
            logging.getLogger(name).addFilter(self._filter)

    def __exit__(self, *exc_info: object) -> None:
        for name in self._LOGGERS:
            logging.getLogger(name).removeFilter(self._filter)


__all__ = [
    "PackageEmbedding",
    "import_mem0",
    "metered_openai_client",
    "quiet_resets",
    "unused_clients_not_built",
    "without_fsync",
]
