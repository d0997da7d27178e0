"""The statistics behind every accuracy the reports show: intervals and paired tests.

Streams have 12 to a few hundred tasks, so a bare percentage misleads; every
accuracy comes with a 95 % interval, and every "memory versus no memory"
difference with an interval and a p-value computed on the tasks both runs ran.
Pure Python (no scipy), exact where it matters.

Choices, and why:

* **Accuracy: Wilson score interval** (Wilson 1927). Unlike the Wald interval it
  never leaves [0, 1], is not degenerate at 0/n or n/n, and keeps close to
  nominal coverage at the small n of a benchmark stream (Newcombe 1998, Statist.
  Med. 17:857-872, method 3; Brown, Cai & DasGupta 2001).
* **Paired difference: Agresti & Min's adjusted Wald interval** (Agresti & Min
  2005, Statist. Med. 24:729-740): half a pseudo-observation added to each of the
  four cells of the paired table, then the Wald interval of the difference of the
  matched proportions, truncated to [-1, 1] (as Fagerland, Lydersen & Laake 2017,
  ch. 8, and their R package contingencytables compute it). Runs answer the same
  tasks, so their outcomes are paired; an interval for independent samples would
  be too wide. Of the intervals for matched proportions it is the one whose
  coverage stays nearest 95 % on 24 tasks near 0 (docs/statistics.md, where
  Newcombe's method 10, its form without the correction of phi, Bonett & Price's
  adjustment and Tango's score interval are compared); it is never zero-width.
* **Paired test: exact McNemar** (two-sided binomial test on the discordant
  pairs, p = 1/2): only the tasks one run got right and the other wrong carry
  information about a difference; exact because discordant counts are small.

For a continuous per-task score (LoCoMo's token F1 in [0, 1]) a yes/no outcome
throws information away, so beside McNemar on ``F1 >= 0.5`` there are:

* **Mean with Wilson's interval on the effective number of tasks**, and **MOVER**
  for the paired mean difference (:func:`.clustered.mean_interval`,
  :func:`.clustered.paired_mean_interval`: one replicate of the replicates'
  methods). F1 is bounded, skewed and often 0 or 1: the interval stays in [0, 1]
  and follows the skew as Wilson's does. (A percentile bootstrap did this before;
  it covered 85-93 % on 24 tasks, docs/statistics.md.)
* **Wilcoxon signed-rank test** on the paired differences, as
  ``scipy.stats.wilcoxon`` computes it by default (zero differences dropped,
  average ranks for ties, no continuity correction): exact null distribution for
  at most 50 pairs without ties or zeros, an exact enumeration of the sign flips
  for at most 13 pairs with them, the normal approximation with the tie
  correction otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

#: The standard normal quantile for a two-sided 95 % interval.
Z95 = 1.959963984540054

CONFIDENCE = 0.95

#: How a failed episode enters every figure (:mod:`.summary` counts it so): as a
#: wrong answer, in the denominator, so an unreachable model never raises a score.
#: compare.json's and replicates.json's ``methods`` say so under ``denominator``.
FAILED_IS_WRONG = "a task whose episode failed counts as wrong (score 0) and stays in the denominator"

_Key = TypeVar("_Key", bound=Hashable)


def wilson_interval(successes: int, total: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes / total``; (0, 1) when ``total`` is 0."""
    if total < 0 or not 0 <= successes <= total:
        raise ValueError(f"need 0 <= successes <= total, got {successes}/{total}")
    if total == 0:
        return 0.0, 1.0
    p = successes / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total))
    # The exact bounds at 0/n and n/n are 0 and 1; rounding must not move them off.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == total else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Proportion:
    """A count of successes with its estimate and 95 % Wilson interval."""

    successes: int
    total: int

    @property
    def estimate(self) -> float | None:
        return self.successes / self.total if self.total else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.successes, self.total) if self.total else None

    def to_dict(self) -> dict[str, Any]:
        interval = self.interval
        return {
            "correct": self.successes,
            "tasks": self.total,
            "accuracy": self.estimate,
            "ci_low": None if interval is None else interval[0],
            "ci_high": None if interval is None else interval[1],
        }


@dataclass(frozen=True)
class PairedTable:
    """Outcomes of two runs on the tasks both ran (``first`` is the baseline)."""

    both: int
    only_first: int
    only_second: int
    neither: int

    @property
    def total(self) -> int:
        return self.both + self.only_first + self.only_second + self.neither

    @property
    def first(self) -> Proportion:
        return Proportion(self.both + self.only_first, self.total)

    @property
    def second(self) -> Proportion:
        return Proportion(self.both + self.only_second, self.total)


def pair(first: Mapping[_Key, bool], second: Mapping[_Key, bool]) -> PairedTable:
    """The paired table over the keys (tasks) present in both mappings."""
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for key, outcome in first.items():
        if key in second:
            counts[(bool(outcome), bool(second[key]))] += 1
    return PairedTable(
        counts[(True, True)], counts[(True, False)], counts[(False, True)], counts[(False, False)]
    )


#: Why a comparison over no paired task has no difference, interval or p-value: a
#: test of nothing is not "no difference" (p = 1), and must not be shown as one.
NO_PAIRS = "no task was scored in both runs, so there is no paired test"


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of the discordant pairs at 1/2.

    Doubling the smaller tail is exact for a symmetric null; 1.0 when there is
    no discordant pair (no evidence of a difference).
    """
    if only_first < 0 or only_second < 0:
        raise ValueError("discordant counts must not be negative")
    n = only_first + only_second
    if n == 0:
        return 1.0
    k = min(only_first, only_second)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    # Exact integer arithmetic up to the single division: no underflow for large n.
    return min(1.0, 2 * tail / (1 << n))


def adjusted_wald_bounds(gained: Any, lost: Any, n: Any, z: Any) -> tuple[Any, Any]:
    """Agresti & Min's (2005) interval of ``gained - lost`` before truncation: the
    shares of pairs only the second (``gained``) and only the first (``lost``) got
    right among ``n`` pairs, each cell given half a pseudo-observation. Plain
    arithmetic, so floats or numpy arrays alike (:mod:`.clustered` passes the Kish
    effective number of tasks as ``n``, one per experiment)."""
    adjusted = n + 2
    more = (gained * n + 0.5) / adjusted
    less = (lost * n + 0.5) / adjusted
    centre = more - less
    half = z * ((more + less - centre * centre) / adjusted) ** 0.5
    return centre - half, centre + half


def paired_difference_interval(table: PairedTable, z: float = Z95) -> tuple[float, float] | None:
    """95 % interval of (second - first) accuracy on paired tasks: Agresti & Min's
    (2005) adjusted Wald interval, half a pseudo-observation in each cell, truncated
    to [-1, 1]; None when no task was paired."""
    n = table.total
    if n == 0:
        return None
    low, high = adjusted_wald_bounds(table.only_second / n, table.only_first / n, n, z)
    return max(-1.0, float(low)), min(1.0, float(high))


@dataclass(frozen=True)
class PairedComparison:
    """A run against the baseline on the tasks both ran."""

    table: PairedTable

    @property
    def difference(self) -> float | None:
        if not self.table.total:
            return None
        return (self.table.only_second - self.table.only_first) / self.table.total

    @property
    def interval(self) -> tuple[float, float] | None:
        return paired_difference_interval(self.table)

    @property
    def p_value(self) -> float | None:
        return mcnemar_exact(self.table.only_first, self.table.only_second) if self.table.total else None

    def to_dict(self) -> dict[str, Any]:
        interval = self.interval
        return {
            "paired_tasks": self.table.total,
            "baseline_correct": self.table.first.successes,
            "correct": self.table.second.successes,
            "only_baseline_correct": self.table.only_first,
            "only_this_correct": self.table.only_second,
            "difference": self.difference,
            "ci_low": None if interval is None else interval[0],
            "ci_high": None if interval is None else interval[1],
            "mcnemar_p": self.p_value,
            "no_test": None if self.table.total else NO_PAIRS,
        }


def compare_paired(first: Mapping[_Key, bool], second: Mapping[_Key, bool]) -> PairedComparison:
    """``second`` against the baseline ``first``, over the tasks both ran."""
    return PairedComparison(pair(first, second))


# --------------------------------------------------------------------------- orders and Student's t
#
# Across replicates, intervals are clustered by task (:mod:`.clustered`). Within one
# replicate, tasks pair: two orders of one stream hold the same tasks, so
# :func:`order_difference` is the paired Agresti-Min/McNemar comparison above, task by task.


def order_difference(first: Mapping[_Key, bool], second: Mapping[_Key, bool]) -> PairedComparison:
    """Sequence robustness within one replicate: the same arm's outcomes in two orders
    of one stream, paired by task (``second - first``: Agresti-Min interval, McNemar p)."""
    return compare_paired(first, second)


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (via the regularized
    incomplete beta function: no scipy)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    x = df / (df + t * t)
    tail = 0.5 * _regularized_beta(x, df / 2, 0.5)
    return 1 - tail if t > 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`student_t_cdf`, to 1e-12)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if student_t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-12:
            break
    return (low + high) / 2


def f_survival(f: float, first_df: float, second_df: float) -> float:
    """P(F >= f) for Snedecor's F with ``first_df`` and ``second_df`` degrees of freedom
    (the regularized incomplete beta function, as :func:`student_t_cdf`)."""
    if first_df <= 0 or second_df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {first_df} and {second_df}")
    if f <= 0:
        return 1.0
    x = second_df / (second_df + first_df * f)
    return _regularized_beta(x, second_df / 2, first_df / 2)


def _regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) by its continued fraction (Lentz), using the symmetry for convergence."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1 - front * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return result


# --------------------------------------------------------------------------- continuous scores


@dataclass(frozen=True)
class MeanEstimate:
    """A mean of per-task scores with its 95 % interval (:func:`.clustered.mean_interval`)."""

    mean: float | None
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci_low": self.low, "ci_high": self.high, "tasks": self.n}


def _paired_differences(first: Mapping[_Key, float], second: Mapping[_Key, float]) -> list[float]:
    """``second - first`` per task both ran, in ``first``'s key order."""
    return [float(second[key]) - float(value) for key, value in first.items() if key in second]


@dataclass(frozen=True)
class WilcoxonResult:
    """The signed-rank statistic (sum of the positive differences' ranks) and p."""

    statistic: float
    p_value: float
    #: ``exact``, ``permutation`` or ``normal`` (see :func:`wilcoxon_signed_rank`).
    method: str
    #: Pairs with a non-zero difference (the ones ranked).
    nonzero: int


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for index in order[start : end + 1]:
            ranks[index] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _signed_rank_counts(n: int) -> list[int]:
    """How many of the 2**n sign patterns give each W+ = 0 .. n(n+1)/2 (ranks 1..n)."""
    counts = [1]
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for total, count in enumerate(counts):
            grown[total + rank] += count
        counts = grown
    return counts


def wilcoxon_signed_rank(first: Mapping[_Key, float], second: Mapping[_Key, float]) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test of ``second - first`` on the tasks both ran.

    Mirrors ``scipy.stats.wilcoxon(d)`` with its defaults (``zero_method="wilcox"``,
    ``correction=False``, ``method="auto"``): with at most 50 pairs and no zero or
    tied difference, the exact null distribution; with ties or zeros and at most 13
    pairs, every sign flip of the non-zero differences enumerated; else the normal
    approximation, its variance corrected for ties. p is 1 when every difference is 0;
    no pair at all is no test (ValueError: say :data:`NO_PAIRS` instead of a p-value).
    """
    differences = _paired_differences(first, second)
    if not differences:
        raise ValueError(f"a paired test needs at least one pair; {NO_PAIRS}")
    nonzero = [d for d in differences if d != 0]
    n = len(nonzero)
    if n == 0:
        return WilcoxonResult(0.0, 1.0, "exact", 0)
    ranks = average_ranks([abs(d) for d in nonzero])
    w_plus = sum(rank for rank, d in zip(ranks, nonzero, strict=True) if d > 0)
    tied = len(set(ranks)) < n
    zeros = len(differences) > n
    if len(differences) <= 50 and not tied and not zeros:
        counts = _signed_rank_counts(n)
        total = 1 << n
        w = round(w_plus)
        below = sum(counts[: w + 1]) / total
        above = sum(counts[w:]) / total
        return WilcoxonResult(w_plus, min(1.0, 2 * min(below, above)), "exact", n)
    if len(differences) <= 13:
        # every assignment of signs to the ranked |d| (scipy's exact permutation test)
        statistics = [
            sum(rank for bit, rank in enumerate(ranks) if pattern >> bit & 1) for pattern in range(1 << n)
        ]
        scale = max(1.0, abs(w_plus))
        tolerance = 1e-14 * scale  # scipy compares with a relative tolerance
        below = sum(1 for value in statistics if value <= w_plus + tolerance) / len(statistics)
        above = sum(1 for value in statistics if value >= w_plus - tolerance) / len(statistics)
        return WilcoxonResult(w_plus, min(1.0, 2 * min(below, above)), "permutation", n)
    mean = n * (n + 1) / 4
    ties: dict[float, int] = {}
    for rank in ranks:
        ties[rank] = ties.get(rank, 0) + 1
    variance = (n * (n + 1) * (2 * n + 1) - sum(t**3 - t for t in ties.values()) / 2) / 24
    if variance <= 0:
        return WilcoxonResult(w_plus, 1.0, "normal", n)
    z = (w_plus - mean) / math.sqrt(variance)
    return WilcoxonResult(w_plus, min(1.0, math.erfc(abs(z) / math.sqrt(2))), "normal", n)


__all__ = [
    "CONFIDENCE",
    "FAILED_IS_WRONG",
    "NO_PAIRS",
    "Z95",
    "MeanEstimate",
    "PairedComparison",
    "PairedTable",
    "Proportion",
    "WilcoxonResult",
    "adjusted_wald_bounds",
    "average_ranks",
    "compare_paired",
    "f_survival",
    "mcnemar_exact",
    "order_difference",
    "pair",
    "paired_difference_interval",
    "student_t_cdf",
    "student_t_quantile",
    "wilcoxon_signed_rank",
    "wilson_interval",
]
