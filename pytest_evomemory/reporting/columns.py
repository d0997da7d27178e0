"""The columns of a per-stream table, declared once for the terminal, the HTML pages
and the live progress line.

A column reads a stream's metrics in their summary form (``summary.json``'s
``streams.<name>``, :class:`~pytest_evomemory.rundocs.StreamSummary`) and gives its cell as
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
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from ..rundocs.summary import Categories, CategoryRow, StreamSummary

# summary.json's models are imported where a cell is read: the progress lines use
# this module's number formats from the start of a run, its summary only at the end
Metrics: TypeAlias = "StreamSummary"
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
    found = metrics.headline
    if "headline" in metrics.model_fields_set and found.metric != "accuracy":
        return found.metric, found.label or found.metric, number(found.value)
    return "accuracy", "accuracy", number(metrics.accuracy)


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
    if "total_tokens" in metrics.model_fields_set:
        return metrics.total_tokens
    return metrics.prompt_tokens + metrics.completion_tokens


@dataclass(frozen=True)
class Column:
    header: str
    tooltip: str
    read: Callable[[Metrics], str | None]
    #: where the column is shown
    where: tuple[Where, ...] = ("terminal", "html")
    #: numbers are right-aligned
    numeric: bool = True
    #: the table a page shows the column in (:data:`GROUPS`)
    group: Group = "accuracy"

    def cell(self, metrics: Metrics | Mapping[str, Any]) -> str | None:
        """The column's cell of a stream's metrics (a mapping: as summary.json holds them)."""
        return self.read(as_metrics(metrics))


def as_metrics(metrics: Metrics | Mapping[str, Any]) -> Metrics:
    """A stream's metrics as their model (a mapping is read as summary.json's; a
    comparison's entry holds its figures so too, and null for a count it lacks)."""
    from ..rundocs.summary import StreamSummary

    if isinstance(metrics, StreamSummary):
        return metrics
    return StreamSummary.model_validate({key: value for key, value in metrics.items() if value is not None})


@dataclass(frozen=True)
class CategoryColumn:
    """A column of the per-category table (a row of ``summary.json``'s ``categories``)."""

    header: str
    tooltip: str
    read: Callable[[CategoryRow], str | None]
    numeric: bool = True

    def cell(self, row: CategoryRow | Mapping[str, Any]) -> str | None:
        """The column's cell of ``row`` (a mapping: the row as summary.json holds it)."""
        from ..rundocs.summary import CategoryRow

        return self.read(row if isinstance(row, CategoryRow) else CategoryRow.model_validate(row))


def figures_of(metrics: Metrics) -> dict[str, str]:
    """The figures a stream carries beyond accuracy: name -> label (``api`` -> ``API``).

    Summaries written before figures were declared carry ``api_matches`` alone."""
    if "figures" in metrics.model_fields_set:
        return dict(metrics.figures)
    return {"api": "API"} if number(metrics.figure_value("api", "matches")) is not None else {}


def figure_column(name: str, label: str) -> Column:
    """``API / Acc.``: the figure beside the accuracy, as the paper prints ToolBench's;
    a mean figure (LoCoMo's ``F1 / Acc.``) shows its mean over the tasks."""

    def cell(metrics: Metrics) -> str | None:
        mean = metrics.figure_value(name, "mean")
        share = percent(mean if mean is not None else metrics.figure_value(name, "accuracy"))
        return None if share is None else f"{share} / {percent(metrics.accuracy) or '-'}"

    return Column(
        f"{label} / Acc.", f"share of tasks with the right {label} (or its mean over the tasks), then the accuracy", cell
    )


_HEAD = (
    Column("tasks", "original tasks scored (feedback turns excluded)", lambda m: count(m.tasks)),
    Column("correct", "tasks answered correctly", lambda m: count(m.correct)),
    Column("errors", "episodes that could not complete; counted as wrong", lambda m: count(m.errors)),
    Column("accuracy", "correct / tasks", lambda m: percent(m.accuracy)),
    Column("95% CI", "95 % Wilson score interval of the accuracy, in percent", lambda m: interval(m.accuracy_ci)),
)
_TAIL = (
    Column("stimuli", "task and feedback turns delivered", lambda m: count(m.stimuli), group="work"),
    Column("agent turns", "model turns of the agent, feedback included", lambda m: count(m.agent_turns), group="work"),
    Column("tool calls", "tool calls, feedback included", lambda m: count(m.tool_calls), group="work"),
    Column("retains", "memory writes", lambda m: count(m.memory_retains), group="work"),
    Column("recalls", "memory reads", lambda m: count(m.memory_recalls), group="work"),
    Column("violations", "responses that broke the episode protocol", lambda m: count(m.protocol_violations), group="work"),
    Column(
        "cached", "responses served from the response cache (their time is not the model's)",
        lambda m: count(m.cached_responses), group="work",
    ),
    Column("tokens", "prompt + completion tokens", lambda m: count(tokens(m)), group="cost"),
    Column("tokens / stimulus", "per-stimulus efficiency", lambda m: decimal(m.per_stimulus.tokens, 1), ("html",), group="cost"),
    Column("turns / stimulus", "per-stimulus efficiency", lambda m: decimal(m.per_stimulus.agent_turns, 2), ("html",), group="cost"),
    Column(
        "time / stimulus", "per-stimulus efficiency (wall time of the agent)",
        lambda m: seconds(m.per_stimulus.seconds), ("html",), group="cost",
    ),
)


#: What the stream's responses cost (``model.pricing``, :mod:`pytest_evomemory.config.pricing`);
#: shown only for runs whose model is priced, as an unpriced run's cost is unknown, not 0.
COST = Column(
    "cost", "US dollars the model's responses cost (model.pricing), feedback turns included",
    lambda m: dollars(m.cost_usd),
)


#: Retains a memory library stored nothing for (its own extraction kept nothing: Mem0
#: or LangMem with ``infer: true``, docs/memory.md "When a library stores nothing");
#: shown only where a stream counts some, on the page beside the retains.
UNSTORED = Column(
    "stored nothing", "retains the memory stored nothing for: its own extraction kept nothing from the text",
    lambda m: count(m.memory_unstored), ("html",), group="work",
)


def priced(streams: Sequence[Metrics]) -> bool:
    """Whether any of ``streams`` carries a cost (its model has prices)."""
    return any(number(metrics.cost_usd) is not None for metrics in streams)


def stream_columns(given: Sequence[Metrics | Mapping[str, Any]], where: Where) -> list[Column]:
    """The per-stream table's columns for ``where``; a figure's column appears only
    when one of ``streams`` carries it, the cost only when one is priced."""
    streams = [as_metrics(metrics) for metrics in given]
    figures: dict[str, str] = {}
    for metrics in streams:
        figures.update(figures_of(metrics))
    columns = [
        *_HEAD, *(figure_column(name, label) for name, label in figures.items()), *_TAIL,
        *((UNSTORED,) if any(metrics.memory_unstored for metrics in streams) else ()),
        *((COST,) if priced(streams) else ()),
    ]
    return [column for column in columns if where in column.where]


def category_columns(label: str) -> list[CategoryColumn]:
    """The per-category table's columns (``summary.json``'s ``categories`` rows: the
    headline mean figure ``label``, LoCoMo's F1, per question category), for the
    terminal and the page alike."""
    return [
        CategoryColumn("questions", "questions of the category scored; a failed episode counts 0", lambda r: count(r.tasks)),
        CategoryColumn(f"mean {label}", f"mean {label} over the questions (the figure the benchmark reports)",
               lambda r: percent(r.mean)),
        CategoryColumn("95% CI", f"95 % Wilson interval of the mean {label} on the effective number of tasks, in percent",
               lambda r: interval([r.ci_low, r.ci_high])),
        CategoryColumn("Acc.", "share of questions the match mode counts correct (LoCoMo: F1 >= 0.5)",
               lambda r: percent(r.accuracy)),
        CategoryColumn("evidence recall", "mean share of a question's evidence turns among the records recalled for it",
               lambda r: percent(r.evidence_recall)),
        CategoryColumn("with evidence", "questions that report an evidence recall (none for an arm without memory)",
               lambda r: count(r.evidence_questions)),
    ]


def category_rows(categories: Categories | None) -> tuple[str, list[tuple[str, CategoryRow]], CategoryRow] | None:
    """``(label, [(category, row), ...], overall row)`` of a summary's ``categories``,
    or None when it has none (an accuracy headline, or a summary written before)."""
    if categories is None:
        return None
    rows = [(str(row.category), row) for row in categories.by_category]
    return categories.label or "score", rows, categories.overall


def grouped(columns: Sequence[Column]) -> list[tuple[Group, str, list[Column]]]:
    """``columns`` as the tables a page shows: (group, caption, its columns), in
    :data:`GROUPS` order, groups without a column left out."""
    tables = [(group, caption, [column for column in columns if column.group == group]) for group, caption in GROUPS.items()]
    return [table for table in tables if table[2]]


__all__ = [
    "COST",
    "GROUPS",
    "UNSTORED",
    "CategoryColumn",
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
