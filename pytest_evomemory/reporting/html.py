"""``report.html``: one self-contained page per run, or one page comparing runs.

The page is read from the run directory's artefacts (``summary.json``, plus
``run.json``, ``scores.jsonl``, ``responses.jsonl`` and ``transcripts/`` when
present), never from live objects, so the same code serves the plugin at session
end and the ``evomemory`` command long after; the per-task records are streamed,
never all held (:mod:`.rundata`). It must open anywhere, offline, from a CI
artefact store: CSS is inline, the learning curves are SVG drawn here
(:mod:`.chart`, thinned for display on long streams), and a Content-Security-Policy
forbids the browser from loading anything and from running any script but the
drill-down's own (:mod:`.drilldown`, allowed by its hash), which pages a long
run's tasks in from compressed data blocks. Every string that came from an
artefact (task ids, answers, run names, failure reasons) goes through ``_e``
(:mod:`._markup`) or, in the drill-down, ``textContent``, because a dataset or an
agent can put markup in them. The comparison's numbers are :mod:`.compare`'s.

Every figure stays visible from an 800 px window up: the per-stream metrics are
three narrow tables rather than one wide one, long run and stream names wrap or
are shortened with the full name in a tooltip, and the run's metadata is a list.
"""

from __future__ import annotations

import itertools
import json
import os
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.power import power_line
from ..atomicfile import write_atomically
from ..identity import describe_component, describe_model, describe_ran, recorded_identity
from ..redaction import dumps_redacted
from ..rundir import REPORT, utc_now
from ..rundocs import StreamSummary
from ..rundocs.compare import (
    ArmScope,
    Comparison,
    DifferenceScope,
    PairedEntry,
    ReplicateArm,
    Replicates,
    ReplicateVersus,
    RunEntry,
    as_comparison,
    as_replicates,
)
from ..text import storable
from ._markup import (
    _NONE,
    _ci,
    _decimal,
    _e,
    _int,
    _mapping,
    _number,
    _percent,
    _position,
)
from .chart import LegendEntry, Series, curve_svg, legend_layout
from .columns import (
    CategoryColumn,
    Column,
    category_columns,
    category_rows,
    figure_column,
    grouped,
    stream_columns,
)
from .compare import OVERALL, comparison_model, stream_names
from .drilldown import SCRIPT_HASH, script_tag, task_sections
from .rundata import ReportError, RunData, load_run, load_runs
from .scatter import similarity_svg

REPORT_NAME = REPORT  # rundir names every file of a run directory

_CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src '{SCRIPT_HASH}'"
#: Failed episodes listed at the top of a report; the drill-down's filter shows all of them.
_FAILED_SHOWN = 100


def _curve(metrics: StreamSummary) -> list[float]:
    return [min(1.0, max(0.0, float(v))) for v in metrics.learning_curve]


def _table_columns(streams: Sequence[StreamSummary]) -> list[Column]:
    """The per-stream tables' columns (:mod:`.columns`), shared by single and compare pages."""
    return stream_columns(streams, "html")


def _metric_headers(columns: Sequence[Column | CategoryColumn]) -> str:
    return "".join(f'<th class="num" title="{_e(column.tooltip)}">{_e(column.header)}</th>' for column in columns)


def _metric_cells(columns: Sequence[Column] | Sequence[CategoryColumn], metrics: Any) -> str:
    return "".join(f'<td class="num">{_e(column.cell(metrics) or _NONE)}</td>' for column in columns)


def _name_cell(tag: str, name: object, extra: str = "") -> str:
    """A stream or run name as a table cell: long names wrap, the tooltip has it whole."""
    return f'<{tag} class="name"{extra} title="{_e(name)}">{_e(name)}</{tag}>'


# --------------------------------------------------------------------------- the chart


# --------------------------------------------------------------------------- the page

_STYLE = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
       max-width: 1200px; padding: 0 16px; color: #1b1f24; background: #fff; overflow-wrap: break-word; }
h1 { font-size: 22px; margin: 0 0 4px; overflow-wrap: anywhere; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 18px 0 6px; overflow-wrap: anywhere; }
.meta { color: #57606a; margin: 0 0 12px; }
dl.meta { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 12px; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; overflow-wrap: anywhere; color: #1b1f24; }
table { border-collapse: collapse; margin: 6px 0 12px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 2px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; } td.num, th.num { text-align: right; }
th.num { white-space: nowrap; } td.num { white-space: nowrap; }
table.replicates th.num, table.replicates td.each { white-space: normal; } table.replicates td.each { min-width: 6em; }
.name, td.run { min-width: 7em; max-width: 16em; overflow-wrap: anywhere; }
td.text { overflow-wrap: anywhere; min-width: 8em; } td.id { min-width: 5em; }
th.run-head { min-width: 6em; max-width: 12em; overflow-wrap: anywhere; }
table.config-diff tbody th { min-width: 9em; }
tfoot td, tfoot th { font-weight: 600; background: #f6f8fa; }
.pass { color: #1a7f37; font-weight: 600; } .fail { color: #cf222e; font-weight: 600; }
.better { color: #1a7f37; } .worse { color: #cf222e; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px; max-width: 100%; box-sizing: border-box; }
figcaption { font-weight: 600; margin-bottom: 4px; overflow-wrap: anywhere; }
svg.curve, svg.forest { display: block; max-width: 100%; height: auto; font-size: 12px; }
svg .zero { stroke: #1b1f24; stroke-width: 1.2; } svg .scope { font-weight: 600; fill: #1b1f24; font-size: 13px; }
svg .arm, svg .value { fill: #1b1f24; } svg .value { font-variant-numeric: tabular-nums; }
svg .frame { fill: #fff; stroke: none; } svg .grid { stroke: #eaeef2; }
svg .axis { stroke: #57606a; } svg .tick { fill: #57606a; } svg .axis-label { fill: #1b1f24; font-size: 13px; }
svg .line { fill: none; stroke-width: 2; stroke-linejoin: round; } svg .empty { fill: #8c959f; }
details { margin: 6px 0; } summary { cursor: pointer; overflow-wrap: anywhere; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; }
.scroll { max-width: 100%; overflow-x: auto; }
table.config-diff th code { word-break: break-all; }
table.tasks td.id { max-width: 12em; }
.warning { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 6px 10px; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; border: 1px solid #eaeef2;
      border-radius: 4px; padding: 6px 8px; margin: 4px 0; font-size: 12px; max-height: 28em; overflow: auto; }
.task { border-left: 3px solid #d0d7de; padding-left: 8px; }
.task > summary .verdict { margin-left: 8px; }
.pager { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 10px; margin: 8px 0; }
.pager input { width: 7em; }
dl.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 12px; margin: 6px 0; }
dl.facts dt { font-weight: 600; color: #57606a; } dl.facts dd { margin: 0; min-width: 0; }
.message { margin: 4px 0; } .message .role { font-weight: 600; color: #57606a; }
ul.runs { padding-left: 20px; } ul.runs > li { margin-bottom: 8px; overflow-wrap: anywhere; }
footer { color: #8c959f; margin-top: 32px; font-size: 12px; }
@media (max-width: 1000px) { th.num, td.num { white-space: normal; } th, td { padding: 3px 5px; }
  .name, td.run { min-width: 5em; } }
@media (max-width: 700px) { dl.meta, dl.facts { grid-template-columns: minmax(0, 1fr); } }
"""


def _page(title: str, body: Iterable[str], *, script: bool = False) -> Iterator[str]:
    """The page, piece by piece (a long run's report is written as it is made)."""
    yield '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    yield f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
    yield '<meta name="viewport" content="width=device-width, initial-scale=1">'
    yield '<link rel="icon" href="data:,">'
    yield f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
    yield from body
    if script:
        yield script_tag()
    yield f"<footer>generated by pytest-evomemory at {_e(utc_now())}</footer></body></html>\n"


def _stream_names(runs: Sequence[RunData]) -> list[str]:
    return stream_names(runs)


def _run_meta(run: RunData) -> str:
    """Where, when and what ran, as a definition list: the agent, memory and model
    that actually ran (a conftest's classes, the model file or the names the
    server reported), from the summary's record (:mod:`..identity`)."""
    identity = recorded_identity(run.summary, run.run)
    agent, memory = _mapping(identity.get("agent")), _mapping(identity.get("memory"))
    strategy = agent.get("memory_strategy")
    items: list[tuple[str, object]] = [
        ("directory", str(run.run_dir)),
        ("started", run.summary.started),
        ("finished", run.summary.finished),
    ]
    if agent:
        kind = f"{agent.get('kind')}" + (f" ({strategy})" if strategy else "")
        items.append(("agent", kind + (f": {describe_component(agent)}" if agent.get("class") else "")))
        options = agent.get("options")
        if isinstance(options, Mapping) and options:
            items.append(("agent options", json.dumps(options, sort_keys=True, default=str)))
    if agent or memory:
        items.append(("memory", (
            f"{memory.get('backend')}" + (f" (top_k {memory['top_k']})" if memory.get("top_k") is not None else "")
            + (f": {describe_component(memory)}" if memory.get("class") else "")
        ) if memory else "none"))
    if agent or identity.get("model"):
        items.append(("model", describe_model(_mapping(identity.get("model")))))
    ran = describe_ran({stream: parts.written() for stream, parts in run.summary.ran.items()})
    if len(ran) > 1:  # the streams ran different things: say which ran what
        items += [("ran", line) for line in ran]
    versions = run.summary.versions or run.run.versions
    if versions.pytest_evomemory:
        items.append(("pytest-evomemory", versions.pytest_evomemory))
    rows = "".join(f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>" for key, value in items if value not in (None, ""))
    return f'<dl class="meta">{rows}</dl>'


def _verdict(run: RunData) -> str:
    thresholds = run.summary.thresholds
    if not thresholds:
        return '<p class="meta">no accuracy thresholds configured</p>'
    passed = run.summary.passed
    rows = []
    for item in thresholds:
        met = item.met
        # a gate reads the scope's headline figure (LoCoMo: mean F1); older summaries hold the accuracy alone
        value = item.value if "value" in item.model_fields_set else item.accuracy
        rows.append(
            f'<tr><td>{_e(item.scope)}</td><td>{_e(item.label or "accuracy")}</td>'
            f'<td class="num">{_e(_percent(item.minimum))}</td>'
            f'<td class="num">{_e(_percent(value))}</td>'
            f'<td class="{"pass" if met else "fail"}">{"met" if met else "MISSED"}</td></tr>'
        )
    verdict = (
        '<span class="pass">all thresholds met</span>'
        if passed
        else '<span class="fail">thresholds missed</span>'
    )
    return (
        f'<p>{verdict}</p><table class="thresholds"><thead><tr><th>scope</th><th>gated on</th>'
        f'<th class="num">minimum</th><th class="num">value</th><th>result</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )


def _failed_episodes(run: RunData) -> str:
    failed = run.summary.failed_episodes
    if not failed:
        return ""
    rows = "".join(
        f"<tr>{_name_cell('td', f.stream)}<td class=\"num\">{_e(_position(f.position))}</td>"
        f"<td class=\"id\"><code>{_e(f.task_id)}</code></td><td>{_e(f.phase)}</td>"
        f"<td class=\"text\">{_e(f.reason)}</td></tr>"
        for f in failed[:_FAILED_SHOWN]
    )
    more = (
        f'<p class="meta">The first {_FAILED_SHOWN} of {len(failed):,} are listed; summary.json lists every one, and '
        "the tasks below show a stream's failed episodes with the filter \u201cfailed episodes\u201d.</p>"
        if len(failed) > _FAILED_SHOWN else ""
    )
    return (
        f'<h2>Failed episodes ({len(failed):,})</h2><div class="scroll"><table class="failed"><thead><tr><th>stream</th>'
        f'<th class="num">position</th><th>task</th><th>turn</th><th>reason</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div>{more}"
    )


def _stream_table(run: RunData) -> str:
    """The per-stream metrics: one table per group of columns (:func:`.columns.grouped`),
    each narrow enough for an 800 px window."""
    tables = []
    for key, title, columns in grouped(_table_columns(list(run.streams.values()))):
        rows = "".join(
            f"<tr>{_name_cell('th', name)}{_metric_cells(columns, metrics)}</tr>" for name, metrics in run.streams.items()
        )
        tables.append(
            f'<div class="scroll"><table class="streams streams-{key}"><caption>{_e(title)}</caption>'
            f"<thead><tr><th>stream</th>{_metric_headers(columns)}</tr></thead><tbody>{rows}</tbody>"
            f"<tfoot><tr><th>overall</th>{_metric_cells(columns, run.overall)}</tr></tfoot></table></div>"
        )
    return "".join(tables) + _cache_note(run.overall)


def _cache_note(overall: StreamSummary) -> str:
    cached, stimuli = overall.cached_responses, overall.stimuli
    if not cached:
        return ""
    return (
        f'<p class="warning">{_int(cached)} of {_int(stimuli)} responses came from the response cache: '
        "their time and tokens are the cache's, not the model's.</p>"
    )


def _category_table(run: RunData) -> str:
    """The headline mean figure per question category and overall (LoCoMo's F1
    table, summary.json's ``categories``), with evidence recall; nothing for a run
    judged on accuracy."""
    found = category_rows(run.summary.categories)
    if found is None:
        return ""
    label, rows, overall = found
    columns = category_columns(label)
    body = "".join(f"<tr>{_name_cell('th', name)}{_metric_cells(columns, row)}</tr>" for name, row in rows)
    return (
        f"<h2>Per category: mean {_e(label)}</h2>"
        f'<div class="scroll"><table class="categories"><thead><tr><th>category</th>{_metric_headers(columns)}'
        f"</tr></thead><tbody>{body}</tbody><tfoot><tr><th>overall</th>{_metric_cells(columns, overall)}</tr></tfoot>"
        f'</table></div><p class="meta">Every stream\'s questions together. 95% CI: Wilson interval on the '
        f"effective number of tasks of the mean {_e(label)}. Acc.: the share the match mode counts correct. Evidence recall: the mean share "
        "of a question's evidence turns among the records recalled for it.</p>"
    )


def _group_tables(run: RunData) -> str:
    """Accuracy per group (e.g. MMLU-Pro category) of every stream that has groups."""
    parts = []
    for name, metrics in run.streams.items():
        groups = metrics.groups
        if not groups:
            continue
        rows = "".join(
            f'<tr><th>{_e(group)}</th><td class="num">{_int(g.tasks)}</td>'
            f'<td class="num">{_int(g.correct)}</td><td class="num">{_percent(g.accuracy)}</td>'
            f'<td class="num">{_ci(g.accuracy_ci)}</td></tr>'
            for group, g in groups.items()
        )
        parts.append(
            f"<h3>{_e(name)}</h3>"
            f'<table class="groups" data-stream="{_e(name)}"><thead><tr><th>group</th><th class="num">tasks</th>'
            '<th class="num">correct</th><th class="num">accuracy</th><th class="num">95% CI</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
        )
    return "<h2>Per group</h2>" + "".join(parts) if parts else ""


def _plots(runs: Sequence[RunData]) -> str:
    figures = []
    for stream in _stream_names(runs):
        series = [Series(run.label, _curve(run.streams[stream])) for run in runs if stream in run.streams]
        figures.append(f"<figure><figcaption>{_e(stream)}</figcaption>{curve_svg(stream, series)}</figure>")
    return f'<div class="plots">{"".join(figures)}</div>'


def report_parts(run: RunData) -> Iterator[str]:
    """The single-run page, piece by piece."""
    body = [
        f"<h1>Evo-Memory run: {_e(run.label)}</h1>",
        _run_meta(run),
        _verdict(run),
        "<h2>Per stream</h2>",
        _stream_table(run),
        '<p class="meta">95% CI: Wilson score interval of the accuracy. API / Acc.: ToolBench as the paper '
        "reports it, the share of tasks whose answer names the right API, then the accuracy.</p>",
        _category_table(run),
        _group_tables(run),
        "<h2>Learning curves</h2>",
        '<p class="meta">Cumulative accuracy after each task of the stream, in stream order.</p>',
        _plots([run]),
        _failed_episodes(run),
    ]
    tasks = task_sections(run.iter_scores, run.iter_responses(), run.iter_transcripts)
    first = next(tasks, None)
    if first is None:
        yield from _page(f"evomemory: {run.label}", body)
        return
    yield from _page(f"evomemory: {run.label}", itertools.chain(body, [first], tasks), script=True)


def render_report(run: RunData) -> str:
    """The single-run page."""
    return "".join(report_parts(run))


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
        f"\u26a0 marks runs whose tasks differ from the baseline's.{continuous_note}</p>"
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
    if not entries:
        return ""
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
        f'<th class="num">paired tasks</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
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
    analysis = _mapping(comparison.similarity)
    figures = []
    for stream, entries in _mapping(analysis.get("streams")).items():
        for entry in entries if isinstance(entries, list) else []:
            if not entry.get("tasks") and not entry.get("tasks_without_similarity"):
                continue
            r, low, high = entry.get("pearson_r"), entry.get("pearson_ci_low"), entry.get("pearson_ci_high")
            stats = (
                f"r = {_decimal(r)} [{_decimal(low)}, {_decimal(high)}], \u03c1 = {_decimal(entry.get('spearman_rho'))}, "
                f"n = {_int(entry.get('tasks'))}"
            )
            caption = f"{_e(stream)}: {_e(entry.get('label'))}<br>{_e(stats)}"
            svg = similarity_svg(str(stream), str(entry.get("label")), entry.get("points") or [], entry.get("bins") or [])
            figures.append(f"<figure><figcaption>{caption}</figcaption>{svg}</figure>")
    if not figures:
        return '<p class="meta">No run after the first recalled anything in a task turn, so there is nothing to correlate.</p>'
    return (
        f'<p class="meta">Each dot is a task: how similar it was to what the run recalled for it ({_e(analysis.get("method"))}), '
        f"against the run's gain over {_e(analysis.get('control'))} on it (+1 only this run right, "
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


def _replicate_notes(arms: Sequence[ReplicateArm], versus: Sequence[ReplicateVersus]) -> str:
    """Overall: where each arm's variance comes from, and each comparison's power."""
    lines = []
    for arm in arms:
        split = arm.overall.variance
        share = split.seed_share if split is not None else None
        if split is not None and share is not None and split.standard_error:
            lines.append(
                f"{arm.label}: {share:.0%} of the variance comes from the seeds; standard error "
                f"{_pp_plain(split.standard_error)}, with twice the tasks "
                f"{_pp_plain(split.standard_error_twice_the_tasks)}, with twice the replicates "
                f"{_pp_plain(split.standard_error_twice_the_replicates)}"
            )
    lines += [power_line(entry.label, entry.overall.power) for entry in versus if entry.overall.power is not None]
    return "".join(f'<p class="meta power">{_e(line)}</p>' for line in lines)


def _pp_plain(value: object) -> str:
    return "\u2013" if not isinstance(value, int | float) else f"{value * 100:.1f} pp"


def render_replicates(given: Replicates | Mapping[str, Any], figures: str = "") -> str:
    """replicates.html: a repeated session's arms across replicates (replicates.json):
    per stream and overall, each arm's mean over tasks with its clustered interval and
    each replicate's figure, and each later arm's per-task mean difference from the
    baseline with its interval and paired p beside each replicate's McNemar p; the
    variance split and power; links to each replicate's comparison page. ``figures``:
    the forest plot and the learning curves across replicates (:mod:`.replicatefigures`),
    drawn from the replicate runs, shown after the table."""
    document = as_replicates(given)
    versus = {entry.label: entry for entry in document.vs_baseline}
    arms = document.arms
    streams = list(arms[0].streams) if arms else []
    rows = []
    for name in [*streams, OVERALL]:
        for index, arm in enumerate(arms):
            scope = arm.overall if name == OVERALL else arm.streams.get(name) or ArmScope()
            head = _name_cell("th", name, f' rowspan="{len(arms)}"') if index == 0 else ""
            each = " ".join(_percent(value) for value in scope.accuracies)
            against = versus.get(arm.label)
            if against is None:
                cells = (f'<td class="num">baseline</td><td class="num">{_NONE}</td><td class="num">{_NONE}</td>'
                         f'<td class="num">{_NONE}</td>')
            else:
                difference = against.scope(name) or DifferenceScope()
                tests = " ".join(_p_value(test.mcnemar_p) for test in difference.per_replicate)
                cells = (
                    f'<td class="num">{_e(_pp(difference.mean))}</td>'
                    f'<td class="num">{_e(_pp_interval(difference.ci_low, difference.ci_high))}</td>'
                    f'<td class="num">{_e(_p_value(difference.p_value))}</td>'
                    f'<td class="num each">{_e(tests)}</td>'
                )
            rows.append(
                f'<tr class="{"overall" if name == OVERALL else ""}">{head}<td class="run">{_e(arm.label)}</td>'
                f'<td class="num">{_e(_percent(scope.mean))}</td>'
                f'<td class="num">{_e(_ci([scope.ci_low, scope.ci_high]))}</td>'
                f'<td class="num each">{_e(each)}</td>{cells}</tr>'
            )
    robustness = [
        f"<li><b>{_e(label)}</b>: {_e(robustness.order)} \u2212 "
        f"{_e(robustness.baseline_order)}: its \u0394 is the sequence "
        "robustness, paired by seed across replicates and by task within each</li>"
        for label, entry in versus.items() if (robustness := entry.sequence_robustness) is not None
    ]
    links = "".join(
        f'<li><a href="{_e(urllib.parse.quote(str(name)))}">{_e(name)}</a></li>' for name in document.comparisons or []
    )
    seeds = ", ".join(str(seed) for seed in document.seeds)
    labels = " vs ".join(arm.label for arm in arms)
    figure = document.figure or "accuracy"
    figure_heading = "mean accuracy" if figure == "accuracy" else figure
    body = [
        f"<h1>Evo-Memory replicates: {_e(labels)}</h1>",
        f'<p class="meta">{_e(document.replicates)} replicate(s) per arm, seeds {_e(seeds)}; '
        f'baseline <b>{_e(document.baseline)}</b>.</p>',
        _warnings(document.warnings),
        '<div class="scroll"><table class="compare-accuracy replicates"><thead><tr><th>stream</th><th>arm</th>'
        f'<th class="num">{_e(figure_heading)}</th><th class="num">95% CI</th><th class="num">per replicate</th>'
        '<th class="num">\u0394 mean vs baseline</th><th class="num">95% CI of \u0394</th>'
        '<th class="num">p</th>'
        f'<th class="num">McNemar p per replicate</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        f'<p class="meta">{_e(figure_heading[:1].upper() + figure_heading[1:])}: each task averaged over the '
        "replicates, then the mean over tasks, with the 95% Wilson interval on the effective number of tasks "
        "(per replicate: each replicate's summary figure). \u0394: this arm minus the baseline, per task "
        "(paired by task, replicates averaged), with its 95% interval (Agresti & Min on the effective number of "
        "tasks; MOVER for a mean score) and the paired test's p; McNemar p: "
        "each replicate's exact test on the tasks both ran (docs/statistics.md).</p>"
        + _replicate_notes(arms, list(versus.values())),
        f"<ul>{''.join(robustness)}</ul>" if robustness else "",
        figures,
        f"<h2>Each replicate's comparison</h2><ul>{links}</ul>" if links else "",
    ]
    return "".join(_page(f"evomemory replicates: {labels}", body))


# --------------------------------------------------------------------------- writing


def _write(path: Path, text: str | Iterable[str]) -> Path:
    """Atomic, so a browser or CI upload never picks up half a page; ``text`` may
    come in pieces, written as they are made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # an artefact keeps lone surrogates (escaped, lossless); a page cannot hold them
        write_atomically(path, (storable(piece) for piece in ([text] if isinstance(text, str) else text)))
    except OSError as error:
        raise ReportError(f"cannot write {path}: {error.strerror or error}") from None
    return path


def write_html_report(run_dir: Path | str, output: Path | str | None = None) -> Path:
    """Write ``report.html`` (or ``output``) for a finished run; returns its path.

    The run's records are read as the page is written, never all at once."""
    run = load_run(run_dir)
    return _write(Path(output) if output is not None else run.run_dir / REPORT_NAME, report_parts(run))


def comparison_json_path(output: Path | str) -> Path:
    """compare.json sits next to the page: ``compare.html`` -> ``compare.json``."""
    return Path(output).with_suffix(".json")


@dataclass(frozen=True)
class ComparisonFiles:
    """What a comparison wrote: the page, compare.json beside it, and the document."""

    html: Path
    json: Path
    document: Mapping[str, Any]


def write_comparison(
    run_dirs: Sequence[Path | str], output: Path | str, labels: Sequence[str] | None = None
) -> ComparisonFiles:
    """Write one page comparing the runs (the first is the baseline of the Δ columns)
    and its statistics as JSON next to it (:func:`comparison_json_path`)."""
    if len(run_dirs) < 2:
        raise ReportError("a comparison needs at least two run directories")
    runs = load_runs(run_dirs, labels)
    comparison = comparison_model(runs)
    path = Path(output)
    json_path = comparison_json_path(path)
    if json_path == path:
        raise ReportError(f"{path}: give the comparison page an .html name, so compare.json can sit beside it")
    document = {**comparison.written(), "generated": utc_now()}
    _write(json_path, dumps_redacted(document, indent=2) + "\n")  # as every artefact: redacted, strict JSON
    reports = [_relative_link(run.run_dir / REPORT_NAME, path.parent) for run in runs]
    return ComparisonFiles(_write(path, render_comparison(runs, comparison, reports)), json_path, document)


def _relative_link(target: Path, start: Path) -> str | None:
    """A relative URL from ``start`` to ``target`` when it exists: the pages move
    together (a CI artefact, a copied results folder), absolute paths would not."""
    if not target.is_file():
        return None
    try:
        relative = os.path.relpath(target.resolve(), start.resolve())
    except (OSError, ValueError):  # another drive, an unreadable path: no link
        return None
    return urllib.parse.quote(Path(relative).as_posix())


def write_page(path: Path, text: str) -> Path:
    """Write a page or its data atomically (:class:`ReportError` when it cannot be)."""
    return _write(path, text)


def write_comparison_report(
    run_dirs: Sequence[Path | str], output: Path | str, labels: Sequence[str] | None = None
) -> Path:
    """:func:`write_comparison`, returning the page's path."""
    return write_comparison(run_dirs, output, labels).html


__all__ = [
    "REPORT_NAME",
    "ComparisonFiles",
    "LegendEntry",
    "ReportError",
    "RunData",
    "Series",
    "comparison_json_path",
    "curve_svg",
    "legend_layout",
    "load_run",
    "load_runs",
    "render_comparison",
    "render_replicates",
    "render_report",
    "report_parts",
    "write_comparison",
    "write_comparison_report",
    "write_html_report",
    "write_page",
]
