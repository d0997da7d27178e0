"""The ``evomemory`` command: runs without pytest, and reports after the fact.

Each command is one module of this package, registered in :data:`COMMANDS`: it adds
its parser (``add_parser``) and carries the command out (``main``, returning the exit
status). ``evomemory run`` runs a benchmark through the same engine as the plugin
(:mod:`.run`, with pytest's exit codes); ``report`` and ``compare`` exist for
everything after a run: re-rendering an old run, and putting runs side by side
(memory versus no memory), possibly from different machines; their errors are one
line on stderr and exit status 2, because the fix is always to the command line.
``data`` fetches, verifies and locates the benchmark's upstream files (:mod:`.data`);
``local-model`` builds and checks the embedded model's llama-cpp-python (:mod:`.local`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

from ..util.redaction import shown
from ..util.version import __version__
from . import compare, data, init, local, merge, power, report, run, table
from .common import PROG, USAGE_ERROR


class Command(Protocol):
    """One ``evomemory`` command: a module with these two functions."""

    def add_parser(self, commands: Any) -> None:
        """Register the command on the ``evomemory`` command's subparsers."""

    def main(self, args: argparse.Namespace) -> int:
        """Carry the command out; returns its exit status."""


#: Every command, by the name the user types, in ``evomemory --help``'s order.
COMMANDS: dict[str, Command] = {
    "run": run,
    "report": report,
    "compare": compare,
    "merge": merge,
    "data": data,
    "init": init,
    "table": table,
    "power": power,
    "local-model": local,
}


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message; we want the message alone, on one line."""

    #: exit status of a usage error (``evomemory run`` says 4, as pytest does)
    usage_status = USAGE_ERROR

    def error(self, message: str) -> NoReturn:
        self.exit(self.usage_status, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Run the Evo-Memory benchmark and report on its run directories.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS.values():
        command.add_parser(commands)
    return parser


#: Exit status of a fault of ours (a bug), as pytest's internal error.
INTERNAL_ERROR = 3
#: Set to 1 to see the traceback of a fault of ours instead of its one line.
TRACEBACK_ENV = "EVOMEMORY_TRACEBACK"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        status = run.EXIT_USAGE if COMMANDS[args.command] is run else USAGE_ERROR
        parser.exit(status, f"{PROG}: error: unrecognized arguments: {' '.join(extra)} (see '{PROG} --help')\n")
    try:
        return COMMANDS[args.command].main(args)
    except Exception as error:  # a bug of ours: one line, not a traceback into the package
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(shown(
            f"{PROG}: internal error (a bug in pytest-evomemory, not in your input): {type(error).__name__}: {error}; "
            f"please report it with the command you ran ({TRACEBACK_ENV}=1 shows where it happened)", one_line=True,
        ), file=sys.stderr)
        return INTERNAL_ERROR


__all__ = ["COMMANDS", "INTERNAL_ERROR", "PROG", "TRACEBACK_ENV", "USAGE_ERROR", "Command", "build_parser", "main"]
