"""What a comparison of runs says, as data: the one place its numbers are decided.

``compare.json``, ``compare.html`` and the terminal comparison all render the
document :func:`comparison_model` builds, so they cannot disagree. Per stream
and overall it holds each run's accuracy with its 95 % Wilson interval and, for
every run after the first (the baseline), the paired difference on the tasks both
ran with Agresti & Min's interval and the exact McNemar p-value (:mod:`..analysis.stats`).
When the runs' match modes declare a continuous headline figure (LoCoMo's F1,
:func:`..analysis.summary.shared_headline`), each paired entry also holds, under
``continuous``, the MOVER interval of the mean difference (:func:`..analysis.clustered.paired_mean_interval`) and the
Wilcoxon signed-rank p-value on the tasks both ran, beside McNemar on the yes/no
outcome (F1 >= 0.5).

A run that is the baseline in another order (:func:`order_only`: the resolved
configs run.json records are equal apart from the order keys, however the order was
set) is also listed under ``sequence_robustness``: the paired difference between the
two orders, the paper's sequence robustness (:func:`..analysis.stats.order_difference`). A repeated
session compares its arms across replicates in :mod:`.replicates`.

Runs are only comparable task by task: when two runs cover different streams or
different tasks (another ``limit``, another category filter), the difference is
still computed, but only over the tasks both ran, and the document says so in
``warnings`` and ``task_sets_differ`` instead of silently putting unlike numbers
side by side. A task is identified by ``(stream, task_id)``; runs whose stream read
another data file (run.json's provenance sha256) are warned about, since one id may
then name two different tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..analysis.categories import score_value
from ..analysis.clustered import paired_mean_interval
from ..analysis.power import discordance_sd, power_entry
from ..analysis.similarity import similarity_analysis
from ..analysis.stats import (
    FAILED_IS_WRONG,
    NO_PAIRS,
    Proportion,
    compare_paired,
    order_difference,
    wilcoxon_signed_rank,
)
from ..analysis.summary import shared_headline
from ..config import ORDER_KEYS
from ..evaluation.modes import Metric
from ..rundir import SCHEMA_VERSION
from ..rundocs import Score, StreamSummary
from ..rundocs.compare import (
    NO_OTHER_ORDER,
    OVERALL,
    ComparedRun,
    Comparison,
    ConfigDifference,
    Flip,
    PairedEntry,
    RunEntry,
    Scope,
    SequenceRobustness,
    as_comparison,
)
from .columns import figures_of

if TYPE_CHECKING:
    from .rundata import RunData

#: run.json keys left out of the config diff: where files were, not what ran.
_NOT_CONFIG = ("sources", "path", "paths")

TaskKey = tuple[str, str]


def outcomes(run: RunData, stream: str | None = None) -> dict[TaskKey, bool]:
    """Each scored task's outcome (a failed episode is wrong), optionally of one stream."""
    result: dict[TaskKey, bool] = {}
    for scored in run.scores:
        name = scored.stream
        if stream is not None and name != stream:
            continue
        result[(name, scored.task_id)] = scored.correct and not scored.error
    return result


def _scored(run: RunData, stream: str | None) -> list[Score]:
    return [scored for scored in run.scores if stream is None or scored.stream == stream]


def values(run: RunData, metric: Metric, stream: str | None = None) -> dict[TaskKey, float]:
    """Each scored task's value of the continuous figure ``metric`` (LoCoMo's F1; a
    failed episode is 0, :func:`..analysis.categories.score_value`), optionally of one stream."""
    return {
        (scored.stream, scored.task_id): score_value(scored, metric.detail)
        for scored in _scored(run, stream)
    }


def continuous_comparison(
    metric: Metric, first: Mapping[TaskKey, float], second: Mapping[TaskKey, float]
) -> dict[str, Any]:
    """``second - first`` on the tasks both ran: the mean difference with its 95 %
    MOVER interval (:func:`..analysis.clustered.paired_mean_interval`), and the two-sided
    Wilcoxon signed-rank test."""
    estimate = paired_mean_interval(first, second)
    differences = [float(second[key]) - float(value) for key, value in first.items() if key in second]
    mean = sum(differences) / len(differences) if differences else 0.0
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / len(differences)) if differences else 0.0
    document: dict[str, Any] = {
        "metric": metric.name, "label": metric.label, "paired_tasks": estimate.n,
        "mean_difference": estimate.mean, "ci_low": estimate.low, "ci_high": estimate.high,
        "wilcoxon_statistic": None, "wilcoxon_p": None, "wilcoxon_method": None, "nonzero": 0,
        "no_test": NO_PAIRS,
        "power": power_entry(sd, len(differences), 1, f"the standard deviation of the per-task {metric.label} differences")
        if differences else None,
    }
    if estimate.n:
        test = wilcoxon_signed_rank(first, second)
        document.update({
            "wilcoxon_statistic": test.statistic, "wilcoxon_p": test.p_value, "wilcoxon_method": test.method,
            "nonzero": test.nonzero, "no_test": None,
        })
    return document


def stream_names(runs: Sequence[RunData]) -> list[str]:
    """Streams in run order, first run first, so a comparison keeps the benchmark's order."""
    names: list[str] = []
    for run in runs:
        for name in run.streams:
            if name not in names:
                names.append(name)
    return names


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _run_entry(run: RunData, metrics: StreamSummary | None) -> RunEntry:
    if metrics is None:
        return RunEntry(label=run.label, present=False)
    correct, tasks = metrics.correct, metrics.tasks
    entry: dict[str, Any] = {"label": run.label, "present": True, **Proportion(correct, tasks).to_dict()}
    for name in figures_of(metrics):
        matches = metrics.figure_value(name, "matches")
        if isinstance(matches, int) and not isinstance(matches, bool):
            share = Proportion(matches, tasks)
            interval = share.interval
            entry[f"{name}_accuracy"] = share.estimate
            entry[f"{name}_ci_low"], entry[f"{name}_ci_high"] = interval if interval else (None, None)
        elif (mean := _number(metrics.figure_value(name, "mean"))) is not None:
            entry[f"{name}_mean"] = mean  # a mean figure (LoCoMo's F1): no paired test of it yet
    # a count the summary does not hold (an older writer's) is none
    set_here = metrics.model_fields_set
    for key in ("protocol_violations", "cached_responses", "errors", "cost_usd"):
        entry[key] = getattr(metrics, key) if key in set_here else None
    return RunEntry(**entry)  # the figures' own keys (<name>_accuracy) are the entry's extras


def _scope(runs: Sequence[RunData], stream: str | None) -> Scope:
    picked = [run.overall if stream is None else run.streams.get(stream) for run in runs]
    entries = [_run_entry(run, metrics) for run, metrics in zip(runs, picked, strict=True)]
    base = outcomes(runs[0], stream)
    headline = shared_headline(item for run in runs for item in _scored(run, stream))
    base_values = values(runs[0], headline, stream) if headline is not None else {}
    versus = []
    differ = False
    for run, metrics in zip(runs[1:], picked[1:], strict=True):
        mine = outcomes(run, stream)
        same = set(mine) == set(base)
        differ = differ or not same or (metrics is None) != (picked[0] is None)
        comparison = compare_paired(base, mine)
        paired = comparison.to_dict()
        table = comparison.table
        paired.update({
            "label": run.label,
            "same_tasks": same and bool(base),
            "only_in_baseline": len(set(base) - set(mine)),
            "only_in_this_run": len(set(mine) - set(base)),
            "continuous": None if headline is None else continuous_comparison(
                headline, base_values, values(run, headline, stream)
            ),
            "power": power_entry(
                discordance_sd(table.only_first, table.only_second, table.total), table.total, 1,
                "the discordant tasks: sd(d)^2 = p10 + p01 - (p10 - p01)^2",
            ) if table.total else None,
        })
        versus.append(PairedEntry(**paired))
    return Scope(runs=entries, vs_baseline=versus, task_sets_differ=differ)


def _flips(runs: Sequence[RunData]) -> list[Flip]:
    """Tasks on which the runs disagree (one right, another wrong), in stream order."""
    per_run = [outcomes(run) for run in runs]
    positions: dict[TaskKey, int] = {}
    for run in runs:
        for scored in run.scores:
            positions.setdefault((scored.stream, scored.task_id), scored.position)
    order = {name: index for index, name in enumerate(stream_names(runs))}
    keys = {key for results in per_run for key in results}
    flips = []
    for key in sorted(keys, key=lambda k: (order.get(k[0], len(order)), positions.get(k, 0), k[1])):
        seen = [results.get(key) for results in per_run]
        known = {value for value in seen if value is not None}
        if len(known) > 1:
            position = positions.get(key)
            flips.append(Flip(
                stream=key[0], task_id=key[1], position=None if position is None else position + 1, correct=seen,
            ))
    return flips


def _differences(values: Sequence[object], key: str, rows: list[dict[str, Any]]) -> None:
    """Rows for the dotted keys under ``key`` whose values differ between runs.

    Where every run has a mapping, its keys are compared one by one; where one has
    a mapping and another has none (a model-free arm beside a model's), the whole
    section is one row: not a row per key of the section against ``null``."""
    if all(isinstance(value, Mapping) for value in values):
        mappings = [value for value in values if isinstance(value, Mapping)]
        for child in sorted({name for mapping in mappings for name in mapping}):
            if not key and child in _NOT_CONFIG:
                continue
            _differences([mapping.get(child, _MISSING) for mapping in mappings], f"{key}.{child}" if key else child, rows)
        return
    if any(value != values[0] for value in values[1:]):
        rows.append({"key": key, "values": [None if value is _MISSING else value for value in values]})


_MISSING: Any = object()


def config_diff(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """Config keys (run.json's resolved configs and stream list) whose values differ."""
    documents = []
    for run in runs:
        document: dict[str, Any] = run.run.run.written() if "run" in run.run.model_fields_set else {}
        document["streams"] = {
            stream.name: {key: item for key, item in stream.written().items() if key not in ("name", "description")}
            for stream in run.run.streams
        }
        documents.append(document)
    rows: list[dict[str, Any]] = []
    _differences(documents, "", rows)
    return rows


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


#: Keys of a stream's recorded provenance that say where its file was, not which bytes
#: it held (its sha256 says that): two checkouts read the same data from two places.
_PROVENANCE_LOCATION = ("file", "path")


def _what_ran_but_order(run: RunData) -> dict[str, Any] | None:
    """What ran, apart from the order of the tasks: run.json's resolved benchmark
    (without :data:`~..config.ORDER_KEYS`), agent and memory, and each stream as it
    was read. Never how the config was spelled (its name, files, ``set`` overrides,
    the command line's selection): the order may come from the config, a ``set``, a
    replicate's seed or a merge, and the same resolved settings are the same arm."""
    if "run" not in run.run.model_fields_set:
        return None
    config = run.run.run.written()
    benchmark = _mapping(config.get("benchmark"))
    return {
        "benchmark": {key: value for key, value in benchmark.items() if key not in ORDER_KEYS},
        "agent": config.get("agent"),
        "memory": config.get("memory"),
        "streams": [
            {
                **{key: value for key, value in entry.written().items() if key not in ("order", "provenance")},
                "provenance": {
                    key: value for key, value in entry.provenance.items() if key not in _PROVENANCE_LOCATION
                },
            }
            for entry in run.run.streams
        ],
    }


def _stream_orders(run: RunData) -> dict[str, _Order]:
    """Each stream's order as the run recorded it (run.json ``streams[].order``: kind,
    seed, the digest of its task ids in order), or, in a run.json from before orders
    were recorded, the configured order for every stream (the config's own key)."""
    recorded = {str(entry.name): entry.order for entry in run.run.streams}
    if recorded and all(order.model_fields_set for order in recorded.values()):
        return {name: _Order(order.named, order.seed, order.tasks_sha256) for name, order in recorded.items()}
    configured = _Order(str(run.run.run.benchmark.get("order") or "given"))
    return {name: configured for name in recorded} or {"": configured}


@dataclass(frozen=True)
class _Order:
    """A stream's order as two runs' are compared: its kind, seed and task digest."""

    kind: str
    seed: int | None = None
    tasks_sha256: str | None = None


def _same_order(first: _Order, second: _Order) -> bool:
    """Whether two recorded orders of a stream put its tasks in one sequence: the
    same kind and seed, and the same task digest where both recorded one."""
    if first.kind != second.kind or first.seed != second.seed:
        return False
    digests = first.tasks_sha256, second.tasks_sha256
    return None in digests or digests[0] == digests[1]


def _order(run: RunData, seeded: bool = False) -> str:
    """The run's order by name (``shuffle``), with its seed (``shuffle seed 5``) when
    ``seeded``: two shuffles are told apart by their seeds."""
    orders = list(_stream_orders(run).values())
    kind = orders[0].kind if orders else "given"
    seed = orders[0].seed if orders else None
    return f"{kind} seed {seed}" if seeded and seed is not None else kind


def _orders_differ(first: RunData, second: RunData) -> bool:
    """Whether some stream of the two runs ran its tasks in another sequence (:func:`_same_order`)."""
    orders, others = _stream_orders(first), _stream_orders(second)
    return set(orders) != set(others) or not all(_same_order(orders[name], others[name]) for name in orders)


def order_note(first: RunData, second: RunData, first_ran: Any = _MISSING) -> str | None:
    """Why ``second`` is not the baseline ``first`` in another order although it ran
    its tasks in another sequence: what else differs (:func:`_what_ran_but_order`), so
    that its difference is not read as sequence robustness. None when the orders are
    the same, or when the two are one arm in two orders (:func:`order_only`)."""
    if not _orders_differ(first, second):
        return None
    ran = _what_ran_but_order(first) if first_ran is _MISSING else first_ran
    other = _what_ran_but_order(second)
    if ran is None or other is None:
        return (f"{second.label} ran another order than the baseline, but a run.json does not record what ran: "
                "no sequence robustness")
    differs = [key for key in ran if ran.get(key) != other.get(key)]
    if not differs:
        return None
    return (
        f"{second.label} ran another order ({_order(second)}) than the baseline ({_order(first)}) but also differs "
        f"in {', '.join(differs)}: its difference mixes the order with that, so it is not sequence robustness"
    )


def order_only(first: RunData, second: RunData, first_ran: Any = _MISSING) -> tuple[str, str] | None:
    """``(first's order, second's order)`` when the two runs ran the same arm in two
    orders: what ran is equal apart from the order (:func:`_what_ran_but_order`), and
    some stream's tasks ran in another sequence (:func:`_same_order`). Their paired
    difference is the paper's sequence robustness; else None. ``first_ran``: what
    :func:`_what_ran_but_order` gives for ``first``, when the caller has it (a
    comparison asks it of its baseline once, not once per run)."""
    ran = _what_ran_but_order(first) if first_ran is _MISSING else first_ran
    if ran is None or ran != _what_ran_but_order(second) or not _orders_differ(first, second):
        return None
    seeded = _order(first) == _order(second)
    return _order(first, seeded), _order(second, seeded)


def sequence_robustness(runs: Sequence[RunData], streams: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """For each run that is the baseline in another order (:func:`order_only`): per
    stream and overall, the paired difference between the two orders on the tasks
    both ran (:func:`..analysis.stats.order_difference`), ``second - first``; and
    the notes that say why a run in another order has no entry (:func:`order_note`),
    or why there is none at all (:data:`NO_OTHER_ORDER`)."""
    found = []
    notes = []
    baseline_ran = _what_ran_but_order(runs[0])
    for run in runs[1:]:
        orders = order_only(runs[0], run, baseline_ran)
        if orders is None:
            note = order_note(runs[0], run, baseline_ran)
            notes += [note] if note is not None else []
            continue
        scopes = {
            name: order_difference(outcomes(runs[0], name), outcomes(run, name)).to_dict() for name in streams
        }
        found.append({
            "label": run.label, "baseline_order": orders[0], "order": orders[1], "streams": scopes,
            OVERALL: order_difference(outcomes(runs[0]), outcomes(run)).to_dict(),
        })
    return found, notes if found or notes else [NO_OTHER_ORDER]


def _warnings(runs: Sequence[RunData], scopes: Mapping[str, Scope]) -> list[str]:
    base = runs[0].label
    warnings = []
    for run in runs:
        if not run.scores:
            warnings.append(
                f"{run.label}: no scores.jsonl in {run.run_dir}; its paired statistics cannot be computed"
            )
    for name, scope in scopes.items():
        for entry, versus in zip(scope.runs[1:], scope.vs_baseline, strict=True):
            if not entry.present:
                warnings.append(f"{name}: {entry.label} did not run this stream")
            elif not scope.runs[0].present:
                warnings.append(f"{name}: the baseline {base} did not run this stream")
            elif not versus.paired_tasks:
                warnings.append(
                    f"{name}: {entry.label} against {base}: {NO_PAIRS} (scored tasks: {versus.only_in_this_run} "
                    f"in {entry.label}, {versus.only_in_baseline} in {base}); no difference, interval or "
                    "p-value is given"
                )
            elif versus.only_in_baseline or versus.only_in_this_run:
                warnings.append(
                    f"{name}: {entry.label} and {base} ran different tasks "
                    f"({versus.only_in_baseline} only in {base}, {versus.only_in_this_run} only in "
                    f"{entry.label}); the difference and p-value use the {versus.paired_tasks} tasks both ran"
                )
    baseline_data = _data_files(runs[0])
    for run in runs[1:]:
        for stream, digest in _data_files(run).items():
            other = baseline_data.get(stream)
            if other is not None and other != digest:
                warnings.append(
                    f"{stream}: {run.label} and {base} read different data (sha256 {digest[:12]} and {other[:12]} "
                    "of the stream's file); tasks are paired by id, so a paired task may not be the same task"
                )
    return warnings


def _data_files(run: RunData) -> dict[str, str]:
    """Each stream's data file by the SHA-256 run.json records (``streams[].provenance``)."""
    found = {}
    for entry in run.run.streams:
        digest = entry.provenance.get("sha256")
        if isinstance(digest, str) and digest:
            found[str(entry.name)] = digest
    return found


def _figures(runs: Sequence[RunData]) -> dict[str, str]:
    """Every figure beyond accuracy any run's stream carries: name -> label."""
    found: dict[str, str] = {}
    for run in runs:
        for metrics in run.streams.values():
            found.update(figures_of(metrics))
    return found


#: How ``continuous`` (a continuous headline figure, LoCoMo's F1) is computed.
_CONTINUOUS_METHODS = {
    "mean_difference_ci": "MOVER (Zou & Donner 2008) on the tasks both runs ran: each run's Wilson interval on the "
    "effective number of tasks (design effect of the F1 scores with half a pseudo-outcome at 0 and at 1, t with "
    "tasks - 1 degrees of freedom) combined with the correlation of the runs' task scores",
    "continuous_p_value": "two-sided Wilcoxon signed-rank test (zero differences dropped, as scipy.stats.wilcoxon's "
    "defaults: exact, sign-flip enumeration with ties or zeros up to 13 pairs, else normal approximation)",
    "yes_no_outcome": "McNemar and the accuracy use the match mode's yes/no outcome (LoCoMo: F1 >= 0.5)",
}




def continuous_label(document: Comparison | Mapping[str, Any]) -> str | None:
    """The label of the continuous headline figure a comparison tests (``F1``), or
    None when every paired entry is judged on accuracy alone."""
    return as_comparison(document).continuous_label()


def comparison_model(runs: Sequence[RunData]) -> Comparison:
    """The comparison (written as compare.json), built as its model; ``runs[0]`` is the baseline."""
    streams = {name: _scope(runs, name) for name in stream_names(runs)}
    overall = _scope(runs, None)
    continuous = any(scope.continuous is not None for scope in [*streams.values(), overall])
    robustness, robustness_notes = sequence_robustness(runs, list(streams))
    return Comparison(
        schema_version=SCHEMA_VERSION,
        baseline=runs[0].label,
        confidence=0.95,
        methods={
            "accuracy_ci": "Wilson score interval",
            "difference_ci": "Agresti & Min (2005) adjusted Wald interval for matched proportions (half a "
            "pseudo-observation in each cell of the paired table, truncated to [-1, 1]), on the tasks both runs ran",
            "p_value": "exact McNemar (two-sided binomial test on the discordant tasks)",
            "power": "minimum detectable effect at 80% power, two-sided alpha 0.05: (z(0.975) + z(0.80)) * sd(d) / "
            "sqrt(paired tasks), sd(d) from the discordant tasks (Miller 2024, arXiv:2411.00640, power analysis)",
            "denominator": f"{FAILED_IS_WRONG}; the paired figures use the tasks both runs scored",
            "similarity_ci": "Pearson's r of task similarity and gain with its 95% interval by Fisher's z transform "
            "(none for 3 tasks or fewer or |r| = 1); Spearman's rho on average ranks",
            **(_CONTINUOUS_METHODS if continuous else {}),
        },
        runs=[
            ComparedRun(label=run.label, run_dir=str(run.run_dir), run=run.summary.run,
                        **run.identity)
            for run in runs
        ],
        streams=streams,
        overall=overall,
        figures=_figures(runs),
        config_diff=[ConfigDifference(**row) for row in config_diff(runs)],
        flips=_flips(runs),
        # how each memory arm's gain over the first run tracks task similarity (..analysis.similarity)
        similarity=similarity_analysis(runs, list(streams)),
        # the same arm in two orders: the paired difference between the orders
        sequence_robustness=[SequenceRobustness(**found) for found in robustness],
        sequence_robustness_notes=robustness_notes,
        warnings=_warnings(runs, {**streams, OVERALL: overall}),
    )


def build_comparison(runs: Sequence[RunData]) -> dict[str, Any]:
    """The comparison document as compare.json holds it (:func:`comparison_model`, written)."""
    return comparison_model(runs).written()


__all__ = [
    "OVERALL",
    "build_comparison",
    "comparison_model",
    "config_diff",
    "continuous_comparison",
    "continuous_label",
    "order_note",
    "order_only",
    "outcomes",
    "sequence_robustness",
    "stream_names",
    "values",
]
