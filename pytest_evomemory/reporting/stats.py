"""The statistics behind every accuracy the reports show: intervals and paired tests.

Streams have 12 to a few hundred tasks, so a bare percentage misleads; every
accuracy comes with a 95 % interval, and every "memory versus no memory"
difference with an interval and a p-value computed on the tasks both runs ran.
Pure Python (no numpy, no scipy), exact where it matters.

Choices, and why:

* **Accuracy: Wilson score interval** (Wilson 1927). Unlike the Wald interval it
  never leaves [0, 1], is not degenerate at 0/n or n/n, and keeps close to
  nominal coverage at the small n of a benchmark stream (Newcombe 1998, Statist.
  Med. 17:857-872, method 3; Brown, Cai & DasGupta 2001).
* **Paired difference: Newcombe's method 10** (Newcombe 1998, Statist. Med.
  17:2635-2650): the two runs' Wilson intervals combined "square and add", with
  the correlation of the paired outcomes through the phi coefficient, its
  numerator corrected towards zero by n/2 when positive, as published (and as
  R's MKinfer ``binomDiffCI(paired=TRUE)`` and Altman et al., *Statistics with
  Confidence*, compute it). Runs answer the same tasks, so their outcomes are
  paired; an interval for independent samples would be too wide.
* **Paired test: exact McNemar** (two-sided binomial test on the discordant
  pairs, p = 1/2): only the tasks one run got right and the other wrong carry
  information about a difference; exact because discordant counts are small.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

#: The standard normal quantile for a two-sided 95 % interval.
Z95 = 1.959963984540054

CONFIDENCE = 0.95

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


def _phi(table: PairedTable) -> float:
    """Newcombe's corrected phi: (ad - bc) pulled towards 0 by n/2 when positive."""
    a, b, c, d = table.both, table.only_second, table.only_first, table.neither
    product = (a + b) * (c + d) * (a + c) * (b + d)
    if product == 0:
        return 0.0
    numerator = float(a * d - b * c)
    if numerator > 0:
        numerator = max(numerator - table.total / 2, 0.0)
    return numerator / math.sqrt(product)


def newcombe_paired_interval(table: PairedTable) -> tuple[float, float] | None:
    """95 % interval of (second - first) accuracy on paired tasks (Newcombe method 10)."""
    n = table.total
    if n == 0:
        return None
    p1, p2 = table.second.estimate or 0.0, table.first.estimate or 0.0
    l1, u1 = wilson_interval(table.both + table.only_second, n)
    l2, u2 = wilson_interval(table.both + table.only_first, n)
    phi = _phi(table)
    difference = p1 - p2
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, difference - below), min(1.0, difference + above)


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
        return newcombe_paired_interval(self.table)

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
        }


def compare_paired(first: Mapping[_Key, bool], second: Mapping[_Key, bool]) -> PairedComparison:
    """``second`` against the baseline ``first``, over the tasks both ran."""
    return PairedComparison(pair(first, second))


# --------------------------------------------------------------------------- replicates
#
# A replicate is one whole run of an arm (same config, another seed or order draw).
# Its accuracy is one number; across N replicates the report gives their mean with a
# Student-t interval (N is small: 3 to 10), and two arms or two orders of one arm are
# compared by the mean of their per-replicate differences (paired by replicate: the
# same seed) with the same interval. Within one replicate, tasks pair: two orders of
# one stream hold the same tasks, so :func:`order_difference` is the paired
# Newcombe/McNemar comparison above, task by task.


@dataclass(frozen=True)
class MeanInterval:
    """The mean of a few numbers with its two-sided 95 % Student-t interval."""

    n: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean, "sd": self.sd, "ci_low": self.low, "ci_high": self.high}


def replicate_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanInterval:
    """Mean, sample standard deviation (n - 1) and the t interval of ``values``
    (mean +/- t(0.975, n - 1) * sd / sqrt(n) at 95 %). One value has a mean and no interval."""
    n = len(values)
    if n == 0:
        return MeanInterval(0, None, None, None, None)
    mean = math.fsum(values) / n
    if n == 1:
        return MeanInterval(1, mean, None, None, None)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = student_t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
    return MeanInterval(n, mean, sd, mean - half, mean + half)


def paired_replicate_difference(
    first: Sequence[float], second: Sequence[float], confidence: float = CONFIDENCE
) -> MeanInterval:
    """``second - first`` replicate by replicate (paired t): the i-th replicates of the
    two arms (or orders) share their seed, so their difference removes what the seed
    did to both."""
    if len(first) != len(second):
        raise ValueError(f"paired replicates need as many of each, got {len(first)} and {len(second)}")
    return replicate_interval([b - a for a, b in zip(first, second, strict=True)], confidence)


def order_difference(first: Mapping[_Key, bool], second: Mapping[_Key, bool]) -> PairedComparison:
    """Sequence robustness within one replicate: the same arm's outcomes in two orders
    of one stream, paired by task (``second - first``: Newcombe interval, McNemar p)."""
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


__all__ = [
    "CONFIDENCE",
    "Z95",
    "MeanInterval",
    "PairedComparison",
    "PairedTable",
    "Proportion",
    "compare_paired",
    "mcnemar_exact",
    "newcombe_paired_interval",
    "order_difference",
    "pair",
    "paired_replicate_difference",
    "replicate_interval",
    "student_t_cdf",
    "student_t_quantile",
    "wilson_interval",
]
