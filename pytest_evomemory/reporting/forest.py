"""The forest plot of gains: inline SVG, drawn here so the page loads nothing.

One row per arm and scope (each stream, then overall): the arm's gain over the
baseline as a marker (the arm's own shape and colour, :mod:`.palette`) with its
interval as a horizontal whisker, a vertical line at no gain, and the numbers
written at the right, so the figure reads without hovering and a row whose
interval crosses zero is seen at once. A gain with no interval is drawn as its
point alone, and one with no value is written as a dash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._markup import _NONE, _e
from .palette import marker_svg, style

_ROW = 22
_GROUP = 24
_LABEL_W = 170
_VALUE_W = 160
_CHAR_W = 7.0


@dataclass(frozen=True)
class Gain:
    """One row: ``arm``'s gain over the baseline on ``scope`` (fractions, not
    points), with its interval; ``index`` is the arm's series index (its look)."""

    scope: str
    arm: str
    index: int
    mean: float | None
    low: float | None
    high: float | None


def _step(span: float) -> float:
    """A 1-2-5 tick step (in points) giving at most about six ticks over ``span``."""
    raw = max(span / 6, 1e-9)
    power = 10 ** math.floor(math.log10(raw))
    return float(next(power * factor for factor in (1, 2, 5, 10) if power * factor >= raw))


def _points(value: float | None) -> str:
    return _NONE if value is None else f"{value * 100:+.1f}"


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def forest_svg(gains: Sequence[Gain], *, baseline: str, width: int = 680, title: str = "Gain over the baseline") -> str:
    """The rows of ``gains`` grouped by scope in the order given, as one SVG."""
    scopes: list[str] = []
    for gain in gains:
        if gain.scope not in scopes:
            scopes.append(gain.scope)
    known = [v for gain in gains for v in (gain.mean, gain.low, gain.high) if v is not None]
    low_pp = min([0.0, *known]) * 100
    high_pp = max([0.0, *known]) * 100
    if high_pp - low_pp < 1e-9:
        low_pp, high_pp = -5.0, 5.0
    step = _step(high_pp - low_pp)
    # a gain in accuracy lies within +-100 points: an interval reaching beyond is cut at the frame
    low_pp = max(-100.0, math.floor(low_pp / step) * step)
    high_pp = min(100.0, math.ceil(high_pp / step) * step)
    top, bottom = 8, 46
    plot_left, plot_right = _LABEL_W, width - _VALUE_W
    height = top + bottom + len(scopes) * _GROUP + len(gains) * _ROW

    def x(fraction: float) -> float:
        pp = min(high_pp, max(low_pp, fraction * 100))
        return plot_left + (pp - low_pp) / (high_pp - low_pp) * (plot_right - plot_left)

    plot_bottom = height - bottom
    parts = [
        f'<svg class="forest" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(f"{title}: {baseline}")}"><title>{_e(title)}</title>',
        f'<rect class="frame" x="{plot_left}" y="{top}" width="{plot_right - plot_left}" height="{plot_bottom - top}"/>',
    ]
    tick = low_pp
    while tick <= high_pp + 1e-9:
        tx = x(tick / 100)
        parts.append(f'<line class="grid" x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{plot_bottom}"/>')
        parts.append(
            f'<text class="tick" x="{tx:.1f}" y="{plot_bottom + 16}" text-anchor="middle">{"0" if abs(tick) < 1e-9 else f"{tick:+g}"}</text>'
        )
        tick += step
    parts += [
        f'<line class="zero" x1="{x(0):.1f}" y1="{top}" x2="{x(0):.1f}" y2="{plot_bottom}"/>',
        f'<text class="axis-label" x="{(plot_left + plot_right) / 2:.1f}" y="{plot_bottom + 34}" text-anchor="middle">'
        f"{_e(f'gain over {_short(baseline, 40)} (percentage points)')}</text>",
        f'<text class="tick" x="{plot_right + 8}" y="{top + 14}">\u0394 [95% interval]</text>',
    ]
    y = float(top)
    for scope in scopes:
        y += _GROUP
        parts.append(
            f'<text class="scope" x="6" y="{y - 6:.1f}"><title>{_e(scope)}</title>{_e(_short(scope, 24))}</text>'
        )
        for gain in (g for g in gains if g.scope == scope):
            y += _ROW
            cy = y - _ROW / 2
            look = style(gain.index)
            name = _short(gain.arm, int((_LABEL_W - 20) / _CHAR_W))
            row = [
                f'<g class="gain" data-scope="{_e(gain.scope)}" data-run="{_e(gain.arm)}">',
                f"<title>{_e(f'{gain.arm} on {gain.scope}: {_points(gain.mean)} pp [{_points(gain.low)}, {_points(gain.high)}]')}</title>",
                f'<text class="arm" x="18" y="{cy + 4:.1f}">{_e(name)}</text>',
            ]
            if gain.low is not None and gain.high is not None:
                row.append(
                    f'<line class="whisker" x1="{x(gain.low):.1f}" y1="{cy:.1f}" x2="{x(gain.high):.1f}" y2="{cy:.1f}" '
                    f'stroke="{look.colour}" stroke-width="2"/>'
                )
                for end in (gain.low, gain.high):
                    row.append(
                        f'<line x1="{x(end):.1f}" y1="{cy - 4:.1f}" x2="{x(end):.1f}" y2="{cy + 4:.1f}" '
                        f'stroke="{look.colour}" stroke-width="2"/>'
                    )
            if gain.mean is not None:
                row.append(marker_svg(look.marker, x(gain.mean), cy, look.colour, size=5))
            interval = f" [{_points(gain.low)}, {_points(gain.high)}]" if gain.low is not None and gain.high is not None else ""
            row.append(f'<text class="value" x="{plot_right + 8}" y="{cy + 4:.1f}">{_e(_points(gain.mean) + interval)}</text>')
            row.append("</g>")
            parts += row
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["Gain", "forest_svg"]
