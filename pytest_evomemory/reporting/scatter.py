"""The gain-versus-similarity plot: inline SVG, drawn here so the page loads nothing.

One small plot per stream and memory arm: each task is a dot at (its similarity to
what it recalled, the memory arm's gain over the control on it: -1, 0 or +1), and
a line joins the mean gain of each similarity bin (:mod:`..analysis.similarity`). Dots are
drawn translucent: many tasks share a gain, and overlap shows as darker dots.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rundocs.compare import SimilarityBin, SimilarityPoint
from ._markup import _e

_DOT = "#0072B2"
_MEAN = "#D55E00"


def similarity_svg(
    stream: str, label: str, points: Sequence[SimilarityPoint], bins: Sequence[SimilarityBin],
    *, width: int = 340, height: int = 230,
) -> str:
    left, right, top, bottom = 44, 12, 12, 40
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(value: float) -> float:
        return left + max(0.0, min(1.0, value)) * plot_w

    def y(gain: float) -> float:
        return top + 8 + (1.0 - (gain + 1.0) / 2.0) * (plot_h - 16)

    title = f"Gain of {label} over the control against task similarity, {stream}"
    parts = [
        f'<svg class="similarity" data-stream="{_e(stream)}" data-run="{_e(label)}" '
        f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{_e(title)}"><title>{_e(title)}</title>',
        f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/>',
    ]
    for gain, text in ((1.0, "+1"), (0.0, "0"), (-1.0, "\u22121")):
        parts.append(f'<line class="grid" x1="{left}" y1="{y(gain):.1f}" x2="{left + plot_w}" y2="{y(gain):.1f}"/>')
        parts.append(f'<text class="tick" x="{left - 6}" y="{y(gain) + 4:.1f}" text-anchor="end">{text}</text>')
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<text class="tick" x="{x(tick):.1f}" y="{top + plot_h + 14}" text-anchor="middle">{tick:g}</text>'
        )
    parts += [
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" text-anchor="middle">'
        "similarity to what was recalled</text>",
        f'<text class="axis-label" transform="translate(12 {top + plot_h / 2:.1f}) rotate(-90)" '
        'text-anchor="middle">gain</text>',
    ]
    if not points:
        parts.append(
            f'<text class="empty" x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" text-anchor="middle">'
            "no task with a recall</text>"
        )
    parts.append('<g class="points">')
    for point in points:
        similarity, gain = float(point.similarity), float(point.gain)
        tip = f"{point.task_id}: similarity {similarity:.2f}, gain {gain:+.0f}"
        parts.append(
            f'<circle cx="{x(similarity):.1f}" cy="{y(gain):.1f}" r="3" fill="{_DOT}" fill-opacity="0.35">'
            f"<title>{_e(tip)}</title></circle>"
        )
    parts.append("</g>")
    means = [(x((b.low + b.high) / 2), y(b.mean_gain), b) for b in bins if b.mean_gain is not None]
    if means:
        parts.append(
            f'<polyline class="line" points="{" ".join(f"{px:.1f},{py:.1f}" for px, py, _ in means)}" '
            f'stroke="{_MEAN}"/>'
        )
        for px, py, b in means:
            tip = f"similarity {b.low:g}-{b.high:g}: mean gain {float(b.mean_gain or 0.0):+.2f} over {b.tasks} task(s)"
            parts.append(
                f'<rect x="{px - 3:.1f}" y="{py - 3:.1f}" width="6" height="6" fill="{_MEAN}">'
                f"<title>{_e(tip)}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["similarity_svg"]
