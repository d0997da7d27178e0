"""``evomemory merge SHARD_DIR... --output-dir DIR``: the shards of a session, joined.

Thin over :mod:`..runtime.merge` (which reads, checks and writes): this module parses
the command's arguments and prints what was merged. Exit status: 0 merged, complete
and passed; 1 merged, but incomplete (a shard did not finish: named on stderr), a
threshold or gain gate missed, or a failed episode; 2 refused (each problem one line
on stderr, naming the shards), nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import arm_name
from ..core.errors import ConfigError, EvoMemoryError
from ..options import GAIN_FIGURE, add_min_gain_by, min_gain_by, render
from ..rundir import output_path_problem
from ..util.redaction import shown
from .common import USAGE_ERROR

if TYPE_CHECKING:
    from ..analysis.gain import GainThreshold
    from ..runtime.shards import ShardPlan



def add_parser(commands: Any) -> None:
    merge = commands.add_parser(
        "merge",
        help="merge the output directories of a session's shards into one run",
        description="Merge the output directories that the shards of one session wrote (--evomemory-shard=I/N, "
        "'evomemory run --shard I/N') into the run directory one machine would have written: records in stream "
        "order; summary, thresholds, report and, for several arms, compare.html and compare.json recomputed from "
        "the merged per-task records (a repeated session: replicates.json and each replicate's comparison). "
        "Refuses shards of different plans, a shard given twice and a missing "
        "shard; names the shards that did not finish (the merged run is then incomplete and resumable).",
    )
    merge.add_argument("shard_dirs", metavar="SHARD_DIR", type=Path, nargs="+",
                       help="the output directory of each shard (any order)")
    merge.add_argument("--output-dir", metavar="DIR", type=Path, required=True,
                       help="where the merged run goes (with several arms: one directory per arm and the comparison)")
    merge.add_argument(
        "--min-gain", metavar="[STREAM=]POINTS", action="append", default=[],
        help=f"with several arms: exit 1 if an arm's {GAIN_FIGURE} does not beat the baseline's by POINTS "
        "percentage points overall (or on STREAM), paired on the tasks both ran; repeatable",
    )
    add_min_gain_by(merge)


def main(args: argparse.Namespace) -> int:
    # loaded by this command only: `evomemory run` builds its parser, not its merge
    from ..analysis.gain import check_gains, check_replicate_gains, parse_min_gain
    from ..reporting.reports import REPORTS
    from ..reporting.terminal import format_comparison, format_replicates, format_table
    from ..runtime.merge import MERGE, MergeRefused, merge_shards

    gates: list[GainThreshold] = []

    def check(plan: ShardPlan) -> None:  # before anything is written
        if args.min_gain and len({arm_name(label) for label in plan.arms}) < 2:  # a replicate is its arm's
            raise ConfigError("--min-gain gates the gain of an arm over the baseline: the shards ran one arm")
        gates.extend(parse_min_gain(args.min_gain, list(plan.streams), requires=min_gain_by(args)))

    problem = output_path_problem(args.output_dir, directory=True)
    if problem is not None:  # before any shard is read
        _error(f"{MERGE}: error: --output-dir {problem}")
        return USAGE_ERROR
    try:
        merged = merge_shards(args.shard_dirs, args.output_dir, REPORTS, tuple(sys.argv), check)
    except MergeRefused as refused:
        for problem in refused.problems:
            _error(f"{MERGE}: error: {problem}")
        return USAGE_ERROR
    except EvoMemoryError as error:
        _error(f"{MERGE}: error: {error}")
        return USAGE_ERROR
    for line in merged.incomplete:
        _error(f"{MERGE}: {line}")
    failed = False
    for arm in merged.arms:
        completion = arm.summary.completion
        print(f"{MERGE}: {arm.name}: {completion.tasks_run} of {completion.tasks_planned} planned tasks"
              + ("" if completion.complete else f" (incomplete: {completion.reason})"))
        for line in format_table(arm.metrics):
            print(shown(line))
        for threshold in arm.thresholds:
            print(shown(threshold.describe()), file=sys.stdout if threshold.met else sys.stderr)
        print(f"results: {arm.run_dir}")
        if arm.report_error:
            _error(f"{MERGE}: the HTML report could not be written: {arm.report_error}")
        else:
            print(f"report: {arm.run_dir / 'report.html'}")
        failed = failed or arm.failed
    complete = all(arm.summary.completion.complete for arm in merged.arms)
    if merged.comparison is not None and merged.comparison_files is not None:
        lines, results = format_comparison(merged.comparison), check_gains(merged.comparison, gates, complete=complete)
        html, json_path = merged.comparison_files
        paths = [f"comparison: {html}", f"comparison data: {json_path}"]
    elif merged.replicates is not None:  # a repeated session: compared across its replicates
        lines = format_replicates(merged.replicates)
        results = check_replicate_gains(merged.replicates, gates, complete=complete)
        paths = [f"comparison: {path}" for path in merged.replicate_files]
    else:
        lines, results, paths = [], [], []
    for line in [*lines, *(result.describe() for result in results)]:
        print(shown(line))
    failed = failed or any(not result.met for result in results)
    for line in paths:
        print(line)
    return 1 if failed else 0


def _error(text: str) -> None:
    print(shown(render(text, "cli"), one_line=True), file=sys.stderr)  # options as this command spells them


__all__ = ["add_parser", "main"]
