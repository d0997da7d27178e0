"""The per-stream table printed at the end of pytest's terminal summary."""

from __future__ import annotations

from collections.abc import Mapping

from .summary import StreamMetrics

_COLUMNS = (
    ("stream", "<"), ("tasks", ">"), ("correct", ">"), ("errors", ">"), ("accuracy", ">"),
    ("stimuli", ">"), ("agent turns", ">"), ("tool calls", ">"), ("retains", ">"),
    ("recalls", ">"), ("tokens", ">"),
)


def _row(metrics: StreamMetrics) -> list[str]:
    accuracy = "-" if metrics.accuracy is None else f"{metrics.accuracy:.1%}"
    return [
        metrics.stream, str(metrics.tasks), str(metrics.correct), str(metrics.errors), accuracy,
        str(metrics.stimuli), str(metrics.agent_turns), str(metrics.tool_calls),
        str(metrics.memory_retains), str(metrics.memory_recalls),
        str(metrics.prompt_tokens + metrics.completion_tokens),
    ]


def format_table(metrics: Mapping[str, StreamMetrics]) -> list[str]:
    """Aligned lines: one per stream, then a rule and the overall row."""
    rows = [_row(m) for name, m in metrics.items() if name != "overall"]
    footer = _row(metrics["overall"])
    header = [name for name, _ in _COLUMNS]
    widths = [max(len(r[i]) for r in [header, footer, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if align == "<" else cell.rjust(width)
            for cell, width, (_, align) in zip(cells, widths, _COLUMNS, strict=True)
        ).rstrip()

    rule = "-" * len(line(header))
    return [line(header), rule, *(line(r) for r in rows), rule, line(footer)]
