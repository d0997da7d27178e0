"""The per-stream table printed at the end of pytest's terminal summary.

Accuracy comes with its 95 % interval; a figure a stream's match mode declares
(ToolBench's "API / Acc.", as the paper prints it) gets its column; protocol violations and responses served from the cache are
columns, so neither hides behind a good accuracy; a stream with groups (MMLU-Pro
categories) gets one indented row per group under its own row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis.clustered import named_tests
from ..analysis.power import power_line
from ..analysis.stats import FAILED_IS_WRONG
from ..analysis.summary import StreamMetrics
from ..rundocs import Categories, StreamSummary, Summary
from ..rundocs.compare import (
    NO_OTHER_ORDER,
    Comparison,
    ContinuousComparison,
    PairedEntry,
    ReplicateArm,
    Replicates,
    ReplicateVersus,
    SequenceRobustness,
    as_comparison,
    as_replicates,
)
from ..util.text import inert
from . import columns
from .columns import CategoryColumn, Column


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def interval(bounds: tuple[float, float] | None) -> str:
    """``[31.9, 80.7]``: the interval in percent, one decimal, "-" without tasks."""
    return "-" if bounds is None else f"[{bounds[0] * 100:.1f}, {bounds[1] * 100:.1f}]"


def _cells(columns: Sequence[Column | CategoryColumn], metrics: Any, first: str) -> list[str]:
    return [first, *(column.cell(metrics) or "-" for column in columns)]


def _group_rows(name: str, metrics: StreamSummary, width: int) -> list[list[str]]:
    rows = []
    for group, counts in metrics.groups.items():
        cells = [f"  {group}", columns.count(counts.tasks) or "-", columns.count(counts.correct) or "-",
                 "", columns.percent(counts.accuracy) or "-", columns.interval(counts.accuracy_ci) or "-"]
        rows.append(cells + [""] * (width - len(cells)))
    return rows


def format_table(metrics: Mapping[str, StreamMetrics]) -> list[str]:
    """Aligned lines: one per stream (and its groups), then a rule and the overall row."""
    documents = {name: m.document() for name, m in metrics.items()}
    streams = {name: document for name, document in documents.items() if name != "overall"}
    table = columns.stream_columns(list(streams.values()), "terminal")
    header = ["stream", *(column.header for column in table)]
    rows: list[list[str]] = []
    for name, document in streams.items():
        rows.append(_cells(table, document, name))
        rows += _group_rows(name, document, len(header))
    footer = _cells(table, documents["overall"], "overall")
    rows = [[inert(cell, one_line=True) for cell in row] for row in rows]  # stream and group names come from data
    widths = [max(len(r[i]) for r in [header, footer, *rows]) for i in range(len(header))]
    numeric = [False, *(column.numeric for column in table)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    rule = "-" * len(line(header))
    lines = [line(header), rule, *(line(r) for r in rows), rule, line(footer)]
    cached = metrics["overall"].cached_responses
    if cached:
        lines.append(
            f"{cached} of {metrics['overall'].stimuli} responses came from the response cache: "
            "their time and tokens are the cache's, not the model's"
        )
    lines.append("95% CI: Wilson score interval of the accuracy, in percent"
                 + (f"; {FAILED_IS_WRONG}" if metrics["overall"].errors else ""))
    return lines


def format_categories(categories: Categories | None) -> list[str]:
    """The headline mean figure per question category and overall (``summary.json``'s
    ``categories``: LoCoMo's F1 table), or no lines when the summary has none."""
    found = columns.category_rows(categories)
    if found is None:
        return []
    label, rows, overall = found
    table = columns.category_columns(label)
    body = [_cells(table, row, name) for name, row in rows]
    lines = _aligned([["category", *(column.header for column in table)], *body, _cells(table, overall, "overall")],
                     [False, *(column.numeric for column in table)])
    rule = "-" * max(len(line) for line in lines)
    lines = [lines[0], rule, *lines[1:-1], rule, lines[-1]]
    lines.append(f"95% CI: Wilson interval of the mean {label} on the effective number of tasks, in percent")
    return lines


def unstored_lines(summary: Summary) -> list[str]:
    """One line per stream whose memory stored nothing for some retains
    (``memory_unstored``: a library's own extraction kept nothing, e.g. Mem0 with
    ``infer: true`` and a model that does not answer its extraction prompt as it
    parses): otherwise an empty memory and a flat learning curve go unexplained.
    Shown through :meth:`.lines.Line.of`, which makes the names inert."""
    lines = []
    for name, stream in summary.streams.items():
        if not stream.memory_unstored:
            continue
        ran = summary.ran.get(name)
        memory = ran.memory if ran is not None else None
        backend = f"{memory.backend} " if memory is not None and memory.backend else ""
        lines.append(
            f"evomemory: stream {name!r}: the {backend}memory stored nothing for "
            f"{stream.memory_unstored} of {stream.memory_retains} retains (its own extraction kept nothing from "
            "them: with infer: true its model found no new fact, or replied in a form the library does not "
            'read; docs/memory.md, "When a library stores nothing")'
        )
    return lines


def _aligned(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    rows = [[inert(cell, one_line=True) for cell in row] for row in rows]  # names and labels come from artefacts
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if align else cell.ljust(width)
            for cell, width, align in zip(row, widths, right, strict=True)
        ).rstrip()
        for row in rows
    ]


def _points(value: object) -> str:
    return "-" if not isinstance(value, int | float) else f"{value * 100:+.1f} pp"


def _points_interval(low: object, high: object) -> str:
    return "-" if not isinstance(low, int | float) or not isinstance(high, int | float) else (
        f"[{_points(low)[:-3]}, {_points(high)[:-3]}]"
    )


def _p(value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def format_comparison(given: Comparison | Mapping[str, Any]) -> list[str]:
    """The comparison (``compare.json``'s document) as aligned terminal lines.

    Per stream and overall, each run's accuracy with its 95 % interval and, for
    every run after the baseline, the paired difference with its interval, the
    exact McNemar p-value and how many tasks both ran, and, for a continuous
    headline figure (LoCoMo's F1), the MOVER interval of its mean
    difference and the Wilcoxon signed-rank p; then any warnings.
    """
    document = as_comparison(given)
    figures = dict(document.figures)
    label = document.continuous_label()
    header = ["stream", "run", "accuracy", "95% CI", *(f"{label} / Acc." for label in figures.values()),
              f"diff vs {document.baseline}", "95% CI of diff", "McNemar p", "paired",
              *((f"{label} diff", f"95% CI of {label} diff", "Wilcoxon p") if label else ())]
    rows: list[list[str]] = [header]
    scopes = [*document.streams.items(), ("overall", document.overall)]
    for name, scope in scopes:
        versus: list[PairedEntry | None] = [None, *scope.vs_baseline]
        for index, (entry, against) in enumerate(zip(scope.runs, versus, strict=True)):
            present = entry.present
            bounds = (entry.ci_low, entry.ci_high) if present and entry.ci_low is not None and entry.ci_high is not None else None
            row = [name if index == 0 else "", entry.label,
                   percent(entry.accuracy) if present else "not run", interval(bounds),
                   *(columns.figure_column(figure, label).cell(entry.written()) or "-" for figure, label in figures.items())]
            if against is None:
                row += ["baseline", "", "", ""] + ([""] * 3 if label else [])
            else:
                row += [
                    _points(against.difference),
                    _points_interval(against.ci_low, against.ci_high),
                    _p(against.mcnemar_p),
                    str(against.paired_tasks),
                ]
                if label:
                    continuous = against.continuous or ContinuousComparison()
                    row += [_points(continuous.mean_difference),
                            _points_interval(continuous.ci_low, continuous.ci_high),
                            _p(continuous.wilcoxon_p)]
            rows.append(row)
    right = [False, False, *([True] * (len(header) - 2))]
    lines = _aligned(rows, right)
    lines.insert(1, "-" * max(len(line) for line in lines))
    lines.append(
        "95% CI: Wilson (accuracy); diff: Agresti-Min, paired on the tasks both ran; McNemar p: exact"
        + (f"; {label} diff: MOVER, Wilcoxon signed-rank p" if label else "")
        + f"; {FAILED_IS_WRONG} (docs/statistics.md)"
    )
    lines += _sequence_lines(document.sequence_robustness)
    lines += [inert(f"sequence robustness: {note}", one_line=True) for note in _order_notes(document)]
    for against in document.overall.vs_baseline:
        power = (against.continuous.power if against.continuous is not None else None) or against.power  # the figure judged
        if power is not None:
            lines.append(inert(power_line(against.label, power), one_line=True))
    lines += [f"warning: {inert(str(warning), one_line=True)}" for warning in document.warnings]
    return lines


def _sequence_lines(entries: Sequence[SequenceRobustness]) -> list[str]:
    """compare.json's ``sequence_robustness``: one line per arm in another order
    (with why there is no figure, when the two orders share no scored task)."""
    lines = []
    for entry in entries:
        overall = entry.overall
        figures = (
            f"{overall.no_test}" if overall.no_test else
            f"{_points(overall.difference)} {_points_interval(overall.ci_low, overall.ci_high)} (Agresti-Min), "
            f"McNemar p {_p(overall.mcnemar_p)} on {overall.paired_tasks} paired tasks"
        )
        lines.append(inert(
            f"sequence robustness: {entry.label} ({entry.order}) - baseline ({entry.baseline_order}): {figures}",
            one_line=True,
        ))
    return lines


def _order_notes(document: Comparison) -> list[str]:
    """compare.json's ``sequence_robustness_notes`` worth a line: a run in another
    order that is not sequence robustness (that no run is in another order goes
    without saying here; the file says it)."""
    return [note for note in document.sequence_robustness_notes if note != NO_OTHER_ORDER]


def format_replicates(given: Replicates | Mapping[str, Any]) -> list[str]:
    """A repeated session's comparison (``replicates.json``) as aligned terminal lines.

    Per stream and overall, each arm's mean over tasks (each task averaged over the
    replicates) with its 95 % interval (Wilson on the effective number of tasks) and
    each replicate's figure; for every arm after the baseline, the per-task mean
    difference with its interval (Agresti-Min on the effective number of tasks; MOVER
    for a continuous score), the paired test's p and each replicate's
    exact McNemar p; then where the variance comes from and the smallest gain the
    comparison could detect (:mod:`..analysis.clustered`, :mod:`..analysis.power`)."""
    document = as_replicates(given)
    count = document.replicates
    figure = document.figure or "accuracy"
    header = ["stream", "arm", "mean accuracy" if figure == "accuracy" else figure, "95% CI", "per replicate",
              f"diff vs {document.baseline}", "95% CI of diff", "p", "McNemar p per replicate"]
    rows: list[list[str]] = [header]
    versus = {entry.label: entry for entry in document.vs_baseline}
    arms = document.arms
    names = list(arms[0].streams) if arms else []
    for name in [*names, "overall"]:
        for index, arm in enumerate(arms):
            scope = arm.overall if name == "overall" else arm.streams[name]
            row = [name if index == 0 else "", arm.label, percent(scope.mean),
                   interval(_bounds(scope.ci_low, scope.ci_high)), " ".join(percent(value) for value in scope.accuracies)]
            against = versus.get(arm.label)
            if against is None:
                row += ["baseline", "", "", ""]
            else:
                difference = against.overall if name == "overall" else against.streams[name]
                row += [_points(difference.mean), _points_interval(difference.ci_low, difference.ci_high),
                        _p(difference.p_value),
                        " ".join(_p(test.mcnemar_p) for test in difference.per_replicate)]
            rows.append(row)
    right = [False, False, True, True, True, True, True, True, True]
    lines = _aligned(rows, right)
    lines.insert(1, "-" * max(len(line) for line in lines))
    seeds = ", ".join(str(seed) for seed in document.seeds)
    test = named_tests(document.paired_tests())
    lines.append(
        f"{count} replicate(s), seeds {seeds}; each task averaged over the replicates; 95% CI: Wilson on the "
        f"effective number of tasks (diff: Agresti-Min on it, MOVER for a mean score; paired by task); p: {test} "
        "(docs/statistics.md)"
    )
    lines += _replicate_power_lines(arms, list(versus.values()))
    for entry in versus.values():
        robustness = entry.sequence_robustness
        if robustness is not None:
            lines.append(inert(
                f"sequence robustness: {entry.label} ({robustness.order}) - baseline "
                f"({robustness.baseline_order}): the diff above, paired by task within each replicate",
                one_line=True,
            ))
    lines += [f"warning: {inert(str(warning), one_line=True)}" for warning in document.warnings]
    return lines


def _replicate_power_lines(arms: Sequence[ReplicateArm], versus: Sequence[ReplicateVersus]) -> list[str]:
    """Overall: each arm's variance split and each comparison's minimum detectable effect."""
    lines = []
    for arm in arms:
        split = arm.overall.variance
        share = split.seed_share if split is not None else None
        if split is not None and share is not None and split.standard_error:
            lines.append(inert(
                f"variance: {arm.label}: {share:.0%} from the seeds; standard error {_se(split.standard_error)}, "
                f"with twice the tasks {_se(split.standard_error_twice_the_tasks)}, with twice the replicates "
                f"{_se(split.standard_error_twice_the_replicates)}",
                one_line=True,
            ))
    for entry in versus:
        power = entry.overall.power
        if power is not None:
            lines.append(inert(power_line(entry.label, power), one_line=True))
    return lines


def _se(value: float) -> str:
    return "-" if not isinstance(value, int | float) else f"{value * 100:.1f} pp"


def _bounds(low: float | None, high: float | None) -> tuple[float, float] | None:
    return (float(low), float(high)) if low is not None and high is not None else None
