"""``evomemory report RUN_DIR``: the HTML report of one finished run, written again.

Its errors are one line on stderr and exit status 2: the fix is always to the
command line (a wrong directory, an output path inside another run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..options import render
from ..rundir import REPORT
from ..util.redaction import shown
from .common import PROG, USAGE_ERROR, refuse_run_output


def add_parser(commands: Any) -> None:
    """Register ``report`` on the ``evomemory`` command's subparsers."""
    report = commands.add_parser(
        "report",
        help="write the HTML report of one run",
        description="Write the HTML report of one finished run.",
    )
    report.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory (holds summary.json)")
    report.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        default=None,
        help=f"where to write (default: RUN_DIR/{REPORT})",
    )


def main(args: argparse.Namespace) -> int:
    # the reporting modules load for this command only, not before a run's first model call
    from ..reporting.html import ReportError, write_html_report

    try:
        if args.output is not None:
            refuse_run_output(args.output, own=[args.run_dir / REPORT])
        written = write_html_report(args.run_dir, args.output)
    except (ReportError, ConfigError) as error:
        print(shown(render(f"{PROG}: error: {error}", "cli"), one_line=True), file=sys.stderr)  # may quote an artefact
        return USAGE_ERROR
    print(written)
    return 0
