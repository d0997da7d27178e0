"""The session's serial driver: every arm, stream and episode in order, in this process.

``evomemory run`` and :func:`run_benchmark` use it; pytest drives the same
:class:`~.session.Session` through its own life cycle (items, fixtures, xdist).
Records go straight to the session, as a pytest controller receives them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..config import RunConfig
from ..errors import SessionRefused
from ..options import CLI_FLAGS, SessionOptions
from .notrun import NotRun
from .records import Record
from .resume import read_resume_source
from .run import AgentFactoryFn, MemoryFactoryFn
from .session import Outcome, Session, SessionSetup
from .signals import lift_shield, shield_interrupts
from .stream import drive


class Progress(Protocol):
    """What a driver shows while it runs: each record as it comes in, and a task
    once it is complete (its feedback in), for lines that are due per task."""

    def record(self, key: str, record: Record) -> None: ...

    def task_done(self, key: str) -> None: ...


def run_session(
    session: Session,
    *,
    agent_factory: AgentFactoryFn | None = None,
    memory_factory: MemoryFactoryFn | None = None,
    progress: Progress | None = None,
    notice: Callable[[str], None] | None = None,
) -> Outcome:
    """Run every task the session has, stream by stream; SIGTERM and Ctrl-C end it
    as interrupted (summarized, resumable). A refusal (a preflight's, or a stream's
    first build, :class:`~..errors.SessionRefused`) is raised: nothing is written.
    ``notice`` shows a line while something is being waited for (a memory factory
    that has not returned); ``progress`` sees every record and every complete task.
    The session's start-up heap, paused while it opened, is settled after the
    preflight (and paused again while each stream opens)."""
    with session.setup.heap.paused():
        session.preflight(builtin_agent=agent_factory is None, builtin_memory=memory_factory is None)
    wall = time.perf_counter()
    interrupted = False
    session.termination.install()
    try:
        for arm in session.arms:
            for stream in arm.benchmark.streams:
                if session.stop_reason:
                    break
                _run_stream(session, arm.key(stream.name), agent_factory, memory_factory, notice, progress)
    except KeyboardInterrupt:
        interrupted = True
        shield_interrupts()  # lifted by the driver once everything is printed
    finally:
        session.termination.uninstall()
    for arm in session.arms:
        arm.run.extra["wall_seconds"] = round(time.perf_counter() - wall, 6)
    return session.finish(interrupted=interrupted)


def _run_stream(
    session: Session, key: str,
    agent_factory: AgentFactoryFn | None, memory_factory: MemoryFactoryFn | None,
    notice: Callable[[str], None] | None, progress: Progress | None,
) -> None:
    arm, name = session.streams_by_key[key]
    pending = [sample for sample in arm.benchmark.by_name[name].samples if not session.is_done(key, sample)]
    if not pending:
        return

    def sink(record: Record) -> None:
        session.add_records([record])  # a reason to stop is kept as the session's
        if progress is not None:
            progress.record(key, record)

    live = session.start_stream(key, sink, agent_factory=agent_factory, memory_factory=memory_factory, notice=notice)
    try:
        for sample in pending:
            task = session.start_task(live, sample, sink)
            if isinstance(task, NotRun) and task.refused:
                raise SessionRefused(task.failure or task.reason)  # before the first task: exit 4, nothing written
            if isinstance(task, NotRun):
                return  # the stream could not start or cannot continue (recorded once): its tasks do not run
            drive(task)
            if progress is not None:
                progress.task_done(key)
            if session.stop_reason or session.cost_stop():  # a call refused for the cost cap records nothing
                return
    finally:
        session.close_stream(live, sink)


def run_benchmark(
    config: RunConfig,
    run_dir: Path,
    *,
    agent_factory: AgentFactoryFn | None = None,
    memory_factory: MemoryFactoryFn | None = None,
    write_artefacts: bool = True,
    resume: bool = False,
    command: tuple[str, ...] = (),
) -> dict[str, object]:
    """Run every selected stream of ``config`` into ``run_dir``, serially, and return
    the summary (failed episodes are recorded and the stream goes on, as under pytest)."""
    options = SessionOptions(resume=str(run_dir) if resume else None)
    setup = SessionSetup(options, CLI_FLAGS, Path.cwd(), command, writes=write_artefacts)
    source = None
    if resume:
        source = read_resume_source(run_dir, CLI_FLAGS("resume"))
    session = Session(setup, [config], [run_dir], source)
    try:
        run_session(session, agent_factory=agent_factory, memory_factory=memory_factory)
    finally:
        session.release()
        lift_shield()
    summary = session.baseline.summary
    return dict(summary) if summary is not None else {}


__all__ = ["Progress", "run_benchmark", "run_session"]
