"""The memory backends a config can name, and the opening of one stream's memory.

Each stream gets its own, fresh memory system: persistence across streams would
let one stream's experiences leak into another's score.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable
from typing import cast

from ..config import MemoryConfig
from ..core.errors import ConfigError, EvoMemoryError, MemoryBackendError
from ..core.factories import check_protocol, load_factory, user_frames
from ..core.registry import Registry, is_reference
from .base import Forgetting, MemoryBackend, MemoryContext, MemorySystem
from .tools import EDITING_TOOLS_ATTRIBUTE


def _open_inprocess(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    # numpy (about 0.1 s of CPU) is loaded when a stream's memory opens, not when a
    # config is checked: pytest's controller checks every arm's config and opens none.
    from .inprocess import open_inprocess_memory

    return open_inprocess_memory(config, context)


#: The ``inprocess`` backend: declared here, not beside its code, so that naming it
#: in a config does not load numpy.
INPROCESS = MemoryBackend("inprocess", open=_open_inprocess)


#: Every backend a memory config may name besides a ``module:factory`` reference.
#: A backend module declares its :class:`MemoryBackend` as ``BACKEND`` (``inprocess``'s is above).
MEMORY_BACKENDS: Registry[MemoryBackend] = Registry("memory backend")
MEMORY_BACKENDS.builtin("inprocess", INPROCESS, owner=__name__)
MEMORY_BACKENDS.builtin("sqlite", "pytest_evomemory.memory.sqlite:BACKEND")
MEMORY_BACKENDS.builtin("postgres", "pytest_evomemory.memory.postgres:BACKEND")
# The memory libraries (optional extras): their modules import the library only
# when a stream's memory opens.
MEMORY_BACKENDS.builtin("mem0", "pytest_evomemory.memory.mem0:BACKEND")
MEMORY_BACKENDS.builtin("langmem", "pytest_evomemory.memory.langmem:BACKEND")
MEMORY_BACKENDS.builtin("dense", "pytest_evomemory.memory.dense:BACKEND")

MemoryFactory = Callable[[MemoryConfig, MemoryContext], MemorySystem]


def backend_spec(name: str) -> MemoryBackend | None:
    """The registered backend called ``name``; ``None`` for a ``module:factory`` reference."""
    return None if is_reference(name) else MEMORY_BACKENDS.get(name)


def missing_extra(spec: MemoryBackend) -> str | None:
    """Why the backend's optional library is not installed, or ``None``."""
    absent = [module for module in spec.requires if importlib.util.find_spec(module) is None]
    if not absent:
        return None
    if len(absent) == 1:
        what, verb, them = absent[0], "is", "it"
    else:  # "needs mem0 and qdrant_client, which are not installed"
        what, verb, them = f"{', '.join(absent[:-1])} and {absent[-1]}", "are", "them"
    return (
        f"memory backend {spec.name!r} needs {what}, which {verb} not installed; "
        f"install {them} with: pip install 'pytest-evomemory[{spec.extra or spec.name}]'"
    )


def build_memory(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
    """Open the configured backend for ``context.stream``; failures name the backend."""
    spec = backend_spec(config.backend)
    if spec is not None and (problem := missing_extra(spec)):
        raise ConfigError(problem)
    factory = spec.open if spec is not None else load_factory(config.backend, "memory")
    try:
        memory = factory(config, context)
    except EvoMemoryError:
        raise
    except Exception as error:  # a third-party backend failing to open
        raise MemoryBackendError(
            f"memory backend {config.backend!r} could not be opened for stream "
            f"{context.stream!r}: {type(error).__name__}: {error}{user_frames(error)}"
        ) from error
    check_protocol(memory, MemorySystem, f"memory factory {config.backend!r}")
    memory = cast(MemorySystem, memory)
    if config.editing_tools and spec is not None:
        enable_editing_tools(memory, config.backend)
    return memory


def enable_editing_tools(memory: MemorySystem, name: str) -> None:
    """Have a built-in backend's tools include ``forget`` and ``update`` (ReMem's
    refine-memory operations, ``memory.editing_tools``); it must be able to forget."""
    if not isinstance(memory, Forgetting):
        raise MemoryBackendError(
            f"memory backend {name!r} cannot forget records, so it cannot offer editing tools; "
            "remove 'editing_tools' from the memory config"
        )
    setattr(memory, EDITING_TOOLS_ATTRIBUTE, True)


#: While a factory has not returned, :func:`open_with_timeout` says so this often
#: (seconds; a quarter of the timeout when that is shorter).
WAIT_NOTICE_EVERY_S = 10.0

#: Told, while a memory factory has not returned, how long it has been waiting and for
#: which factory: ``on_wait(elapsed_s, name)``.
WaitNotice = Callable[[float, str], None]


def open_with_timeout(
    factory: Callable[[], MemorySystem], timeout_s: float, name: str, on_wait: WaitNotice | None = None
) -> MemorySystem:
    """Call ``factory()`` (which opens a stream's memory), giving up after ``timeout_s``.

    A factory that never returns (a server that accepts connections and never
    answers, a lock held forever) would hang the whole session; instead the
    stream fails with a message naming the factory. Meanwhile ``on_wait`` is called
    every :data:`WAIT_NOTICE_EVERY_S` seconds (a quarter of ``timeout_s`` when that
    is shorter), so a screen says what is being waited for instead of nothing for
    two minutes. The call runs in a daemon thread that cannot be killed: if it
    returns after all, the memory it built is closed, so nothing stays open for a
    stream that is no longer running.
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
    started = time.monotonic()
    worker.start()
    every = min(WAIT_NOTICE_EVERY_S, timeout_s / 4)
    while (remaining := timeout_s - (time.monotonic() - started)) > 0:
        worker.join(min(every, remaining))
        if not worker.is_alive():
            break
        elapsed = time.monotonic() - started
        if on_wait is not None and elapsed < timeout_s:
            on_wait(elapsed, name)
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


__all__ = [
    "MEMORY_BACKENDS",
    "MemoryContext",
    "MemoryFactory",
    "backend_spec",
    "build_memory",
    "enable_editing_tools",
    "missing_extra",
    "open_with_timeout",
]
