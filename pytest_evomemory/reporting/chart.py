"""The learning-curve chart: inline SVG, drawn here so the page loads nothing.

Any number of runs stays readable: the legend wraps onto further rows (the
picture and its viewBox grow with it) and a label too long for a row is
shortened, with the full text in its tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._markup import _e

# Okabe-Ito colours plus dash patterns: curves stay apart for colour-blind readers
# and on black-and-white printouts.
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
_DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")

_Y_INSET = 6


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


#: Legend geometry: a generous width per character (12 px system-ui stays under
#: it), so an entry measured here is never wider on screen than its slot.
_CHAR_W = 7.5
_LEGEND_ROW = 18
_SWATCH = 30


@dataclass(frozen=True)
class LegendEntry:
    text: str
    full: str
    x: float
    row: int


def legend_layout(texts: Sequence[str], left: float, usable: float) -> list[LegendEntry]:
    """Place legend entries left to right, wrapping to a new row instead of leaving
    the viewBox; a text too long for a whole row is shortened (the full text stays
    in its tooltip)."""
    most = max(4, int((usable - _SWATCH) / _CHAR_W))
    entries, x, row = [], left, 0
    for full in texts:
        text = full if len(full) <= most else full[: most - 1] + "\u2026"
        size = _SWATCH + _CHAR_W * len(text)
        if x > left and x + size > left + usable:
            x, row = left, row + 1
        entries.append(LegendEntry(text, full, x, row))
        x += size + 24
    return entries


#: Points drawn per curve at most: the plot is 488 px wide, so two points per pixel
#: column already show every rise and fall a reader can see.
MAX_DRAWN_POINTS = 1000


def display_points(values: Sequence[float], most: int = MAX_DRAWN_POINTS) -> list[tuple[int, float]]:
    """(1-based position, value) of the points drawn for a curve.

    Up to ``most`` values all of them; beyond, per bucket of consecutive positions
    its lowest and highest point at their own positions (and the first and last
    point), so a 20,000-task curve keeps its shape, dips included, at a fixed size.
    Only the drawing is thinned: summary.json keeps every value.
    """
    count = len(values)
    if count <= most:
        return [(index + 1, value) for index, value in enumerate(values)]
    buckets = max(1, (most - 2) // 2)
    picked = {0, count - 1}
    for bucket in range(buckets):
        low, high = bucket * count // buckets, (bucket + 1) * count // buckets
        if low >= high:
            continue
        segment = range(low, high)
        picked.add(min(segment, key=values.__getitem__))
        picked.add(max(segment, key=values.__getitem__))
    return [(index + 1, values[index]) for index in sorted(picked)]


def curve_svg(stream: str, series: Sequence[Series], *, width: int = 560, height: int = 300) -> str:
    """Cumulative accuracy against task position, one line per run, as inline SVG.

    ``height`` is the height with a one-row legend; each further legend row makes
    the picture (and its viewBox) taller, so any number of runs stays readable.
    """
    left, right, top, bottom = 56, 16, 16, 72
    plot_w, plot_h = width - left - right, height - top - bottom
    legend = legend_layout(
        [f"{line.label}{f' ({line.values[-1]:.1%})' if line.values else ' (no tasks)'}" for line in series],
        left, width - left - right,
    )
    height += _LEGEND_ROW * (max((entry.row for entry in legend), default=0))
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
        points = " ".join(f"{x(position):.1f},{y(v):.1f}" for position, v in display_points(line.values))
        parts.append(f'<g class="series" data-run="{_e(line.label)}" data-tasks="{len(line.values)}">')
        if line.values:
            parts.append(f'<polyline class="line" points="{points}" stroke="{colour}"{dash_attr}/>')
        if len(line.values) <= 60:
            for i, v in enumerate(line.values):
                parts.append(
                    f'<circle cx="{x(i + 1):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}">'
                    f"<title>{_e(f'{line.label}: task {i + 1}, cumulative accuracy {v:.3f}')}</title></circle>"
                )
        parts.append("</g>")
    parts.append('<g class="legend">')
    for index, entry in enumerate(legend):
        colour, dash = _PALETTE[index % len(_PALETTE)], _DASHES[index % len(_DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        legend_y = top + plot_h + bottom - 14 + entry.row * _LEGEND_ROW
        parts.append(
            f'<g class="legend-entry"><title>{_e(entry.full)}</title>'
            f'<line x1="{entry.x:.1f}" y1="{legend_y - 4}" x2="{entry.x + 24:.1f}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2.5"{dash_attr}/>'
            f'<text class="legend-label" x="{entry.x + _SWATCH:.1f}" y="{legend_y}">{_e(entry.text)}</text></g>'
        )
    parts.append("</g></svg>")
    return "".join(parts)
