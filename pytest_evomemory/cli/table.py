"""``evomemory table RUN_DIR...``: the runs as rows of a table shaped like the paper's Table 1.

Thin over
:func:`..reporting.table.write_table` (the table itself): this module only parses the
command's arguments and prints the text or the path written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..reporting.rundata import ReportError
from ..reporting.table import FORMATS, write_table
from ..rundir import output_path_problem
from .common import USAGE_ERROR


def add_parser(commands: Any) -> None:
    table = commands.add_parser(
        "table",
        help="the runs as rows of a table shaped like the paper's Table 1",
        description="Print (or write) the runs as rows of a table shaped like the Evo-Memory paper's Table 1: "
        "AIME-24, AIME-25, GPQA, MMLU-Pro Eco / Eng / Philo, ToolBench API / Acc. and their average, one "
        "row per run, every cell the run's summary.json accuracy (docs/paper.md). Runs with none of the "
        "paper's streams get their own streams (and Overall) as columns; other streams beside the paper's "
        "follow Avg.",
    )
    table.add_argument("run_dirs", metavar="RUN_DIR", type=Path, nargs="+", help="finished run directories, one row each")
    table.add_argument("--format", choices=FORMATS, default="markdown", help="markdown (default), latex or csv")
    table.add_argument(
        "--ci", action="store_true",
        help="add each cell's 95%% interval (Wilson for a run; with --replicates, clustered by task over the "
        "replicates: docs/statistics.md)",
    )
    table.add_argument(
        "--replicates", action="store_true",
        help="runs with the same label (--labels, else the run name) are replicates of one method: one row of "
        "their means",
    )
    table.add_argument(
        "--labels", metavar="A,B[,...]", default=None, help="comma-separated method names, one per run (default: run names)"
    )
    table.add_argument("--digits", type=int, default=2, choices=range(0, 7), metavar="N",
                       help="decimals shown in markdown and latex (default 2, as the paper; csv is full precision)")
    table.add_argument("-o", "--output", metavar="FILE", type=Path, default=None, help="write here instead of stdout")


def main(args: argparse.Namespace) -> int:
    try:
        problem = output_path_problem(args.output) if args.output is not None else None
        if problem is not None:  # a table is no file of a run
            raise ReportError(f"-o {problem}")
        text = write_table(
            args.run_dirs, args.output, form=args.format, labels=_labels(args.labels, len(args.run_dirs)),
            ci=args.ci, digits=args.digits, replicates=args.replicates,
        )
    except ReportError as error:
        print(f"evomemory: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    if args.output is None:
        sys.stdout.write(text)
    else:
        print(args.output)
    return 0


def _labels(value: str | None, count: int) -> list[str] | None:
    if value is None:
        return None
    labels = [label.strip() for label in value.split(",")]
    if len(labels) != count:
        raise ReportError(f"--labels has {len(labels)} label(s) for {count} run directories; give one per run")
    if any(not label for label in labels):
        raise ReportError("--labels contains an empty label")
    return labels
