"""The shell every HTML page of the package shares: the inline style sheet, the
Content-Security-Policy (nothing loaded, no script but the drill-down's, allowed by
its hash), the page frame written piece by piece, and the markup the run, comparison
and replicates pages all use (metric tables' cells, names that wrap, learning-curve
plots, a run's metadata list). Every string from an artefact goes through ``_e``
(:mod:`._markup`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..models.identity import describe_component, describe_model, describe_ran
from ..rundir import utc_now
from ..rundocs import StreamSummary
from ._markup import (
    _NONE,
    _e,
)
from .chart import Series, curve_svg
from .columns import (
    CategoryColumn,
    Column,
    stream_columns,
)
from .compare import stream_names
from .drilldown import SCRIPT_HASH, script_tag
from .rundata import RunData

_CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src '{SCRIPT_HASH}'"


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


def _metric_headers(columns: Sequence[Column | CategoryColumn]) -> str:
    return "".join(f'<th class="num" title="{_e(column.tooltip)}">{_e(column.header)}</th>' for column in columns)


def _metric_cells(columns: Sequence[Column] | Sequence[CategoryColumn], metrics: Any) -> str:
    return "".join(f'<td class="num">{_e(column.cell(metrics) or _NONE)}</td>' for column in columns)


def _name_cell(tag: str, name: object, extra: str = "") -> str:
    """A stream or run name as a table cell: long names wrap, the tooltip has it whole."""
    return f'<{tag} class="name"{extra} title="{_e(name)}">{_e(name)}</{tag}>'


def _curve(metrics: StreamSummary) -> list[float]:
    return [min(1.0, max(0.0, float(v))) for v in metrics.learning_curve]


def _table_columns(streams: Sequence[StreamSummary]) -> list[Column]:
    """The per-stream tables' columns (:mod:`.columns`), shared by single and compare pages."""
    return stream_columns(streams, "html")


def _stream_names(runs: Sequence[RunData]) -> list[str]:
    return stream_names(runs)


def _plots(runs: Sequence[RunData]) -> str:
    figures = []
    for stream in _stream_names(runs):
        series = [Series(run.label, _curve(run.streams[stream])) for run in runs if stream in run.streams]
        figures.append(f"<figure><figcaption>{_e(stream)}</figcaption>{curve_svg(stream, series)}</figure>")
    return f'<div class="plots">{"".join(figures)}</div>'


def _run_meta(run: RunData) -> str:
    """Where, when and what ran, as a definition list: the agent, memory and model
    that actually ran (a conftest's classes, the model file or the names the
    server reported), from the summary's record (:mod:`..models.identity`)."""
    identity = run.ran
    agent, memory = identity.agent, identity.memory
    items: list[tuple[str, object]] = [
        ("directory", str(run.run_dir)),
        ("started", run.summary.started),
        ("finished", run.summary.finished),
    ]
    if agent is not None:
        strategy = agent.memory_strategy
        kind = f"{agent.kind}" + (f" ({strategy})" if strategy else "")
        items.append(("agent", kind + (f": {describe_component(agent)}" if agent.class_ else "")))
        if agent.options:
            items.append(("agent options", json.dumps(agent.options, sort_keys=True, default=str)))
    if agent is not None or memory is not None:
        items.append(("memory", (
            f"{memory.backend}" + (f" (top_k {memory.top_k})" if memory.top_k is not None else "")
            + (f": {describe_component(memory)}" if memory.class_ else "")
        ) if memory is not None else "none"))
    if agent is not None or identity.model is not None:
        items.append(("model", describe_model(identity.model)))
    ran = describe_ran(run.summary.ran)
    if len(ran) > 1:  # the streams ran different things: say which ran what
        items += [("ran", line) for line in ran]
    versions = run.summary.versions or run.run.versions
    if versions.pytest_evomemory:
        items.append(("pytest-evomemory", versions.pytest_evomemory))
    rows = "".join(f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>" for key, value in items if value not in (None, ""))
    return f'<dl class="meta">{rows}</dl>'
