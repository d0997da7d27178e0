"""The session's in-process driver: every arm, stream and episode, in this process.

``evomemory run`` and :func:`~..cli.run.run_benchmark` use it; pytest drives the same
:class:`~.session.Session` through its own life cycle (items, fixtures, xdist).
Here one process is both sides of the session: its stream driver runs the episodes
and its collector takes their records.
Each chain (one arm's run of one stream) runs its episodes in order; up to
``chains`` chains run at once, each on a thread (:mod:`.chains`), with the results
of a serial run. Records go straight to the session, as a pytest controller
receives them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..core.errors import SessionRefused
from ..core.types import BenchmarkSample
from ..models.deadline import allow_calls, interrupt_calls
from .arm import Arm
from .chains import Lane, LaneRunner, chains_in_flight, exclusive_parts, plan_lanes
from .notrun import FailedStream, NotRun
from .records import Record
from .run import AgentFactoryFn, MemoryFactoryFn
from .session import Outcome, Session
from .signals import shield_interrupts
from .stream import drive


class Progress(Protocol):
    """What a driver shows while it runs: each record as it comes in, and a task
    once it is complete (its feedback in), for lines that are due per task."""

    def record(self, key: str, record: Record) -> None: ...

    def task_done(self, key: str) -> None: ...

    def chain_started(self, key: str) -> None: ...

    def chain_ended(self, key: str) -> None: ...


def run_session(
    session: Session,
    *,
    agent_factory: AgentFactoryFn | None = None,
    memory_factory: MemoryFactoryFn | None = None,
    progress: Progress | None = None,
    notice: Callable[[str], None] | None = None,
) -> Outcome:
    """Run every task the session has, up to ``chains`` chains at once (each arm's
    run of each stream is a chain, :mod:`.chains`; one chain: in session order, in
    this thread); SIGTERM and Ctrl-C end it as interrupted (summarized, resumable).
    A refusal (a preflight's, or a stream's first build, :class:`~..core.errors.SessionRefused`)
    is raised: nothing is written. ``notice`` shows a line while something is being
    waited for (a memory factory that has not returned); ``progress`` sees every
    record and every complete task, one call at a time. The session's start-up heap,
    paused while it opened, is settled after the preflight (and paused again while
    each stream opens)."""
    plan, state, collector = session.plan, session.state, session.collector
    with plan.setup.heap.paused():
        collector.preflight(builtin_agent=agent_factory is None, builtin_memory=memory_factory is None)
    wall = time.perf_counter()
    interrupted = False
    keys = _keys(session)
    lanes = _lanes(session, builtin_agent=agent_factory is None, builtin_memory=memory_factory is None)
    chains = _Chains(session, agent_factory, memory_factory, notice, _Serialized.of(progress), keys)
    state.termination.install()
    try:
        limit = chains_in_flight(plan.options.chains, len(lanes))
        chains.finish_early_from = wall if limit > 1 else None
        if limit == 1:
            for key in keys:
                if state.stop_reason:
                    break
                chains.run(key)
        else:  # the lane of the chain that opens first starts first: the others wait for it
            lanes.sort(key=lambda lane: chains.first not in lane.keys)
            interrupted = _run_at_once(session, lanes, limit, chains)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        state.termination.uninstall()
    chains.prepared()
    if interrupted:  # however it came (here, or on a chain's thread): lifted by the driver once everything is printed
        shield_interrupts()
    for arm in plan.arms:
        if not arm.finished:
            arm.run.extra["wall_seconds"] = round(time.perf_counter() - wall, 6)
    return collector.finish(interrupted=interrupted)


def _keys(session: Session) -> list[str]:
    """Every chain of the session (its stream key), in session order."""
    return [arm.key(stream.name) for arm in session.plan.arms for stream in arm.benchmark.streams]


def _lanes(session: Session, *, builtin_agent: bool, builtin_memory: bool) -> list[Lane]:
    return plan_lanes([
        (key, exclusive_parts(session.plan.streams_by_key[key][0], builtin_agent=builtin_agent,
                              builtin_memory=builtin_memory))
        for key in _keys(session)
    ])


def chains_at_once(session: Session, *, builtin_agent: bool = True, builtin_memory: bool = True) -> int:
    """How many chains :func:`run_session` runs at once (the driver's progress shows
    one line for the session when it is more than one)."""
    lanes = _lanes(session, builtin_agent=builtin_agent, builtin_memory=builtin_memory)
    return chains_in_flight(session.plan.options.chains, len(lanes))


#: After Ctrl-C or SIGTERM, how long the driver waits for chains still in code no
#: signal reaches (an agent's own loop, a memory library's call: a serial run's Ctrl-C
#: would have interrupted it) before it gives up on them and ends the session; a
#: second Ctrl-C gives up at once. What they record afterwards is not taken.
GIVE_UP_AFTER_S = 5.0


def _run_at_once(session: Session, lanes: list[Lane], limit: int, chains: _Chains) -> bool:
    """Run the lanes, ``limit`` at once; whether the session was interrupted. Ctrl-C
    (here, the main thread) or SIGTERM (raised here, or on a chain's thread when it
    came while records were being written) interrupts every chain's model call, as
    it interrupts the one call of a serial run; a chain still running after
    :data:`GIVE_UP_AFTER_S` (or a second Ctrl-C) is given up on: what it records
    afterwards is not taken."""
    state, collector = session.state, session.collector

    def on_error(error: BaseException) -> None:
        collector.interrupt()
        if isinstance(error, KeyboardInterrupt):
            interrupt_calls()

    runner = LaneRunner(lanes, limit, chains.run, halted=lambda: bool(state.stop_reason or state.interrupting),
                        on_error=on_error)
    interrupted = False
    try:
        runner.start()
        try:
            runner.join()
        except KeyboardInterrupt:
            interrupted = True
            collector.interrupt()
            interrupt_calls()
            try:
                ended = runner.join(timeout_s=GIVE_UP_AFTER_S)
            except KeyboardInterrupt:
                ended = False
            finally:  # from here on the session is ending: a further interrupt must not cut it
                shield_interrupts()
            if not ended:
                collector.close_intake()
    finally:
        if not runner.running:
            allow_calls()  # a chain given up on (a second Ctrl-C) never starts another call
    failure = runner.failure
    if isinstance(failure, KeyboardInterrupt):
        return True
    if failure is not None:
        raise failure
    return interrupted


class _Chains:
    """Runs one chain (one arm's run of one stream) of the session, on any thread.

    The first chain with tasks to run opens its stream before any other chain opens
    one, as in a serial run: a first build that refuses the session (a factory's
    result that is not an Agent) then refuses it before anything is recorded, and a
    later one fails only its own stream."""

    def __init__(
        self, session: Session, agent_factory: AgentFactoryFn | None, memory_factory: MemoryFactoryFn | None,
        notice: Callable[[str], None] | None, progress: Progress | None, keys: list[str],
    ) -> None:
        self.session = session
        self.agent_factory = agent_factory
        self.memory_factory = memory_factory
        self.notice = notice
        self.progress = progress
        self.pending = {key: self._pending(key) for key in keys}
        self.first = next((key for key in keys if self.pending[key]), None)
        self.first_opened = threading.Event()
        #: with chains on threads of their own: the session's start (``perf_counter``),
        #: and an arm finishes as its last chain ends (:meth:`.Collector.finish_early`)
        self.finish_early_from: float | None = None
        arms = [session.plan.streams_by_key[key][0] for key in keys]
        self._chains_left = {id(arm): arms.count(arm) for arm in arms}
        self._count = threading.Lock()
        #: arms whose chains all ended, with their wall time, to finish in that order
        self._to_finish: list[tuple[Arm, float]] = []
        #: held by the one chain's thread finishing arms at a time (:meth:`_finish_ended`)
        self._finishing = threading.Lock()

    def _pending(self, key: str) -> list[BenchmarkSample]:
        plan = self.session.plan
        arm, name = plan.streams_by_key[key]
        return [sample for sample in arm.benchmark.by_name[name].samples if not plan.is_done(key, sample)]

    def run(self, key: str) -> None:
        """Run chain ``key``; the arm whose last chain it was finishes here, when it
        can (a chain that raised leaves its arm to the session's finish)."""
        self._run(key)
        if self.finish_early_from is not None:
            self._ended(key, self.finish_early_from)

    def _ended(self, key: str, started: float) -> None:
        arm = self.session.plan.streams_by_key[key][0]
        with self._count:
            self._chains_left[id(arm)] -= 1
            if self._chains_left[id(arm)]:
                return
            self._to_finish.append((arm, round(time.perf_counter() - started, 6)))
        self._finish_ended()

    def _finish_ended(self) -> None:
        """Finish the arms whose chains all ended, one at a time: a chain's thread
        that finds another finishing leaves its arm to that one and ends, so that
        only one thread at a time competes with the running chains for the
        interpreter lock. An arm left when the chains end, the session's finish
        finishes (:meth:`.Collector.finish`)."""
        while self._finishing.acquire(blocking=False):
            try:
                while True:
                    with self._count:
                        if not self._to_finish:
                            break
                        arm, wall_seconds = self._to_finish.pop(0)
                    self.session.collector.finish_early(arm, wall_seconds)
            finally:
                self._finishing.release()
            with self._count:
                if not self._to_finish:  # else one came after the last look: take it too
                    return

    def _prepare(self) -> None:
        """Queue what the session's end needs (:func:`.run.prepare_finish`) after
        what the episodes need (:meth:`.StreamDriver.start_stream` queued that): all
        loaded while the chains wait on the network (:mod:`.ahead`)."""
        self.session.load_finish_ahead()

    def prepared(self) -> None:
        """Wait for what was loaded ahead (a short load; the process must not end
        while a thread imports)."""
        self.session.driver.ahead.join()

    def _run(self, key: str) -> None:
        state, driver, collector, progress = self.session.state, self.session.driver, self.session.collector, self.progress
        pending = self.pending[key]
        if not pending:
            return
        if key != self.first:
            self.first_opened.wait()
            if state.refused is not None or state.stop_reason or state.interrupting:
                return

        def sink(record: Record) -> None:
            collector.add_records([record])  # a reason to stop is kept as the session's
            if progress is not None:
                progress.record(key, record)

        try:
            live = driver.start_stream(
                key, sink, agent_factory=self.agent_factory, memory_factory=self.memory_factory, notice=self.notice
            )
        finally:
            if key == self.first:
                self._prepare()
                self.first_opened.set()
        if progress is not None:
            progress.chain_started(key)
        try:
            for sample in pending:
                if state.refused is not None and not isinstance(live, FailedStream):
                    return  # refused by another chain, or at this stream's first record (its own build's
                    # refusal is its FailedStream's, raised below: exit 4, nothing written)
                task = driver.start_task(live, sample, sink)
                if isinstance(task, NotRun) and task.refused:
                    raise SessionRefused(task.failure or task.reason)  # before the first task: exit 4, nothing written
                if isinstance(task, NotRun):
                    return  # the stream could not start or cannot continue (recorded once): its tasks do not run
                drive(task)
                if progress is not None:
                    progress.task_done(key)
                if state.stop_reason or state.cost_stop() or state.interrupting:
                    return  # a call refused for the cost cap records nothing
        finally:
            driver.close_stream(live, sink)
            if progress is not None:
                progress.chain_ended(key)


class _Serialized:
    """A driver's progress, called by one chain at a time (its lines stay whole)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._lock = threading.Lock()

    @classmethod
    def of(cls, progress: Progress | None) -> Progress | None:
        return None if progress is None else cls(progress)

    def record(self, key: str, record: Record) -> None:
        with self._lock:
            self._progress.record(key, record)

    def task_done(self, key: str) -> None:
        with self._lock:
            self._progress.task_done(key)

    def chain_started(self, key: str) -> None:
        with self._lock:
            self._progress.chain_started(key)

    def chain_ended(self, key: str) -> None:
        with self._lock:
            self._progress.chain_ended(key)


__all__ = ["Progress", "chains_at_once", "run_session"]
