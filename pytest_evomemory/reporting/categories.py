"""Mean score per question category, for streams scored on a continuous scale.

LoCoMo reports its token F1 per category (multi-hop, temporal, open-domain,
single-hop, adversarial) and overall; this is that table, computed from the
run's scored items (``scores.jsonl``), each mean with its bootstrap interval
(:func:`.stats.mean_interval`), beside the share of answers with F1 >= 0.5 and
the mean evidence recall. A failed episode is a scored item with value 0: it
stays in the denominator, as it does for accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .stats import mean_interval

#: Category numbers by name (LoCoMo's), for ordering rows as the data numbers them.
_ORDER = {"multi-hop": 1, "temporal": 2, "open-domain": 3, "single-hop": 4, "adversarial": 5}


def score_value(scored: Mapping[str, Any]) -> float:
    """A scored item's value in [0, 1]: ``value`` when recorded, else 1/0 from
    ``correct``; 0 for a failed episode."""
    if scored.get("error"):
        return 0.0
    value = scored.get("value")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return 1.0 if scored.get("correct") else 0.0


def _row(items: list[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    values = [score_value(item) for item in items]
    estimate = mean_interval(values, seed=seed)
    recalls = [
        float(recall) for item in items
        if isinstance(item.get("details"), Mapping)
        and isinstance(recall := item["details"].get("evidence_recall"), int | float)
        and not isinstance(recall, bool)
    ]
    correct = sum(1 for item in items if not item.get("error") and item.get("correct"))
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


def category_summary(scores: Iterable[Mapping[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """``{"categories": {name: row, ...}, "overall": row}`` over ``scores``.

    A row: ``tasks``, ``mean`` (mean score, e.g. F1) with ``ci_low``/``ci_high``,
    ``correct`` and ``accuracy`` (score >= the mode's yes/no cut), and
    ``evidence_recall`` (mean over the questions that report one, ``None`` if none).
    Categories are the scored items' ``group``, in LoCoMo's numbering order, other
    groups after them by name.
    """
    items = list(scores)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        groups.setdefault(str(item.get("group")), []).append(item)
    ordered = sorted(groups, key=lambda name: (_ORDER.get(name, 99), name))
    return {
        "categories": {name: _row(groups[name], seed) for name in ordered},
        "overall": _row(items, seed) if items else _row([], seed),
    }


__all__ = ["category_summary", "score_value"]
