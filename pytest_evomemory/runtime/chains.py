"""Chains at once: which chains of a session may run side by side in one process.

A *chain* is one arm's run of one stream (a replicate is an arm of its own): a
serial chain of episodes, each needing the memory the one before it left. Chains
share nothing but the session (its records, its stops, the model side's limits), so
``evomemory run`` drives several at once, each on a thread of its own (model calls
are I/O, and the HTTP model client is synchronous), each with its own agent, memory
and order: its records are those of a serial run.

Some parts cannot share a process with another instance of themselves: a memory
backend that says so (:attr:`~..memory.base.MemoryBackend.concurrent`, a library
with process-wide state) and the embedded llama.cpp model (one copy per process,
:func:`~..models.factory.exclusive_model`). The chains that use one run one after
another, in session order, as one :class:`Lane`; every other chain is a lane of
its own. :func:`run_lanes` runs at most ``chains`` lanes at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.errors import ConfigError
from ..memory.factory import backend_spec
from ..models.factory import exclusive_model
from ..options import DEFAULT_CHAINS
from .arm import Arm


@dataclass(frozen=True)
class Lane:
    """Chains (stream keys) that run one after another, in session order."""

    keys: tuple[str, ...]
    #: what they take turns on (empty: a chain that runs beside any other)
    exclusive: tuple[str, ...] = ()


def exclusive_parts(arm: Arm, *, builtin_agent: bool, builtin_memory: bool) -> set[str]:
    """What a chain of ``arm`` must not share with another chain in this process."""
    parts: set[str] = set()
    config = arm.run_config
    if builtin_memory and arm.benchmark.memory_strategy != "none":
        spec = backend_spec(config.memory.backend)
        if spec is not None and not spec.concurrent:
            parts.add(f"memory backend {spec.name!r}")
    if builtin_agent:
        model = exclusive_model(config.agent.model)
        if model is not None:
            parts.add(model)
    return parts


def plan_lanes(chains: Sequence[tuple[str, set[str]]]) -> list[Lane]:
    """``chains``: each chain's key and exclusive parts, in session order. Chains
    sharing a part (directly, or through a chain that uses both) form one lane;
    lanes come in the order of their first chain."""
    owner: dict[str, int] = {}  # part -> the lane that holds it
    lanes: list[tuple[list[str], set[str]]] = []
    for key, parts in chains:
        joined = sorted({owner[part] for part in parts if part in owner})
        if not joined:
            lanes.append(([key], set(parts)))
            index = len(lanes) - 1
        else:
            index = joined[0]
            for other in joined[1:]:  # this chain links two lanes: they become one
                lanes[index][0].extend(lanes[other][0])
                lanes[index][1].update(lanes[other][1])
                lanes[other] = ([], set())
            lanes[index][0].append(key)
            lanes[index][1].update(parts)
        for part in lanes[index][1]:
            owner[part] = index
    order = {key: position for position, (key, _) in enumerate(chains)}
    return [
        Lane(tuple(sorted(keys, key=order.__getitem__)), tuple(sorted(parts)))
        for keys, parts in lanes if keys
    ]


def chains_in_flight(requested: int | None, lanes: int) -> int:
    """How many lanes run at once: ``requested`` (the ``chains`` option), else
    :data:`~..options.DEFAULT_CHAINS`; never more than there are lanes, at least one."""
    return max(1, min(requested or DEFAULT_CHAINS, lanes))


#: Open files a process of the session holds whatever its chains (the interpreter,
#: the run directories' locks, the load-ahead thread's imports), and at most per chain
#: in flight (its model connection, its run's record files, its stream's record log
#: and kept snapshot descriptors). Measured with the sample streams and the in-process
#: memory (4 chains ran in 36 and failed in 30; 12 ran in 72 and failed in 64: about
#: 18 + 4.5 a chain), then doubled: a library memory holds more.
BASE_DESCRIPTORS = 32
DESCRIPTORS_PER_CHAIN = 8


def check_descriptors(chains: int, option: str) -> None:
    """Before any task: a process that will run out of descriptors fails wherever it
    opens its next file (a snapshot's log, a lazy import at the session's end, a
    model connection), so its soft limit is raised to what ``chains`` need (up to
    the hard limit), and a hard limit below that is refused in one line saying what
    to do. ``option``: the chains option as the user spells it."""
    try:
        import resource
    except ImportError:  # no such limit to read (Windows)
        return
    need = BASE_DESCRIPTORS + DESCRIPTORS_PER_CHAIN * chains
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        fits = max(1, (hard - BASE_DESCRIPTORS) // DESCRIPTORS_PER_CHAIN)
        raise ConfigError(
            f"{chains} chain(s) at once need about {need} open files, and this process may open {hard} "
            f"(ulimit -n): raise the limit, or run at most {fits} at once ({option} {fits})"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else min(hard, 2 * need), hard))


class LaneRunner:
    """Runs every lane's chains, at most ``limit`` lanes at once, each lane on a thread.

    A lane starts its next chain only while ``halted()`` is false. The first error a
    chain raises (``KeyboardInterrupt`` included: a deferred SIGTERM, an interrupted
    model call) is kept in :attr:`failure` and stops the other lanes before their next
    chain; ``on_error`` hears it on the chain's thread (to interrupt the others' calls).
    The threads are daemons: a chain stuck in user code cannot keep the process alive
    once the driver has given up on it.
    """

    def __init__(
        self,
        lanes: Sequence[Lane],
        limit: int,
        run_chain: Callable[[str], None],
        *,
        halted: Callable[[], bool],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self._pending = list(lanes)
        self._lock = threading.Lock()
        self._run_chain = run_chain
        self._halted = halted
        self._on_error = on_error
        self.failure: BaseException | None = None
        self.threads = [
            threading.Thread(target=self._serve, name=f"evomemory-chain-{index + 1}", daemon=True)
            for index in range(min(limit, len(lanes)))
        ]
        self._running = len(self.threads)
        self._done = threading.Event()

    @property
    def running(self) -> bool:
        """Whether a lane's thread is still at work. Counted here, not read from
        ``Thread.is_alive``: Ctrl-C raised inside ``Thread.join`` marks the thread
        joined as stopped while it still runs (CPython 3.11, bpo-45274's handling)."""
        with self._lock:
            return self._running > 0

    def start(self) -> None:
        if not self.threads:
            self._done.set()
        for thread in self.threads:
            thread.start()

    def join(self, poll_s: float = 0.2, timeout_s: float | None = None) -> bool:
        """Wait for every lane (at most ``timeout_s``); whether they all ended. A short
        timeout per wait, so Ctrl-C reaches the caller at once."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._done.wait(poll_s):
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def _next_lane(self) -> Lane | None:
        with self._lock:
            return self._pending.pop(0) if self._pending else None

    def _serve(self) -> None:
        try:
            self._serve_lanes()
        finally:
            with self._lock:
                self._running -= 1
                if not self._running:
                    self._done.set()

    def _serve_lanes(self) -> None:
        while (lane := self._next_lane()) is not None:
            for key in lane.keys:
                if self._halted() or self.failure is not None:
                    return
                try:
                    self._run_chain(key)
                except BaseException as error:  # carried to the driver's thread
                    with self._lock:
                        self.failure = self.failure or error
                    self._on_error(error)
                    return


__all__ = ["BASE_DESCRIPTORS", "DESCRIPTORS_PER_CHAIN", "Lane", "LaneRunner", "chains_in_flight", "check_descriptors", "exclusive_parts", "plan_lanes"]
