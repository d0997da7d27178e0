"""``evomemory run``: a benchmark session without pytest, through the same engine.

For users of the original harness (a command, a config, an output directory) and
for scripts. It takes the plugin's options (``--limit`` for ``--evomemory-limit``,
declared once in :mod:`.options`), runs the same :class:`~.runtime.Session` with
its serial driver, writes the same artefacts, applies the same gates and returns
pytest's exit codes, so CI can switch between it and the plugin freely:

    0  every task ran, gates met, no failed episode
    1  a gate missed, or an episode failed
    2  interrupted (Ctrl-C, SIGTERM) or stopped early (max errors, a run directory
       that can no longer be written): the run is resumable
    4  usage error: bad config, data or options (nothing was run)

It reads the repository's pytest settings as pytest would (``pythonpath``, so a
user's ``module:factory`` imports the same; ``evomemory_config`` when no
``--config`` is given). Streams run one after another; for parallel streams use
the plugin (``pytest -n N``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from .errors import EvoMemoryError
from .heap import StartupHeap
from .options import CLI_FLAGS, PROGRESS_INTERVAL_INI, add_options, read_options
from .redaction import shown
from .reporting.progress import ProgressBoard, progress_interval, task_verdict
from .runtime.lines import Line
from .runtime.records import Record
from .runtime.session import EXIT_USAGE, Session, SessionSetup
from .runtime.signals import lift_shield
from .text import inert

__all__ = ["EXIT_USAGE", "RunProgress", "add_parser", "main"]


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a benchmark without pytest (same engine, options, artefacts and exit codes)",
        description="Run a benchmark session from one or more run configs, serially, without pytest. "
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
    from .pytestini import add_pythonpath, find_settings
    from .runtime.serial import run_session

    here = Path.cwd()
    settings = find_settings(here)
    add_pythonpath(settings)
    heap = StartupHeap.for_process()
    try:
        interval = progress_interval(_ini_text(settings.values.get(PROGRESS_INTERVAL_INI)), PROGRESS_INTERVAL_INI)
        options = read_options(vars(args), CLI_FLAGS)
        ini_configs = [settings.evomemory_config] if settings.evomemory_config and settings.rootdir else []
        setup = SessionSetup(options, CLI_FLAGS, here, tuple(sys.argv), writes=True, heap=heap)
        with heap.paused(settle_after=False):  # settled after the preflight (run_session)
            session = Session.open(setup, ini_configs, settings.rootdir)
    except EvoMemoryError as error:
        _error(f"evomemory: error: {error}")
        return EXIT_USAGE
    for text in session.shard_lines():
        print(text, flush=True)
    for note in session.resume_notes():
        _notice(note)
    try:
        progress = RunProgress(session, ProgressBoard(interval, final_only=args.quiet), verdicts=not args.quiet)
        outcome = run_session(session, progress=progress, notice=_notice)
    except EvoMemoryError as error:  # refused before any task (preflight)
        _error(f"evomemory: error: {error}")
        return EXIT_USAGE
    finally:
        heap.resume()  # settled already unless the run failed before its preflight
        session.release()
    try:
        for line in session.report(resume_command="evomemory run"):
            _print(line)
    finally:
        lift_shield()  # raised by an interrupt (runtime/signals.py): the session has ended
    return outcome.exit_status()


class RunProgress:
    """What pytest shows while a session runs, printed by ``evomemory run``: a line
    per task with its verdict (for pytest's letter) and each stream's line as the
    board decides (every ``evomemory_progress_interval`` seconds and at its last task)."""

    def __init__(self, session: Session, board: ProgressBoard, *, verdicts: bool) -> None:
        self.board = board
        self.verdicts = verdicts
        totals = Counter(task.key for task in session.tasks() if not session.is_done(task.key, task.sample))
        board.start(totals, session.completed_scores)

    def record(self, key: str, record: Record) -> None:
        scored = getattr(record, "scored", None)
        if self.verdicts and scored is not None:
            arm = f"{record.arm}:" if record.arm else ""
            print(inert(f"{arm}{scored['stream']}/{scored['task_id']} [{int(scored['position']) + 1}] "
                        f"{task_verdict(scored)}"), flush=True)
        self.board.add(key, [record.to_wire()], show=False)

    def task_done(self, key: str) -> None:
        line = self.board.add(key, (), show=True)
        if line is not None:
            print(inert(line), flush=True)


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
    print(CLI_FLAGS.spelled(text), file=sys.stderr, flush=True)


def _error(text: str) -> None:
    print(CLI_FLAGS.spelled(shown(text)), file=sys.stderr)


