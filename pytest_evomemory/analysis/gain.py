"""The gain gate: does each arm beat the baseline by at least the stated margin?

``--evomemory-min-gain [STREAM=]POINTS`` (pytest, several arms in one session) and
``evomemory compare --min-gain`` (existing run directories) both read the margin
here and judge it on the comparison document (:func:`..reporting.compare.build_comparison`),
so the gate, ``compare.json`` and the terminal table use one difference: the
paired one, on the tasks both runs ran, in percentage points.

By default a gate is judged on the point estimate of the difference: "memory must
add 5 points" is what a user writes, and the interval and p-value beside it say how
sure that is. ``--evomemory-min-gain-by`` (``--min-gain-by``; :data:`REQUIRES`) lets a
gate demand confidence instead: ``lower-bound`` is met only when the 95 % interval's
lower bound reaches the margin, ``p-value`` only when the estimate reaches it and the
paired test's p is below 0.05. Every verdict prints the estimate and the lower bound.
A scope neither run covered, or covered without a task in common, misses the gate
(nothing shows a gain).

A gate reads the figure the stream is judged on, as every gate does (its match
mode's headline, :attr:`.summary.StreamMetrics.headline`): the accuracy, or a
declared mean such as LoCoMo's F1, whose paired difference is the comparison's
``continuous`` entry (the Wilcoxon p beside it instead of McNemar's).

A session of replicates (``repeats``) is judged the same way on its own estimate:
the per-task mean difference across the replicates (``replicates.json``), with its
interval (Agresti-Min on the effective number of tasks; MOVER for a mean) and paired t-test (:func:`check_replicate_gains`, :mod:`.clustered`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError, named
from ..options import GAIN_REQUIRES
from ..rundocs.compare import (
    OVERALL,
    Comparison,
    ContinuousComparison,
    DifferenceScope,
    PairedEntry,
    Replicates,
    as_comparison,
    as_replicates,
)
from ..rundocs.report import GainDoc
from ..util.text import did_you_mean

#: What a gate requires to be met (``min-gain-by``), the default first: the point
#: estimate reaches the margin; the 95 % interval's lower bound does; or the estimate
#: does and the paired test's p is below :data:`ALPHA`.
REQUIRES = GAIN_REQUIRES
ALPHA = 0.05
#: The interval of a gate's difference, by what it is of, as a verdict names it
#: (docs/statistics.md): one run's accuracy (and one replicate's), a mean figure
#: (LoCoMo's F1; one run or replicates), the accuracy across replicates.
INTERVALS = {
    "accuracy": "Agresti-Min",
    "mean": "MOVER",
    "replicates accuracy": "Agresti-Min on the effective number of tasks",
}


@dataclass(frozen=True)
class GainThreshold:
    """One gate: ``scope`` (a stream or ``overall``) must gain ``points`` or more,
    judged as ``requires`` says (:data:`REQUIRES`)."""

    scope: str
    points: float
    requires: str = REQUIRES[0]


@dataclass(frozen=True)
class GainResult:
    """One arm's verdict on one gate."""

    threshold: GainThreshold
    label: str
    baseline: str
    difference: float | None
    paired_tasks: int
    p_value: float | None
    complete: bool = True
    #: a session of replicates: how many replicates the mean difference is of; None
    #: for one run's comparison
    replicates: int | None = None
    #: the 95 % interval of the difference (Agresti-Min; MOVER for a declared
    #: mean; across replicates Agresti-Min on the effective number of tasks, MOVER for a mean)
    interval: tuple[float, float] | None = None
    #: the figure the difference is of: ``accuracy``, or a declared mean (``mean F1``)
    figure: str = "accuracy"
    #: with a declared mean: the Wilcoxon signed-rank p of the paired difference
    wilcoxon_p: float | None = None
    #: across replicates: the paired t-test's p (McNemar's with one replicate)
    replicate_p: float | None = None
    #: the test behind :attr:`test_p` (``McNemar``, ``Wilcoxon``, ``paired t``, ``sign-flip``)
    test: str = "McNemar"
    #: the method of :attr:`interval`, in the words the verdict prints (:data:`INTERVALS`)
    interval_method: str = ""

    @property
    def test_p(self) -> float | None:
        """The p-value of the paired test this difference is judged with."""
        if self.replicates is not None:
            return self.replicate_p
        return self.p_value if self.figure == "accuracy" else self.wilcoxon_p

    @property
    def met(self) -> bool:
        """Never for an incomplete comparison: the tasks that did not run might have
        told another story. What must reach the margin is :attr:`GainThreshold.requires`."""
        margin = self.threshold.points - 1e-9
        reached = self.difference is not None and self.difference * 100 >= margin
        if self.threshold.requires == "lower-bound":
            reached = self.interval is not None and self.interval[0] * 100 >= margin
        elif self.threshold.requires == "p-value":
            reached = reached and self.test_p is not None and self.test_p < ALPHA
        return self.complete and reached

    def describe(self) -> str:
        of = "" if self.figure == "accuracy" else f" of {self.figure}"
        p_value = self.test_p
        p = "" if p_value is None else f", {self.test} p={p_value:.3g}"
        method = f" ({self.interval_method})" if self.interval_method else ""
        interval = "" if self.interval is None else (
            f", 95% CI [{self.interval[0] * 100:+.1f}, {self.interval[1] * 100:+.1f}]{method}"
        )
        if self.difference is None:
            shown = "n/a (no task both ran)"
        elif self.replicates is not None:
            shown = (f"{self.difference * 100:+.1f} points{of}, the per-task mean over {self.replicates} replicates "
                     f"on {self.paired_tasks} paired tasks{interval}{p}")
        else:
            shown = f"{self.difference * 100:+.1f} points{of} over {self.paired_tasks} paired tasks{interval}{p}"
        verdict = "met" if self.met else "MISSED" if self.complete else "MISSED (incomplete run)"
        judged = {
            "estimate": "", "lower-bound": " (required of the 95% CI's lower bound)",
            "p-value": f" (required of the estimate, with p < {ALPHA:g})",
        }[self.threshold.requires]
        return (
            f"{verdict}: {self.threshold.scope} gain of {self.label} over {self.baseline} {shown}, "
            f"minimum {self.threshold.points:+.1f} points{judged}"
        )

    def document(self) -> GainDoc:
        """The verdict as the JSON report's ``gains`` holds it."""
        return GainDoc(
            scope=self.threshold.scope, label=self.label, baseline=self.baseline,
            minimum_points=self.threshold.points,
            difference_points=None if self.difference is None else self.difference * 100,
            paired_tasks=self.paired_tasks, mcnemar_p=self.p_value, complete=self.complete,
            met=self.met, figure=self.figure, wilcoxon_p=self.wilcoxon_p, replicates=self.replicates,
            difference_ci_points=None if self.interval is None else [bound * 100 for bound in self.interval],
            interval_method=(self.interval_method or None) if self.interval is not None else None,
            requires=self.threshold.requires, test=self.test, p_value=self.test_p,
        )


def parse_min_gain(values: Sequence[str], streams: Sequence[str], requires: str = REQUIRES[0]) -> list[GainThreshold]:
    """``[STREAM=]POINTS`` margins (percentage points, e.g. ``5`` or ``sample_facts=10``),
    each judged as ``requires`` says (:data:`REQUIRES`). Errors name the option by
    identity (the door spells it)."""
    option = named("min-gain")
    if requires not in REQUIRES:
        raise ConfigError(f"{option}: a gate requires one of {', '.join(REQUIRES)}, got {requires!r}", option="min-gain")
    thresholds: dict[str, GainThreshold] = {}
    for value in values:
        name, _, number = str(value).rpartition("=")
        try:
            points = float(number)
        except ValueError:
            raise ConfigError(
                f"{option} {value!r}: expected [STREAM=]POINTS in percentage points; write e.g. 5, or sample_facts=10",
                option="min-gain",
            ) from None
        if not -100.0 <= points <= 100.0 or points != points:
            raise ConfigError(
                f"{option} {value!r}: the margin must be between -100 and 100 percentage points; write e.g. 5",
                option="min-gain",
            )
        if name and name not in streams:
            raise ConfigError(
                f"{option} {value!r}: unknown stream {name!r}{did_you_mean(name, streams)}; "
                f"use one of the streams: {', '.join(streams)}",
                option="min-gain",
            )
        scope = name or OVERALL
        thresholds[scope] = GainThreshold(scope, points, requires)
    return list(thresholds.values())


def check_gains(
    given: Comparison | Mapping[str, Any], thresholds: Sequence[GainThreshold], *, complete: bool = True
) -> list[GainResult]:
    """Every arm after the baseline against every gate, streams first, then overall.

    ``complete`` is false when a run stopped before its planned tasks ran: then no
    gate is met, whatever the difference on the tasks that did run.
    """
    document = as_comparison(given)
    results = []
    for threshold in _in_order(thresholds):
        scope = document.scope(threshold.scope)
        labels = [run.label for run in document.runs[1:]]
        versus = list(scope.vs_baseline) if scope is not None else [PairedEntry() for _ in labels]
        for label, paired in zip(labels, versus, strict=True):
            continuous = paired.continuous
            source: PairedEntry | ContinuousComparison = paired
            if continuous is not None:  # the stream is judged on a mean (LoCoMo's F1): so is its gain
                source = continuous
                tasks = continuous.paired_tasks
                difference = continuous.mean_difference if tasks else None
                figure, wilcoxon, test = f"mean {continuous.label}", continuous.wilcoxon_p, "Wilcoxon"
                method = INTERVALS["mean"]
            else:
                tasks = paired.paired_tasks
                difference = paired.difference if tasks else None
                figure, wilcoxon, test = "accuracy", None, "McNemar"
                method = INTERVALS["accuracy"]
            results.append(GainResult(
                threshold, label, document.baseline,
                None if difference is None else float(difference), tasks, paired.mcnemar_p, complete,
                interval=_bounds(source.ci_low, source.ci_high) if tasks else None,
                figure=figure, wilcoxon_p=None if wilcoxon is None else float(wilcoxon), test=test,
                interval_method=method,
            ))
    return results


def _bounds(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (float(low), float(high))



def _in_order(thresholds: Sequence[GainThreshold]) -> list[GainThreshold]:
    """The gates as their verdicts are listed: the streams' first, then overall."""
    return sorted(thresholds, key=lambda threshold: threshold.scope == OVERALL)


def check_replicate_gains(
    given: Replicates | Mapping[str, Any], thresholds: Sequence[GainThreshold], *, complete: bool = True
) -> list[GainResult]:
    """:func:`check_gains` for a session of replicates, on ``replicates.json``'s
    document: each arm's per-task mean difference across the replicates, its interval
    (:func:`.clustered.difference_interval`) and paired t-test; ``paired_tasks`` the tasks every replicate of both ran."""
    document = as_replicates(given)
    results = []
    for threshold in _in_order(thresholds):
        for entry in document.vs_baseline:
            scope = entry.scope(threshold.scope) or DifferenceScope()
            mean = scope.mean
            tasks = scope.paired_tasks or 0
            p_value = scope.p_value
            results.append(GainResult(
                threshold, entry.label, document.baseline,
                None if mean is None or not tasks else float(mean), tasks, None, complete,
                replicates=scope.n,
                interval=_bounds(scope.ci_low, scope.ci_high) if tasks else None,
                figure=document.figure or "accuracy",
                replicate_p=None if p_value is None else float(p_value), test=scope.test or "paired t",
                interval_method=INTERVALS[
                    "accuracy" if scope.test == "McNemar" else
                    "replicates accuracy" if (document.figure or "accuracy") == "accuracy" else "mean"
                ],
            ))
    return results



__all__ = ["ALPHA", "INTERVALS", "REQUIRES", "GainResult", "GainThreshold", "check_gains", "check_replicate_gains", "parse_min_gain"]
