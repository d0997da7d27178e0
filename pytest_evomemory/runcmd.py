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
from pathlib import Path
from typing import Any

from .errors import EvoMemoryError
from .heap import StartupHeap
from .options import CLI_FLAGS, add_options, read_options
from .redaction import shown
from .reporting.progress import task_verdict
from .runtime.lines import Line
from .runtime.records import Record, TaskRecord
from .runtime.session import EXIT_USAGE, Session, SessionSetup

__all__ = ["EXIT_USAGE", "add_parser", "main"]
from .text import inert


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
    run.add_argument("-q", "--quiet", action="store_true", help="no per-task progress lines")


def main(args: argparse.Namespace) -> int:
    from .pytestini import add_pythonpath, find_settings
    from .runtime.serial import run_session

    here = Path.cwd()
    settings = find_settings(here)
    add_pythonpath(settings)
    heap = StartupHeap.for_process()
    try:
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
        outcome = run_session(session, progress=None if args.quiet else _progress, notice=_notice)
    except EvoMemoryError as error:  # refused before any task (preflight)
        _error(f"evomemory: error: {error}")
        return EXIT_USAGE
    finally:
        heap.resume()  # settled already unless the run failed before its preflight
        session.release()
    for line in session.report(resume_command="evomemory run"):
        _print(line)
    return outcome.exit_status()


def _progress(record: Record) -> None:
    if isinstance(record, TaskRecord) or getattr(record, "scored", None) is not None:
        scored = record.scored  # type: ignore[attr-defined]
        arm = f"{record.arm}:" if record.arm else ""
        print(inert(f"{arm}{scored['stream']}/{scored['task_id']} [{int(scored['position']) + 1}] "
                    f"{task_verdict(scored)}"), flush=True)


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


