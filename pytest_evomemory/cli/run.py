"""``evomemory run``: a benchmark session without pytest, through the same engine.

For users of the original harness (a command, a config, an output directory) and
for scripts. It takes the plugin's options (``--limit`` for ``--evomemory-limit``,
declared once in :mod:`..options`), runs the same :class:`~..runtime.Session` with
its in-process driver, writes the same artefacts, applies the same gates and returns
pytest's exit codes, so CI can switch between it and the plugin freely:

    0  every task ran, gates met, no failed episode
    1  a gate missed, or an episode failed
    2  interrupted (Ctrl-C, SIGTERM) or stopped early (max errors, a run directory
       that can no longer be written): the run is resumable
    4  usage error: bad config, data or options (nothing was run)

It reads the repository's pytest settings as pytest would (``pythonpath``, so a
user's ``module:factory`` imports the same; ``evomemory_config`` when no
``--config`` is given). Up to ``--chains N`` chains (each arm's run of each
stream) run at once in this process, with the artefacts of a serial run: the door
for a large grid (docs/scale.md).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from ..config import RunConfig
from ..core.errors import EvoMemoryError, SessionRefused
from ..options import (
    CLI_FLAGS,
    PROGRESS_INTERVAL_INI,
    SessionOptions,
    add_options,
    read_options,
    render,
    rendered,
)
from ..reporting.lines import Line
from ..reporting.progress import ProgressBoard, cost_text, progress_interval, task_verdict
from ..reporting.reports import REPORTS
from ..reporting.sessionlines import report, resume_notes, shard_lines
from ..runtime.records import Record
from ..runtime.run import AgentFactoryFn, MemoryFactoryFn
from ..runtime.session import EXIT_USAGE, Session, SessionPlan, SessionSetup
from ..runtime.signals import lift_shield
from ..util.heap import StartupHeap
from ..util.redaction import shown
from ..util.text import inert

__all__ = ["EXIT_USAGE", "RunProgress", "add_parser", "main", "run_benchmark"]


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a benchmark without pytest (same engine, options, artefacts and exit codes)",
        description="Run a benchmark session from one or more run configs without pytest, up to --chains chains at once. "
        "Every option is the plugin's, without its --evomemory- prefix.",
    )
    # a usage error of ``run`` is exit 4, as the plugin's (argparse says 2, which this
    # command's exit codes reserve for an interrupted run)
    run.usage_status = EXIT_USAGE
    add_options(run.add_argument, CLI_FLAGS)
    run.add_argument(
        "-q", "--quiet", action="store_true",
        help="no per-task lines, only each stream's last progress line (as pytest -q)",
    )


def main(args: argparse.Namespace) -> int:
    from ..runtime.serial import chains_at_once, run_session
    from .pytestini import add_pythonpath, find_settings

    here = Path.cwd()
    heap = StartupHeap.for_process()
    try:
        settings = find_settings(here)
        add_pythonpath(settings)
        interval = progress_interval(_ini_text(settings.values.get(PROGRESS_INTERVAL_INI)), PROGRESS_INTERVAL_INI)
        options = read_options(vars(args), CLI_FLAGS)
        ini_configs = [settings.evomemory_config] if settings.evomemory_config and settings.rootdir else []
        setup = SessionSetup(options, CLI_FLAGS, here, tuple(sys.argv), writes=True, heap=heap)
        with heap.paused(settle_after=False):  # settled after the preflight (run_session)
            session = Session.open(setup, ini_configs, settings.rootdir, reports=REPORTS)
    except EvoMemoryError as error:
        _error(f"evomemory: error: {error}")
        return EXIT_USAGE
    for text in shard_lines(session):
        print(text, flush=True)
    for note in resume_notes(session):
        _notice(note)
    previous = None
    try:
        grid = chains_at_once(session) > 1
        progress = RunProgress(session, ProgressBoard(interval, final_only=args.quiet), verdicts=not args.quiet,
                               grid=grid)
        if grid and hasattr(signal, "SIGUSR1"):  # each running chain's last event, on request
            previous = signal.signal(signal.SIGUSR1, _print_chains(progress))
        outcome = run_session(session, progress=progress, notice=_notice)
    except EvoMemoryError as error:  # refused before any task (preflight)
        _error(f"evomemory: error: {error}")
        return EXIT_USAGE
    finally:
        if previous is not None:
            signal.signal(signal.SIGUSR1, previous)
        heap.resume()  # settled already unless the run failed before its preflight
        session.release()
    try:
        for line in report(session, resume_command="evomemory run"):
            _print(line)
    finally:
        lift_shield()  # raised by an interrupt (runtime/signals.py): the session has ended
    heap.exiting()
    return outcome.exit_status()


def run_benchmark(
    config: RunConfig,
    run_dir: Path,
    *,
    agent_factory: AgentFactoryFn | None = None,
    memory_factory: MemoryFactoryFn | None = None,
    write_artefacts: bool = True,
    resume: bool = False,
    command: tuple[str, ...] = (),
    chains: int = 1,
) -> dict[str, object]:
    """Run every selected stream of ``config`` into ``run_dir``, one at a time (or up to
    ``chains`` streams at once, with the same results), and return the summary (failed
    episodes are recorded and the stream goes on, as under pytest). The door for
    Python (notebooks, tools, agents built in code): the session ``evomemory run``
    drives, with the same renderers. An error it raises names the options as
    ``evomemory run`` spells them (``--resume``)."""
    from ..rundir import read_resume_source
    from ..runtime.serial import run_session

    options = SessionOptions(resume=str(run_dir) if resume else None, chains=chains)
    setup = SessionSetup(options, CLI_FLAGS, Path.cwd(), command, writes=write_artefacts)
    try:
        source = read_resume_source(run_dir) if resume else None
        session = Session(SessionPlan(setup, [config], [run_dir], source, reports=REPORTS))
        try:
            outcome = run_session(session, agent_factory=agent_factory, memory_factory=memory_factory)
        finally:
            session.release()
            lift_shield()
        if outcome.refused is not None:  # refused after a stream opened (by a record or another chain)
            raise SessionRefused(outcome.refused)
    except EvoMemoryError as error:
        rendered(error, CLI_FLAGS.entry)
        raise
    summary = session.plan.baseline.summary
    return summary.written() if summary is not None else {}


class RunProgress:
    """What pytest shows while a session runs, printed by ``evomemory run``: a line
    per task with its verdict (for pytest's letter) and each stream's line as the
    board decides (every ``evomemory_progress_interval`` seconds and at its last task).

    With several chains at once (``grid``) the lines of every interval are one line
    for the whole session (chains done and running, tasks, model calls per second,
    an ETA from the rate so far; :meth:`session_line`), a stream's own line comes
    once, at its last task, and each running chain's last event is printed on
    request (SIGUSR1: :meth:`chain_lines`). Never a line per chain per interval."""

    def __init__(self, session: Session, board: ProgressBoard, *, verdicts: bool, grid: bool = False) -> None:
        self.board = board
        self.verdicts = verdicts
        self.grid = grid
        plan = session.plan
        totals = Counter(task.key for task in plan.tasks() if not plan.is_done(task.key, task.sample))
        board.start(totals, plan.completed_scores)
        self.chains = len(totals)
        self.chains_done = 0
        #: running chain -> its last event, in words
        self.running: dict[str, str] = {}
        self.began = self.last_line = time.monotonic()

    def chain_started(self, key: str) -> None:
        self.running[key] = "started"

    def chain_ended(self, key: str) -> None:
        if self.running.pop(key, None) is not None:
            self.chains_done += 1
            if self.grid and not self.running and self.chains_done == self.chains:
                print(inert(self.session_line()), flush=True)  # the session's last line

    def record(self, key: str, record: Record) -> None:
        scored = getattr(record, "scored", None)
        if scored is not None:
            verdict = task_verdict(scored)
            self.running[key] = f"{scored.task_id} [{scored.position + 1}] {verdict}"
            if self.verdicts:
                arm = f"{record.arm}:" if record.arm else ""
                print(inert(f"{arm}{scored.stream}/{scored.task_id} [{scored.position + 1}] {verdict}"), flush=True)
        self.board.add(key, [record], show=False)

    def task_done(self, key: str) -> None:
        line = self.board.add(key, (), show=True)
        if self.grid:
            stream = self.board.streams.get(key)
            line = line if stream is not None and stream.finished else None  # its last line only
            if self.board.final_only or time.monotonic() - self.last_line < self.board.interval:
                if line is not None:
                    print(inert(line), flush=True)
                return
            self.last_line = time.monotonic()
            line = "\n".join(text for text in (line, self.session_line()) if text)
        if line:
            print(inert(line), flush=True)

    def session_line(self) -> str:
        """``evomemory session: chains 3/16 done, 8 running  tasks 120/384  calls 240 (21.5/s)  eta 12s``."""
        streams = list(self.board.streams.values())
        done = sum(stream.done for stream in streams)
        total = sum(stream.total for stream in streams)
        calls = sum(stream.model_calls for stream in streams)
        elapsed = max(time.monotonic() - self.began, 1e-9)
        eta = "done" if done >= total else (_duration((total - done) * elapsed / done) if done else "?")
        return (
            f"evomemory session: chains {self.chains_done}/{self.chains} done, {len(self.running)} running  "
            f"tasks {done}/{total}  calls {calls} ({calls / elapsed:.1f}/s)  eta {eta}{cost_text(streams)}"
        )

    def chain_lines(self) -> list[str]:
        """Each running chain's last event (what SIGUSR1 prints)."""
        return [inert(f"evomemory {key}: {event}") for key, event in sorted(self.running.items())]


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s" if whole < 3600 else (
        f"{whole // 3600}h{whole % 3600 // 60:02d}m")


def _print_chains(progress: RunProgress) -> Callable[[int, FrameType | None], None]:
    def show(signum: int, frame: FrameType | None) -> None:
        lines = progress.chain_lines() or ["evomemory: no chain is running"]
        print("\n".join([progress.session_line(), *lines]), flush=True)

    return show


def _ini_text(value: object) -> str | None:
    """An ini value as pytest's ``getini`` gives a string option (a pyproject.toml
    number included)."""
    return None if value is None else str(value)


def _print(line: Line) -> None:
    if line.section:
        print(f" {line.text} ".center(80, "="))
    else:
        print(line.text, file=sys.stderr if line.style == "red" else sys.stdout)


def _notice(text: str) -> None:
    """A line while something is waited for (already redacted and inert), naming
    options as this command takes them."""
    print(render(text, "cli"), file=sys.stderr, flush=True)


def _error(text: str) -> None:
    print(shown(render(text, "cli")), file=sys.stderr)


