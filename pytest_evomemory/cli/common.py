"""What every ``evomemory`` command shares: its name, the usage status, and the
one refusal of an output file that would land inside a run directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..rundir import output_path_problem

PROG = "evomemory"
#: Exit status of a usage error (``evomemory run`` says 4, as pytest does).
USAGE_ERROR = 2
#: Ctrl-C outside a session: the shell's status for SIGINT, and 'run''s as pytest's
#: (``EXIT_INTERRUPTED``, which this module does not import: it loads the runtime).
INTERRUPTED = 130
INTERRUPTED_RUN = 2


def usage_line(message: str, command: str = "") -> str:
    """A usage error as every command prints it: one line, pointing at the ``--help``
    of the command it is about (``evomemory compare --help``), as argparse's own are."""
    prog = f"{PROG} {command}".strip()
    return f"{prog}: error: {message} (see '{prog} --help')\n"


def refuse_run_output(path: Path, *, own: Sequence[Path] = ()) -> None:
    """:class:`ReportError` when an output file would land inside a run directory
    (:func:`pytest_evomemory.rundir.output_path_problem`): before any run is read."""
    from ..reporting.rundata import ReportError

    problem = output_path_problem(path, own=own)
    if problem is not None:
        raise ReportError(f"-o {problem}")
