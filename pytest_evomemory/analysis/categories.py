"""Mean score per question category, for streams scored on a continuous scale.

LoCoMo reports its token F1 per category (single-hop, multi-hop, temporal,
open-domain, adversarial) and overall; this is that table, computed from the
run's scored items (``scores.jsonl``), each mean with its 95 % interval
(:func:`.clustered.mean_interval`: Wilson on the effective number of tasks), beside the share of answers with F1 >= 0.5 and
the mean evidence recall. A failed episode is a scored item with value 0: it
stays in the denominator, as it does for accuracy. ``summary.json`` carries it
as ``categories`` (:func:`category_table`) when the run's match modes declare a
mean headline figure (:attr:`~pytest_evomemory.evaluation.modes.MatchModeSpec.headline`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..evaluation.modes import Metric
from ..rundocs import Categories, CategoryRow, Score
from ..rundocs.records import as_score
from .clustered import mean_interval

#: Row order by category name: the order of the LoCoMo paper's tables, which is how
#: upstream prints its per-category figures (snap-research/locomo,
#: task_eval/evaluation_stats.py, ``analyze_aggr_acc``: ``keys = [4, 1, 2, 3, 5]``),
#: i.e. the data's categories 4, 1, 2, 3, 5 (docs/locomo.md, "Categories").
_ORDER = {"single-hop": 1, "multi-hop": 2, "temporal": 3, "open-domain": 4, "adversarial": 5}


def _finite(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def score_value(item: Score | Mapping[str, Any], detail: str | None = None) -> float:
    """A scored item's value in [0, 1]: its ``details[detail]`` when given and
    recorded (the mode's declared figure, LoCoMo's ``f1``), else ``value`` when
    recorded, else 1/0 from ``correct``; 0 for a failed episode."""
    scored = as_score(item)
    if scored.error:
        return 0.0
    if detail is not None and (found := _finite(scored.details.get(detail))) is not None:
        return found
    if "value" in scored.model_fields_set and (value := _finite(scored.value)) is not None:
        return value
    return 1.0 if scored.correct else 0.0


def _row(items: list[Score], detail: str | None) -> dict[str, Any]:
    values = [score_value(item, detail) for item in items]
    estimate = mean_interval(values)
    recalls = [
        float(recall) for item in items
        if isinstance(recall := item.details.get("evidence_recall"), int | float) and not isinstance(recall, bool)
    ]
    correct = sum(1 for item in items if not item.error and item.correct)
    return {
        "tasks": len(items),
        "mean": estimate.mean,
        "ci_low": estimate.low,
        "ci_high": estimate.high,
        "correct": correct,
        "accuracy": correct / len(items) if items else None,
        "evidence_recall": sum(recalls) / len(recalls) if recalls else None,
        "evidence_questions": len(recalls),
    }


def category_summary(
    scores: Iterable[Score | Mapping[str, Any]], *, detail: str | None = None
) -> dict[str, Any]:
    """``{"by_category": [row, ...], "overall": row}`` over ``scores``; each category's
    row names it (``category``), in order (JSON writers may sort an object's keys,
    never a list).

    A row: ``tasks``, ``mean`` (mean score, e.g. F1: :func:`score_value`) with
    ``ci_low``/``ci_high`` (95 %, :func:`.clustered.mean_interval`), ``correct`` and
    ``accuracy`` (the items' yes/no outcome, F1 >= 0.5 for LoCoMo), and
    ``evidence_recall`` (mean over the ``evidence_questions`` that report one,
    ``None`` if none). Categories are the scored items' ``group``, in the LoCoMo
    paper's order, other groups after them by name.
    """
    items = [as_score(item) for item in scores]
    groups: dict[str, list[Score]] = {}
    for item in items:
        groups.setdefault(str(item.group), []).append(item)
    ordered = sorted(groups, key=lambda name: (_ORDER.get(name, 99), name))
    return {
        "by_category": [{"category": name, **_row(groups[name], detail)} for name in ordered],
        "overall": _row(items, detail),
    }


def category_table(scores: Iterable[Score], metric: Metric | None) -> Categories | None:
    """``summary.json``'s ``categories``: the headline mean figure (``metric``,
    LoCoMo's F1) per category and overall, or None when the headline is accuracy
    (the per-group accuracy is then the streams' ``groups``)."""
    if metric is None:
        return None
    table = category_summary(scores, detail=metric.detail)
    return Categories(
        metric=metric.name, label=metric.label, by_category=[CategoryRow(**row) for row in table["by_category"]],
        overall=CategoryRow(**table["overall"]),
    )


__all__ = ["category_summary", "category_table", "score_value"]
