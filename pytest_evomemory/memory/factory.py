"""Build the memory system for one stream from the memory config.

Each stream gets its own, fresh memory system: persistence across streams would
let one stream's experiences leak into another's score.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import MemoryConfig, ModelConfig
from ..errors import EvoMemoryError, MemoryBackendError
from ..factories import load_factory, user_frames
from .base import MemorySystem


@dataclass(frozen=True)
class MemoryContext:
    """Where a memory system lives: its stream and the run's output directory.

    ``agent_model`` is the agent's model config: a memory library that calls a
    model of its own (Mem0's and LangMem's ``infer``) uses that endpoint unless
    its options name another.
    """

    stream: str
    run_dir: Path
    run_name: str
    agent_model: ModelConfig | None = None


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


def _mem0(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    from .mem0 import open_mem0_memory

    return open_mem0_memory(
        config, stream=context.stream, run_dir=context.run_dir, run_name=context.run_name,
        agent_model=context.agent_model,
    )


def _langmem(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    from .langmem import open_langmem_memory

    return open_langmem_memory(config, stream=context.stream, agent_model=context.agent_model)


BUILTIN_BACKENDS: dict[str, MemoryFactory] = {
    "inprocess": _inprocess,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "mem0": _mem0,
    "langmem": _langmem,
}


def _check_mem0(config: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
    from .mem0 import check_mem0_config

    check_mem0_config(config, agent_model, source)


def _check_langmem(config: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
    from .langmem import check_langmem_config

    check_langmem_config(config, agent_model, source)


#: What a built-in backend checks when the run is loaded, before any stream opens:
#: an optional extra that is missing, options, endpoints (ConfigError naming the key).
BUILTIN_CHECKS: dict[str, Callable[[MemoryConfig, ModelConfig | None, str], None]] = {
    "mem0": _check_mem0,
    "langmem": _check_langmem,
}


def check_memory_backend(config: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
    """Refuse now what the configured built-in backend could not open later."""
    check = BUILTIN_CHECKS.get(config.backend)
    if check is not None:
        check(config, agent_model, source)


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
    return memory


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
