"""Power: the smallest gain a comparison could detect, and the tasks a gain needs.

For a paired comparison of two arms on n tasks, with per-task differences d_i of
standard deviation sd(d), a two-sided test at level alpha has power 1 - beta
against a true gain delta when delta >= (z(1 - alpha/2) + z(1 - beta)) * sd(d) /
sqrt(n) (the normal approximation; E. Miller, *Adding Error Bars to Evals*, 2024,
arXiv:2411.00640, section on power analysis). So:

* after a run, the **minimum detectable effect** (MDE) is that bound with the
  observed sd(d): for one replicate of yes/no outcomes sd(d)^2 = p10 + p01 -
  (p10 - p01)^2, p10 and p01 the shares of discordant tasks; across K replicates,
  the standard deviation of the per-task mean differences;
* before a run, the tasks needed for a gain delta are n = ((z + z) * sd(d) /
  delta)^2, with sd(d) from assumptions (:func:`planned_variance`).

With K replicates, sd(d)^2 = between + within / K (:class:`.clustered.VarianceSplit`):
more replicates shrink only the within-task (seed) part, more tasks shrink both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..rundocs.compare import PowerEstimate
from .clustered import z_quantile

ALPHA = 0.05
POWER = 0.80


def _z_sum(alpha: float, power: float) -> float:
    """z(1 - alpha/2) + z(power)."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    return z_quantile(1 - alpha) + z_quantile(2 * power - 1)


def minimum_detectable_effect(sd: float, tasks: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true gain detected with ``power`` at two-sided ``alpha`` on ``tasks`` tasks."""
    if tasks < 1:
        raise ValueError(f"need at least one task, got {tasks}")
    return _z_sum(alpha, power) * sd / math.sqrt(tasks)


def tasks_needed(gain: float, sd: float, *, alpha: float = ALPHA, power: float = POWER) -> int:
    """The tasks it takes to detect ``gain`` (a fraction, > 0) with ``power``."""
    if not gain > 0:
        raise ValueError(f"the gain must be positive, got {gain}")
    return max(2, math.ceil((_z_sum(alpha, power) * sd / gain) ** 2))


def power_at(gain: float, sd: float, tasks: int, *, alpha: float = ALPHA) -> float:
    """The chance a two-sided test at ``alpha`` rejects given a true ``gain`` on ``tasks``
    tasks (normal approximation: Phi(d - z) + Phi(-d - z), d = gain * sqrt(tasks) / sd,
    z = z(1 - alpha/2); both tails, so never below ``alpha``, which it is at no gain)."""
    if sd <= 0:
        return 1.0 if gain != 0 else alpha
    shift = abs(gain) * math.sqrt(tasks) / sd
    z = z_quantile(1 - alpha)
    return 0.5 * math.erfc(-(shift - z) / math.sqrt(2)) + 0.5 * math.erfc((shift + z) / math.sqrt(2))


def discordance_sd(only_first: int, only_second: int, total: int) -> float:
    """sd(d) of one replicate's yes/no outcomes: sqrt(p10 + p01 - (p10 - p01)^2);
    :func:`least_sd` when no task is discordant."""
    if total < 1:
        raise ValueError("need at least one paired task")
    p10, p01 = only_first / total, only_second / total
    sd = math.sqrt(max(p10 + p01 - (p10 - p01) ** 2, 0.0))
    return sd if sd > 0 else least_sd(total, 1)


def within_reach(effect: float, largest: float = 1.0) -> float | None:
    """``effect`` when a gain that large can happen, else None: a minimum detectable
    effect beyond the largest possible gain (100 points; after a run, 1 - the
    baseline's accuracy) means no gain is detectable, and is said so rather than
    printed as "the smallest gain detectable is 140 points"."""
    return effect if effect <= largest + 1e-12 else None


def least_sd(tasks: int, replicates: int) -> float:
    """The sd of the per-task differences when a single task differed in a single
    replicate (by 1/K): what sd(d) is taken to be when no task differed (or all by
    the same amount), so such a comparison does not claim it could detect any gain."""
    step = 1 / replicates
    return math.sqrt(max(step * step / tasks - (step / tasks) ** 2, 0.0))


#: Why a ``power`` entry has no minimum detectable effect (its ``note``).
ONE_TASK = "one paired task: the spread of the task differences, and so the detectable gain, cannot be estimated"
BEYOND_REACH = "no gain of up to 100 points is detectable with 80% power on so few tasks"


def power_entry(sd: float, tasks: int, replicates: int, source: str) -> PowerEstimate:
    """The ``power`` entry of compare.json and replicates.json: the MDE and what it
    rests on (an ``sd`` of 0, no task differed, is replaced by :func:`least_sd`).
    With one task, or an MDE beyond 100 points, there is none, and ``note`` says why."""
    if tasks < 2:
        return PowerEstimate(
            alpha=ALPHA, power=POWER, tasks=tasks, replicates=replicates, sd_difference=None,
            minimum_detectable_effect=None, sd_from=source, note=ONE_TASK,
        )
    sd = sd if sd > 0 else least_sd(tasks, replicates)
    effect = within_reach(minimum_detectable_effect(sd, tasks))
    return PowerEstimate(
        alpha=ALPHA, power=POWER, tasks=tasks, replicates=replicates, sd_difference=sd,
        minimum_detectable_effect=effect, sd_from=source, note=BEYOND_REACH if effect is None else None,
    )


@dataclass(frozen=True)
class Plan:
    """What a pre-run power calculation assumes (``evomemory power``)."""

    #: the baseline arm's accuracy (0.5: the largest variance)
    baseline: float
    #: the gain to detect, a fraction
    gain: float
    #: correlation of the two arms' per-task accuracies (tasks hard for one are hard for the other)
    correlation: float = 0.5
    #: the share of one outcome's variance that is within-task (seeds, order, sampling)
    seed_share: float = 0.25

    def __post_init__(self) -> None:
        if not 0 <= self.baseline <= 1 or not 0 <= self.baseline + self.gain <= 1:
            raise ValueError(
                f"the baseline accuracy ({self.baseline}) and baseline + gain ({self.baseline + self.gain}) must be "
                "between 0 and 1"
            )
        if not -1 <= self.correlation <= 1 or not 0 <= self.seed_share <= 1:
            raise ValueError("the correlation must be in [-1, 1] and the seed share in [0, 1]")

    def variance(self, replicates: int) -> float:
        """sd(d)^2 with ``replicates`` replicates: each arm's outcome variance p(1 - p)
        split into between tasks (1 - seed share) and within (seed share, divided by
        the replicates); the arms' between-task parts correlated."""
        first = self.baseline * (1 - self.baseline)
        second = (self.baseline + self.gain) * (1 - self.baseline - self.gain)
        keep = 1 - self.seed_share
        between = keep * (first + second) - 2 * self.correlation * keep * math.sqrt(first * second)
        return max(between, 0.0) + self.seed_share * (first + second) / replicates

    def sd(self, replicates: int) -> float:
        return math.sqrt(self.variance(replicates))

    def minimum_detectable_effect(self, tasks: int, replicates: int, **kwargs: float) -> float | None:
        """The smallest detectable gain, None when it is beyond the largest gain the
        baseline leaves room for (1 - baseline: :func:`within_reach`)."""
        return within_reach(minimum_detectable_effect(self.sd(replicates), tasks, **kwargs), 1 - self.baseline)

    def tasks_needed(self, replicates: int, **kwargs: float) -> int:
        return tasks_needed(self.gain, self.sd(replicates), **kwargs)

    def power_at(self, tasks: int, replicates: int, *, alpha: float = ALPHA) -> float:
        return power_at(self.gain, self.sd(replicates), tasks, alpha=alpha)


def power_line(label: str, power: PowerEstimate) -> str:
    """One line saying a ``power`` entry (:func:`power_entry`) in words, for the
    terminal and the pages."""
    effect = power.minimum_detectable_effect
    replicates = power.replicates or 1
    with_replicates = f" x {replicates} replicates" if replicates > 1 else ""
    if effect is None:
        return f"power: {label}: on {power.tasks} tasks{with_replicates}: {power.note or 'not estimated'}"
    shown = f"{effect * 100:.1f} pp"
    return (
        f"power: {label}: the smallest gain detectable with {float(power.power or 0.8):.0%} power "
        f"(two-sided alpha {power.alpha}) on {power.tasks} tasks{with_replicates} is {shown}"
    )


__all__ = [
    "ALPHA",
    "BEYOND_REACH",
    "ONE_TASK",
    "POWER",
    "Plan",
    "discordance_sd",
    "least_sd",
    "minimum_detectable_effect",
    "power_at",
    "power_entry",
    "power_line",
    "tasks_needed",
    "within_reach",
]
