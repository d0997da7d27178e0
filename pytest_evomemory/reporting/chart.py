"""The learning-curve chart: inline SVG, drawn here so the page loads nothing.

Any number of runs stays readable: the legend wraps onto further rows (the
picture and its viewBox grow with it) and a label too long for a row is
shortened, with the full text in its tooltip. Each run has a colour, a dash
pattern and a hollow marker shape of its own (:mod:`.palette`); runs whose curves
are identical put their markers at different positions and say so in the legend
("= other run"), so one never hides another. A series may carry a band (the
replicates page: lowest to highest replicate at each position), drawn
translucent under the lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._markup import _e
from .palette import marker_positions, marker_svg, style

_Y_INSET = 6


@dataclass(frozen=True)
class Series:
    """One line of a chart; ``low`` / ``high`` (as long as ``values``), when given,
    are the band drawn around it."""

    label: str
    values: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None


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


def legend_room(usable: float) -> int:
    """The characters a legend entry may have on a row ``usable`` px wide."""
    return max(4, int((usable - _SWATCH) / _CHAR_W))


def shorten(text: str, most: int) -> str:
    """``text`` in at most ``most`` characters, cut in the middle: run labels often
    differ only at their ends, and a legend entry ends with its final value."""
    if len(text) <= most:
        return text
    tail = min(28, (most - 1) // 2)
    return text[: most - 1 - tail] + "\u2026" + text[len(text) - tail:]


def legend_layout(
    texts: Sequence[str], left: float, usable: float, full: Sequence[str] | None = None
) -> list[LegendEntry]:
    """Place legend entries left to right, wrapping to a new row instead of leaving
    the viewBox; a text too long for a whole row is shortened (:func:`shorten`).
    ``full``: the tooltips' texts, when ``texts`` were already fitted (default: ``texts``)."""
    most = legend_room(usable)
    entries, x, row = [], left, 0
    for given, tooltip in zip(texts, full if full is not None else texts, strict=True):
        text = shorten(given, most)
        size = _SWATCH + _CHAR_W * len(text)
        if x > left and x + size > left + usable:
            x, row = left, row + 1
        entries.append(LegendEntry(text, tooltip, x, row))
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


def band_points(low: Sequence[float], high: Sequence[float], most: int = MAX_DRAWN_POINTS) -> list[tuple[int, float, float]]:
    """(1-based position, low, high) of a band as drawn: every position up to
    ``most``, beyond it per bucket of consecutive positions the bucket's lowest low
    and highest high (at its middle position), so thinning never narrows a band."""
    count = min(len(low), len(high))
    if count <= most:
        return [(index + 1, low[index], high[index]) for index in range(count)]
    buckets = max(1, most - 2)
    drawn = [(1, low[0], high[0])]
    for bucket in range(buckets):
        start, stop = bucket * count // buckets, (bucket + 1) * count // buckets
        if start < stop:
            drawn.append(((start + stop) // 2 + 1, min(low[start:stop]), max(high[start:stop])))
    drawn.append((count, low[count - 1], high[count - 1]))
    return sorted(set(drawn))


def twins(series: Sequence[Series]) -> list[str | None]:
    """Per series, the label of the first earlier series with exactly the same
    curve (and band), or None: the legend says so, as the lines coincide."""
    found: list[str | None] = []
    for index, line in enumerate(series):
        same = next(
            (other.label for other in series[:index]
             if line.values and list(other.values) == list(line.values)
             and list(other.low or []) == list(line.low or []) and list(other.high or []) == list(line.high or [])),
            None,
        )
        found.append(same)
    return found


def _legend_text(line: Series, twin: str | None, most: int | None = None) -> str:
    """``label (final value)``, with `` = twin`` for a curve identical to an earlier
    one's; with ``most``, the label and the twin's label are shortened alike (in the
    middle) so the value and the "=" always show."""
    value = f" ({line.values[-1]:.1%})" if line.values else " (no tasks)"
    text = f"{line.label}{value}" + (f" = {twin}" if twin is not None else "")
    if most is None or len(text) <= most:
        return text
    room = max(2, most - len(value) - (3 if twin is not None else 0))
    if twin is None:
        return shorten(line.label, room) + value
    first = max(1, min(len(line.label), room - min(len(twin), room // 2)))
    return f"{shorten(line.label, first)}{value} = {shorten(twin, max(1, room - first))}"


def curve_svg(
    stream: str, series: Sequence[Series], *, width: int = 560, height: int = 300,
    y_label: str = "cumulative accuracy",
) -> str:
    """Cumulative accuracy against task position, one line per run, as inline SVG.

    ``height`` is the height with a one-row legend; each further legend row makes
    the picture (and its viewBox) taller, so any number of runs stays readable.
    """
    left, right, top, bottom = 56, 16, 16, 72
    plot_w, plot_h = width - left - right, height - top - bottom
    same = twins(series)
    most = legend_room(width - left - right)
    legend = legend_layout(
        [_legend_text(line, twin, most) for line, twin in zip(series, same, strict=True)], left, width - left - right,
        [_legend_text(line, twin) for line, twin in zip(series, same, strict=True)],
    )
    height += _LEGEND_ROW * (max((entry.row for entry in legend), default=0))
    longest = max((len(s.values) for s in series), default=0)
    x_max = max(longest, 2)

    def x(position: int) -> float:
        return left + (position - 1) / (x_max - 1) * plot_w

    def y(value: float) -> float:
        # Inset so a curve at exactly 0 or 1 is not hidden under the axis or the frame edge.
        return top + _Y_INSET + (1.0 - min(1.0, max(0.0, value))) * (plot_h - 2 * _Y_INSET)

    parts = [
        f'<svg class="curve" data-stream="{_e(stream)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(f"{y_label[:1].upper()}{y_label[1:]} along stream {stream}")}">',
        f"<title>{_e(f'{y_label[:1].upper()}{y_label[1:]} along {stream}')}</title>",
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
        f'<text class="axis-label" transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">{_e(y_label)}</text>',
    ]
    if not longest:
        parts.append(
            f'<text class="empty" x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" text-anchor="middle">no scored tasks</text>'
        )
    for index, line in enumerate(series):  # bands first: every line stays on top of every band
        if line.low is None or line.high is None or not line.values:
            continue
        band = band_points(line.low, line.high)
        outline = [f"{x(p):.1f},{y(h):.1f}" for p, _, h in band] + [f"{x(p):.1f},{y(lo):.1f}" for p, lo, _ in reversed(band)]
        parts.append(
            f'<polygon class="band" data-run="{_e(line.label)}" points="{" ".join(outline)}" '
            f'fill="{style(index).colour}" fill-opacity="0.10" stroke="{style(index).colour}" stroke-opacity="0.35" '
            f'stroke-width="0.8"{style(index).dash_attr}/>'
        )
    for index, line in enumerate(series):
        look = style(index)
        points = " ".join(f"{x(position):.1f},{y(v):.1f}" for position, v in display_points(line.values))
        parts.append(f'<g class="series" data-run="{_e(line.label)}" data-tasks="{len(line.values)}">')
        if line.values:
            parts.append(f'<polyline class="line" points="{points}" stroke="{look.colour}"{look.dash_attr}/>')
        for position in marker_positions(len(line.values), index, len(series)):
            value = line.values[position - 1]
            parts.append(marker_svg(look.marker, x(position), y(value), look.colour,
                                    tooltip=f"{line.label}: task {position}, {y_label} {value:.3f}"))
        if len(line.values) <= 60:
            # hover targets, one per task: invisible (the markers above are what a reader sees)
            for i, v in enumerate(line.values):
                parts.append(
                    f'<circle class="point" cx="{x(i + 1):.1f}" cy="{y(v):.1f}" r="4" fill="{look.colour}" fill-opacity="0">'
                    f"<title>{_e(f'{line.label}: task {i + 1}, {y_label} {v:.3f}')}</title></circle>"
                )
        parts.append("</g>")
    parts.append(legend_svg(legend, top + plot_h + bottom - 14))
    parts.append("</svg>")
    return "".join(parts)


def legend_svg(legend: Sequence[LegendEntry], baseline: float) -> str:
    """The legend: per entry a swatch of its line (colour, dashes, marker) and its text."""
    parts = ['<g class="legend">']
    for index, entry in enumerate(legend):
        look = style(index)
        legend_y = baseline + entry.row * _LEGEND_ROW
        parts.append(
            f'<g class="legend-entry"><title>{_e(entry.full)}</title>'
            f'<line x1="{entry.x:.1f}" y1="{legend_y - 4}" x2="{entry.x + 24:.1f}" y2="{legend_y - 4}" '
            f'stroke="{look.colour}" stroke-width="2.5"{look.dash_attr}/>'
            + marker_svg(look.marker, entry.x + 12, legend_y - 4, look.colour, size=3.5)
            + f'<text class="legend-label" x="{entry.x + _SWATCH:.1f}" y="{legend_y}">{_e(entry.text)}</text></g>'
        )
    parts.append("</g>")
    return "".join(parts)
