"""Coverage of the package's 95 % intervals, by simulation with a known truth.

    python benchmarks/bench_statistics.py                       # 1,000 experiments per cell
    python benchmarks/bench_statistics.py --experiments 300     # a quick check (run_all.py's)

Each experiment draws a benchmark the way a real one varies:

* n tasks from a population whose difficulty varies: task i's chance of being
  solved by the baseline arm is expit(mu_A + sigma * u_i), the other arm's
  expit(mu_B + sigma * (rho * u_i + sqrt(1 - rho^2) * v_i)) (u, v standard normal;
  sigma = 1.5, rho = 0.8: the memory arm helps some tasks more than others);
* K replicates (seeds) per task and arm, each a Bernoulli draw with the task's
  chance: the within-task noise that seeds, orders and sampling add.

mu_A and mu_B are set so that the population accuracies are exactly p and p + gain
(Gauss-Hermite quadrature), the truth the intervals must cover: the accuracy of
the population of tasks, not of the n drawn. The intervals are the package's
own (:mod:`pytest_evomemory.analysis.clustered` across replicates; for K = 1 the
same code is Wilson's interval, and the paired difference is Agresti & Min's
adjusted Wald interval of :mod:`pytest_evomemory.analysis.stats`, as a single run
reports it).

The truth of the difference is the population gain E[chance_B] - E[chance_A],
what a paper's "memory adds X points on tasks like these" means. It is the
expectation of both estimators: with one replicate each task's pair of outcomes
is a draw from the population's paired 2x2 table (cell probabilities E[c_A c_B],
...), with K replicates each task's pair of means has expectation (E c_A, E c_B).
The gain of the drawn tasks would be the wrong truth: it leaves task sampling out,
which the intervals are built to cover.

A 95 % interval must cover the truth in 93-97 % of the experiments. A cell is
MISSED (a line says so; with ``--strict`` the exit status is 1) when its coverage is outside that
band by more than the simulation's own error: when the 95 % Wilson interval of the
observed coverage (over the experiments) does not reach the band. With 1,000
experiments the Monte Carlo standard error of a coverage near 95 % is 0.7 points,
so a method whose true coverage is 97.0 % shows 96-98 % from run to run. (For one
replicate on 24 tasks at p = 0.05 or 0.95 Wilson's exact coverage is 97.02 %: with
24 yes/no outcomes no interval can be closer, the binomial's steps are that coarse.
Likewise for the difference with one replicate on 24 tasks at p = 0.95, where the
gain is 2.5 points and 1.6 tasks are discordant on average: even an interval that
knew the nuisance parameters and rejected exactly the outer 2.5 % tails of the
discordant difference b - c would cover 97.85 % (exact multinomial
computation), so that cell is MISSED by every method; docs/statistics.md.)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_evomemory.analysis.clustered import arm_interval, difference_interval
from pytest_evomemory.analysis.stats import PairedTable, paired_difference_interval, wilson_interval

SIGMA = 1.5
RHO = 0.8
LOW, HIGH = 93.0, 97.0


def _population_accuracy(mu: float, nodes: np.ndarray, weights: np.ndarray) -> float:
    return float((weights / (1 + np.exp(-(mu + SIGMA * nodes)))).sum())


def location_for(accuracy: float) -> float:
    """mu such that the population of tasks has ``accuracy`` (bisection on quadrature)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    low, high = -20.0, 20.0
    for _ in range(200):
        middle = (low + high) / 2
        if _population_accuracy(middle, nodes, weights) < accuracy:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def gain_for(accuracy: float) -> float:
    """The true gain of the second arm: 10 points, less near the ceiling."""
    return min(0.10, (1 - accuracy) / 2)


def simulate(
    generator: np.random.Generator, experiments: int, tasks: int, replicates: int, accuracy: float
) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes ``(experiments, tasks, replicates)`` of the two arms (see the module docstring)."""
    mu_a, mu_b = location_for(accuracy), location_for(accuracy + gain_for(accuracy))
    u = generator.standard_normal((experiments, tasks, 1))
    v = generator.standard_normal((experiments, tasks, 1))
    chance_a = 1 / (1 + np.exp(-(mu_a + SIGMA * u)))
    chance_b = 1 / (1 + np.exp(-(mu_b + SIGMA * (RHO * u + math.sqrt(1 - RHO * RHO) * v))))
    shape = (experiments, tasks, replicates)
    first = (generator.random(shape) < chance_a).astype(np.float64)
    second = (generator.random(shape) < chance_b).astype(np.float64)
    return first, second


def paired_cells(accuracy: float) -> tuple[float, float]:
    """The population's chance that a task is solved by the second arm only and by the
    first arm only (two-dimensional Gauss-Hermite quadrature over u and v)."""
    mu_a, mu_b = location_for(accuracy), location_for(accuracy + gain_for(accuracy))
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    weights = weights / weights.sum()
    u, v = np.meshgrid(nodes, nodes, indexing="ij")
    weight = np.outer(weights, weights)
    chance_a = 1 / (1 + np.exp(-(mu_a + SIGMA * u)))
    chance_b = 1 / (1 + np.exp(-(mu_b + SIGMA * (RHO * u + math.sqrt(1 - RHO * RHO) * v))))
    return float((weight * (1 - chance_a) * chance_b).sum()), float((weight * chance_a * (1 - chance_b)).sum())


def attainable_coverage(tasks: int, accuracy: float) -> float:
    """The highest coverage (%) below which no interval of one replicate can go without
    excluding the truth in more than 2.5 % of experiments on one side: an oracle that
    knows the population's paired table rejects the largest outer tails of the
    discordant difference b - c that hold at most 2.5 % each (exact multinomial)."""
    gained, lost = paired_cells(accuracy)
    b, c = np.meshgrid(np.arange(tasks + 1), np.arange(tasks + 1), indexing="ij")
    keep = b + c <= tasks
    b, c = b[keep], c[keep]
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, tasks + 1)))])
    log_p = (log_factorial[tasks] - log_factorial[b] - log_factorial[c] - log_factorial[tasks - b - c]
             + b * math.log(gained) + c * math.log(lost) + (tasks - b - c) * math.log(1 - gained - lost))
    values, where = np.unique(b - c, return_inverse=True)
    probability = np.bincount(where, weights=np.exp(log_p), minlength=values.size)
    below, above = np.cumsum(probability), np.cumsum(probability[::-1])
    rejected = below[below <= 0.025].max(initial=0.0) + above[above <= 0.025].max(initial=0.0)
    return float((1 - rejected) * 100)


def single_run(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One replicate: the single run's paired interval (Agresti & Min), experiment by experiment."""
    a, b = first[..., 0].astype(bool), second[..., 0].astype(bool)
    lows, highs = [], []
    for x, y in zip(a, b, strict=True):
        table = PairedTable(int((x & y).sum()), int((x & ~y).sum()), int((~x & y).sum()), int((~x & ~y).sum()))
        low, high = paired_difference_interval(table) or (math.nan, math.nan)
        lows.append(low)
        highs.append(high)
    return np.asarray(lows), np.asarray(highs)


def cell(generator: np.random.Generator, experiments: int, tasks: int, replicates: int, accuracy: float) -> dict[str, float]:
    first, second = simulate(generator, experiments, tasks, replicates, accuracy)
    gain = gain_for(accuracy)
    _, low, high, _ = arm_interval(first)
    arm = float(((low <= accuracy) & (accuracy <= high)).mean() * 100)
    if replicates == 1:
        d_low, d_high = single_run(first, second)
    else:
        _, d_low, d_high = difference_interval(first, second, binary=True)
    difference = float(((d_low <= gain) & (gain <= d_high)).mean() * 100)
    return {
        "arm": arm, "difference": difference,
        "arm_width": float((high - low).mean() * 100), "difference_width": float((d_high - d_low).mean() * 100),
    }


def miss(coverage: float, experiments: int) -> tuple[str, float, float] | None:
    """``(side, low, high)`` when a coverage (%) over ``experiments`` misses the band by
    more than the simulation's error (its 95 % Wilson interval, in %, does not reach
    it), else None."""
    low, high = wilson_interval(round(coverage * experiments / 100), experiments)
    if LOW <= high * 100 and low * 100 <= HIGH:
        return None
    return ("too narrow" if high * 100 < LOW else "too wide (conservative)"), low * 100, high * 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", type=int, default=1000, help="experiments per cell (default 1,000)")
    parser.add_argument("--tasks", default="24,200", help="comma-separated task counts (default 24,200)")
    parser.add_argument("--replicates", default="1,3,5", help="comma-separated replicate counts (default 1,3,5)")
    parser.add_argument("--accuracies", default="0.05,0.5,0.95", help="true baseline accuracies (default 0.05,0.5,0.95)")
    parser.add_argument("--seed", type=int, default=20241101)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a cell is MISSED")
    args = parser.parse_args(argv)
    generator = np.random.default_rng(args.seed)
    started = time.perf_counter()
    header = f"{'K':>2} {'tasks':>5} {'p':>5} {'gain':>5} {'arm cover %':>11} {'diff cover %':>12} {'arm width':>9} {'diff width':>10}"
    print(f"coverage of 95% intervals, {args.experiments} experiments per row (target {LOW:.0f}-{HIGH:.0f} %)")
    print(header)
    print("-" * len(header))
    missed = []
    for replicates in [int(k) for k in args.replicates.split(",")]:
        for tasks in [int(n) for n in args.tasks.split(",")]:
            for accuracy in [float(p) for p in args.accuracies.split(",")]:
                found = cell(generator, args.experiments, tasks, replicates, accuracy)
                print(
                    f"{replicates:>2} {tasks:>5} {accuracy:>5.2f} {gain_for(accuracy):>+5.3f} {found['arm']:>11.1f} "
                    f"{found['difference']:>12.1f} {found['arm_width']:>9.1f} {found['difference_width']:>10.1f}",
                    flush=True,
                )
                for what in ("arm", "difference"):
                    verdict = miss(found[what], args.experiments)
                    if verdict is None:
                        continue
                    side, low, high = verdict
                    if what == "difference" and replicates == 1 and high >= LOW:
                        best = attainable_coverage(tasks, accuracy)
                        if best > HIGH:
                            side += f"; an interval that errs at most 2.5 % on each side covers at least {best:.1f} % here"
                    missed.append(
                        f"MISSED: {what} interval covers {found[what]:.1f} % at K={replicates}, n={tasks}, "
                        f"p={accuracy} (target {LOW:.0f}-{HIGH:.0f} %, Monte Carlo 95% interval "
                        f"{low:.1f}-{high:.1f}): {side}"
                    )
    print("K = 1: Wilson (arm) and Agresti-Min adjusted Wald (difference), as a single run reports them; K > 1: "
          "Wilson (arm) and Agresti-Min (difference) on the Kish effective number of tasks, as replicates.json does")
    print(f"widths: mean interval width in percentage points; {time.perf_counter() - started:.1f} s")
    for line in missed:
        print(line)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
