"""``report.html``: one self-contained page per run, or one page comparing runs.

The page is read from the run directory's artefacts (``summary.json``, plus
``run.json`` and ``scores.jsonl`` when present), never from live objects, so the
same code serves the plugin at session end and the ``evomemory`` command long
after. It must open anywhere, offline, from a CI artefact store: CSS is inline,
the learning curves are SVG drawn here, there is no JavaScript at all, and a
Content-Security-Policy forbids the browser from loading anything else. Every
string that came from an artefact (task ids, answers, run names, failure reasons)
goes through :func:`_e`, because a dataset or an agent can put markup in them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ..errors import EvoMemoryError
from ..rundir import read_jsonl, utc_now
from .summary import SCHEMA_VERSION

REPORT_NAME = "report.html"

# Okabe-Ito colours plus dash patterns: curves stay apart for colour-blind readers
# and on black-and-white printouts.
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
_DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")

_Y_INSET = 6
_NONE = "\u2013"  # en dash: shown where a metric has no value (no tasks, no stimuli)
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


class ReportError(EvoMemoryError):
    """A run directory cannot be turned into a report (missing or unreadable artefacts)."""


@dataclass(frozen=True)
class RunData:
    """What a report needs from one run directory."""

    run_dir: Path
    label: str
    summary: Mapping[str, Any]
    run: Mapping[str, Any] = field(default_factory=dict)
    scores: Sequence[Mapping[str, Any]] = ()

    @property
    def streams(self) -> dict[str, Mapping[str, Any]]:
        """Per-stream metrics in the benchmark's stream order.

        summary.json is written with sorted keys, so its own order is alphabetical;
        the run order comes from run.json's stream list, else from scores.jsonl.
        """
        streams = self.summary.get("streams")
        if not isinstance(streams, Mapping):
            return {}
        listed = self.run.get("streams")
        order = [s.get("name") for s in listed if isinstance(s, Mapping)] if isinstance(listed, list) else []
        order += [s.get("stream") for s in self.scores]
        rank: dict[object, int] = {}
        for name in order:
            rank.setdefault(name, len(rank))
        names = sorted(streams, key=lambda name: rank.get(name, len(rank)))
        return {name: streams[name] for name in names}

    @property
    def overall(self) -> Mapping[str, Any]:
        overall = self.summary.get("overall")
        return overall if isinstance(overall, Mapping) else {}


# --------------------------------------------------------------------------- loading


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ReportError(
            f"{path} is not valid JSON ({error}); was the run interrupted while writing it?"
        ) from None
    if not isinstance(document, dict):
        raise ReportError(f"{path} does not hold a JSON object")
    return document


def load_run(run_dir: Path | str, label: str | None = None) -> RunData:
    """Read a finished run's artefacts; ``summary.json`` is the one that must exist."""
    directory = Path(run_dir)
    if not directory.is_dir():
        raise ReportError(
            f"{directory} is not a directory; pass a run directory such as evomemory-results/<run name>"
        )
    summary_path = directory / "summary.json"
    if not summary_path.is_file():
        raise ReportError(
            f"{directory} has no summary.json; it is not a finished evomemory run "
            "(the file is written when the pytest session ends)"
        )
    summary = _read_json(summary_path)
    version = summary.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ReportError(
            f"{summary_path} has schema version {version}, newer than this pytest-evomemory "
            f"understands ({SCHEMA_VERSION}); upgrade pytest-evomemory"
        )
    if not isinstance(summary.get("streams"), Mapping):
        raise ReportError(f"{summary_path} has no 'streams' object; it is not an evomemory summary")
    run = _read_json(directory / "run.json") if (directory / "run.json").is_file() else {}
    scores = list(read_jsonl(directory / "scores.jsonl"))
    name = label if label is not None else _run_name(summary, run, directory)
    return RunData(run_dir=directory, label=name, summary=summary, run=run, scores=scores)


def _run_name(summary: Mapping[str, Any], run: Mapping[str, Any], directory: Path) -> str:
    name = summary.get("run")
    if not name:
        config = run.get("run")
        name = config.get("name") if isinstance(config, Mapping) else None
    return str(name) if name else directory.name


def load_runs(run_dirs: Sequence[Path | str], labels: Sequence[str] | None = None) -> list[RunData]:
    """Load several runs; labels default to run names, made unique so legends are unambiguous."""
    if labels is not None and len(labels) != len(run_dirs):
        raise ReportError(
            f"{len(labels)} label(s) given for {len(run_dirs)} run directories; give one label per run"
        )
    if labels is not None and any(not label.strip() for label in labels):
        raise ReportError("labels must not be empty")
    runs = [load_run(d, labels[i] if labels is not None else None) for i, d in enumerate(run_dirs)]
    if labels is None:
        seen: dict[str, int] = {}
        unique = []
        for run in runs:
            count = seen.get(run.label, 0) + 1
            seen[run.label] = count
            unique.append(run if count == 1 else _relabel(run, f"{run.label} #{count}"))
        runs = unique
    return runs


def _relabel(run: RunData, label: str) -> RunData:
    return RunData(run_dir=run.run_dir, label=label, summary=run.summary, run=run.run, scores=run.scores)


# --------------------------------------------------------------------------- formatting


def _e(value: object) -> str:
    """Escape for both element text and quoted attribute values."""
    return escape("" if value is None else str(value), quote=True)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _int(value: object) -> str:
    number = _number(value)
    return _NONE if number is None else f"{int(number):,}"


def _percent(value: object) -> str:
    number = _number(value)
    return _NONE if number is None else f"{number:.1%}"


def _decimal(value: object, digits: int = 2) -> str:
    number = _number(value)
    return _NONE if number is None else f"{number:,.{digits}f}"


def _seconds(value: object) -> str:
    number = _number(value)
    if number is None:
        return _NONE
    return f"{number * 1000:.2f} ms" if number < 1 else f"{number:.2f} s"


def _tokens(metrics: Mapping[str, Any]) -> object:
    total = metrics.get("total_tokens")
    if total is None:
        prompt, completion = _number(metrics.get("prompt_tokens")), _number(metrics.get("completion_tokens"))
        total = None if prompt is None or completion is None else prompt + completion
    return total


def _per(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    per = metrics.get("per_stimulus")
    return per if isinstance(per, Mapping) else {}


def _curve(metrics: Mapping[str, Any]) -> list[float]:
    curve = metrics.get("learning_curve")
    if not isinstance(curve, list):
        return []
    return [min(1.0, max(0.0, n)) for n in (_number(v) for v in curve) if n is not None]


# (header, tooltip, cell) — the per-stream table, shared by single and compare pages.
_METRIC_COLUMNS: tuple[tuple[str, str, Any], ...] = (
    ("tasks", "original tasks scored (feedback turns excluded)", lambda m: _int(m.get("tasks"))),
    ("correct", "tasks answered correctly", lambda m: _int(m.get("correct"))),
    ("errors", "episodes that could not complete; counted as wrong", lambda m: _int(m.get("errors"))),
    ("accuracy", "correct / tasks", lambda m: _percent(m.get("accuracy"))),
    ("stimuli", "task and feedback turns delivered", lambda m: _int(m.get("stimuli"))),
    ("agent turns", "model turns of the agent, feedback included", lambda m: _int(m.get("agent_turns"))),
    ("tool calls", "tool calls, feedback included", lambda m: _int(m.get("tool_calls"))),
    ("retains", "memory writes", lambda m: _int(m.get("memory_retains"))),
    ("recalls", "memory reads", lambda m: _int(m.get("memory_recalls"))),
    ("tokens", "prompt + completion tokens", lambda m: _int(_tokens(m))),
    ("tokens / stimulus", "per-stimulus efficiency", lambda m: _decimal(_per(m).get("tokens"), 1)),
    ("turns / stimulus", "per-stimulus efficiency", lambda m: _decimal(_per(m).get("agent_turns"), 2)),
    (
        "time / stimulus",
        "per-stimulus efficiency (wall time of the agent)",
        lambda m: _seconds(_per(m).get("seconds")),
    ),
)


def _metric_headers() -> str:
    return "".join(f'<th class="num" title="{_e(tip)}">{_e(name)}</th>' for name, tip, _ in _METRIC_COLUMNS)


def _metric_cells(metrics: Mapping[str, Any]) -> str:
    return "".join(f'<td class="num">{_e(cell(metrics))}</td>' for _, _, cell in _METRIC_COLUMNS)


# --------------------------------------------------------------------------- the chart


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float]


def _ticks(maximum: int, most: int = 10) -> list[int]:
    """Integer positions 1..maximum at a 1-2-5 step, so labels never crowd."""
    step = 1
    while math.ceil(maximum / step) > most:
        for factor in (2, 5, 10):
            if math.ceil(maximum / (step * factor)) <= most or factor == 10:
                step *= factor
                break
    ticks = [1, *range(step, maximum + 1, step)] if step > 1 else list(range(1, maximum + 1))
    return sorted(set(ticks))


def curve_svg(stream: str, series: Sequence[Series], *, width: int = 560, height: int = 300) -> str:
    """Cumulative accuracy against task position, one line per run, as inline SVG."""
    left, right, top, bottom = 56, 16, 16, 72
    plot_w, plot_h = width - left - right, height - top - bottom
    longest = max((len(s.values) for s in series), default=0)
    x_max = max(longest, 2)

    def x(position: int) -> float:
        return left + (position - 1) / (x_max - 1) * plot_w

    def y(value: float) -> float:
        # Inset so a curve at exactly 0 or 1 is not hidden under the axis or the frame edge.
        return top + _Y_INSET + (1.0 - value) * (plot_h - 2 * _Y_INSET)

    parts = [
        f'<svg class="curve" data-stream="{_e(stream)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(f"Cumulative accuracy along stream {stream}")}">',
        f"<title>{_e(f'Cumulative accuracy along {stream}')}</title>",
        f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        ty = y(tick)
        parts.append(f'<line class="grid" x1="{left}" y1="{ty:.1f}" x2="{left + plot_w}" y2="{ty:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    if longest:
        for tick_x in _ticks(x_max if longest > 1 else 1):
            tx = x(tick_x)
            parts.append(
                f'<line class="axis" x1="{tx:.1f}" y1="{top + plot_h}" x2="{tx:.1f}" y2="{top + plot_h + 5}"/>'
            )
            parts.append(
                f'<text class="tick" x="{tx:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{tick_x}</text>'
            )
    parts += [
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}"/>',
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{top + plot_h + 36}" text-anchor="middle">task position in stream</text>',
        f'<text class="axis-label" transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">cumulative accuracy</text>',
    ]
    if not longest:
        parts.append(
            f'<text class="empty" x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" text-anchor="middle">no scored tasks</text>'
        )
    for index, line in enumerate(series):
        colour, dash = _PALETTE[index % len(_PALETTE)], _DASHES[index % len(_DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        points = " ".join(f"{x(i + 1):.1f},{y(v):.1f}" for i, v in enumerate(line.values))
        parts.append(f'<g class="series" data-run="{_e(line.label)}">')
        if line.values:
            parts.append(f'<polyline class="line" points="{points}" stroke="{colour}"{dash_attr}/>')
        if len(line.values) <= 60:
            for i, v in enumerate(line.values):
                parts.append(
                    f'<circle cx="{x(i + 1):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}">'
                    f"<title>{_e(f'{line.label}: task {i + 1}, cumulative accuracy {v:.3f}')}</title></circle>"
                )
        parts.append("</g>")
    legend_y = height - 14
    legend_x = float(left)
    parts.append('<g class="legend">')
    for index, line in enumerate(series):
        colour, dash = _PALETTE[index % len(_PALETTE)], _DASHES[index % len(_DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        final = f" ({line.values[-1]:.1%})" if line.values else " (no tasks)"
        text = f"{line.label}{final}"
        parts.append(
            f'<line x1="{legend_x:.1f}" y1="{legend_y - 4}" x2="{legend_x + 24:.1f}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2.5"{dash_attr}/>'
            f'<text class="legend-label" x="{legend_x + 30:.1f}" y="{legend_y}">{_e(text)}</text>'
        )
        legend_x += 30 + 7.2 * len(text) + 24
    parts.append("</g></svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- the page

_STYLE = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
       max-width: 1200px; padding: 0 16px; color: #1b1f24; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #57606a; margin: 0 0 12px; } .meta span { margin-right: 16px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; } td.run { white-space: nowrap; } td.num, th.num { text-align: right; }
tfoot td, tfoot th { font-weight: 600; background: #f6f8fa; }
.pass { color: #1a7f37; font-weight: 600; } .fail { color: #cf222e; font-weight: 600; }
.better { color: #1a7f37; } .worse { color: #cf222e; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg.curve { display: block; max-width: 100%; height: auto; font-size: 12px; }
svg .frame { fill: #fff; stroke: none; } svg .grid { stroke: #eaeef2; }
svg .axis { stroke: #57606a; } svg .tick { fill: #57606a; } svg .axis-label { fill: #1b1f24; font-size: 13px; }
svg .line { fill: none; stroke-width: 2; stroke-linejoin: round; } svg .empty { fill: #8c959f; }
details { margin: 6px 0; } summary { cursor: pointer; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; }
footer { color: #8c959f; margin-top: 32px; font-size: 12px; }
"""


def _page(title: str, body: Iterable[str]) -> str:
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<link rel="icon" href="data:,">',
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
            *body,
            f"<footer>generated by pytest-evomemory at {_e(utc_now())}</footer></body></html>\n",
        ]
    )


def _stream_names(runs: Sequence[RunData]) -> list[str]:
    """Streams in run order, first run first, so a compare page keeps the benchmark's order."""
    names: list[str] = []
    for run in runs:
        for name in run.streams:
            if name not in names:
                names.append(name)
    return names


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _run_meta(run: RunData) -> str:
    config = _mapping(run.run.get("run"))
    agent, memory = _mapping(config.get("agent")), _mapping(config.get("memory"))
    items = [
        ("directory", str(run.run_dir)),
        ("started", run.summary.get("started")),
        ("finished", run.summary.get("finished")),
        ("agent", f"{agent.get('kind')} ({agent.get('memory_strategy')})" if agent else None),
        ("model", agent.get("model") if agent else None),
        (
            "memory",
            memory.get("backend")
            if memory and agent.get("memory_strategy") != "none"
            else ("none" if agent else None),
        ),
    ]
    spans = "".join(f"<span><b>{_e(k)}:</b> {_e(v)}</span>" for k, v in items if v not in (None, ""))
    return f'<p class="meta">{spans}</p>'


def _verdict(run: RunData) -> str:
    thresholds = run.summary.get("thresholds")
    if not isinstance(thresholds, list) or not thresholds:
        return '<p class="meta">no accuracy thresholds configured</p>'
    passed = bool(run.summary.get("passed"))
    rows = []
    for item in thresholds:
        if not isinstance(item, Mapping):
            continue
        met = bool(item.get("met"))
        rows.append(
            f'<tr><td>{_e(item.get("scope"))}</td><td class="num">{_e(_percent(item.get("minimum")))}</td>'
            f'<td class="num">{_e(_percent(item.get("accuracy")))}</td>'
            f'<td class="{"pass" if met else "fail"}">{"met" if met else "MISSED"}</td></tr>'
        )
    verdict = (
        '<span class="pass">all thresholds met</span>'
        if passed
        else '<span class="fail">thresholds missed</span>'
    )
    return (
        f'<p>{verdict}</p><table class="thresholds"><thead><tr><th>scope</th><th class="num">minimum</th>'
        f'<th class="num">accuracy</th><th>result</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _failed_episodes(run: RunData) -> str:
    failed = run.summary.get("failed_episodes")
    if not isinstance(failed, list) or not failed:
        return ""
    rows = "".join(
        f"<tr><td>{_e(f.get('stream'))}</td><td><code>{_e(f.get('task_id'))}</code></td><td>{_e(f.get('reason'))}</td></tr>"
        for f in failed
        if isinstance(f, Mapping)
    )
    return (
        f'<h2>Failed episodes ({len(failed)})</h2><table class="failed"><thead><tr><th>stream</th>'
        f"<th>task</th><th>reason</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _stream_table(run: RunData) -> str:
    rows = "".join(
        f"<tr><th>{_e(name)}</th>{_metric_cells(metrics)}</tr>" for name, metrics in run.streams.items()
    )
    return (
        f'<table class="streams"><thead><tr><th>stream</th>{_metric_headers()}</tr></thead>'
        f"<tbody>{rows}</tbody><tfoot><tr><th>overall</th>{_metric_cells(run.overall)}</tr></tfoot></table>"
    )


def _task_tables(run: RunData) -> str:
    if not run.scores:
        return ""
    by_stream: dict[str, list[Mapping[str, Any]]] = {}
    for scored in run.scores:
        by_stream.setdefault(str(scored.get("stream")), []).append(scored)
    parts = ["<h2>Tasks</h2>"]
    for stream, scored_items in by_stream.items():
        correct = sum(bool(s.get("correct")) for s in scored_items)
        rows = "".join(
            f'<tr><td class="num">{_e(_int(s.get("position")))}</td><td><code>{_e(s.get("task_id"))}</code></td>'
            f'<td class="{"pass" if s.get("correct") else "fail"}">{"yes" if s.get("correct") else "no"}</td>'
            f"<td><code>{_e(s.get('extracted'))}</code></td><td><code>{_e(s.get('target'))}</code></td>"
            f"<td>{_e(s.get('match_mode'))}</td></tr>"
            for s in scored_items
        )
        parts.append(
            f"<details><summary>{_e(stream)}: {correct} of {len(scored_items)} correct</summary>"
            f'<table class="tasks"><thead><tr><th class="num">position</th><th>task</th><th>correct</th>'
            f"<th>answer (extracted)</th><th>target</th><th>match</th></tr></thead><tbody>{rows}</tbody></table></details>"
        )
    return "".join(parts)


def _plots(runs: Sequence[RunData]) -> str:
    figures = []
    for stream in _stream_names(runs):
        series = [Series(run.label, _curve(run.streams[stream])) for run in runs if stream in run.streams]
        figures.append(f"<figure><figcaption>{_e(stream)}</figcaption>{curve_svg(stream, series)}</figure>")
    return f'<div class="plots">{"".join(figures)}</div>'


def render_report(run: RunData) -> str:
    """The single-run page."""
    body = [
        f"<h1>Evo-Memory run: {_e(run.label)}</h1>",
        _run_meta(run),
        _verdict(run),
        "<h2>Per stream</h2>",
        _stream_table(run),
        "<h2>Learning curves</h2>",
        '<p class="meta">Cumulative accuracy after each task of the stream, in stream order.</p>',
        _plots([run]),
        _failed_episodes(run),
        _task_tables(run),
    ]
    return _page(f"evomemory: {run.label}", body)


def _delta(value: float | None, base: float | None) -> str:
    if value is None or base is None:
        return f'<td class="num">{_NONE}</td>'
    diff = value - base
    css = "better" if diff > 1e-12 else "worse" if diff < -1e-12 else ""
    return f'<td class="num {css}">{diff * 100:+.1f} pp</td>'


def _accuracy_table(runs: Sequence[RunData]) -> str:
    base = runs[0]
    head = "".join(f'<th class="num">{_e(run.label)}</th>' for run in runs)
    head += "".join(f'<th class="num">{_e(f"Δ {run.label} vs {base.label}")}</th>' for run in runs[1:])

    def cell(metrics: Mapping[str, Any] | None) -> str:
        if metrics is None:
            return f'<td class="num">{_NONE}</td>'
        counts = f"{_int(metrics.get('correct'))}/{_int(metrics.get('tasks'))}"
        return f'<td class="num">{_e(_percent(metrics.get("accuracy")))} <small>({_e(counts)})</small></td>'

    def row(name: str, pick: Any) -> str:
        metrics: list[Mapping[str, Any] | None] = [pick(run) for run in runs]
        first = _number(metrics[0].get("accuracy")) if metrics[0] is not None else None
        cells = "".join(cell(m) for m in metrics)
        cells += "".join(
            _delta(_number(m.get("accuracy")) if m is not None else None, first) for m in metrics[1:]
        )
        return f"<tr><th>{_e(name)}</th>{cells}</tr>"

    body = "".join(row(name, lambda r, n=name: r.streams.get(n)) for name in _stream_names(runs))
    foot = row("overall", lambda r: r.overall)
    return (
        f'<table class="compare-accuracy"><thead><tr><th>stream</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody><tfoot>{foot}</tfoot></table>"
    )


def _side_by_side(runs: Sequence[RunData]) -> str:
    rows = []
    for name in [*_stream_names(runs), "overall"]:
        for index, run in enumerate(runs):
            metrics = run.overall if name == "overall" else run.streams.get(name)
            stream_cell = f'<th rowspan="{len(runs)}">{_e(name)}</th>' if index == 0 else ""
            cells = (
                _metric_cells(metrics)
                if metrics is not None
                else f'<td colspan="{len(_METRIC_COLUMNS)}">not in this run</td>'
            )
            rows.append(f'<tr>{stream_cell}<td class="run">{_e(run.label)}</td>{cells}</tr>')
    return (
        f'<table class="compare-streams"><thead><tr><th>stream</th><th>run</th>{_metric_headers()}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def render_comparison(runs: Sequence[RunData]) -> str:
    """One page, every run's curve on one plot per stream, tables side by side."""
    if len(runs) < 2:
        raise ReportError("a comparison needs at least two runs")
    labels = " vs ".join(run.label for run in runs)
    runs_list = "".join(f"<li><b>{_e(run.label)}</b>{_run_meta(run)}</li>" for run in runs)
    body = [
        f"<h1>Evo-Memory comparison: {_e(labels)}</h1>",
        f'<ul class="runs">{runs_list}</ul>',
        "<h2>Accuracy</h2>",
        _accuracy_table(runs),
        "<h2>Learning curves</h2>",
        '<p class="meta">Cumulative accuracy after each task of the stream; one line per run.</p>',
        _plots(runs),
        "<h2>Per stream, side by side</h2>",
        _side_by_side(runs),
    ]
    return _page(f"evomemory: {labels}", body)


# --------------------------------------------------------------------------- writing


def _write(path: Path, text: str) -> Path:
    """Atomic, so a browser or CI upload never picks up half a page."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:
        raise ReportError(f"cannot write {path}: {error.strerror or error}") from None
    return path


def write_html_report(run_dir: Path | str, output: Path | str | None = None) -> Path:
    """Write ``report.html`` (or ``output``) for a finished run; returns its path."""
    run = load_run(run_dir)
    return _write(Path(output) if output is not None else run.run_dir / REPORT_NAME, render_report(run))


def write_comparison_report(
    run_dirs: Sequence[Path | str], output: Path | str, labels: Sequence[str] | None = None
) -> Path:
    """Write one page comparing the runs (the first is the baseline for the Δ columns)."""
    if len(run_dirs) < 2:
        raise ReportError("a comparison needs at least two run directories")
    return _write(Path(output), render_comparison(load_runs(run_dirs, labels)))


__all__ = [
    "REPORT_NAME",
    "ReportError",
    "RunData",
    "Series",
    "curve_svg",
    "load_run",
    "load_runs",
    "render_comparison",
    "render_report",
    "write_comparison_report",
    "write_html_report",
]
