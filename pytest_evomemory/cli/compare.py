"""``evomemory compare RUN_DIR RUN_DIR...``: runs side by side on one page.

Memory versus no memory, possibly from different machines: accuracy with its
intervals, the paired difference from the first run (the baseline), the learning
curves, the config diff and the tasks that flipped; the gain gates (``--min-gain``)
decide the exit status. Its errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigError
from ..options import GAIN_FIGURE, add_min_gain_by, min_gain_by, render
from ..rundir import ARMS_MANIFEST
from ..util.redaction import shown
from .common import PROG, USAGE_ERROR, refuse_run_output, usage_line

if TYPE_CHECKING:
    from ..analysis.gain import GainThreshold

DEFAULT_COMPARE_OUTPUT = "evomemory-compare.html"


def add_parser(commands: Any) -> None:
    """Register ``compare`` on the ``evomemory`` command's subparsers."""
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


def main(args: argparse.Namespace) -> int:
    # the reporting modules load for this command only, not before a run's first model call
    from ..analysis.gain import parse_min_gain
    from ..reporting.html import ReportError, comparison_json_path, write_comparison
    from ..reporting.terminal import format_comparison

    if len(args.run_dirs) < 2:
        sys.stderr.write(usage_line("give at least two run directories to compare", "compare"))
        return USAGE_ERROR
    try:
        requires = min_gain_by(args)  # refused before anything is written
        for path in (args.output, comparison_json_path(args.output)):
            # a session's own comparison (compare.html beside its arms.json) is compare's file to replace
            refuse_run_output(path, own=[path] if _session_comparison(path) else [])
        files = write_comparison(args.run_dirs, args.output, _labels(args.labels, len(args.run_dirs)))
        gates = parse_min_gain(args.min_gain, list(files.document["streams"]), requires=requires)
        for line in format_comparison(files.document):
            print(line)
        missed = _gate(files.document, gates)
    except (ReportError, ConfigError) as error:
        print(shown(render(f"{PROG}: error: {error}", "cli"), one_line=True), file=sys.stderr)  # may quote an artefact
        return USAGE_ERROR
    print(files.html)
    print(files.json)
    return 1 if missed else 0


def _labels(value: str | None, count: int) -> list[str] | None:
    from ..reporting.rundata import ReportError

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


def _session_comparison(path: Path) -> bool:
    return path.name in ("compare.html", "compare.json") and (path.parent / ARMS_MANIFEST).is_file()


def _gate(document: Mapping[str, Any], gates: Sequence[GainThreshold]) -> bool:
    """Print each gain gate's verdict; True when one is missed."""
    from ..analysis.gain import check_gains

    results = check_gains(document, gates)
    for result in results:
        print(shown(result.describe()))
    return any(not result.met for result in results)
