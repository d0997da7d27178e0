"""``report.html``'s body: one run's metadata, threshold verdict, per-stream and
per-category tables, learning curves, failed episodes and the drill-down of its
tasks (:mod:`.drilldown`), written piece by piece so a long run is never held whole."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ..rundocs import StreamSummary
from ._markup import (
    _ci,
    _e,
    _int,
    _percent,
    _position,
)
from .columns import (
    category_columns,
    category_rows,
    grouped,
)
from .drilldown import task_sections
from .htmlpage import _metric_cells, _metric_headers, _name_cell, _page, _plots, _run_meta, _table_columns
from .rundata import RunData

#: Failed episodes listed at the top of a report; the drill-down's filter shows all of them.
_FAILED_SHOWN = 100


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



__all__ = ["render_report", "report_parts"]
