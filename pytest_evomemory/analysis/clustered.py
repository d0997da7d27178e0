"""Statistics across replicates, clustered by task: what a paper can print.

The benchmark's tasks are a sample from the tasks one could have asked; the
quantity of interest is the accuracy on that population. A replicate (another
seed: another order, memory history, model sample) measures the *same* tasks
again, so replicates are repeated measurements within each task, not new
observations of the population. The unit of sampling is the task (E. Miller,
*Adding Error Bars to Evals*, 2024, arXiv:2411.00640, sections on clustered
standard errors and on resampling answers): every estimate here first averages
each task over its K replicates, then works over the n per-task means.

Methods, and why (docs/statistics.md has a worked example of each):

* **One arm: Wilson score interval with the Kish effective number of tasks.** The
  variance of the mean is the cluster-robust one, the sample variance of the
  per-task means over n (Miller's clustered standard error with the task as the
  cluster). The design effect (Kish 1965) is that variance over the binomial
  p(1 - p) / (nK) and is kept within [1, K]: 1 when replicates are as informative
  as new tasks, K when they only repeat each task's outcome. The Wilson interval
  (Wilson 1927) on p with the effective n = nK / deff stays within [0, 1], is
  not zero-width when the seeds agree (deff = K: Wilson on n tasks) and gives an
  all-wrong arm an upper bound. Where the interval rests on the variance
  estimated from the n task means (a design effect strictly between 1 and K), z
  is replaced by Student's t with n - 1 degrees of freedom, the
  degrees-of-freedom adjustment of Korn & Graubard (1998, Survey Methodology
  24:193-201). Where the design effect is at a bound, the interval is Wilson's on
  n (or nK) outcomes with its own binomial variance p(1 - p), nothing estimated
  from the spread of the task means, so z stays, as for one run. With K = 1 the
  bound always holds for yes/no outcomes: exactly Wilson's interval.
* **One arm of continuous scores (F1): the same interval, its design effect
  estimated.** A score in [0, 1] varies less than a yes/no outcome of the same
  mean (p(1 - p) is its largest variance), so the design effect may fall below 1
  (kept at or above 1/4) and is estimated with half a pseudo-outcome at 0 and
  half at 1 added, which keeps a few small scores among zeros from claiming a
  tiny variance; t(n - 1) wherever it is estimated (more than n effective tasks).
  With K = 1 this is a single run's interval of a mean F1 (:func:`mean_interval`,
  which replaced a percentile bootstrap that covered 85-93 % on 24 tasks).
  benchmarks/bench_statistics.py checks its coverage on simulated F1 scores.
* **Paired difference of yes/no outcomes: Agresti & Min's adjusted Wald interval
  with the Kish effective number of tasks.** Pooled over tasks and replicates, the
  shares of pairs only the second arm (g) and only the first (l) got right give
  the difference g - l, the mean of the per-task mean differences. Agresti & Min
  (2005, Statistics in Medicine 24:729-740) add half a pseudo-observation to each
  cell of the paired table; here the table's size is the effective number of
  tasks, the Kish design effect of the per-task mean differences (their
  cluster-robust variance over the multinomial (g + l - (g - l)^2) / nK) kept
  within [1, K], with the same t-or-z rule as one arm. With K = 1 it is exactly
  Agresti & Min's interval of a single run (compare.json's). Truncated to
  [-1, 1], never zero-width. It replaced MOVER for yes/no outcomes because near
  0 or 1 MOVER's correlation of the arms' task means is undefined whenever one arm
  is constant, and taken as 0 it made the interval too wide (docs/statistics.md).
* **Paired difference of continuous scores: MOVER** (method of variance estimates
  recovery, Zou & Donner 2008, Statistics in Medicine 27:1693-1702): the two arms'
  intervals above combined "square and add" with the correlation of the arms'
  per-task means, which is Newcombe's (1998) method 10 with clustered intervals in
  place of Wilson's. It stays within [-1, 1] and is never zero-width. With K = 1
  it is a single run's interval of a mean F1 difference (:func:`paired_mean_interval`).
* **Paired test: two-sided paired t-test** on the per-task mean differences
  (n - 1 degrees of freedom), tasks paired, replicates averaged within each. Where
  t is undefined (one task, or all tasks differing by the same amount) the exact
  sign-flip test of the differences (:func:`paired_t`), never a p of 0.
* **Variance decomposition** (Miller 2024, "resampling answers"): the within-task
  (seed) variance is the mean over tasks of each task's variance across its
  replicates; the between-task variance is the variance of the task means less
  the within part over K. The standard error with n' tasks and K' replicates is
  then sqrt((between + within / K') / n'), which says whether more seeds or more
  tasks would narrow the interval.

Every function takes an array of scores shaped ``(..., tasks, replicates)`` (1/0
outcomes, or per-task scores in [0, 1] such as LoCoMo's F1) and works over the
leading axes at once, so benchmarks/bench_statistics.py checks the coverage of
these very functions on thousands of simulated experiments.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .stats import (
    CONFIDENCE,
    FAILED_IS_WRONG,
    MeanEstimate,
    adjusted_wald_bounds,
    f_survival,
    student_t_cdf,
    student_t_quantile,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    Array = npt.NDArray[Any]

_Key = TypeVar("_Key", bound=Hashable)

#: What the estimates here count (:data:`.stats.FAILED_IS_WRONG`); the tasks a
#: replicate did not score at all are left out (replicates.json warns).
DENOMINATOR = f"{FAILED_IS_WRONG}; the intervals use the tasks every replicate of both arms scored"

#: How replicates.json's ``methods`` names each computation (words a reader can cite).
METHODS = {
    "accuracy_ci": "each task averaged over its replicates, then a Wilson score interval (Wilson 1927) with the "
    "Kish effective number of tasks: design effect = the cluster-robust variance of the mean of the per-task "
    "means (Miller 2024, arXiv:2411.00640, tasks as clusters) over the binomial variance, kept within [1, K]; "
    "z replaced by Student's t with tasks - 1 degrees of freedom where that estimated design effect is used "
    "(strictly between 1 and K: Korn & Graubard 1998), z where it is at a bound (Wilson's own binomial "
    "variance on tasks or on tasks x replicates); with one replicate, the plain Wilson interval; for continuous "
    "scores (F1) the design effect is estimated with half a pseudo-outcome at 0 and at 1 added, kept within "
    "[1/4, K], and t used wherever it is estimated",
    "difference_ci": "the per-task mean difference (each task averaged over its replicates, paired by task); "
    "for yes/no outcomes Agresti & Min's (2005) adjusted Wald interval for matched proportions (half a "
    "pseudo-observation in each cell of the paired table of tasks x replicates, truncated to [-1, 1]) with "
    "the Kish effective number of tasks (design effect = the cluster-robust variance of the mean per-task "
    "difference over the multinomial one, kept within [1, K]; t or z as for accuracy_ci), with one "
    "replicate exactly Agresti & Min's interval; for continuous scores a MOVER interval (Zou & Donner 2008): "
    "the two arms' intervals above combined with the correlation of their per-task means",
    "p_value": "two-sided paired t-test on the per-task mean differences (tasks - 1 degrees of freedom); where t "
    "is undefined (one task, or every task differing by the same amount) the exact sign-flip test of those "
    "differences (test 'sign-flip': p = 2 / 2^tasks, or 1 when no task differs); with one replicate of yes/no "
    "outcomes, the exact McNemar test",
    "variance": "between-task and within-task (seed) variance of the per-task scores (Miller 2024, "
    "'resampling answers'): within = the mean over tasks of the variance across replicates; between = the "
    "variance of the task means less within / K",
    "power": "minimum detectable effect at 80% power, two-sided alpha 0.05: (z(0.975) + z(0.80)) * sd(d) / "
    "sqrt(tasks), sd(d) the standard deviation of the per-task mean differences (Miller 2024, power analysis)",
    "per_replicate": "within each replicate: Agresti & Min (2005) adjusted Wald paired interval and exact "
    "McNemar p on the tasks both arms ran",
    "denominator": DENOMINATOR,
}


#: Each paired test by the name a difference's ``test`` holds, in words.
TEST_WORDS = {
    "paired t": "paired t-test on the per-task mean differences",
    "sign-flip": "exact sign-flip test (t undefined: one task, or all tasks differing alike)",
    "McNemar": "exact McNemar test",
}


def named_tests(tests: Sequence[str | None]) -> str:
    """The paired tests behind a document's p-values, in words, each once in the
    order met (``paired t-test on ...; exact sign-flip test (...)``): what the
    terminal and the page say the ``p`` column is."""
    found = list(dict.fromkeys(test for test in tests if test))
    return "; ".join(TEST_WORDS.get(test, test) for test in found) or TEST_WORDS["paired t"]


def _numpy() -> Any:
    import numpy

    return numpy


@functools.lru_cache(maxsize=256)
def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided ``confidence`` quantile of Student's t (cached: one per task count)."""
    return student_t_quantile(1 - (1 - confidence) / 2, df)


@functools.lru_cache(maxsize=64)
def z_quantile(confidence: float = CONFIDENCE) -> float:
    """The two-sided ``confidence`` quantile of the standard normal (via :func:`math.erf` bisection):
    100 steps, so kept per ``confidence`` (a comparison of 32 arms asks for the same two
    quantiles for each of its hundreds of paired entries' power)."""
    target = 1 - (1 - confidence) / 2
    low, high = 0.0, 10.0
    for _ in range(100):
        middle = (low + high) / 2
        if 0.5 * math.erfc(-middle / math.sqrt(2)) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _check(scores: Array) -> tuple[int, int]:
    if scores.ndim < 2 or scores.shape[-1] < 1 or scores.shape[-2] < 1:
        raise ValueError(f"need scores shaped (..., tasks, replicates), got {scores.shape}")
    return int(scores.shape[-2]), int(scores.shape[-1])


#: The least design effect of continuous scores (F1): a score in [0, 1] with mean p
#: has a variance of at most p(1 - p), a yes/no outcome's, and less the more its
#: values sit between 0 and 1, so its design effect can fall below 1. Kept at or
#: above 1/4 (an effective n of at most 4nK) so that scores that happen not to
#: spread (every task 0.5) give an interval, not a point; real F1 scores, with
#: their many exact 0s and 1s, sit well above it (docs/statistics.md).
CONTINUOUS_LEAST_DEFF = 0.25
#: The pseudo-outcomes added to each side in the design effect of continuous
#: scores: half an outcome scoring 0 and half scoring 1, as Agresti & Min add half a
#: pseudo-observation to each cell; a task holds K outcomes, so that is a task of
#: weight 0.5 / K at 0 and one at 1. Without them a few small non-zero scores among
#: zeros (p = 0.1 on 24 tasks) give a tiny spread over a tiny p(1 - p), a design
#: effect far below 1 and an interval that missed the truth above it in 7-8 % of
#: simulated experiments (benchmarks/bench_statistics.py).
CONTINUOUS_PSEUDO_OUTCOMES = 0.5


def _kish(means: Array, per_outcome: Array, n: int, k: int) -> tuple[Array, Array]:
    """``(mean, effective n)`` of per-task ``means`` whose single outcomes have the
    variance ``per_outcome``: nK / deff, the Kish design effect (the cluster-robust
    variance of the mean over ``per_outcome`` / nK) kept within [1, K]. With no
    spread between task means the design effect is 1 (K when ``per_outcome`` is 0:
    nothing says replicates add anything)."""
    np = _numpy()
    mean = means.mean(axis=-1)
    variance = ((means - mean[..., None]) ** 2).mean(axis=-1) / n  # cluster-robust (CR0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(variance > 0, per_outcome / np.where(variance > 0, variance, 1.0), np.inf)
    ratio = np.where(per_outcome > 0, ratio, n)
    return mean, np.clip(ratio, n, n * k)


def _continuous_effective(means: Array, n: int, k: int) -> Array:
    """The effective n of continuous per-task ``means`` (F1): nK / deff, the design
    effect being the cluster-robust variance of the mean over p(1 - p) / nK, both
    taken with :data:`CONTINUOUS_PSEUDO_OUTCOMES` of an outcome scoring 0 and of
    one scoring 1 added (so p stays inside (0, 1)), kept within
    [:data:`CONTINUOUS_LEAST_DEFF`, K]. All tasks at 0 (or 1) give deff = K: Wilson on n."""
    np = _numpy()
    weight = CONTINUOUS_PSEUDO_OUTCOMES / k
    total = n + 2 * weight
    centre = (means.sum(axis=-1) + weight) / total
    spread = (((means - centre[..., None]) ** 2).sum(axis=-1) + weight * (centre**2 + (1 - centre) ** 2)) / total
    binomial = centre * (1 - centre)
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 only without pseudo-outcomes, all at 0 or 1
        ratio = np.where(binomial > 0, k * spread / np.where(binomial > 0, binomial, 1.0), k)
    deff = np.clip(ratio, CONTINUOUS_LEAST_DEFF, k)
    effective: Array = n * k / deff
    return effective


def yes_no(scores: Array) -> Array:
    """Per experiment: whether every score is 0 or 1 (yes/no outcomes, whose variance
    is exactly p(1 - p)), else the scores are continuous (F1)."""
    flat = scores.reshape(*scores.shape[:-2], -1)
    outcome: Array = ((flat == 0) | (flat == 1)).all(axis=-1)
    return outcome


def effective_tasks(scores: Array) -> tuple[Array, Array]:
    """``(estimate, effective n)``: the mean of the per-task means and nK / deff,
    the Kish design effect, kept within [1, K] for yes/no outcomes (with no spread
    between task means it is K at 0 and 1, nothing says replicates add anything,
    and 1 otherwise) and estimated as :func:`_continuous_effective` for continuous
    scores (see the module docstring)."""
    np = _numpy()
    n, k = _check(scores)
    means = scores.mean(axis=-1)
    estimate = means.mean(axis=-1)
    _, binary = _kish(means, estimate * (1 - estimate), n, k)
    effective: Array = np.where(yes_no(scores), binary, _continuous_effective(means, n, k))
    return estimate, effective


def wilson_bounds(estimate: Array, n: Array, z: Array | float) -> tuple[Array, Array]:
    """Wilson's score interval at ``estimate`` with a (possibly fractional) sample size
    ``n`` and quantile ``z`` (one, or one per experiment); exactly 0 and 1 at an
    estimate of 0 and 1."""
    np = _numpy()
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (estimate + z2 / (2 * n)) / denominator
    half = z / denominator * np.sqrt(np.maximum(estimate * (1 - estimate), 0.0) / n + z2 / (4 * n * n))
    low = np.where(estimate <= 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(estimate >= 1, 1.0, np.clip(centre + half, 0.0, 1.0))
    return low, high


def _quantile(effective: Array, tasks: int, replicates: int, confidence: float, binary: Array | bool = True) -> Array:
    """Per experiment: t(tasks - 1) where the effective n comes from a design effect
    estimated from the task means (strictly above n: Korn & Graubard 1998), z where
    it is n, so that the interval is Wilson's on n outcomes with its binomial
    variance and nothing is estimated from the task means' spread. Yes/no outcomes
    at nK (a design effect of 1) also take z: Wilson's on the nK outcomes (always
    so with one replicate); continuous scores estimate theirs there too."""
    np = _numpy()
    z = z_quantile(confidence)
    if tasks < 2:
        constant: Array = np.full(np.shape(effective), z)
        return constant
    at_outcomes = np.asarray(binary) & (effective >= tasks * replicates * (1 - 1e-9))
    estimated = (effective > tasks * (1 + 1e-9)) & ~at_outcomes
    quantile: Array = np.where(estimated, t_quantile(tasks - 1, confidence), z)
    return quantile


def arm_interval(scores: Array, confidence: float = CONFIDENCE) -> tuple[Array, Array, Array, Array]:
    """``(estimate, low, high, effective n)`` of one arm (module docstring: Wilson with
    the Kish effective number of tasks)."""
    n, k = _check(scores)
    estimate, effective = effective_tasks(scores)
    low, high = wilson_bounds(estimate, effective, _quantile(effective, n, k, confidence, yes_no(scores)))
    return estimate, low, high, effective


def task_correlation(first: Array, second: Array) -> Array:
    """Pearson's correlation of the two arms' per-task means (0 where either is constant)."""
    np = _numpy()
    a = first.mean(axis=-1)
    b = second.mean(axis=-1)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    scale = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        correlation: Array = np.where(scale > 0, (a * b).sum(axis=-1) / np.where(scale > 0, scale, 1.0), 0.0)
    return correlation


def mover_bounds(
    first: tuple[Array, Array, Array], second: tuple[Array, Array, Array], correlation: Array
) -> tuple[Array, Array, Array]:
    """``(difference, low, high)`` of ``second - first`` from each one's ``(estimate,
    low, high)`` and the correlation of the estimates (Zou & Donner 2008), within [-1, 1]."""
    np = _numpy()
    p1, l1, u1 = first
    p2, l2, u2 = second
    difference = p2 - p1
    below = np.sqrt(np.maximum((p2 - l2) ** 2 - 2 * correlation * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0.0))
    above = np.sqrt(np.maximum((u2 - p2) ** 2 - 2 * correlation * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2, 0.0))
    return difference, np.clip(difference - below, -1.0, 1.0), np.clip(difference + above, -1.0, 1.0)


def binary_difference_interval(first: Array, second: Array, confidence: float = CONFIDENCE) -> tuple[Array, Array, Array]:
    """``(mean difference, low, high)`` of ``second - first`` for 1/0 outcomes paired by
    task: Agresti & Min's interval with the Kish effective number of tasks (module
    docstring), within [-1, 1]."""
    np = _numpy()
    n, k = _check(first)
    gained = (second * (1 - first)).mean(axis=(-1, -2))
    lost = (first * (1 - second)).mean(axis=(-1, -2))
    difference = gained - lost
    _, effective = _kish(second.mean(axis=-1) - first.mean(axis=-1), gained + lost - difference**2, n, k)
    low, high = adjusted_wald_bounds(gained, lost, effective, _quantile(effective, n, k, confidence))
    return difference, np.clip(low, -1.0, 1.0), np.clip(high, -1.0, 1.0)


def difference_interval(
    first: Array, second: Array, confidence: float = CONFIDENCE, *, binary: bool = False
) -> tuple[Array, Array, Array]:
    """``(mean difference, low, high)`` of ``second - first``, paired by task (both
    shaped ``(..., tasks, replicates)``): for 1/0 outcomes (``binary``)
    :func:`binary_difference_interval`, else the MOVER interval of the module docstring."""
    if first.shape != second.shape:
        raise ValueError(f"paired arms need the same tasks and replicates, got {first.shape} and {second.shape}")
    if binary:
        return binary_difference_interval(first, second, confidence)
    one = arm_interval(first, confidence)[:3]
    two = arm_interval(second, confidence)[:3]
    return mover_bounds(one, two, task_correlation(first, second))


#: Differences this close are equal: per-task means of K replicates are multiples of
#: 1/K, computed in floating point.
_ROUNDING = 1e-12
#: The paired test across replicates: Student's t on the per-task mean differences.
PAIRED_T = "paired t"
#: The paired test where t is undefined (one task, or every task differing by the
#: same amount: no spread to divide by): the exact sign-flip test of the per-task
#: mean differences, as :data:`METHODS` says.
SIGN_FLIP = "sign-flip"


def paired_t(first: Array, second: Array) -> tuple[float, float, str]:
    """``(t, two-sided p, test)`` of the paired t-test on the per-task mean
    differences of one experiment. Where t is undefined (fewer than 2 tasks, or no
    spread between the differences) the test is the exact sign-flip (randomization)
    test instead, so p never claims more than the tasks can show: 1 when every
    difference is 0, else 2 / 2^n for n tasks all differing by the same amount (the
    one sign pattern, and its mirror, of the 2^n equally likely under no difference);
    t is then 0 or infinite. Before, the t-test's p was 0 for three tasks that each
    gained one replicate in three, beside an interval that held 0."""
    np = _numpy()
    differences = second.mean(axis=-1) - first.mean(axis=-1)
    n = differences.size
    mean = float(differences.mean()) if n else 0.0
    sd = float(np.std(differences, ddof=1)) if n >= 2 else 0.0
    # 1/3 - 0 and 1 - 2/3 differ in the last bit: a spread of rounding is no spread
    if sd <= _ROUNDING * max(1.0, abs(mean)) or n < 2:
        if n == 0 or abs(mean) <= _ROUNDING:
            return 0.0, 1.0, SIGN_FLIP
        return math.copysign(math.inf, mean), min(1.0, 2.0 ** (1 - n)), SIGN_FLIP
    t = mean / (sd / math.sqrt(n))
    return t, min(1.0, 2 * (1 - student_t_cdf(abs(t), n - 1))), PAIRED_T


@dataclass(frozen=True)
class VarianceSplit:
    """Where the variance of per-task scores comes from (module docstring)."""

    #: variance of the tasks' true scores (difficulty): only more tasks shrink it
    between_tasks: float
    #: variance of one replicate's score around its task's mean (seeds): more replicates shrink it
    within_tasks: float | None
    tasks: int
    replicates: int

    def standard_error(self, tasks: int | None = None, replicates: int | None = None) -> float:
        """The standard error of the mean with ``tasks`` and ``replicates`` (default: as run)."""
        n = tasks or self.tasks
        k = replicates or self.replicates
        return math.sqrt((self.between_tasks + (self.within_tasks or 0.0) / k) / n)

    @property
    def seed_share(self) -> float | None:
        """The share of the mean's variance that the seeds contribute (None with one replicate)."""
        if self.within_tasks is None:
            return None
        total = self.between_tasks + self.within_tasks / self.replicates
        return self.within_tasks / self.replicates / total if total > 0 else 0.0

    def advice(self) -> str:
        """One sentence: what would narrow the interval."""
        if self.within_tasks is None:
            return "one replicate: the seeds' share of the variance is unknown (run 3 or more replicates)"
        share = self.seed_share or 0.0
        doubled_tasks = self.standard_error(tasks=2 * self.tasks)
        doubled_seeds = self.standard_error(replicates=2 * self.replicates)
        return (
            f"{share:.0%} of the variance comes from the seeds; twice the tasks would give a standard error of "
            f"{doubled_tasks * 100:.1f} points, twice the replicates {doubled_seeds * 100:.1f} "
            f"(now {self.standard_error() * 100:.1f})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "between_tasks": self.between_tasks, "within_tasks": self.within_tasks,
            "seed_share": self.seed_share, "standard_error": self.standard_error(),
            "standard_error_twice_the_tasks": self.standard_error(tasks=2 * self.tasks),
            "standard_error_twice_the_replicates": self.standard_error(replicates=2 * self.replicates),
        }


def variance_split(scores: Array) -> VarianceSplit:
    """The between-task and within-task variance of one experiment's scores
    ``(tasks, replicates)`` (Miller 2024): within is unknown with one replicate."""
    np = _numpy()
    n, k = _check(scores)
    means = scores.mean(axis=-1)
    total = float(np.var(means, ddof=1)) if n > 1 else 0.0
    if k == 1:
        return VarianceSplit(total, None, n, k)
    within = float(np.var(scores, axis=-1, ddof=1).mean())
    return VarianceSplit(max(total - within / k, 0.0), within, n, k)


@dataclass(frozen=True)
class ReplicateSpread:
    """Whether an arm's replicates differ more than its tasks' seed noise explains
    (:func:`replicate_spread`): the F ratio, its degrees of freedom and p."""

    f: float
    first_df: int
    second_df: int
    p_value: float


def replicate_spread(scores: Array) -> ReplicateSpread | None:
    """The F test of a replicate-level effect in one arm's ``(tasks, replicates)`` scores.

    The intervals here cover task sampling: replicates are taken to be independent
    measurements of each task. Something shared by all the tasks of one replicate (a
    memory history good or bad throughout, carry-over from one task to the next)
    breaks that, and then they are too narrow (benchmarks/bench_statistics.py,
    ``--scores sequence``: 50-88 % coverage). It shows as replicate means that vary
    more than the within-task variance allows: with no such effect, the variance of a
    replicate's mean over n tasks is the mean within-task variance over n
    (:class:`VarianceSplit`), so F = (variance of the K replicate means) / (within / n)
    is about F(K - 1, n (K - 1)). None with fewer than 2 tasks or replicates, or no
    within-task variance (the replicates agree on every task: no evidence)."""
    np = _numpy()
    n, k = _check(scores)
    if n < 2 or k < 2:
        return None
    within = float(np.var(scores, axis=-1, ddof=1).mean())
    if within <= 0:
        return None
    observed = float(np.var(scores.mean(axis=-2), ddof=1))
    ratio = observed / (within / n)
    first, second = k - 1, n * (k - 1)
    return ReplicateSpread(ratio, first, second, f_survival(ratio, first, second))


def as_scores(rows: Sequence[Sequence[float]]) -> Array:
    """A ``(tasks, replicates)`` float array from per-task rows of replicate scores."""
    np = _numpy()
    scores: Array = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1 if rows else 1)
    return scores


@dataclass(frozen=True)
class ArmEstimate:
    """One arm across its replicates: the mean of its per-task means and the interval."""

    estimate: float | None
    low: float | None
    high: float | None
    tasks: int
    replicates: int
    effective_tasks: float | None
    variance: VarianceSplit | None
    #: :func:`replicate_spread` of the rows (None below 2 tasks or replicates)
    spread: ReplicateSpread | None = None

    def to_dict(self) -> dict[str, Any]:
        spread = self.spread
        return {
            "tasks": self.tasks, "effective_tasks": self.effective_tasks,
            "variance": None if self.variance is None else self.variance.to_dict(),
            "replicate_effect": None if spread is None else {
                "f": spread.f, "first_df": spread.first_df, "second_df": spread.second_df, "p_value": spread.p_value,
            },
        }


def estimate_arm(rows: Sequence[Sequence[float]], confidence: float = CONFIDENCE) -> ArmEstimate:
    """:func:`arm_interval` of one arm's ``rows`` (a row per task, a score per replicate)."""
    if not rows:
        return ArmEstimate(None, None, None, 0, 0, None, None)
    scores = as_scores(rows)
    estimate, low, high, effective = arm_interval(scores, confidence)
    return ArmEstimate(
        float(estimate), float(low), float(high), len(rows), int(scores.shape[-1]), float(effective),
        variance_split(scores), replicate_spread(scores),
    )


@dataclass(frozen=True)
class DifferenceEstimate:
    """``second - first`` paired by task across replicates, with its interval and test."""

    difference: float | None
    low: float | None
    high: float | None
    tasks: int
    replicates: int
    #: :data:`PAIRED_T`, :data:`SIGN_FLIP` where t is undefined (:func:`paired_t`), or
    #: ``McNemar`` with one replicate of yes/no outcomes
    test: str
    p_value: float | None
    variance: VarianceSplit | None
    #: the per-task differences' standard deviation (what power depends on)
    sd: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "paired_tasks": self.tasks, "test": self.test, "p_value": self.p_value,
            "variance": None if self.variance is None else self.variance.to_dict(),
        }


def estimate_difference(
    first: Sequence[Sequence[float]], second: Sequence[Sequence[float]], *, binary: bool,
    confidence: float = CONFIDENCE,
) -> DifferenceEstimate:
    """``second - first`` on the tasks both ran (rows paired by task, columns by
    replicate). One replicate of yes/no outcomes is a single run's comparison:
    Agresti & Min's interval and the exact McNemar test, as compare.json's."""
    np = _numpy()
    if not first:
        return DifferenceEstimate(None, None, None, 0, 0, PAIRED_T, None, None, None)
    a, b = as_scores(first), as_scores(second)
    n, k = _check(a)
    differences = b.mean(axis=-1) - a.mean(axis=-1)
    sd = float(np.std(differences, ddof=0))
    split = variance_split(b - a)
    if k == 1 and binary:
        from .stats import PairedTable, mcnemar_exact, paired_difference_interval

        x, y = a[:, 0] > 0.5, b[:, 0] > 0.5
        table = PairedTable(int((x & y).sum()), int((x & ~y).sum()), int((~x & y).sum()), int((~x & ~y).sum()))
        low, high = paired_difference_interval(table) or (-1.0, 1.0)
        p_value = mcnemar_exact(table.only_first, table.only_second)
        return DifferenceEstimate(float(differences.mean()), low, high, n, k, "McNemar", p_value, split, sd)
    difference, low_, high_ = difference_interval(a, b, confidence, binary=binary)
    _, p_value, test = paired_t(a, b)
    return DifferenceEstimate(float(difference), float(low_), float(high_), n, k, test, p_value, split, sd)


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanEstimate:
    """The mean of one run's per-task scores (LoCoMo's F1 per category) with
    :func:`arm_interval` at one replicate: Wilson on the effective number of tasks
    (continuous scores: the design effect of :func:`_continuous_effective`, t with
    tasks - 1 degrees of freedom). Nones when empty. It replaced the percentile
    bootstrap, which covered 85-93 % on 24 tasks (docs/statistics.md)."""
    if not values:
        return MeanEstimate(None, None, None, 0)
    estimate, low, high, _ = arm_interval(as_scores([[value] for value in values]), confidence)
    return MeanEstimate(float(estimate), float(low), float(high), len(values))


def paired_mean_interval(
    first: Mapping[_Key, float], second: Mapping[_Key, float], confidence: float = CONFIDENCE
) -> MeanEstimate:
    """``second - first`` of one run each on the tasks both ran (``first``'s order):
    the mean difference with MOVER's interval of :func:`difference_interval` (the
    two runs' intervals of :func:`mean_interval` and the correlation of their task
    scores). It replaced the paired percentile bootstrap (docs/statistics.md)."""
    keys = [key for key in first if key in second]
    if not keys:
        return MeanEstimate(None, None, None, 0)
    a = as_scores([[float(first[key])] for key in keys])
    b = as_scores([[float(second[key])] for key in keys])
    _, low, high = difference_interval(a, b, confidence)
    mean = math.fsum(float(second[key]) - float(first[key]) for key in keys) / len(keys)
    return MeanEstimate(mean, float(low), float(high), len(keys))


__all__ = [
    "DENOMINATOR",
    "METHODS",
    "PAIRED_T",
    "SIGN_FLIP",
    "TEST_WORDS",
    "ArmEstimate",
    "DifferenceEstimate",
    "ReplicateSpread",
    "VarianceSplit",
    "arm_interval",
    "as_scores",
    "binary_difference_interval",
    "difference_interval",
    "effective_tasks",
    "estimate_arm",
    "estimate_difference",
    "mean_interval",
    "mover_bounds",
    "named_tests",
    "paired_mean_interval",
    "paired_t",
    "replicate_spread",
    "t_quantile",
    "task_correlation",
    "variance_split",
    "wilson_bounds",
    "z_quantile",
]
