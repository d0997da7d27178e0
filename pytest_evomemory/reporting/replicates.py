"""A repeated session's comparison: each arm across its replicates, as data.

A replicate is one whole run of an arm with its own seed (:mod:`..runtime.replicates`).
The unit of sampling is the task; replicates are repeated measurements of each task
(:mod:`..analysis.clustered`). Per stream and overall, ``replicates.json`` holds each arm's
figure in every replicate (``accuracies``) and, over the tasks every replicate
scored, the mean of the per-task means with its 95 % interval (Wilson with the Kish
effective number of tasks), the variance split between tasks and seeds; for every
arm after the first (the baseline), the per-task mean difference from the baseline
(paired by task, replicates averaged) with its interval (Agresti-Min on the
effective number of tasks; MOVER for a continuous score), the paired t-test,
the minimum detectable effect at 80 % power (:mod:`..analysis.power`), beside each
replicate's own paired test on the tasks both ran (Agresti-Min interval, exact
McNemar p, as compare.json's). ``replicates.html`` shows the same, with figures
drawn from the replicate runs (:mod:`.replicatefigures`: each arm's learning curve
as the mean over its replicates with their range, and a forest plot of the gains).
With several
arms, each replicate's full comparison is also written as ``compare-r<i>.html`` /
``compare-r<i>.json``.

When an arm differs from the baseline only in ``benchmark.order`` (the same arm in
two orders), the entry says so under ``sequence_robustness``: its difference is the
paper's sequence robustness, with its interval (:func:`..analysis.stats.order_difference`).

The figure compared is each run's summary.json headline, the figure its streams are
judged on (:attr:`..analysis.summary.StreamMetrics.headline`, read by
:func:`.columns.headline`): the ``accuracy``, or a mean its match mode declares
(LoCoMo's F1); ``figure`` names it. The per-task scores behind the intervals are
the same figure task by task (1/0, or the task's F1, :func:`.compare.values`). The
per-replicate tests stay on the yes/no outcome (McNemar).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.clustered import METHODS, estimate_arm, estimate_difference
from ..analysis.power import power_entry
from ..analysis.stats import compare_paired, order_difference
from ..analysis.summary import shared_headline
from ..evaluation.modes import Metric
from ..rundir import REPLICATES_DATA, SCHEMA_VERSION, utc_now
from ..rundocs.compare import (
    ArmScope,
    DifferenceScope,
    OrderPair,
    ReplicateArm,
    Replicates,
    ReplicateTest,
    ReplicateVersus,
)
from ..util.redaction import dumps_redacted
from .columns import headline
from .compare import TaskKey, order_note, order_only, outcomes, stream_names, values
from .html import render_replicates, write_comparison, write_page
from .replicatefigures import replicate_figures
from .rundata import ReportError, RunData, load_run

#: Fewer replicates than this and the seeds' share of the variance is a guess: warned.
FEW_REPLICATES = 3


@dataclass(frozen=True)
class ReplicateFiles:
    """What a repeated session's comparison wrote, and its document."""

    document: Mapping[str, Any]
    paths: Sequence[Path]


def _accuracy(run: RunData, stream: str | None) -> float | None:
    """The figure the run's stream (or overall row) is judged on (:func:`.columns.headline`)."""
    metrics = run.overall if stream is None else run.streams.get(stream)
    return headline(metrics)[2] if metrics is not None else None


def _figure(run: RunData) -> str:
    """The label of what :func:`_accuracy` reads overall: ``accuracy`` or ``mean F1``."""
    return headline(run.overall)[1]


def _seed(run: RunData) -> int | None:
    replicate = run.summary.replicate
    return replicate.seed if replicate is not None else None


def _task_scores(run: RunData, stream: str | None, metric: Metric | None) -> dict[TaskKey, float]:
    """Each task's score in the compared figure: 1/0, or its value of ``metric`` (F1)."""
    if metric is None:
        return {key: 1.0 if outcome else 0.0 for key, outcome in outcomes(run, stream).items()}
    return values(run, metric, stream)


def _rows(runs: Sequence[RunData], stream: str | None, metric: Metric | None) -> dict[TaskKey, list[float]]:
    """Per task every replicate scored, its score in each replicate (replicate order)."""
    scores = [_task_scores(run, stream, metric) for run in runs]
    shared = set(scores[0]).intersection(*scores[1:]) if scores else set()
    return {key: [found[key] for found in scores] for key in scores[0] if key in shared} if scores else {}


def _spread(values: Sequence[float | None]) -> tuple[int, float | None, float | None]:
    """How many replicates have a figure, their mean and sample standard deviation
    (n - 1; None below two): the replicates' own spread, shown beside the interval."""
    present = [value for value in values if value is not None]
    if not present:
        return 0, None, None
    mean = math.fsum(present) / len(present)
    if len(present) < 2:
        return 1, mean, None
    return len(present), mean, math.sqrt(math.fsum((v - mean) ** 2 for v in present) / (len(present) - 1))


def _arm_scope(runs: Sequence[RunData], stream: str | None, metric: Metric | None) -> ArmScope:
    accuracies = [_accuracy(run, stream) for run in runs]
    count, mean, sd = _spread(accuracies)
    rows = _rows(runs, stream, metric)
    estimate = estimate_arm(list(rows.values()))
    return ArmScope(
        accuracies=accuracies, n=count, mean=estimate.estimate if estimate.estimate is not None else mean, sd=sd,
        ci_low=estimate.low, ci_high=estimate.high, **estimate.to_dict(),
    )


def _difference_scope(
    base: Sequence[RunData], mine: Sequence[RunData], stream: str | None, order: bool, metric: Metric | None
) -> DifferenceScope:
    first = [_accuracy(run, stream) for run in base]
    second = [_accuracy(run, stream) for run in mine]
    differences = [None if a is None or b is None else b - a for a, b in zip(first, second, strict=True)]
    count, mean, sd = _spread(differences)
    rows_first, rows_second = _rows(base, stream, metric), _rows(mine, stream, metric)
    keys = [key for key in rows_first if key in rows_second]
    estimate = estimate_difference(
        [rows_first[key] for key in keys], [rows_second[key] for key in keys], binary=metric is None
    )
    paired = order_difference if order else compare_paired
    per_replicate = []
    for index, (baseline, run) in enumerate(zip(base, mine, strict=True), 1):
        test = paired(outcomes(baseline, stream), outcomes(run, stream)).to_dict()
        per_replicate.append(ReplicateTest(replicate=index, seed=_seed(run), **test))
    power = None
    if estimate.sd is not None and estimate.tasks:
        power = power_entry(
            estimate.sd, estimate.tasks, estimate.replicates,
            "the standard deviation of the per-task mean differences",
        )
    return DifferenceScope(
        differences=differences, n=count, mean=estimate.difference if estimate.difference is not None else mean,
        sd=sd, ci_low=estimate.low, ci_high=estimate.high, **estimate.to_dict(), power=power,
        per_replicate=per_replicate,
    )


def _headline_metric(runs: Sequence[RunData]) -> Metric | None:
    """The continuous figure the runs are judged on (LoCoMo's F1), None for accuracy."""
    return shared_headline(item for run in runs for item in run.scores)


def replicate_comparison_model(groups: Sequence[tuple[str, Sequence[RunData]]]) -> Replicates:
    """The document of ``replicates.json``, built as its model: ``groups`` are the
    arms, each with its replicate runs in replicate order; the first arm is the baseline."""
    if not groups or any(not runs for _, runs in groups):
        raise ReportError("a replicate comparison needs at least one run of each arm")
    counts = {len(runs) for _, runs in groups}
    if len(counts) != 1:
        raise ReportError("every arm needs as many replicates as the baseline to pair them by seed")
    base_seeds = [_seed(run) for run in groups[0][1]]
    for label, runs in groups[1:]:
        seeds = [_seed(run) for run in runs]
        unpaired = [index for index, (a, b) in enumerate(zip(base_seeds, seeds, strict=True), 1)
                    if a is not None and b is not None and a != b]
        if unpaired:
            index = unpaired[0]
            raise ReportError(
                f"replicate {index} of {label} ran with seed {seeds[index - 1]} and the baseline's with seed "
                f"{base_seeds[index - 1]}: replicates pair by seed, so give each arm's replicates in the same "
                "seed order"
            )
    all_runs = [run for _, runs in groups for run in runs]
    streams = stream_names(all_runs)
    metric = _headline_metric(all_runs)
    base_label, base = groups[0]
    arms = [
        ReplicateArm(
            label=label,
            run_dirs=[str(run.run_dir) for run in runs],
            seeds=[_seed(run) for run in runs],
            streams={name: _arm_scope(runs, name, metric) for name in streams},
            overall=_arm_scope(runs, None, metric),
        )
        for label, runs in groups
    ]
    versus = []
    order_notes = []
    for label, runs in groups[1:]:
        orders = order_only(base[0], runs[0])
        note = order_note(base[0], runs[0]) if orders is None else None
        order_notes += [f"sequence robustness: {note}"] if note is not None else []
        versus.append(ReplicateVersus(
            label=label,
            sequence_robustness=None if orders is None else OrderPair(baseline_order=orders[0], order=orders[1]),
            streams={name: _difference_scope(base, runs, name, orders is not None, metric) for name in streams},
            overall=_difference_scope(base, runs, None, orders is not None, metric),
        ))
    warnings = [
        f"{label}: replicate {index} has no accuracy for {name}"
        for label, runs in groups for index, run in enumerate(runs, 1)
        for name in streams if _accuracy(run, name) is None
    ]
    if len(base) < FEW_REPLICATES:
        warnings.append(
            f"{len(base)} replicate(s) per arm: the seeds' share of the variance cannot be told apart from the "
            f"tasks' with fewer than {FEW_REPLICATES}; the intervals still cover task sampling (run "
            f"{FEW_REPLICATES} or more replicates to see whether more seeds or more tasks would help)"
        )
    warnings += _dropped_tasks(groups, streams, metric) + order_notes + _replicate_effects(arms)
    return Replicates(
        schema_version=SCHEMA_VERSION,
        baseline=base_label,
        confidence=0.95,
        figure=_figure(base[0]),
        replicates=len(base),
        seeds=[_seed(run) for run in base],
        methods=METHODS,
        arms=arms,
        vs_baseline=versus,
        warnings=warnings,
    )


#: Below this p, an arm's replicates differ more than seed noise within tasks explains: warned.
REPLICATE_EFFECT_ALPHA = 0.05


def _replicate_effects(arms: Sequence[ReplicateArm]) -> list[str]:
    """A warning per arm whose replicates differ, overall, more than the seed noise
    within its tasks explains (:func:`..analysis.clustered.replicate_spread`): the
    intervals cover task sampling and leave such an effect out."""
    found = []
    for arm in arms:
        effect = arm.overall.replicate_effect
        if effect is not None and effect.p_value < REPLICATE_EFFECT_ALPHA:
            found.append(
                f"{arm.label}: its replicates differ more than the seed noise within tasks explains (F = "
                f"{effect.f:.2f} on {effect.first_df} and {effect.second_df} df, p = {effect.p_value:.3g}): something "
                "shared by all the tasks of a replicate (its memory history, carry-over from one task to the next) "
                "varies between seeds, and the 95% intervals, which cover task sampling, leave it out and are too "
                "narrow (docs/statistics.md, 'What the intervals do not cover')"
            )
    return found


def build_replicate_comparison(groups: Sequence[tuple[str, Sequence[RunData]]]) -> dict[str, Any]:
    """replicates.json's document as the file holds it (:func:`replicate_comparison_model`, written)."""
    return replicate_comparison_model(groups).written()


def _dropped_tasks(
    groups: Sequence[tuple[str, Sequence[RunData]]], streams: Sequence[str], metric: Metric | None
) -> list[str]:
    """A warning per arm and stream whose replicates did not all score the same tasks
    (the interval uses the tasks every replicate scored), and per later arm and stream
    whose tasks differ from the baseline's (the difference uses the tasks of both)."""
    found = []
    for label, runs in groups:
        for name in streams:
            every = [set(_task_scores(run, name, metric)) for run in runs]
            union = set().union(*every)
            kept = set(every[0]).intersection(*every[1:]) if every else set()
            if len(union) > len(kept):
                found.append(
                    f"{name}: {label}'s replicates scored different tasks; its interval uses the {len(kept)} tasks "
                    f"every replicate scored ({len(union) - len(kept)} left out)"
                )
    base_label, base = groups[0]
    for label, runs in groups[1:]:
        for name in streams:
            first, second = set(_rows(base, name, metric)), set(_rows(runs, name, metric))
            if first != second and first and second:
                found.append(
                    f"{name}: {label} and {base_label} scored different tasks; the difference uses the "
                    f"{len(first & second)} tasks every replicate of both scored ({len(first - second)} only in "
                    f"{base_label}, {len(second - first)} only in {label}); each arm's interval uses its own"
                )
    return found


def write_replicate_comparison(groups: Sequence[tuple[str, Sequence[Path]]], directory: Path) -> ReplicateFiles:
    """Write ``replicates.json`` in ``directory`` and, with several arms, each
    replicate's comparison of the arms (``compare-r<i>.html`` and ``.json``)."""
    loaded = [(label, [load_run(run_dir, label) for run_dir in run_dirs]) for label, run_dirs in groups]
    model = replicate_comparison_model(loaded)
    paths: list[Path] = []
    if len(groups) > 1:
        labels = [label for label, _ in groups]
        for index in range(len(groups[0][1])):
            files = write_comparison(
                [run_dirs[index] for _, run_dirs in groups], directory / f"compare-r{index + 1}.html", labels
            )
            paths.append(files.html)
    model = model.model_copy(update={"comparisons": [path.name for path in paths], "generated": utc_now()})
    document = model.written()
    path = directory / REPLICATES_DATA
    write_page(path, dumps_redacted(document, indent=2) + "\n")  # as every artefact: redacted, strict JSON
    page = write_page(path.with_suffix(".html"), render_replicates(model, replicate_figures(model, loaded)))
    return ReplicateFiles(document, [page, path, *paths])


__all__ = [
    "FEW_REPLICATES",
    "METHODS",
    "ReplicateFiles",
    "build_replicate_comparison",
    "replicate_comparison_model",
    "write_replicate_comparison",
]
