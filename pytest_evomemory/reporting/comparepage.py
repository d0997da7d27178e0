"""``compare.html``'s body: the runs, accuracies with intervals and paired statistics
(:mod:`.compare`'s document, so page, JSON and terminal agree), sequence robustness,
learning curves, gain versus similarity, the config diff, the tasks that flipped and
the per-stream tables side by side."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..analysis.power import power_line
from ..analysis.stats import FAILED_IS_WRONG
from ..rundocs.compare import (
    NO_OTHER_ORDER,
    Comparison,
    PairedEntry,
    RunEntry,
    Similarity,
    as_comparison,
)
from ._markup import (
    _NONE,
    _ci,
    _decimal,
    _e,
    _int,
    _number,
    _percent,
)
from .columns import (
    Column,
    figure_column,
    grouped,
)
from .compare import OVERALL, comparison_model
from .htmlpage import (
    _metric_cells,
    _metric_headers,
    _name_cell,
    _page,
    _plots,
    _run_meta,
    _stream_names,
    _table_columns,
)
from .rundata import ReportError, RunData
from .scatter import similarity_svg


def _pp(value: object) -> str:
    number = _number(value)
    return _NONE if number is None else f"{number * 100:+.1f} pp"


def _pp_interval(low: object, high: object) -> str:
    low_n, high_n = _number(low), _number(high)
    return _NONE if low_n is None or high_n is None else f"[{low_n * 100:+.1f}, {high_n * 100:+.1f}]"


def _p_value(value: object) -> str:
    number = _number(value)
    if number is None:
        return _NONE
    return "< 0.001" if number < 0.001 else f"{number:.3f}"


def _accuracy_cell(entry: RunEntry, figures: Sequence[Column]) -> str:
    if not entry.present:
        return "".join(f'<td class="num">{_NONE}</td>' for _ in range(2 + len(figures)))
    counts = f"{_int(entry.correct)}/{_int(entry.tasks)}"
    return (
        f'<td class="num">{_e(_percent(entry.accuracy))} <small>({_e(counts)})</small></td>'
        f'<td class="num">{_e(_ci([entry.ci_low, entry.ci_high]))}</td>'
        + "".join(f'<td class="num">{_e(column.cell(entry.written()) or _NONE)}</td>' for column in figures)
    )


def _continuous_cells(versus: PairedEntry | None) -> str:
    """Δ of the mean of a continuous headline figure (LoCoMo's F1), its paired
    MOVER interval and the Wilcoxon p (compare.json's ``continuous``)."""
    continuous = versus.continuous if versus is not None else None
    if continuous is None:
        return f'<td class="num">{_NONE}</td>' * 3
    difference = _number(continuous.mean_difference)
    css = "" if difference is None else "better" if difference > 1e-12 else "worse" if difference < -1e-12 else ""
    return (
        f'<td class="num {css}">{_e(_pp(difference))}</td>'
        f'<td class="num">{_e(_pp_interval(continuous.ci_low, continuous.ci_high))}</td>'
        f'<td class="num">{_e(_p_value(continuous.wilcoxon_p))}</td>'
    )


def _versus_cells(versus: PairedEntry | None) -> str:
    if versus is None:
        return f'<td class="num">baseline</td><td class="num">{_NONE}</td><td class="num">{_NONE}</td><td class="num">{_NONE}</td>'
    difference = _number(versus.difference)
    css = "" if difference is None else "better" if difference > 1e-12 else "worse" if difference < -1e-12 else ""
    paired = f"{_int(versus.paired_tasks)}"
    if not versus.same_tasks:
        paired += " \u26a0"
    return (
        f'<td class="num {css}">{_e(_pp(difference))}</td>'
        f'<td class="num">{_e(_pp_interval(versus.ci_low, versus.ci_high))}</td>'
        f'<td class="num">{_e(_p_value(versus.mcnemar_p))}</td><td class="num">{_e(paired)}</td>'
    )


def _accuracy_table(comparison: Comparison) -> str:
    """One row per scope and run: a long table whose width does not grow with runs."""
    figures = [figure_column(name, label) for name, label in comparison.figures.items()]
    rows = []
    label = comparison.continuous_label()
    scopes = [*comparison.streams.items(), (OVERALL, comparison.overall)]
    for name, scope in scopes:
        entries, versus = scope.runs, [None, *scope.vs_baseline]
        for index, (entry, against) in enumerate(zip(entries, versus, strict=True)):
            head = _name_cell("th", name, f' rowspan="{len(entries)}"') if index == 0 else ""
            rows.append(
                f'<tr class="{"overall" if name == OVERALL else ""}" data-scope="{_e(name)}">{head}'
                f'<td class="run" title="{_e(entry.label)}">{_e(entry.label)}</td>{_accuracy_cell(entry, figures)}'
                f"{_versus_cells(against)}{_continuous_cells(against) if label else ''}</tr>"
            )
    baseline = comparison.baseline
    continuous_heads = (
        f'<th class="num" title="mean {_e(label)} of this run minus the baseline\'s, on the tasks both ran">'
        f'\u0394 mean {_e(label)}</th><th class="num">95% CI (MOVER)</th><th class="num">Wilcoxon p</th>'
        if label else ""
    )
    continuous_note = (
        f" \u0394 mean {_e(label)}: the paired mean difference of the continuous score with its 95% MOVER "
        "interval (the two runs' Wilson intervals on the effective number of tasks, paired by task) and the two-sided Wilcoxon signed-rank p-value; the "
        "accuracy and McNemar use the yes/no outcome (LoCoMo: F1 \u2265 0.5)."
        if label else ""
    )
    return (
        f'<p class="meta">Baseline: <b>{_e(baseline)}</b> (the first run); \u0394 is each run minus it.</p>'
        '<div class="scroll"><table class="compare-accuracy"><thead><tr><th>stream</th><th>run</th>'
        '<th class="num">accuracy</th><th class="num">95% CI</th>'
        + "".join(f'<th class="num" title="{_e(column.tooltip)}">{_e(column.header)}</th>' for column in figures)
        + f'<th class="num" title="vs {_e(baseline)}: paired, on the tasks both ran">\u0394 vs baseline</th>'
        '<th class="num">95% CI of \u0394</th><th class="num">McNemar p</th>'
        '<th class="num" title="tasks both this run and the baseline ran">paired tasks</th>'
        f"{continuous_heads}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        '<p class="meta">Accuracy: 95% Wilson interval. \u0394: this run minus the baseline on the tasks both '
        "ran, with Agresti & Min's paired 95% interval and the exact McNemar p-value; "
        f"\u26a0 marks runs whose tasks differ from the baseline's.{continuous_note} "
        f"{_e(FAILED_IS_WRONG[:1].upper() + FAILED_IS_WRONG[1:])}.</p>"
        + _power_notes(comparison.overall.vs_baseline)
    )


def _power_notes(entries: Iterable[PairedEntry]) -> str:
    """Each paired entry's minimum detectable effect (:func:`..analysis.power.power_line`), one line each."""
    found = []
    for entry in entries:
        power = (entry.continuous.power if entry.continuous is not None else None) or entry.power  # the figure judged
        if power is not None:
            found.append(power_line(entry.label, power))
    return "".join(f'<p class="meta power">{_e(line)}</p>' for line in found)


def _sequence_robustness(comparison: Comparison) -> str:
    """compare.json's ``sequence_robustness``: the same arm in two orders, paired by task."""
    entries = comparison.sequence_robustness
    notes = "".join(
        f'<p class="meta">{_e(note)}</p>' for note in comparison.sequence_robustness_notes if note != NO_OTHER_ORDER
    )
    if not entries:
        return f"<h2>Sequence robustness</h2>{notes}" if notes else ""
    rows = []
    for entry in entries:
        scopes = [*entry.streams.items(), (OVERALL, entry.overall)]
        for name, scope in scopes:
            rows.append(
                f'<tr class="{"overall" if name == OVERALL else ""}"><td>{_e(entry.label)}</td>'
                f'<td>{_e(entry.order)} \u2212 {_e(entry.baseline_order)}</td>'
                f"{_name_cell('td', name)}{_versus_cells(PairedEntry.model_validate({**scope.written(), 'same_tasks': True}))}</tr>"
            )
    return (
        "<h2>Sequence robustness</h2>"
        '<p class="meta">Runs that differ from the baseline only in <code>benchmark.order</code>: the paired '
        "difference between the two orders on the tasks both ran (Agresti & Min's 95% interval, exact McNemar p).</p>"
        '<div class="scroll"><table><thead><tr><th>run</th><th>orders</th><th>stream</th>'
        '<th class="num">Δ</th><th class="num">95% CI of Δ</th><th class="num">McNemar p</th>'
        f'<th class="num">paired tasks</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>{notes}'
    )


def _warnings(warnings: Sequence[str]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<li>{_e(w)}</li>" for w in warnings)
    return (
        '<div class="warning compare-warnings"><b>The runs are not fully comparable.</b> '
        "No difference below mixes unlike tasks: each is computed on the tasks both runs ran."
        f"<ul>{items}</ul></div>"
    )


def _config_diff(runs: Sequence[RunData], comparison: Comparison) -> str:
    rows = comparison.config_diff
    if not rows:
        return '<p class="meta">The runs have the same configuration (apart from where their files were).</p>'
    head = _run_heads(runs)
    body = "".join(
        f"<tr><th><code>{_e(row.key)}</code></th>"
        + "".join(f"<td><code>{_e(json.dumps(value, default=str))}</code></td>" for value in row.values)
        + "</tr>"
        for row in rows
    )
    return (
        f'<div class="scroll"><table class="config-diff"><thead><tr><th>key</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _flips(runs: Sequence[RunData], comparison: Comparison) -> str:
    flips = comparison.flips
    if not flips:
        return '<p class="meta">No task was answered correctly by one run and wrongly by another.</p>'
    head = _run_heads(runs)

    def mark(value: object) -> str:
        if value is None:
            return f"<td>{_NONE}</td>"
        return '<td class="pass">right</td>' if value else '<td class="fail">wrong</td>'

    body = "".join(
        f'<tr>{_name_cell("td", flip.stream)}<td class="num">{_e(flip.position if flip.position is not None else _NONE)}</td>'
        f"<td><code>{_e(flip.task_id)}</code></td>{''.join(mark(v) for v in flip.correct)}</tr>"
        for flip in flips
    )
    return (
        f'<p class="meta">{len(flips)} task(s) on which the runs disagree.</p>'
        '<div class="scroll"><table class="flips"><thead><tr><th>stream</th><th class="num">position</th>'
        f"<th>task</th>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _run_heads(runs: Sequence[RunData]) -> str:
    """One column per run, headed by its label: a long label is shortened in the
    middle (its tooltip has it whole; the list of runs above shows every label in full)."""
    return "".join(f'<th class="run-head" title="{_e(run.label)}">{_e(_middle(run.label))}</th>' for run in runs)


def _middle(label: str, most: int = 25) -> str:
    """``label`` shortened in the middle: runs' labels often differ only at their ends."""
    if len(label) <= most:
        return label
    keep = (most - 1) // 2
    return f"{label[:keep]}\u2026{label[-(most - 1 - keep):]}"


def _side_by_side(runs: Sequence[RunData]) -> str:
    tables = []
    for key, title, columns in grouped(_table_columns([metrics for run in runs for metrics in run.streams.values()])):
        rows = []
        for name in [*_stream_names(runs), "overall"]:
            for index, run in enumerate(runs):
                metrics = run.overall if name == "overall" else run.streams.get(name)
                stream_cell = _name_cell("th", name, f' rowspan="{len(runs)}"') if index == 0 else ""
                cells = (
                    _metric_cells(columns, metrics)
                    if metrics is not None
                    else f'<td colspan="{len(columns)}">not in this run</td>'
                )
                rows.append(f'<tr>{stream_cell}<td class="run" title="{_e(run.label)}">{_e(run.label)}</td>{cells}</tr>')
        tables.append(
            f'<div class="scroll"><table class="compare-streams compare-streams-{key}"><caption>{_e(title)}</caption>'
            f"<thead><tr><th>stream</th><th>run</th>{_metric_headers(columns)}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
    return "".join(tables)


def _similarity(comparison: Comparison) -> str:
    """Per stream, one plot per memory arm: its gain over the first run against how
    similar each task was to what it recalled, with the correlation (..analysis.similarity)."""
    analysis = comparison.similarity or Similarity()
    figures = []
    for stream, entries in analysis.streams.items():
        for entry in entries:
            if not entry.tasks and not entry.tasks_without_similarity:
                continue
            stats = (
                f"r = {_decimal(entry.pearson_r)} [{_decimal(entry.pearson_ci_low)}, {_decimal(entry.pearson_ci_high)}], "
                f"\u03c1 = {_decimal(entry.spearman_rho)}, n = {_int(entry.tasks)}"
            )
            caption = f"{_e(stream)}: {_e(entry.label)}<br>{_e(stats)}"
            svg = similarity_svg(str(stream), str(entry.label), entry.points, entry.bins)
            figures.append(f"<figure><figcaption>{caption}</figcaption>{svg}</figure>")
    if not figures:
        return '<p class="meta">No run after the first recalled anything in a task turn, so there is nothing to correlate.</p>'
    return (
        f'<p class="meta">Each dot is a task: how similar it was to what the run recalled for it ({_e(analysis.method)}), '
        f"against the run's gain over {_e(analysis.control)} on it (+1 only this run right, "
        "\u22121 only the control right); squares are the mean gain per similarity bin. r: Pearson with its 95 % "
        "interval (Fisher z), \u03c1: Spearman.</p>"
        f'<div class="plots">{"".join(figures)}</div>'
    )


def render_comparison(
    runs: Sequence[RunData], given: Comparison | Mapping[str, Any] | None = None, reports: Sequence[str | None] = ()
) -> str:
    """One page: accuracies with intervals and paired statistics, every run's curve
    on one plot per stream, the config diff, the tasks that flipped, tables side by side.

    ``reports``: per run, a relative link to its report.html (None: no link), so a
    reader goes from a difference to the tasks behind it.
    """
    if len(runs) < 2:
        raise ReportError("a comparison needs at least two runs")
    comparison = as_comparison(given) if given is not None else comparison_model(runs)
    labels = " vs ".join(run.label for run in runs)
    links = [*reports, *[None] * (len(runs) - len(reports))]
    runs_list = "".join(
        f"<li><b>{_e(run.label)}</b>"
        + (f' <a href="{_e(link)}">report</a>' if link else "")
        + f"{_run_meta(run)}</li>"
        for run, link in zip(runs, links, strict=True)
    )
    body = [
        f"<h1>Evo-Memory comparison: {_e(labels)}</h1>",
        f'<ul class="runs">{runs_list}</ul>',
        _warnings(comparison.warnings),
        "<h2>Accuracy</h2>",
        _accuracy_table(comparison),
        _sequence_robustness(comparison),
        "<h2>Learning curves</h2>",
        '<p class="meta">Cumulative accuracy after each task of the stream; one line per run.</p>',
        _plots(runs),
        "<h2>Gain versus similarity</h2>",
        _similarity(comparison),
        "<h2>Configuration differences</h2>",
        _config_diff(runs, comparison),
        "<h2>Tasks that flipped</h2>",
        _flips(runs, comparison),
        "<h2>Per stream, side by side</h2>",
        _side_by_side(runs),
    ]
    return "".join(_page(f"evomemory: {labels}", body))



__all__ = ["render_comparison"]
