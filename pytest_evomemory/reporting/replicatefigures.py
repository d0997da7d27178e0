"""The figures of ``replicates.html``: learning curves across replicates and the
forest plot of gains, as HTML (inline SVG) for :func:`.html.render_replicates`.

Learning curves: per stream, each arm's cumulative accuracy at each task position
averaged over its replicates (the line), with the band from the lowest to the
highest replicate at that position (with a handful of replicates, a
per-position interval would rest on two to five values; the range shows them as
they are). Replicates in shuffled orders put different tasks at one position: the
mean curve is then the expected curve over orders, which is what a reader wants
from seeds. The per-position data come from the replicate runs themselves
(summary.json's ``learning_curve``), not from ``replicates.json``.

Forest plot: each later arm's gain over the baseline per stream and overall, read
from ``replicates.json``'s ``vs_baseline``, read as its model (:class:`~..rundocs.Replicates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..rundocs.compare import DifferenceScope, Replicates, as_replicates
from ._markup import _e
from .chart import Series, curve_svg
from .columns import number
from .compare import OVERALL
from .forest import Gain, forest_svg
from .rundata import RunData

#: replicates.json's ``methods`` key naming the gain interval's method
DIFFERENCE_CI = "difference_ci"

# --------------------------------------------------------------------------- replicates.json readers


def arm_labels(document: Replicates) -> list[str]:
    """The arms in order, the baseline first."""
    return [str(arm.label) for arm in document.arms]


def gain_of(scope: DifferenceScope) -> tuple[float | None, float | None, float | None]:
    """(gain, interval low, interval high) of one ``vs_baseline`` scope, as fractions."""
    return number(scope.mean), number(scope.ci_low), number(scope.ci_high)


def interval_method(document: Replicates) -> str:
    """How the gain's interval was computed, in the document's own words."""
    found = document.methods.get(DIFFERENCE_CI)
    return str(found) if found else "95 % interval of the mean difference"


def gains(given: Replicates | Mapping[str, Any]) -> list[Gain]:
    """Every later arm's gain per stream (in the arms' stream order), then overall."""
    document = as_replicates(given)
    labels = arm_labels(document)
    streams: list[str] = []
    for entry in document.vs_baseline:
        streams += [str(name) for name in entry.streams if str(name) not in streams]
    rows = []
    for scope in [*streams, OVERALL]:
        for entry in document.vs_baseline:
            label = str(entry.label)
            found = entry.scope(scope)
            if found is None:
                continue
            index = labels.index(label) if label in labels else len(labels)
            rows.append(Gain(scope, label, index, *gain_of(found)))
    return rows


# --------------------------------------------------------------------------- curves across replicates


@dataclass(frozen=True)
class Band:
    """An arm's curve on one stream across its replicates: the mean at each position
    and the lowest and highest replicate there, over the positions every replicate
    reached (``shortest`` to ``longest`` tasks ran)."""

    mean: Sequence[float]
    low: Sequence[float]
    high: Sequence[float]
    replicates: int
    shortest: int
    longest: int


def _curve(run: RunData, stream: str) -> list[float] | None:
    metrics = run.streams.get(stream)
    if metrics is None:
        return None
    found = [number(value) for value in metrics.learning_curve]
    return [min(1.0, max(0.0, value)) for value in found if value is not None]


def band(runs: Sequence[RunData], stream: str) -> Band | None:
    """The arm's :class:`Band` on ``stream``, or None when no replicate has a curve there."""
    curves = [curve for curve in (_curve(run, stream) for run in runs) if curve is not None]
    if not curves:
        return None
    shortest, longest = min(map(len, curves)), max(map(len, curves))
    columns = [[curve[position] for curve in curves] for position in range(shortest)]
    return Band(
        [sum(column) / len(column) for column in columns],
        [min(column) for column in columns],
        [max(column) for column in columns],
        len(curves), shortest, longest,
    )


def _stream_names(groups: Sequence[tuple[str, Sequence[RunData]]]) -> list[str]:
    names: list[str] = []
    for _, runs in groups:
        for run in runs:
            names += [name for name in run.streams if name not in names]
    return names


def curve_figures(groups: Sequence[tuple[str, Sequence[RunData]]]) -> str:
    """One figure per stream: every arm's mean learning curve with its band."""
    figures, notes = [], []
    for stream in _stream_names(groups):
        series = []
        for label, runs in groups:
            found = band(runs, stream)
            if found is None:
                continue
            banded = found.replicates > 1
            series.append(Series(label, found.mean, found.low if banded else None, found.high if banded else None))
            if found.shortest != found.longest:
                notes.append(
                    f"{label} on {stream}: its replicates ran {found.shortest} to {found.longest} tasks; "
                    f"the curve stops at {found.shortest}, where every replicate has a value"
                )
        svg = curve_svg(stream, series, y_label="mean cumulative accuracy")
        figures.append(f"<figure><figcaption>{_e(stream)}</figcaption>{svg}</figure>")
    if not figures:
        return '<p class="meta">No replicate run recorded a learning curve.</p>'
    shown = "".join(f"<li>{_e(note)}</li>" for note in notes)
    return (
        '<p class="meta">Line: the cumulative accuracy after each task of the stream, averaged over the arm\'s '
        "replicates (position by position; with shuffled orders each replicate has other tasks at a position). "
        "Shaded band: the lowest to the highest replicate at that position, not a confidence interval. "
        "The legend gives the mean's final value; \u201c= other\u201d marks a curve identical to another "
        "arm's, drawn with its markers shifted so both stay visible.</p>"
        f'<div class="plots">{"".join(figures)}</div>' + (f'<ul class="meta">{shown}</ul>' if shown else "")
    )


def forest_figure(given: Replicates | Mapping[str, Any]) -> str:
    """The forest plot of every later arm's gain over the baseline, with its caption."""
    document = as_replicates(given)
    rows = gains(document)
    if not rows:
        return '<p class="meta">One arm only: there is no gain over a baseline to show.</p>'
    baseline = str(document.baseline or (arm_labels(document) or ["the baseline"])[0])
    svg = forest_svg(rows, baseline=baseline)
    return (
        f"<figure><figcaption>Gain of each arm over {_e(baseline)}, per stream and overall</figcaption>{svg}</figure>"
        f'<p class="meta">Each row: the arm\'s mean gain over the baseline in percentage points (marker) and its '
        f"95 % interval (whisker): {_e(interval_method(document))}. The vertical line is no gain; an interval "
        "crossing it does not exclude zero.</p>"
    )


def replicate_figures(document: Replicates | Mapping[str, Any], groups: Sequence[tuple[str, Sequence[RunData]]]) -> str:
    """Both figures' sections, for :func:`.html.render_replicates`."""
    return (
        "<h2>Gain over the baseline</h2>" + forest_figure(document)
        + "<h2>Learning curves across replicates</h2>" + curve_figures(groups)
    )


__all__ = [
    "Band", "arm_labels", "band", "curve_figures", "forest_figure", "gain_of", "gains", "interval_method",
    "replicate_figures",
]
