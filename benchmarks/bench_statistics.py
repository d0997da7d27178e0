"""Coverage of the package's 95 % intervals, by simulation with a known truth.

    python benchmarks/bench_statistics.py                       # 1,000 experiments per cell
    python benchmarks/bench_statistics.py --experiments 300     # a quick check (run_all.py's)
    python benchmarks/bench_statistics.py --scores f1           # only the continuous (F1) table
    python benchmarks/bench_statistics.py --scores sequence     # what the intervals do not cover
    python benchmarks/bench_statistics.py --tasks 5,12 --accuracies 0.02,0.2,0.5,0.8,0.98   # the edges

Two tables: yes/no outcomes (accuracy) and continuous per-task scores (LoCoMo's
token F1). Each experiment of the first draws a benchmark the way a real one varies:

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

The F1 table draws per-task token F1 scores the way LoCoMo's vary (:func:`simulate_f1`):
task i has a chance c_i drawn as above (the two arms correlated by rho), and each of
its K replicates scores 1 with probability c_i^2, 0 with probability (1 - c_i)^2, and
otherwise a Beta(kappa c_i, kappa (1 - c_i)) value (kappa = 4): many exact 0s and 1s
(at a mean F1 of 0.4, about 41 % zeros and 24 % ones) and a continuous middle, the
replicates of a task clustered by its c_i. A replicate's expected F1 is
m(c) = 3c^2 - 2c^3; the truth is the population mean E[m(c)] (quadrature), and the
gain's truth E[m(c_B)] - E[m(c_A)]. The intervals are the ones the package prints for
a mean figure: for one arm the clustered Wilson interval on the effective number of
tasks of :mod:`pytest_evomemory.analysis.clustered` (continuous scores: a design
effect estimated with half a pseudo-outcome at 0 and at 1, :func:`~pytest_evomemory.
analysis.clustered.effective_tasks`), for the paired difference MOVER over those
intervals; with one replicate these are a single run's (summary.json's categories,
compare.json's continuous comparison), with K the replicates' (replicates.json,
``evomemory table --ci``).

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

from collections.abc import Callable, Iterator

from pytest_evomemory.analysis.clustered import arm_interval, difference_interval, replicate_spread
from pytest_evomemory.analysis.stats import PairedTable, paired_difference_interval, wilson_interval
from pytest_evomemory.reporting.replicates import REPLICATE_EFFECT_ALPHA

SIGMA = 1.5
RHO = 0.8
#: the concentration of a partly right answer's F1 around its task's chance
KAPPA = 4.0
LOW, HIGH = 93.0, 97.0
F1_TASKS = "24,100,500"
F1_MEANS = "0.1,0.4,0.8"


def _chance(chance: np.ndarray) -> np.ndarray:
    """A yes/no outcome's expected score: the task's chance itself."""
    return chance


def expected_f1(chance: np.ndarray) -> np.ndarray:
    """A replicate's expected F1 on a task of chance c: c^2 + 2c(1 - c) * c (module docstring)."""
    expected: np.ndarray = 3 * chance**2 - 2 * chance**3
    return expected


def _population_mean(mu: float, nodes: np.ndarray, weights: np.ndarray, score: Callable[[np.ndarray], np.ndarray]) -> float:
    return float((weights * score(1 / (1 + np.exp(-(mu + SIGMA * nodes))))).sum())


def location_for(accuracy: float, score: Callable[[np.ndarray], np.ndarray] = _chance) -> float:
    """mu such that the population of tasks has mean ``score`` ``accuracy`` (bisection on quadrature)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    low, high = -20.0, 20.0
    for _ in range(200):
        middle = (low + high) / 2
        if _population_mean(middle, nodes, weights, score) < accuracy:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def gain_for(accuracy: float) -> float:
    """The true gain of the second arm: 10 points, less near the ceiling."""
    return min(0.10, (1 - accuracy) / 2)


def _chances(
    generator: np.random.Generator, experiments: int, tasks: int, accuracy: float,
    score: Callable[[np.ndarray], np.ndarray] = _chance,
) -> tuple[np.ndarray, np.ndarray]:
    """Each task's chance in the two arms, shaped ``(experiments, tasks, 1)``, their
    population means of ``score`` being ``accuracy`` and ``accuracy`` + the gain."""
    mu_a, mu_b = location_for(accuracy, score), location_for(accuracy + gain_for(accuracy), score)
    u = generator.standard_normal((experiments, tasks, 1))
    v = generator.standard_normal((experiments, tasks, 1))
    chance_a = 1 / (1 + np.exp(-(mu_a + SIGMA * u)))
    chance_b = 1 / (1 + np.exp(-(mu_b + SIGMA * (RHO * u + math.sqrt(1 - RHO * RHO) * v))))
    return chance_a, chance_b


def simulate(
    generator: np.random.Generator, experiments: int, tasks: int, replicates: int, accuracy: float
) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes ``(experiments, tasks, replicates)`` of the two arms (see the module docstring)."""
    chance_a, chance_b = _chances(generator, experiments, tasks, accuracy)
    shape = (experiments, tasks, replicates)
    first = (generator.random(shape) < chance_a).astype(np.float64)
    second = (generator.random(shape) < chance_b).astype(np.float64)
    return first, second


def _f1_draws(generator: np.random.Generator, chance: np.ndarray, replicates: int) -> np.ndarray:
    """K replicate F1 scores of each task: 1 with probability c^2, 0 with (1 - c)^2,
    else Beta(kappa c, kappa (1 - c)) (module docstring)."""
    shape = (*chance.shape[:-1], replicates)
    chance = np.broadcast_to(chance, shape)
    draw = generator.random(shape)
    middle = generator.beta(KAPPA * np.clip(chance, 1e-9, 1.0), KAPPA * np.clip(1 - chance, 1e-9, 1.0))
    scores: np.ndarray = np.where(draw < chance**2, 1.0, np.where(draw < chance**2 + (1 - chance) ** 2, 0.0, middle))
    return scores


def simulate_f1(
    generator: np.random.Generator, experiments: int, tasks: int, replicates: int, mean: float
) -> tuple[np.ndarray, np.ndarray]:
    """F1 scores ``(experiments, tasks, replicates)`` of the two arms, the population's
    mean F1 being ``mean`` and ``mean`` + :func:`gain_for` (module docstring)."""
    chance_a, chance_b = _chances(generator, experiments, tasks, mean, expected_f1)
    return _f1_draws(generator, chance_a, replicates), _f1_draws(generator, chance_b, replicates)


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


def f1_cell(generator: np.random.Generator, experiments: int, tasks: int, replicates: int, mean: float) -> dict[str, float]:
    """The F1 table's row: coverage and width of the arm's interval and of MOVER's paired
    difference, as the package computes them for a mean figure."""
    first, second = simulate_f1(generator, experiments, tasks, replicates, mean)
    gain = gain_for(mean)
    _, low, high, _ = arm_interval(first)
    _, d_low, d_high = difference_interval(first, second, binary=False)
    assert ((0 <= low) & (high <= 1)).all() and ((-1 <= d_low) & (d_high <= 1)).all()
    return {
        "arm": float(((low <= mean) & (mean <= high)).mean() * 100),
        "difference": float(((d_low <= gain) & (gain <= d_high)).mean() * 100),
        "arm_width": float((high - low).mean() * 100), "difference_width": float((d_high - d_low).mean() * 100),
        "zeros": float((first == 0).mean() * 100), "ones": float((first == 1).mean() * 100),
    }


#: The sequence effects the third table simulates (``--scores sequence``), each a way
#: one replicate's tasks are not independent draws: a seed that helps or hurts every
#: task of its replicate (a memory history good or bad throughout: a logit shift
#: of N(0, TAU) shared by the replicate's tasks), and carry-over in a fixed order
#: (the task after a right answer is easier, after a wrong one harder: a logit shift
#: of +/- GAMMA, the order the same in every replicate, as ``order: given`` runs it),
#: and the same carry-over with each replicate in its own order (``order: shuffle``
#: with each replicate's seed).
SEQUENCE_EFFECTS = ("seed shift", "carry-over", "carry-over, shuffled")
TAU = 0.5
GAMMA = 0.75


def simulate_sequence(
    generator: np.random.Generator, experiments: int, tasks: int, replicates: int, accuracy: float, effect: str
) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes ``(experiments, tasks, replicates)`` of the two arms with a sequence
    ``effect`` (:data:`SEQUENCE_EFFECTS`) on top of :func:`simulate`'s tasks."""
    chance_a, chance_b = _chances(generator, experiments, tasks, accuracy)
    shape = (experiments, tasks, replicates)
    arms = []
    for chance in (chance_a, chance_b):
        logit = np.log(chance / (1 - chance))
        if effect == "seed shift":
            shift = TAU * generator.standard_normal((experiments, 1, replicates))
            arms.append((generator.random(shape) < 1 / (1 + np.exp(-(logit + shift)))).astype(np.float64))
            continue
        outcomes = np.zeros(shape)
        previous = generator.random((experiments, replicates)) < 0.5
        logit = np.broadcast_to(logit, shape)
        order = (np.argsort(generator.random(shape), axis=1) if effect.endswith("shuffled")
                 else np.broadcast_to(np.arange(tasks)[None, :, None], shape))
        for position in range(tasks):
            task = order[:, position, :]  # the task each replicate runs at this position
            step = np.take_along_axis(logit, task[:, None, :], axis=1)[:, 0, :] + np.where(previous, GAMMA, -GAMMA)
            previous = generator.random((experiments, replicates)) < 1 / (1 + np.exp(-step))
            np.put_along_axis(outcomes, task[:, None, :], previous[:, None, :].astype(np.float64), axis=1)
        arms.append(outcomes)
    return arms[0], arms[1]


def sequence_truth(tasks: int, accuracy: float, effect: str, experiments: int = 200_000) -> tuple[float, float]:
    """The population's accuracy of each arm under ``effect`` (:func:`simulate_sequence`
    with one replicate, averaged over many experiments and the n positions: a fixed
    seed, so every cell of a grid has the same truth; Monte Carlo error below 0.001)."""
    first, second = simulate_sequence(np.random.default_rng(1), experiments // tasks + 1, tasks, 1, accuracy, effect)
    return float(first.mean()), float(second.mean())


def sequence_cell(
    generator: np.random.Generator, experiments: int, tasks: int, replicates: int, accuracy: float, effect: str
) -> dict[str, float]:
    """Coverage of the package's intervals (as :func:`cell` computes them) of
    experiments with a sequence ``effect``, against the population's truth
    (:func:`sequence_truth`): an accuracy and a gain over seeds and tasks alike."""
    first, second = simulate_sequence(generator, experiments, tasks, replicates, accuracy, effect)
    truth_a, truth_b = sequence_truth(tasks, accuracy, effect)
    gain = truth_b - truth_a
    _, low, high, _ = arm_interval(first)
    if replicates == 1:
        d_low, d_high = single_run(first, second)
    else:
        _, d_low, d_high = difference_interval(first, second, binary=True)
    flagged = [
        spread is not None and spread.p_value < REPLICATE_EFFECT_ALPHA
        for spread in (replicate_spread(scores) for scores in first)
    ]
    return {
        "arm": float(((low <= truth_a) & (truth_a <= high)).mean() * 100),
        "difference": float(((d_low <= gain) & (gain <= d_high)).mean() * 100),
        "truth": truth_a, "gain": gain, "flagged": float(np.mean(flagged) * 100),
    }


def miss(coverage: float, experiments: int) -> tuple[str, float, float] | None:
    """``(side, low, high)`` when a coverage (%) over ``experiments`` misses the band by
    more than the simulation's error (its 95 % Wilson interval, in %, does not reach
    it), else None."""
    low, high = wilson_interval(round(coverage * experiments / 100), experiments)
    if LOW <= high * 100 and low * 100 <= HIGH:
        return None
    return ("too narrow" if high * 100 < LOW else "too wide (conservative)"), low * 100, high * 100


def _grid(replicates: str, tasks: str, levels: str) -> Iterator[tuple[int, int, float]]:
    """Every cell ``(K, n, level)`` of a table, K outermost (as the table prints)."""
    for k in replicates.split(","):
        for n in tasks.split(","):
            for level in levels.split(","):
                yield int(k), int(n), float(level)


def _head(title: str, header: str, experiments: int) -> None:
    print(f"{title}: coverage of 95% intervals, {experiments} experiments per row (target {LOW:.0f}-{HIGH:.0f} %)")
    print(header)
    print("-" * len(header))


def _misses(found: dict[str, float], experiments: int, what: str, where: str,
            reason: Callable[[str, str, float], str]) -> list[str]:
    """The MISSED lines of a row: ``what`` names the figure (``F1 arm``), ``reason``
    ``(interval, side, Monte Carlo high)`` says why."""
    lines = []
    for interval in ("arm", "difference"):
        verdict = miss(found[interval], experiments)
        if verdict is not None:
            side, low, high = verdict
            lines.append(
                f"MISSED: {what}{interval} interval covers {found[interval]:.1f} % at {where} (target {LOW:.0f}-"
                f"{HIGH:.0f} %, Monte Carlo 95% interval {low:.1f}-{high:.1f}): {reason(interval, side, high)}"
            )
    return lines


def _yes_no_table(args: argparse.Namespace, generator: np.random.Generator) -> list[str]:
    _head("yes/no outcomes", f"{'K':>2} {'tasks':>5} {'p':>5} {'gain':>5} {'arm cover %':>11} {'diff cover %':>12} "
          f"{'arm width':>9} {'diff width':>10}", args.experiments)
    missed = []
    for replicates, tasks, accuracy in _grid(args.replicates, args.tasks, args.accuracies):
        found = cell(generator, args.experiments, tasks, replicates, accuracy)
        print(
            f"{replicates:>2} {tasks:>5} {accuracy:>5.2f} {gain_for(accuracy):>+5.3f} {found['arm']:>11.1f} "
            f"{found['difference']:>12.1f} {found['arm_width']:>9.1f} {found['difference_width']:>10.1f}",
            flush=True,
        )

        def reason(interval: str, side: str, high: float, tasks: int = tasks, accuracy: float = accuracy,
                   replicates: int = replicates) -> str:
            if interval == "difference" and replicates == 1 and high >= LOW:
                best = attainable_coverage(tasks, accuracy)
                if best > HIGH:
                    side += f"; an interval that errs at most 2.5 % on each side covers at least {best:.1f} % here"
            return side

        missed += _misses(found, args.experiments, "", f"K={replicates}, n={tasks}, p={accuracy}", reason)
    print("K = 1: Wilson (arm) and Agresti-Min adjusted Wald (difference), as a single run reports them; K > 1: "
          "Wilson (arm) and Agresti-Min (difference) on the Kish effective number of tasks, as replicates.json does")
    return missed


def f1_reason(side: str, zeros: float, ones: float, tasks: int) -> str:
    """Why an F1 cell misses: too narrow is the method's fault; too wide where the
    scores pile up at 0 or 1 on few tasks is their discreteness (as Wilson's 97 % on
    24 yes/no outcomes near 0)."""
    if side.startswith("too wide") and tasks <= 30 and max(zeros, ones) >= 50:
        return (f"{side}; {max(zeros, ones):.0f} % of the scores are exactly {0 if zeros >= ones else 1} on {tasks} "
                "tasks, nearly yes/no outcomes, whose 95 % intervals cannot come closer than about 97 % there")
    return side


def _f1_table(args: argparse.Namespace, generator: np.random.Generator) -> list[str]:
    _head("F1 scores (continuous, in [0, 1])", f"{'K':>2} {'tasks':>5} {'F1':>5} {'gain':>5} {'zeros %':>7} "
          f"{'ones %':>6} {'arm cover %':>11} {'diff cover %':>12} {'arm width':>9} {'diff width':>10}", args.experiments)
    missed = []
    for replicates, tasks, mean in _grid(args.replicates, args.f1_tasks, args.f1_means):
        found = f1_cell(generator, args.experiments, tasks, replicates, mean)
        print(
            f"{replicates:>2} {tasks:>5} {mean:>5.2f} {gain_for(mean):>+5.3f} {found['zeros']:>7.0f} "
            f"{found['ones']:>6.0f} {found['arm']:>11.1f} {found['difference']:>12.1f} "
            f"{found['arm_width']:>9.1f} {found['difference_width']:>10.1f}",
            flush=True,
        )

        def reason(_interval: str, side: str, _high: float, tasks: int = tasks, found: dict[str, float] = found) -> str:
            return f1_reason(side, found["zeros"], found["ones"], tasks)

        missed += _misses(found, args.experiments, "F1 ", f"K={replicates}, n={tasks}, mean F1={mean}", reason)
    print("arm: Wilson on the effective number of tasks (continuous scores: design effect with half a pseudo-outcome "
          "at 0 and at 1, t with tasks - 1 df); difference: MOVER (Zou & Donner) of the two arms' intervals; "
          "K = 1 as a single run reports them (summary.json, compare.json), K > 1 as replicates.json does")
    return missed


def _sequence_table(args: argparse.Namespace, generator: np.random.Generator) -> list[str]:
    """Coverage where one replicate's tasks are not independent (:data:`SEQUENCE_EFFECTS`):
    what the intervals, which cover task sampling, leave out; and how often
    replicates.json's replicate-effect F test flags it (``flagged``, with K > 1)."""
    _head("sequence effects (what the intervals do not cover)", f"{'effect':<20} {'K':>2} {'tasks':>5} {'p':>5} "
          f"{'arm cover %':>11} {'diff cover %':>12} {'flagged %':>9}", args.experiments)
    for effect in SEQUENCE_EFFECTS:
        for replicates, tasks, accuracy in _grid(args.replicates, args.tasks, args.sequence_accuracies):
            found = sequence_cell(generator, args.experiments, tasks, replicates, accuracy, effect)
            flagged = f"{found['flagged']:>9.1f}" if replicates > 1 else f"{'-':>9}"
            print(f"{effect:<20} {replicates:>2} {tasks:>5} {accuracy:>5.2f} {found['arm']:>11.1f} "
                  f"{found['difference']:>12.1f} {flagged}", flush=True)
    print(f"seed shift: a N(0, {TAU}) logit shift shared by a replicate's tasks; carry-over: +/-{GAMMA} on the logit "
          "after a right / wrong answer, in one fixed order (shuffled: each replicate its own order); truth: the "
          "population's accuracy and gain over tasks and seeds. Expected to miss: not MISSED lines")
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", type=int, default=1000, help="experiments per cell (default 1,000)")
    parser.add_argument("--tasks", default="24,200", help="yes/no table: comma-separated task counts (default 24,200)")
    parser.add_argument("--replicates", default="1,3,5", help="comma-separated replicate counts (default 1,3,5)")
    parser.add_argument("--accuracies", default="0.05,0.5,0.95", help="yes/no table: true baseline accuracies (default 0.05,0.5,0.95)")
    parser.add_argument("--f1-tasks", default=F1_TASKS, help=f"F1 table: comma-separated task counts (default {F1_TASKS})")
    parser.add_argument("--f1-means", default=F1_MEANS, help=f"F1 table: true baseline mean F1 (default {F1_MEANS})")
    parser.add_argument("--scores", choices=("both", "yes-no", "f1", "sequence"), default="both",
                        help="which tables (default both: yes-no and f1; sequence: the sequence effects the intervals "
                        "do not cover)")
    parser.add_argument("--sequence-accuracies", default="0.05,0.5",
                        help="sequence table: true baseline accuracies (default 0.05,0.5)")
    parser.add_argument("--seed", type=int, default=20241101)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a cell is MISSED")
    args = parser.parse_args(argv)
    generator = np.random.default_rng(args.seed)
    started = time.perf_counter()
    missed = []
    if args.scores in ("both", "yes-no"):
        missed += _yes_no_table(args, generator)
    if args.scores in ("both", "f1"):
        missed += _f1_table(args, generator)
    if args.scores == "sequence":
        missed += _sequence_table(args, generator)
    print(f"widths: mean interval width in percentage points; {time.perf_counter() - started:.1f} s")
    for line in missed:
        print(line)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
