"""The columns of a per-stream table, declared once for the terminal, the HTML pages
and the live progress line.

A column reads a stream's metrics in their summary form (``summary.json``'s
``streams.<name>``, :meth:`~.summary.StreamMetrics.to_dict`) and gives its cell as
text, or ``None`` where the stream has no value (each renderer shows its own
blank: ``-`` on the terminal, an en dash on a page). Adding a figure to the
reports is one :class:`Column` here. Figures a match mode declares (ToolBench's
"API", :class:`~pytest_evomemory.evaluation.modes.Metric`) get a column of their
own wherever a stream carries them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Metrics = Mapping[str, Any]
Where = Literal["terminal", "html"]
Group = Literal["accuracy", "work", "cost"]

#: The groups a page shows as tables of their own, each narrow enough for an
#: 800 px window (the terminal shows every column in one table): key -> caption.
GROUPS: dict[Group, str] = {"accuracy": "Accuracy", "work": "Work done", "cost": "Cost"}


def number(value: object) -> float | None:
    """A finite number read from an artefact, or None (a damaged value is no value)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def headline(metrics: Metrics) -> tuple[str, str, float | None]:
    """``(metric, label, value)`` of the figure a summary row (a stream's, or
    ``overall``) is judged on, as summary.json's ``headline`` records it:
    ``("f1_mean", "mean F1", 0.41)`` for LoCoMo, else ``("accuracy", "accuracy", 0.6)``
    (also for a summary written before headlines were recorded). The one reader of
    that field for the reports that compare runs (replicates, ``evomemory table``)."""
    found = metrics.get("headline")
    if isinstance(found, Mapping) and found.get("metric") not in (None, "accuracy"):
        metric = str(found.get("metric"))
        return metric, str(found.get("label") or metric), number(found.get("value"))
    return "accuracy", "accuracy", number(metrics.get("accuracy"))


def count(value: object) -> str | None:
    found = number(value)
    return None if found is None else f"{int(found):,}"


def percent(value: object) -> str | None:
    found = number(value)
    return None if found is None else f"{found:.1%}"


def interval(value: object) -> str | None:
    """``[31.9, 80.7]``: a 95 % interval stored as fractions, shown in percent."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    low, high = number(value[0]), number(value[1])
    return None if low is None or high is None else f"[{low * 100:.1f}, {high * 100:.1f}]"


def decimal(value: object, digits: int = 2) -> str | None:
    found = number(value)
    return None if found is None else f"{found:,.{digits}f}"


def seconds(value: object) -> str | None:
    found = number(value)
    if found is None:
        return None
    return f"{found * 1000:.2f} ms" if found < 1 else f"{found:.2f} s"


def dollars(value: object) -> str | None:
    """``$0.0123``: a cost in US dollars (four decimals: a task on a small model costs
    fractions of a cent)."""
    found = number(value)
    return None if found is None else f"${found:,.4f}"


def tokens(metrics: Metrics) -> object:
    total = metrics.get("total_tokens")
    if total is None:
        prompt, completion = number(metrics.get("prompt_tokens")), number(metrics.get("completion_tokens"))
        total = None if prompt is None or completion is None else prompt + completion
    return total


def _per(metrics: Metrics) -> Metrics:
    per = metrics.get("per_stimulus")
    return per if isinstance(per, Mapping) else {}


@dataclass(frozen=True)
class Column:
    header: str
    tooltip: str
    cell: Callable[[Metrics], str | None]
    #: where the column is shown
    where: tuple[Where, ...] = ("terminal", "html")
    #: numbers are right-aligned
    numeric: bool = True
    #: the table a page shows the column in (:data:`GROUPS`)
    group: Group = "accuracy"


def figures_of(metrics: Metrics) -> dict[str, str]:
    """The figures a stream carries beyond accuracy: name -> label (``api`` -> ``API``).

    Summaries written before figures were declared carry ``api_matches`` alone."""
    declared = metrics.get("figures")
    if isinstance(declared, Mapping):
        return {str(name): str(label) for name, label in declared.items()}
    return {"api": "API"} if number(metrics.get("api_matches")) is not None else {}


def figure_column(name: str, label: str) -> Column:
    """``API / Acc.``: the figure beside the accuracy, as the paper prints ToolBench's;
    a mean figure (LoCoMo's ``F1 / Acc.``) shows its mean over the tasks."""

    def cell(metrics: Metrics) -> str | None:
        mean = metrics.get(f"{name}_mean")
        share = percent(mean if mean is not None else metrics.get(f"{name}_accuracy"))
        return None if share is None else f"{share} / {percent(metrics.get('accuracy')) or '-'}"

    return Column(
        f"{label} / Acc.", f"share of tasks with the right {label} (or its mean over the tasks), then the accuracy", cell
    )


_HEAD = (
    Column("tasks", "original tasks scored (feedback turns excluded)", lambda m: count(m.get("tasks"))),
    Column("correct", "tasks answered correctly", lambda m: count(m.get("correct"))),
    Column("errors", "episodes that could not complete; counted as wrong", lambda m: count(m.get("errors"))),
    Column("accuracy", "correct / tasks", lambda m: percent(m.get("accuracy"))),
    Column("95% CI", "95 % Wilson score interval of the accuracy, in percent", lambda m: interval(m.get("accuracy_ci"))),
)
_TAIL = (
    Column("stimuli", "task and feedback turns delivered", lambda m: count(m.get("stimuli")), group="work"),
    Column("agent turns", "model turns of the agent, feedback included", lambda m: count(m.get("agent_turns")), group="work"),
    Column("tool calls", "tool calls, feedback included", lambda m: count(m.get("tool_calls")), group="work"),
    Column("retains", "memory writes", lambda m: count(m.get("memory_retains")), group="work"),
    Column("recalls", "memory reads", lambda m: count(m.get("memory_recalls")), group="work"),
    Column("violations", "responses that broke the episode protocol", lambda m: count(m.get("protocol_violations")), group="work"),
    Column(
        "cached", "responses served from the response cache (their time is not the model's)",
        lambda m: count(m.get("cached_responses")), group="work",
    ),
    Column("tokens", "prompt + completion tokens", lambda m: count(tokens(m)), group="cost"),
    Column("tokens / stimulus", "per-stimulus efficiency", lambda m: decimal(_per(m).get("tokens"), 1), ("html",), group="cost"),
    Column("turns / stimulus", "per-stimulus efficiency", lambda m: decimal(_per(m).get("agent_turns"), 2), ("html",), group="cost"),
    Column(
        "time / stimulus", "per-stimulus efficiency (wall time of the agent)",
        lambda m: seconds(_per(m).get("seconds")), ("html",), group="cost",
    ),
)


#: What the stream's responses cost (``model.pricing``, :mod:`pytest_evomemory.pricing`);
#: shown only for runs whose model is priced, as an unpriced run's cost is unknown, not 0.
COST = Column(
    "cost", "US dollars the model's responses cost (model.pricing), feedback turns included",
    lambda m: dollars(m.get("cost_usd")),
)


def priced(streams: Sequence[Metrics]) -> bool:
    """Whether any of ``streams`` carries a cost (its model has prices)."""
    return any(number(metrics.get("cost_usd")) is not None for metrics in streams)


def stream_columns(streams: Sequence[Metrics], where: Where) -> list[Column]:
    """The per-stream table's columns for ``where``; a figure's column appears only
    when one of ``streams`` carries it, the cost only when one is priced."""
    figures: dict[str, str] = {}
    for metrics in streams:
        figures.update(figures_of(metrics))
    columns = [
        *_HEAD, *(figure_column(name, label) for name, label in figures.items()), *_TAIL,
        *((COST,) if priced(streams) else ()),
    ]
    return [column for column in columns if where in column.where]


def category_columns(label: str) -> list[Column]:
    """The per-category table's columns (``summary.json``'s ``categories`` rows: the
    headline mean figure ``label``, LoCoMo's F1, per question category), for the
    terminal and the page alike."""
    return [
        Column("questions", "questions of the category scored; a failed episode counts 0", lambda r: count(r.get("tasks"))),
        Column(f"mean {label}", f"mean {label} over the questions (the figure the benchmark reports)",
               lambda r: percent(r.get("mean"))),
        Column("95% CI", f"95 % percentile bootstrap interval of the mean {label}, in percent",
               lambda r: interval([r.get("ci_low"), r.get("ci_high")])),
        Column("Acc.", "share of questions the match mode counts correct (LoCoMo: F1 >= 0.5)",
               lambda r: percent(r.get("accuracy"))),
        Column("evidence recall", "mean share of a question's evidence turns among the records recalled for it",
               lambda r: percent(r.get("evidence_recall"))),
        Column("with evidence", "questions that report an evidence recall (none for an arm without memory)",
               lambda r: count(r.get("evidence_questions"))),
    ]


def category_rows(categories: object) -> tuple[str, list[tuple[str, Metrics]], Metrics] | None:
    """``(label, [(category, row), ...], overall row)`` of a summary's ``categories``,
    or None when it has none (an accuracy headline, or a summary written before)."""
    if not isinstance(categories, Mapping):
        return None
    by_category, overall = categories.get("by_category"), categories.get("overall")
    if not isinstance(by_category, list) or not isinstance(overall, Mapping):
        return None
    rows = [(str(row.get("category")), row) for row in by_category if isinstance(row, Mapping)]
    return str(categories.get("label") or "score"), rows, overall


def grouped(columns: Sequence[Column]) -> list[tuple[Group, str, list[Column]]]:
    """``columns`` as the tables a page shows: (group, caption, its columns), in
    :data:`GROUPS` order, groups without a column left out."""
    tables = [(group, caption, [column for column in columns if column.group == group]) for group, caption in GROUPS.items()]
    return [table for table in tables if table[2]]


__all__ = [
    "COST",
    "GROUPS",
    "Column",
    "Group",
    "category_columns",
    "category_rows",
    "count",
    "decimal",
    "dollars",
    "figure_column",
    "figures_of",
    "grouped",
    "headline",
    "interval",
    "number",
    "percent",
    "priced",
    "seconds",
    "stream_columns",
    "tokens",
]
