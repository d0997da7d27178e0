"""How the figures tell series apart: a colour, a dash pattern and a marker shape each.

Declared once for every figure the reports draw (learning curves, their bands
across replicates, the forest plot of gains), so an arm looks the same in each.

Three cues, not one, because a reader may not see one of them: the colours are
Okabe and Ito's colour-blind-safe set (M. Okabe, K. Ito, *Color Universal Design*,
2008) without its yellow, which all but vanishes on white; the dash patterns
survive a black-and-white printout; the marker shapes are drawn hollow, so two
arms with the *same* curve still show both shapes where they overlap (each
series puts its markers at positions of its own, see :func:`marker_positions`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._markup import _e

#: Okabe-Ito, darkest and most distinct first; the yellow (#F0E442) is left out:
#: a thin line of it on white cannot be seen.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9")
#: SVG ``stroke-dasharray`` values; "" is a solid line. Six patterns against seven
#: colours: the pair repeats only after 42 series.
DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")
MARKERS = ("circle", "square", "triangle", "diamond", "triangle-down", "cross", "plus")


@dataclass(frozen=True)
class Style:
    """One series' look: colour, dash pattern ("" solid) and marker shape."""

    colour: str
    dash: str
    marker: str

    @property
    def dash_attr(self) -> str:
        """The ``stroke-dasharray`` attribute, or nothing for a solid line."""
        return f' stroke-dasharray="{self.dash}"' if self.dash else ""


def style(index: int) -> Style:
    """The look of the ``index``-th series (0-based) of a figure."""
    return Style(COLOURS[index % len(COLOURS)], DASHES[index % len(DASHES)], MARKERS[index % len(MARKERS)])


def marker_svg(shape: str, x: float, y: float, colour: str, size: float = 4.5, tooltip: str = "") -> str:
    """A hollow marker of ``shape`` centred on (x, y), ``size`` its half width."""
    s = size
    title = f"<title>{_e(tooltip)}</title>" if tooltip else ""
    common = f'class="marker" fill="#fff" fill-opacity="0.6" stroke="{colour}" stroke-width="1.6"'
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}" {common}>{title}</circle>'
    points = {
        "square": [(-s, -s), (s, -s), (s, s), (-s, s)],
        "triangle": [(0, -s * 1.2), (s * 1.1, s * 0.8), (-s * 1.1, s * 0.8)],
        "triangle-down": [(0, s * 1.2), (s * 1.1, -s * 0.8), (-s * 1.1, -s * 0.8)],
        "diamond": [(0, -s * 1.3), (s * 1.1, 0), (0, s * 1.3), (-s * 1.1, 0)],
    }.get(shape)
    if points is not None:
        drawn = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in points)
        return f'<polygon points="{drawn}" {common}>{title}</polygon>'
    if shape == "cross":
        d = f"M{x - s:.1f},{y - s:.1f}L{x + s:.1f},{y + s:.1f}M{x - s:.1f},{y + s:.1f}L{x + s:.1f},{y - s:.1f}"
    else:  # plus
        d = f"M{x - s:.1f},{y:.1f}L{x + s:.1f},{y:.1f}M{x:.1f},{y - s:.1f}L{x:.1f},{y + s:.1f}"
    return f'<path d="{d}" class="marker" fill="none" stroke="{colour}" stroke-width="2">{title}</path>'


def marker_positions(length: int, index: int, count: int, most: int = 8) -> list[int]:
    """The 1-based positions of a curve of ``length`` points that carry its markers:
    at most ``most``, evenly spaced, series ``index`` of ``count`` shifted by its
    share of the spacing. The spacing is at least ``count`` positions, so no two
    series of a figure ever put a marker at the same position: identical curves
    show every series' markers side by side instead of one on top of the other."""
    if length <= 0:
        return []
    count = max(count, 1)
    markers = min(most, length // count)
    if markers == 0:  # fewer points than series: one marker each, spread over the points
        return [1 + index % length]
    step = length / markers
    shift = step * index / count
    return [1 + int(shift + step * k) for k in range(markers)]


__all__ = ["COLOURS", "DASHES", "MARKERS", "Style", "marker_positions", "marker_svg", "style"]
