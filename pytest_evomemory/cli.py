"""The ``evomemory`` command: runs without pytest, and reports after the fact.

``evomemory run`` runs a benchmark through the same engine as the plugin
(:mod:`.runcmd`, with pytest's exit codes). ``report`` and ``compare`` exist for
everything after a run: re-rendering an old run, and putting runs side by side
(memory versus no memory), possibly from different machines; their errors are one
line on stderr and exit status 2, because the fix is always to the command line.
``data`` fetches, verifies and locates the benchmark's upstream files (:mod:`.datacmd`);
``local-model`` builds and checks the embedded model's llama-cpp-python (:mod:`.localcmd`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__, datacmd, initcmd, localcmd, mergecmd, powercmd, runcmd, tablecmd
from .errors import ConfigError
from .options import GAIN_FIGURE, add_min_gain_by, min_gain_by, render
from .redaction import shown
from .rundir import ARMS_MANIFEST, REPORT, output_path_problem

if TYPE_CHECKING:
    from .analysis.gain import GainThreshold

PROG = "evomemory"
DEFAULT_COMPARE_OUTPUT = "evomemory-compare.html"
USAGE_ERROR = 2


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
    runcmd.add_parser(commands)

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

    compare = commands.add_parser(
        "compare",
        help="compare two or more runs on one page",
        description="Compare runs: accuracy with 95% intervals, the paired difference from the first run "
        "(the baseline) with its interval and exact McNemar p-value (for LoCoMo's F1 also the MOVER "
        "interval of the mean difference and the Wilcoxon signed-rank p), every run's learning curve on one "
        "plot per stream, the config diff and the tasks that flipped. Writes the page and, beside it, "
        "compare.json (same name, .json); prints the comparison, then both paths.",
    )
    compare.add_argument(
        "run_dirs", metavar="RUN_DIR", type=Path, nargs="+", help="two or more run directories"
    )
    compare.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        default=Path(DEFAULT_COMPARE_OUTPUT),
        help=f"where to write (default: ./{DEFAULT_COMPARE_OUTPUT})",
    )
    compare.add_argument(
        "--labels",
        metavar="A,B[,...]",
        default=None,
        help="comma-separated legend labels, one per run (default: the run names)",
    )
    compare.add_argument(
        "--min-gain",
        metavar="[STREAM=]POINTS",
        action="append",
        default=[],
        help=f"exit 1 if a run's {GAIN_FIGURE} does not beat the baseline's by POINTS percentage points "
        "overall (or on STREAM), paired on the tasks both ran; repeatable",
    )
    add_min_gain_by(compare)
    mergecmd.add_parser(commands)
    datacmd.add_parser(commands)
    initcmd.add_parser(commands)
    tablecmd.add_parser(commands)
    powercmd.add_parser(commands)
    localcmd.add_parser(commands)
    return parser


def _labels(value: str | None, count: int) -> list[str] | None:
    from .reporting.rundata import ReportError

    if value is None:
        return None
    labels = [label.strip() for label in value.split(",")]
    if len(labels) != count:
        raise ReportError(
            f"--labels has {len(labels)} label(s) for {count} run directories; give one per run"
        )
    if any(not label for label in labels):
        raise ReportError("--labels contains an empty label")
    return labels


def refuse_run_output(path: Path, *, own: Sequence[Path] = ()) -> None:
    """:class:`ReportError` when an output file would land inside a run directory
    (:func:`.rundir.output_path_problem`): before any run is read."""
    from .reporting.rundata import ReportError

    problem = output_path_problem(path, own=own)
    if problem is not None:
        raise ReportError(f"-o {problem}")


def _session_comparison(path: Path) -> bool:
    return path.name in ("compare.html", "compare.json") and (path.parent / ARMS_MANIFEST).is_file()


def _gate(document: Mapping[str, Any], gates: Sequence[GainThreshold]) -> bool:
    """Print each gain gate's verdict; True when one is missed."""
    from .analysis.gain import check_gains

    results = check_gains(document, gates)
    for result in results:
        print(shown(result.describe()))
    return any(not result.met for result in results)


#: Exit status of a fault of ours (a bug), as pytest's internal error.
INTERNAL_ERROR = 3
#: Set to 1 to see the traceback of a fault of ours instead of its one line.
TRACEBACK_ENV = "EVOMEMORY_TRACEBACK"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        status = runcmd.EXIT_USAGE if args.command == "run" else USAGE_ERROR
        parser.exit(status, f"{PROG}: error: unrecognized arguments: {' '.join(extra)} (see '{PROG} --help')\n")
    try:
        return _dispatch(parser, args)
    except Exception as error:  # a bug of ours: one line, not a traceback into the package
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(shown(
            f"{PROG}: internal error (a bug in pytest-evomemory, not in your input): {type(error).__name__}: {error}; "
            f"please report it with the command you ran ({TRACEBACK_ENV}=1 shows where it happened)", one_line=True,
        ), file=sys.stderr)
        return INTERNAL_ERROR


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "run":
        return runcmd.main(args)
    if args.command == "data":
        return datacmd.run(args)
    if args.command == "init":
        return initcmd.main(args)
    if args.command == "table":
        return tablecmd.main(args)
    if args.command == "power":
        return powercmd.main(args)
    if args.command == "merge":
        return mergecmd.main(args)
    if args.command == "local-model":
        return localcmd.main(args)
    return _report_or_compare(parser, args)


def _report_or_compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    # the reporting modules load for these two commands only, not before a run's first model call
    from .analysis.gain import parse_min_gain
    from .reporting.html import ReportError, comparison_json_path, write_comparison, write_html_report
    from .reporting.terminal import format_comparison

    try:
        if args.command == "report":
            if args.output is not None:
                refuse_run_output(args.output, own=[args.run_dir / REPORT])
            written = write_html_report(args.run_dir, args.output)
        else:
            if len(args.run_dirs) < 2:
                parser.error("compare needs at least two run directories")
            requires = min_gain_by(args)  # refused before anything is written
            for path in (args.output, comparison_json_path(args.output)):
                # a session's own comparison (compare.html beside its arms.json) is compare's file to replace
                refuse_run_output(path, own=[path] if _session_comparison(path) else [])
            files = write_comparison(args.run_dirs, args.output, _labels(args.labels, len(args.run_dirs)))
            gates = parse_min_gain(args.min_gain, list(files.document["streams"]), requires=requires)
            for line in format_comparison(files.document):
                print(line)
            missed = _gate(files.document, gates)
            print(files.html)
            print(files.json)
            return 1 if missed else 0
    except (ReportError, ConfigError) as error:
        print(shown(render(f"{PROG}: error: {error}", "cli"), one_line=True), file=sys.stderr)  # may quote an artefact
        return USAGE_ERROR
    print(written)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
