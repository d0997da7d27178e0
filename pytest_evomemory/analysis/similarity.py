"""How the gain from memory tracks how similar a task is to what the agent recalled.

The paper reports that memory helps most where the tasks resemble what was
retrieved (a positive correlation between task similarity and the gain, per model).
Here, per task, the similarity is measured between the task's prompt and what the
agent's recalls returned in the task turn, and per stream it is correlated with the
memory arm's gain over the control arm on the same task (paired by task id).

Why lexical: a hit's ``score`` is backend-specific (BM25, fused ranks, cosines of
one encoder or another), so it cannot be compared across memory systems. The
similarity here is the bag-of-words cosine of :func:`pytest_evomemory.util.text.similarity`
(content words, stop words dropped, light stemming): backend-independent, cheap,
needing no model, and the same for every run on every machine. A task's similarity
is the largest over its recalled records (0.0 when its recalls returned nothing;
``None``, and left out of the correlation, when the task turn made no recall).

Per stream and memory arm (every run after the comparison's first, the control):
the Pearson correlation between similarity and gain (gain = memory correct minus
control correct: -1, 0 or +1), its 95 % interval by Fisher's z transform, Spearman's
rank correlation, and the mean gain in five similarity bins (for the plot).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Protocol

from ..rundocs import Score
from ..rundocs.compare import Similarity, SimilarityBin, SimilarityEntry, SimilarityPoint
from .recall import recall_similarity
from .stats import Z95, average_ranks


class ScoredRun(Protocol):
    """What the analysis reads of a finished run: its label and its scores (a run
    loaded from its directory, :class:`..reporting.rundata.RunData`, has both). A
    protocol, so this layer does not import the code that reads run directories."""

    @property
    def label(self) -> str: ...

    @property
    def scores(self) -> Sequence[Score]: ...

#: The key a task's similarity is recorded under in its scored record (scores.jsonl).
SIMILARITY_KEY = "recall_similarity"

#: Similarity bins of the plot and of ``bins`` in compare.json: [0, .2), ..., [.8, 1].
BIN_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)

METHOD = (
    "lexical bag-of-words cosine (pytest_evomemory.util.text.similarity) between the task prompt and each "
    "record its task turn recalled, the largest per task; gain = memory correct - control correct, "
    "paired by task"
)


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None for fewer than 3 pairs or a constant variable."""
    n = len(xs)
    if n < 3 or n != len(ys):
        return None
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    syy = sum((y - mean_y) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def fisher_interval(r: float | None, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95 % interval of a correlation by Fisher's z transform (needs n > 3, |r| < 1).

    None at |r| = 1 (a few points on a line): the transform is infinite there, and
    the interval it gives, [r, r], would claim a certainty no sample has. Its
    coverage on gains of -1, 0, +1 against a similarity is checked by simulation
    (tests/reporting/test_similarity.py: 95-97 % on 6 to 100 tasks)."""
    if r is None or n <= 3 or abs(r) >= 1.0:
        return None
    centre, half = math.atanh(r), z / math.sqrt(n - 3)
    return math.tanh(centre - half), math.tanh(centre + half)


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their average rank (Spearman's rho ranks so)."""
    return average_ranks(values)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    return pearson(ranks(xs), ranks(ys))


def paired_points(control: ScoredRun, memory: ScoredRun, stream: str) -> tuple[list[SimilarityPoint], int]:
    """``(points, left_out)``: per task both runs scored, its similarity (from the
    memory run) and gain; tasks whose similarity is unknown are counted, not plotted."""
    base = {s.task_id: s for s in control.scores if s.stream == stream}
    points: list[SimilarityPoint] = []
    left_out = 0
    for scored in memory.scores:
        if scored.stream != stream or scored.task_id not in base:
            continue
        value = scored.recall_similarity
        if value is None:
            left_out += 1
            continue
        other = base[scored.task_id]
        gain = _solved(scored) - _solved(other)
        points.append(SimilarityPoint(task_id=scored.task_id, similarity=float(value), gain=gain))
    return points, left_out


def _solved(scored: Score) -> int:
    return int(scored.correct and not scored.error)


def analyse(points: Sequence[SimilarityPoint], left_out: int = 0, label: str = "") -> SimilarityEntry:
    """The correlation summary of one stream's points (see the module docstring),
    with the points, for the run ``label``."""
    xs = [float(p.similarity) for p in points]
    ys = [float(p.gain) for p in points]
    r = pearson(xs, ys)
    interval = fisher_interval(r, len(xs))
    bins = []
    for low, high in itertools.pairwise(BIN_EDGES):
        inside = [y for x, y in zip(xs, ys, strict=True) if low <= x < high or (high == BIN_EDGES[-1] and x == high)]
        bins.append(SimilarityBin(
            low=low, high=high, tasks=len(inside), mean_gain=sum(inside) / len(inside) if inside else None,
        ))
    return SimilarityEntry(
        label=label,
        tasks=len(xs),
        tasks_without_similarity=left_out,
        mean_similarity=sum(xs) / len(xs) if xs else None,
        mean_gain=sum(ys) / len(ys) if ys else None,
        pearson_r=r,
        pearson_ci_low=None if interval is None else interval[0],
        pearson_ci_high=None if interval is None else interval[1],
        spearman_rho=spearman(xs, ys),
        bins=bins,
        points=list(points),
    )


def similarity_analysis(runs: Sequence[ScoredRun], streams: Sequence[str]) -> Similarity:
    """compare.json's ``similarity``: per stream, per run after the first (the control),
    the correlation summary and the points."""
    per_stream: dict[str, list[SimilarityEntry]] = {}
    control = runs[0]
    for stream in streams:
        entries = []
        for run in runs[1:]:
            points, left_out = paired_points(control, run, stream)
            entries.append(analyse(points, left_out, run.label))
        per_stream[stream] = entries
    return Similarity(control=control.label, method=METHOD, streams=per_stream)


__all__ = [
    "BIN_EDGES",
    "SIMILARITY_KEY",
    "ScoredRun",
    "analyse",
    "fisher_interval",
    "paired_points",
    "pearson",
    "ranks",
    "recall_similarity",
    "similarity_analysis",
    "spearman",
]
