"""``evomemory power``: before a run, how many tasks and replicates a gain needs.

Thin over :mod:`..analysis.power`
(the formulas, shared with the minimum detectable effect compare.json and
replicates.json report after a run): this module parses the command's arguments
and prints the table.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ..analysis.power import ALPHA, POWER, Plan
from .common import USAGE_ERROR

#: Replicate counts the table always shows, beside the one asked for.
SHOWN_REPLICATES = (1, 3, 5)


def add_parser(commands: Any) -> None:
    power = commands.add_parser(
        "power",
        help="how many tasks and replicates it takes to detect a gain (before a run)",
        description="Before a run: how many tasks and replicates it takes to detect a gain of POINTS percentage "
        "points over a baseline with 80% power at two-sided alpha 0.05 (a paired comparison of two arms on the "
        "same tasks; the normal approximation of Miller 2024, arXiv:2411.00640). The variance of a task's "
        "difference is split between tasks (difficulty: only more tasks help) and seeds (more replicates help); "
        "a pilot run's replicates.json reports the split (variance.seed_share). docs/statistics.md, 'Power'.",
    )
    power.add_argument("--gain", metavar="POINTS", type=float, required=True,
                       help="the gain to detect, in percentage points (e.g. 5)")
    power.add_argument("--tasks", metavar="N", type=int, default=None,
                       help="the tasks you plan to run: also print the smallest gain they detect and their power")
    power.add_argument("--replicates", metavar="K", type=int, default=1, help="replicates per arm (default 1)")
    power.add_argument("--baseline", metavar="FRACTION", type=float, default=0.5,
                       help="the baseline arm's expected accuracy (default 0.5, the largest variance)")
    power.add_argument("--correlation", metavar="R", type=float, default=0.5,
                       help="correlation of the two arms' per-task accuracies (default 0.5: tasks hard for one "
                       "are often hard for the other; 0 is the cautious choice)")
    power.add_argument("--seed-share", metavar="S", type=float, default=0.25,
                       help="share of one outcome's variance that comes from the seeds (default 0.25; 0: "
                       "replicates repeat each task's outcome)")
    power.add_argument("--alpha", type=float, default=ALPHA, help=f"two-sided significance level (default {ALPHA})")
    power.add_argument("--power", dest="target", type=float, default=POWER, help=f"power (default {POWER})")


def main(args: argparse.Namespace) -> int:
    try:
        plan = Plan(args.baseline, args.gain / 100, args.correlation, args.seed_share)
        if not args.gain > 0:
            raise ValueError(f"--gain must be positive percentage points, got {args.gain:g}")
        if args.replicates < 1 or (args.tasks is not None and args.tasks < 2):
            raise ValueError("--replicates must be at least 1 and --tasks at least 2")
        if not 0 < args.alpha < 1 or not 0 < args.target < 1:
            raise ValueError("--alpha and --power must be between 0 and 1")
    except ValueError as error:
        print(f"evomemory: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    for line in describe(plan, args.tasks, args.replicates, alpha=args.alpha, power=args.target):
        print(line)
    return 0


def describe(plan: Plan, tasks: int | None, replicates: int, *, alpha: float, power: float) -> list[str]:
    """The lines ``evomemory power`` prints: the assumptions, then per replicate count
    the tasks needed (and, with ``tasks``, the smallest detectable gain and the power)."""
    lines = [
        f"detecting +{plan.gain * 100:g} points over a baseline of {plan.baseline:.0%} with {power:.0%} power, "
        f"two-sided alpha {alpha:g} (paired by task; arms' correlation {plan.correlation:g}, seed share "
        f"{plan.seed_share:g})",
    ]
    header = ["replicates", "sd of a task's difference", "tasks needed"]
    if tasks is not None:
        header += [f"smallest gain on {tasks} tasks", f"power on {tasks} tasks"]
    rows = [header]
    for count in sorted({*SHOWN_REPLICATES, replicates}):
        row = [str(count), f"{plan.sd(count):.3f}", str(plan.tasks_needed(count, alpha=alpha, power=power))]
        if tasks is not None:
            effect = plan.minimum_detectable_effect(tasks, count, alpha=alpha, power=power)
            shown = f"{effect * 100:.1f} points" if effect is not None else f"none up to +{(1 - plan.baseline) * 100:g}"
            row += [shown, f"{plan.power_at(tasks, count, alpha=alpha):.0%}"]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    if tasks is not None:
        smallest = plan.minimum_detectable_effect(tasks, replicates, alpha=alpha, power=power)
        verdict = smallest is not None and smallest <= plan.gain
        lines.append(
            f"{tasks} tasks x {replicates} replicate(s): a gain of +{plan.gain * 100:g} points is "
            + ("detectable" if verdict else "NOT detectable")
            + f" with {power:.0%} power (power {plan.power_at(tasks, replicates, alpha=alpha):.0%})"
        )
    between = plan.sd(10**9) ** 2
    if math.isclose(plan.variance(1), between):
        lines.append("replicates cannot help: with seed share 0 every replicate repeats each task's outcome")
    return lines


__all__ = ["add_parser", "describe", "main"]
