"""The gain gate: does each arm beat the baseline by at least the stated margin?

``--evomemory-min-gain [STREAM=]POINTS`` (pytest, several arms in one session) and
``evomemory compare --min-gain`` (existing run directories) both read the margin
here and judge it on the comparison document (:func:`.compare.build_comparison`),
so the gate, ``compare.json`` and the terminal table use one difference: the
paired one, on the tasks both runs ran, in percentage points.

A gate is judged on the point estimate of the difference, not on its interval:
"memory must add 5 points" is what a user writes; whether that is significant is
the McNemar p-value beside it. A scope neither run covered, or covered without a
task in common, misses the gate (nothing shows a gain).

A gate reads the figure the stream is judged on, as every gate does (its match
mode's headline, :attr:`.summary.StreamMetrics.headline`): the accuracy, or a
declared mean such as LoCoMo's F1, whose paired difference is the comparison's
``continuous`` entry (the Wilcoxon p beside it instead of McNemar's).

A session of replicates (``repeats``) is judged the same way on its own estimate:
the mean of the replicates' paired differences (``replicates.json``), its paired-t
interval beside it (:func:`check_replicate_gains`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .compare import OVERALL


@dataclass(frozen=True)
class GainThreshold:
    """One gate: ``scope`` (a stream or ``overall``) must gain ``points`` or more."""

    scope: str
    points: float


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
    #: a session of replicates: how many replicates the mean difference is of, and its
    #: 95 % paired-t interval (None with one replicate); None for one run's comparison
    replicates: int | None = None
    interval: tuple[float, float] | None = None
    #: the figure the difference is of: ``accuracy``, or a declared mean (``mean F1``)
    figure: str = "accuracy"
    #: with a declared mean: the Wilcoxon signed-rank p of the paired difference
    wilcoxon_p: float | None = None

    @property
    def met(self) -> bool:
        """Never for an incomplete comparison: the tasks that did not run might have
        told another story."""
        reached = self.difference is not None and self.difference * 100 >= self.threshold.points - 1e-9
        return self.complete and reached

    def describe(self) -> str:
        of = "" if self.figure == "accuracy" else f" of {self.figure}"
        if self.difference is None:
            shown = "n/a (no task both ran)"
        elif self.replicates is not None:
            interval = "" if self.interval is None else (
                f", 95% CI [{self.interval[0] * 100:+.1f}, {self.interval[1] * 100:+.1f}]"
            )
            shown = f"{self.difference * 100:+.1f} points{of}, the mean over {self.replicates} replicates{interval}"
        else:
            test, p_value = ("McNemar", self.p_value) if self.figure == "accuracy" else ("Wilcoxon", self.wilcoxon_p)
            p = "" if p_value is None else f", {test} p={p_value:.3g}"
            shown = f"{self.difference * 100:+.1f} points{of} over {self.paired_tasks} paired tasks{p}"
        verdict = "met" if self.met else "MISSED" if self.complete else "MISSED (incomplete run)"
        return (
            f"{verdict}: {self.threshold.scope} gain of {self.label} over {self.baseline} {shown}, "
            f"minimum {self.threshold.points:+.1f} points"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.threshold.scope, "label": self.label, "baseline": self.baseline,
            "minimum_points": self.threshold.points,
            "difference_points": None if self.difference is None else self.difference * 100,
            "paired_tasks": self.paired_tasks, "mcnemar_p": self.p_value, "complete": self.complete,
            "met": self.met, "figure": self.figure, "wilcoxon_p": self.wilcoxon_p, "replicates": self.replicates,
            "difference_ci_points": None if self.interval is None else [bound * 100 for bound in self.interval],
        }


def parse_min_gain(values: Sequence[str], streams: Sequence[str], option: str = "--evomemory-min-gain") -> list[GainThreshold]:
    """``[STREAM=]POINTS`` margins (percentage points, e.g. ``5`` or ``sample_facts=10``)."""
    thresholds: dict[str, GainThreshold] = {}
    for value in values:
        name, _, number = str(value).rpartition("=")
        try:
            points = float(number)
        except ValueError:
            raise ConfigError(
                f"{option} {value!r}: expected [STREAM=]POINTS in percentage points, such as 5 or sample_facts=10",
                source=option,
            ) from None
        if not -100.0 <= points <= 100.0 or points != points:
            raise ConfigError(f"{option} {value!r}: the margin must be between -100 and 100 percentage points", source=option)
        if name and name not in streams:
            raise ConfigError(f"{option} {value!r}: unknown stream {name!r}; streams: {', '.join(streams)}", source=option)
        scope = name or OVERALL
        thresholds[scope] = GainThreshold(scope, points)
    return list(thresholds.values())


def check_gains(
    document: Mapping[str, Any], thresholds: Sequence[GainThreshold], *, complete: bool = True
) -> list[GainResult]:
    """Every arm after the baseline against every gate, streams first, then overall.

    ``complete`` is false when a run stopped before its planned tasks ran: then no
    gate is met, whatever the difference on the tasks that did run.
    """
    results = []
    for threshold in _in_order(thresholds):
        scope = _scope(document, threshold)
        labels = [run["label"] for run in document["runs"][1:]]
        versus: list[Mapping[str, Any]] = list(scope["vs_baseline"]) if scope is not None else [{} for _ in labels]
        for label, paired in zip(labels, versus, strict=True):
            continuous = paired.get("continuous")
            if isinstance(continuous, Mapping):  # the stream is judged on a mean (LoCoMo's F1): so is its gain
                tasks = int(continuous.get("paired_tasks") or 0)
                difference = continuous.get("mean_difference") if tasks else None
                figure, wilcoxon = f"mean {continuous.get('label')}", continuous.get("wilcoxon_p")
            else:
                tasks = int(paired.get("paired_tasks") or 0)
                difference = paired.get("difference") if tasks else None
                figure, wilcoxon = "accuracy", None
            results.append(GainResult(
                threshold, label, str(document["baseline"]),
                None if difference is None else float(difference), tasks, paired.get("mcnemar_p"), complete,
                figure=figure, wilcoxon_p=None if wilcoxon is None else float(wilcoxon),
            ))
    return results


def _in_order(thresholds: Sequence[GainThreshold]) -> list[GainThreshold]:
    """The gates as their verdicts are listed: the streams' first, then overall."""
    return sorted(thresholds, key=lambda threshold: threshold.scope == OVERALL)


def _scope(block: Mapping[str, Any], threshold: GainThreshold) -> Mapping[str, Any] | None:
    """A comparison's entry for the gate's scope (``overall``, or a stream of ``streams``)."""
    found: Mapping[str, Any] | None = block[OVERALL] if threshold.scope == OVERALL else block["streams"].get(threshold.scope)
    return found


def check_replicate_gains(
    document: Mapping[str, Any], thresholds: Sequence[GainThreshold], *, complete: bool = True
) -> list[GainResult]:
    """:func:`check_gains` for a session of replicates, on ``replicates.json``'s
    document: each arm's mean paired difference across the replicates (replicate
    ``i`` of each arm ran with the same seed); ``paired_tasks`` sums the replicates'."""
    results = []
    for threshold in _in_order(thresholds):
        for entry in document["vs_baseline"]:
            scope: Mapping[str, Any] = _scope(entry, threshold) or {}
            mean, low, high = scope.get("mean"), scope.get("ci_low"), scope.get("ci_high")
            tasks = sum(int(test.get("paired_tasks") or 0) for test in scope.get("per_replicate") or ())
            results.append(GainResult(
                threshold, str(entry["label"]), str(document["baseline"]),
                None if mean is None or not tasks else float(mean), tasks, None, complete,
                replicates=int(scope.get("n") or 0),
                interval=None if low is None or high is None else (float(low), float(high)),
                figure=str(document.get("figure") or "accuracy"),
            ))
    return results


__all__ = ["GainResult", "GainThreshold", "check_gains", "check_replicate_gains", "parse_min_gain"]
