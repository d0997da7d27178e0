"""Build the memory system for one stream from the memory config.

Each stream gets its own, fresh memory system: persistence across streams would
let one stream's experiences leak into another's score.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import MemoryConfig
from ..errors import EvoMemoryError, MemoryBackendError
from ..factories import load_factory, user_frames
from .base import Forgetting, MemorySystem
from .tools import EDITING_TOOLS_ATTRIBUTE


@dataclass(frozen=True)
class MemoryContext:
    """Where a memory system lives: its stream and the run's output directory."""

    stream: str
    run_dir: Path
    run_name: str


MemoryFactory = Callable[[MemoryConfig, MemoryContext], MemorySystem]


def _inprocess(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    from .inprocess import InProcessMemory  # numpy: imported by the processes that use it

    return InProcessMemory(default_top_k=config.top_k)


def _sqlite(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    from .sqlite import open_sqlite_memory

    return open_sqlite_memory(config, context)


def _postgres(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    from .postgres import open_postgres_memory

    return open_postgres_memory(config, context)


def _dense(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    from .dense import DenseMemory
    from .embedders import SentenceTransformerEmbedder, build_embedder

    # Embeddings are the whole point of this backend: without an ``embedder`` it uses
    # sentence-transformers (the bundled all-MiniLM-L6-v2 unless embedder_model says).
    embedder = build_embedder(config) or SentenceTransformerEmbedder(config.embedder_model)
    return DenseMemory(embedder, default_top_k=config.top_k)


BUILTIN_BACKENDS: dict[str, MemoryFactory] = {
    "inprocess": _inprocess,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "dense": _dense,
}


def build_memory(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    """Open the configured backend for ``context.stream``; failures name the backend."""
    factory = BUILTIN_BACKENDS.get(config.backend) or load_factory(config.backend, "memory")
    try:
        memory = factory(config, context)
    except EvoMemoryError:
        raise
    except Exception as error:  # a third-party backend failing to open
        raise MemoryBackendError(
            f"memory backend {config.backend!r} could not be opened for stream "
            f"{context.stream!r}: {type(error).__name__}: {error}{user_frames(error)}"
        ) from error
    if not isinstance(memory, MemorySystem):
        raise MemoryBackendError(
            f"memory backend {config.backend!r} returned {type(memory).__name__}, which "
            "does not implement the MemorySystem protocol (retain, recall, reset, close, "
            "tools, default_top_k)"
        )
    if config.editing_tools and config.backend in BUILTIN_BACKENDS:
        enable_editing_tools(memory, config.backend)
    return memory


def enable_editing_tools(memory: MemorySystem, name: str) -> None:
    """Have a built-in backend's tools include ``forget`` and ``update`` (ReMem's
    refine-memory operations); the backend must be able to forget records."""
    if not isinstance(memory, Forgetting):
        raise MemoryBackendError(
            f"memory backend {name!r} cannot forget records, so it cannot offer editing tools; "
            "remove 'editing_tools' from the memory config"
        )
    setattr(memory, EDITING_TOOLS_ATTRIBUTE, True)


def open_with_timeout(factory: Callable[[], MemorySystem], timeout_s: float, name: str) -> MemorySystem:
    """Call ``factory()`` (which opens a stream's memory), giving up after ``timeout_s``.

    A factory that never returns (a server that accepts connections and never
    answers, a lock held forever) would hang the whole session; instead the
    stream fails with a message naming the factory. The call runs in a daemon
    thread that cannot be killed: if it returns after all, the memory it built
    is closed, so nothing stays open for a stream that is no longer running.
    """
    outcome: list[MemorySystem] = []
    failure: list[BaseException] = []
    lock = threading.Lock()
    abandoned = False

    def run() -> None:
        try:
            memory = factory()
        except BaseException as error:  # handed to the caller below
            failure.append(error)
            return
        with lock:
            if not abandoned:
                outcome.append(memory)
                return
        try:
            memory.close()
        except Exception:
            pass  # nobody is left to tell

    worker = threading.Thread(target=run, name=f"evomemory-open-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    with lock:
        if not outcome and not failure:
            abandoned = True
            raise MemoryBackendError(
                f"memory factory {name} did not return within {timeout_s:g} s while opening a stream's "
                "memory; check that its server or files are reachable, or raise the memory "
                "config's open_timeout_s"
            )
    if failure:
        raise failure[0]
    return outcome[0]
