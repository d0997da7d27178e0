"""A repeated session's comparison: each arm across its replicates, as data.

A replicate is one whole run of an arm with its own seed (:mod:`..runtime.replicates`).
Per stream and overall, ``replicates.json`` holds each arm's accuracy in every
replicate with their mean and 95 % Student-t interval across replicates
(:func:`.stats.replicate_interval`) and, for every arm after the first (the
baseline), the mean of its per-replicate differences from the baseline with the
paired-t interval (:func:`.stats.paired_replicate_difference`: replicate ``i`` of
each arm ran with the same seed) beside each replicate's own paired test on the
tasks both ran (Newcombe interval, exact McNemar p, as compare.json's);
``replicates.html`` shows the same. With
several arms, each replicate's full comparison is also written as
``compare-r<i>.html`` / ``compare-r<i>.json``.

When an arm differs from the baseline only in ``benchmark.order`` (the same arm in
two orders), the entry says so under ``sequence_robustness``: its difference is the
paper's sequence robustness, with its interval (:func:`.stats.order_difference`).

The figure compared is each run's summary.json headline, the figure its streams are
judged on (:attr:`.summary.StreamMetrics.headline`, read by
:func:`.columns.headline`): the ``accuracy``, or a mean its match mode declares
(LoCoMo's F1); ``figure`` names it. ``evomemory table`` reads the same figures (a
LoCoMo row in its "LoCoMo mean F1" column), so the means here equal a replicate
table's cells. The per-replicate
tests stay on the yes/no outcome (McNemar).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..redaction import dumps_redacted
from ..rundir import REPLICATES_DATA, SCHEMA_VERSION, utc_now
from .columns import headline
from .compare import OVERALL, order_only, outcomes, stream_names
from .html import render_replicates, write_comparison, write_page
from .rundata import ReportError, RunData, load_run
from .stats import compare_paired, order_difference, paired_replicate_difference, replicate_interval

METHODS = {
    "accuracy_ci": "Student-t interval of the mean figure (the accuracy, or the mean the match mode declares: "
    "see figure) across replicates (n - 1 degrees of freedom)",
    "difference_ci": "paired t across replicates: replicate i of each arm ran with the same seed",
    "per_replicate": "within each replicate: Newcombe (1998) method 10 paired interval and exact McNemar p "
    "on the tasks both arms ran",
}


@dataclass(frozen=True)
class ReplicateFiles:
    """What a repeated session's comparison wrote, and its document."""

    document: Mapping[str, Any]
    paths: Sequence[Path]


def _accuracy(run: RunData, stream: str | None) -> float | None:
    """The figure the run's stream (or overall row) is judged on (:func:`.columns.headline`)."""
    metrics = run.overall if stream is None else run.streams.get(stream)
    return headline(metrics)[2] if isinstance(metrics, Mapping) else None


def _figure(run: RunData) -> str:
    """The label of what :func:`_accuracy` reads overall: ``accuracy`` or ``mean F1``."""
    return headline(run.overall)[1]


def _seed(run: RunData) -> int | None:
    replicate = run.summary.get("replicate")
    seed = replicate.get("seed") if isinstance(replicate, Mapping) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _arm_scope(runs: Sequence[RunData], stream: str | None) -> dict[str, Any]:
    accuracies = [_accuracy(run, stream) for run in runs]
    mean = replicate_interval([value for value in accuracies if value is not None])
    return {"accuracies": accuracies, **mean.to_dict()}


def _difference_scope(
    base: Sequence[RunData], mine: Sequence[RunData], stream: str | None, order: bool
) -> dict[str, Any]:
    first = [_accuracy(run, stream) for run in base]
    second = [_accuracy(run, stream) for run in mine]
    both = [(a, b) for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    mean = paired_replicate_difference([a for a, _ in both], [b for _, b in both])
    paired = order_difference if order else compare_paired
    per_replicate = []
    for index, (baseline, run) in enumerate(zip(base, mine, strict=True), 1):
        test = paired(outcomes(baseline, stream), outcomes(run, stream)).to_dict()
        per_replicate.append({"replicate": index, "seed": _seed(run), **test})
    return {
        "differences": [None if a is None or b is None else b - a for a, b in zip(first, second, strict=True)],
        **mean.to_dict(),
        "per_replicate": per_replicate,
    }


def build_replicate_comparison(groups: Sequence[tuple[str, Sequence[RunData]]]) -> dict[str, Any]:
    """The document of ``replicates.json``: ``groups`` are the arms, each with its
    replicate runs in replicate order; the first arm is the baseline."""
    if not groups or any(not runs for _, runs in groups):
        raise ReportError("a replicate comparison needs at least one run of each arm")
    counts = {len(runs) for _, runs in groups}
    if len(counts) != 1:
        raise ReportError("every arm needs as many replicates as the baseline to pair them by seed")
    all_runs = [run for _, runs in groups for run in runs]
    streams = stream_names(all_runs)
    base_label, base = groups[0]
    arms = [
        {
            "label": label,
            "run_dirs": [str(run.run_dir) for run in runs],
            "seeds": [_seed(run) for run in runs],
            "streams": {name: _arm_scope(runs, name) for name in streams},
            OVERALL: _arm_scope(runs, None),
        }
        for label, runs in groups
    ]
    versus = []
    for label, runs in groups[1:]:
        orders = order_only(base[0], runs[0])
        entry: dict[str, Any] = {
            "label": label,
            "sequence_robustness": None if orders is None else {"baseline_order": orders[0], "order": orders[1]},
            "streams": {name: _difference_scope(base, runs, name, orders is not None) for name in streams},
            OVERALL: _difference_scope(base, runs, None, orders is not None),
        }
        versus.append(entry)
    warnings = [
        f"{label}: replicate {index} has no accuracy for {name}"
        for label, runs in groups for index, run in enumerate(runs, 1)
        for name in streams if _accuracy(run, name) is None
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "baseline": base_label,
        "confidence": 0.95,
        "figure": _figure(base[0]),
        "replicates": len(base),
        "seeds": [_seed(run) for run in base],
        "methods": METHODS,
        "arms": arms,
        "vs_baseline": versus,
        "warnings": warnings,
    }


def write_replicate_comparison(groups: Sequence[tuple[str, Sequence[Path]]], directory: Path) -> ReplicateFiles:
    """Write ``replicates.json`` in ``directory`` and, with several arms, each
    replicate's comparison of the arms (``compare-r<i>.html`` and ``.json``)."""
    loaded = [(label, [load_run(run_dir, label) for run_dir in run_dirs]) for label, run_dirs in groups]
    document = build_replicate_comparison(loaded)
    paths: list[Path] = []
    if len(groups) > 1:
        labels = [label for label, _ in groups]
        for index in range(len(groups[0][1])):
            files = write_comparison(
                [run_dirs[index] for _, run_dirs in groups], directory / f"compare-r{index + 1}.html", labels
            )
            paths.append(files.html)
    document = {**document, "comparisons": [path.name for path in paths], "generated": utc_now()}
    path = directory / REPLICATES_DATA
    write_page(path, dumps_redacted(document, indent=2) + "\n")  # as every artefact: redacted, strict JSON
    page = write_page(path.with_suffix(".html"), render_replicates(document))
    return ReplicateFiles(document, [page, path, *paths])


__all__ = ["METHODS", "ReplicateFiles", "build_replicate_comparison", "write_replicate_comparison"]
