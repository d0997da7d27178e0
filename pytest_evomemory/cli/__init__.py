"""The ``evomemory`` command: runs without pytest, and reports after the fact.

Each command is one module of this package, registered in :data:`COMMANDS`: it adds
its parser (``add_parser``) and carries the command out (``main``, returning the exit
status). Only the chosen command's module is imported, and only its parser built
(``evomemory --help`` and a command line that names no known command build them all):
``evomemory run`` starts without the other eight. ``evomemory run`` runs a benchmark through the same engine as the plugin
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
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from ..util.redaction import shown
from ..util.text import did_you_mean
from ..util.version import __version__
from .common import INTERRUPTED, INTERRUPTED_RUN, PROG, USAGE_ERROR


class Command(Protocol):
    """One ``evomemory`` command: a module with these two functions."""

    def add_parser(self, commands: Any) -> None:
        """Register the command on the ``evomemory`` command's subparsers."""

    def main(self, args: argparse.Namespace) -> int:
        """Carry the command out; returns its exit status."""


# One loader per command: a plain import inside a function (not a module path for
# importlib), so the import-graph check sees every command's edge.


def _run() -> Command:
    from . import run
    return run


def _report() -> Command:
    from . import report
    return report


def _compare() -> Command:
    from . import compare
    return compare


def _merge() -> Command:
    from . import merge
    return merge


def _data() -> Command:
    from . import data
    return data


def _init() -> Command:
    from . import init
    return init


def _table() -> Command:
    from . import table
    return table


def _power() -> Command:
    from . import power
    return power


def _local() -> Command:
    from . import local
    return local


#: Every command, by the name the user types, in ``evomemory --help``'s order: the
#: loader of its module (imported when the command is chosen, or help shows them all).
COMMANDS: dict[str, Callable[[], Command]] = {
    "run": _run,
    "report": _report,
    "compare": _compare,
    "merge": _merge,
    "data": _data,
    "init": _init,
    "table": _table,
    "power": _power,
    "local-model": _local,
}


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message; we want the message alone, on one line."""

    #: exit status of a usage error (``evomemory run`` says 4, as pytest does)
    usage_status = USAGE_ERROR

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations: pytest takes none (``--evomemory-lim`` is refused), so
        # ``evomemory run --lim 2`` must not quietly mean --limit; and an option added
        # later would change what an abbreviation meant.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # argparse quotes the value it refused (``invalid float value: '...'``): a key
        # pasted into the wrong option is masked, as in every refusal
        self.exit(self.usage_status, f"{self.prog}: error: {_quoted(message)} (see '{self.prog} --help')\n")


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The ``evomemory`` parser: with ``chosen``, a command of :data:`COMMANDS`, only
    that command's parser (what it parses and prints is the same: a command's parser
    knows nothing of the others); else every command's."""
    parser = _Parser(prog=PROG, description="Run the Evo-Memory benchmark and report on its run directories.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, load in COMMANDS.items():
        if chosen is None or name == chosen:
            load().add_parser(commands)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command a command line chooses, when its first word is one (nothing
    before it: an option there, ``--help`` or ``--version``, is the top parser's)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def _quoted(text: str) -> str:
    """Words of the command line as a refusal quotes them: without a secret, inert."""
    from ..core.errors import without_secrets

    return shown(without_secrets(text), one_line=True)


def _suggestion(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """The option a misspelt one may have meant (``--confg``: ``--config``), from the
    chosen command's options."""
    spelled = [word.partition("=")[0] for word in extra if word.startswith("--")]
    if not spelled:
        return ""
    known = [
        option for action in _command_parser(parser)._actions for option in action.option_strings
        if option.startswith("--")
    ]
    return did_you_mean(spelled[0], known)


def _command_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The chosen command's parser (the top parser's subparsers hold it), or the top one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen: list[argparse.ArgumentParser] = list(action.choices.values())
            if len(chosen) == 1:
                return chosen[0]
    return parser


#: Exit status of a fault of ours (a bug), as pytest's internal error.
INTERNAL_ERROR = 3
#: Set to 1 to see the traceback of a fault of ours instead of its one line.
TRACEBACK_ENV = "EVOMEMORY_TRACEBACK"


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(words)
    except KeyboardInterrupt:
        # Ctrl-C where no session has taken the interrupts over (loading the command,
        # reading the configs, locking the run directory; a report or a download): one
        # line, not the traceback of whichever import it landed in. A session catches
        # its own and ends as interrupted; 'run' exits as pytest does then (2).
        print(f"{PROG}: interrupted", file=sys.stderr)
        return INTERRUPTED_RUN if chosen_command(words) == "run" else INTERRUPTED


def _main(words: list[str]) -> int:
    parser = build_parser(chosen_command(words))
    args, extra = parser.parse_known_args(words)
    if extra:
        status = USAGE_ERROR
        if args.command == "run":  # says 4, as pytest does (its module is loaded: it was chosen)
            from .run import EXIT_USAGE as status
        parser.exit(status, f"{PROG}: error: unrecognized arguments: {_quoted(' '.join(extra))}"
                            f"{_suggestion(parser, extra)} (see '{PROG} --help')\n")
    try:
        return COMMANDS[args.command]().main(args)
    except Exception as error:  # a bug of ours: one line, not a traceback into the package
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(shown(
            f"{PROG}: internal error (a bug in pytest-evomemory, not in your input): {type(error).__name__}: {error}; "
            f"please report it with the command you ran ({TRACEBACK_ENV}=1 shows where it happened)", one_line=True,
        ), file=sys.stderr)
        return INTERNAL_ERROR


__all__ = ["COMMANDS", "INTERNAL_ERROR", "INTERRUPTED", "INTERRUPTED_RUN", "PROG", "TRACEBACK_ENV", "USAGE_ERROR", "Command", "build_parser", "chosen_command", "main"]
