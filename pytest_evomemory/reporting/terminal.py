"""The per-stream table printed at the end of pytest's terminal summary.

Accuracy comes with its 95 % interval; ToolBench-like streams show "API / Acc."
as the paper does; protocol violations and responses served from the cache are
columns, so neither hides behind a good accuracy; a stream with groups (MMLU-Pro
categories) gets one indented row per group under its own row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..text import inert
from .stats import Proportion
from .summary import StreamMetrics

_BASE_COLUMNS = (
    ("stream", "<"), ("tasks", ">"), ("correct", ">"), ("errors", ">"), ("accuracy", ">"),
    ("95% CI", ">"),
)
_API_COLUMN = (("API / Acc.", ">"),)
_TAIL_COLUMNS = (
    ("stimuli", ">"), ("agent turns", ">"), ("tool calls", ">"), ("retains", ">"),
    ("recalls", ">"), ("violations", ">"), ("cached", ">"), ("tokens", ">"),
)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def interval(bounds: tuple[float, float] | None) -> str:
    """``[31.9, 80.7]``: the interval in percent, one decimal, "-" without tasks."""
    return "-" if bounds is None else f"[{bounds[0] * 100:.1f}, {bounds[1] * 100:.1f}]"


def api_and_accuracy(metrics: StreamMetrics) -> str:
    """The paper's "API / Acc." cell, "-" for streams without an API figure."""
    if metrics.api_accuracy is None:
        return "-"
    return f"{percent(metrics.api_accuracy)} / {percent(metrics.accuracy)}"


def _row(metrics: StreamMetrics, with_api: bool) -> list[str]:
    cells = [
        inert(metrics.stream, one_line=True), str(metrics.tasks), str(metrics.correct), str(metrics.errors),
        percent(metrics.accuracy), interval(metrics.accuracy_ci),
    ]
    if with_api:
        cells.append(api_and_accuracy(metrics))
    return [
        *cells, str(metrics.stimuli), str(metrics.agent_turns), str(metrics.tool_calls),
        str(metrics.memory_retains), str(metrics.memory_recalls), str(metrics.protocol_violations),
        str(metrics.cached_responses), str(metrics.prompt_tokens + metrics.completion_tokens),
    ]


def _group_rows(metrics: StreamMetrics, width: int) -> list[list[str]]:
    rows = []
    for name, group in metrics.groups.items():
        proportion = Proportion(group.correct, group.tasks)
        cells = [f"  {inert(name, one_line=True)}", str(group.tasks), str(group.correct), "", percent(proportion.estimate),
                 interval(proportion.interval)]
        rows.append(cells + [""] * (width - len(cells)))
    return rows


def format_table(metrics: Mapping[str, StreamMetrics]) -> list[str]:
    """Aligned lines: one per stream (and its groups), then a rule and the overall row."""
    streams = [m for name, m in metrics.items() if name != "overall"]
    with_api = any(m.api_accuracy is not None for m in streams)
    columns = _BASE_COLUMNS + (_API_COLUMN if with_api else ()) + _TAIL_COLUMNS
    rows: list[list[str]] = []
    for stream in streams:
        rows.append(_row(stream, with_api))
        rows += _group_rows(stream, len(columns))
    footer = _row(metrics["overall"], with_api)
    header = [name for name, _ in columns]
    widths = [max(len(r[i]) for r in [header, footer, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if align == "<" else cell.rjust(width)
            for cell, width, (_, align) in zip(cells, widths, columns, strict=True)
        ).rstrip()

    rule = "-" * len(line(header))
    lines = [line(header), rule, *(line(r) for r in rows), rule, line(footer)]
    cached = metrics["overall"].cached_responses
    if cached:
        lines.append(
            f"{cached} of {metrics['overall'].stimuli} responses came from the response cache: "
            "their time and tokens are the cache's, not the model's"
        )
    lines.append("95% CI: Wilson score interval of the accuracy, in percent")
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


def format_comparison(document: Mapping[str, Any]) -> list[str]:
    """The comparison (``compare.json``'s document) as aligned terminal lines.

    Per stream and overall, each run's accuracy with its 95 % interval and, for
    every run after the baseline, the paired difference with its interval, the
    exact McNemar p-value and how many tasks both ran; then any warnings.
    """
    header = ["stream", "run", "accuracy", "95% CI", "API / Acc.", f"diff vs {document['baseline']}",
              "95% CI of diff", "McNemar p", "paired"]
    rows: list[list[str]] = [header]
    scopes = [*document["streams"].items(), ("overall", document["overall"])]
    for name, scope in scopes:
        versus: list[Mapping[str, Any] | None] = [None, *scope["vs_baseline"]]
        for index, (entry, against) in enumerate(zip(scope["runs"], versus, strict=True)):
            present = entry.get("present")
            bounds = (entry["ci_low"], entry["ci_high"]) if present and entry.get("ci_low") is not None else None
            api = entry.get("api_accuracy")
            row = [name if index == 0 else "", str(entry["label"]),
                   percent(entry.get("accuracy")) if present else "not run",
                   interval(bounds), "-" if api is None else f"{percent(api)} / {percent(entry.get('accuracy'))}"]
            if against is None:
                row += ["baseline", "", "", ""]
            else:
                low, high = against.get("ci_low"), against.get("ci_high")
                p_value = against.get("mcnemar_p")
                row += [
                    _points(against.get("difference")),
                    "-" if low is None else f"[{_points(low)[:-3]}, {_points(high)[:-3]}]",
                    "-" if p_value is None else ("< 0.001" if p_value < 0.001 else f"{p_value:.3f}"),
                    str(against.get("paired_tasks")),
                ]
            rows.append(row)
    right = [False, False, True, True, True, True, True, True, True]
    if all(row[4] == "-" for row in rows[1:]):  # no stream with an API figure
        rows = [row[:4] + row[5:] for row in rows]
        right = right[:-1]
    lines = _aligned(rows, right)
    lines.insert(1, "-" * max(len(line) for line in lines))
    lines += [f"warning: {inert(str(warning), one_line=True)}" for warning in document.get("warnings") or []]
    return lines
