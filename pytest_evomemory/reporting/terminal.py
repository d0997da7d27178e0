"""The per-stream table printed at the end of pytest's terminal summary.

Accuracy comes with its 95 % interval; ToolBench-like streams show "API / Acc."
as the paper does; protocol violations and responses served from the cache are
columns, so neither hides behind a good accuracy; a stream with groups (MMLU-Pro
categories) gets one indented row per group under its own row.
"""

from __future__ import annotations

from collections.abc import Mapping

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
        metrics.stream, str(metrics.tasks), str(metrics.correct), str(metrics.errors),
        percent(metrics.accuracy), interval(metrics.accuracy_ci),
    ]
    if with_api:
        cells.append(api_and_accuracy(metrics))
    return cells + [
        str(metrics.stimuli), str(metrics.agent_turns), str(metrics.tool_calls),
        str(metrics.memory_retains), str(metrics.memory_recalls), str(metrics.protocol_violations),
        str(metrics.cached_responses), str(metrics.prompt_tokens + metrics.completion_tokens),
    ]


def _group_rows(metrics: StreamMetrics, width: int) -> list[list[str]]:
    rows = []
    for name, group in metrics.groups.items():
        proportion = Proportion(group.correct, group.tasks)
        cells = [f"  {name}", str(group.tasks), str(group.correct), "", percent(proportion.estimate),
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
