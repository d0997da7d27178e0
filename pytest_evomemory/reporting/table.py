"""A table shaped like the Evo-Memory paper's Table 1 (single-turn), from run directories.

Rows are methods (one run each), columns the paper's: AIME-24, AIME-25, GPQA,
MMLU-Pro's Economics / Engineering / Philosophy, ToolBench's API / Acc., and the
average, so a user can paste their method's row next to the paper's. Every cell is
read from the run's ``summary.json`` (through :mod:`.rundata`) and is exactly the
accuracy the run's summary states: a stream's ``accuracy``, an MMLU-Pro category's
``groups[...].accuracy``, ToolBench's ``api`` figure (API: the figure its match mode
declares, read as :mod:`.columns` reads figures) and ``accuracy`` (Acc.); intervals
are the summary's 95 % Wilson intervals.

The average: the paper does not spell it out. Its printed figures fit the mean of
the seven dataset entries with ToolBench counted once, as the mean of API and Acc.
(Gemini 2.5 Flash, ReMem: 0.60, 0.53, 0.51, 0.85, 0.46, 0.79 and (0.85 + 0.71) / 2
average to 0.646, printed 0.65; the mean of all eight columns would be 0.663).
That is the average here, over the entries a run has; a row missing some says so
in the notes, since its average is then not comparable with the paper's.
AIME-25 is a column because the paper has it; the built-in benchmark has no
AIME 2025 stream (a run with a stream named ``aime_2025`` fills it).

A LoCoMo run (docs/locomo.md) has none of these streams and is judged on its mean
F1, not on accuracy: its row shows that figure, summary.json's overall ``headline``
(the mean the gates and ``replicates.json`` read), in a column of its own headed
"LoCoMo mean F1" after the average and never in it, with the summary's interval
(Wilson on the effective number of tasks). The column appears only in a table that has such a row, so an
Evo-Memory table keeps the paper's shape.

Runs on other streams (the bundled sample streams, a user's own): when no run fills
any of the paper's columns, the paper's layout would be a row of dashes, so the
columns are the runs' own streams instead, in the order the runs list them, each
cell the stream's accuracy with the summary's interval, and a last column
"Overall", the run's headline figure over all its tasks; there is no Avg. (an
average over unlike streams means nothing the paper defines). When the paper's streams are there and others too (a
mix), the paper's layout stays and every other stream gets a column of its own
after Avg. (after LoCoMo's), never in the average, so nothing a run scored is
left out. A LoCoMo run's conversations are its LoCoMo column, not columns of
their own. :func:`layout` makes that choice, once, for every format.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.clustered import estimate_arm, z_quantile
from ..analysis.summary import shared_headline
from ..core.errors import WRITE_HINT
from ..evaluation.modes import MATCH_MODES
from ..rundocs import Score
from .columns import headline, number
from .compare import TaskKey, outcomes, values
from .rundata import ReportError, RunData, load_run, load_runs

_DASH = "\u2013"
#: The key prefix of a column of a run's own stream.
_OWN = "stream:"


@dataclass(frozen=True)
class PaperColumn:
    """One column of the paper's table: where its value is in a stream's summary
    metrics, and how the paper heads it. (The per-stream tables' columns are
    :class:`.columns.Column`; this table has runs as rows and the paper's columns.)"""

    key: str
    group: str
    name: str
    stream: str
    #: ``accuracy``, ``figure.<name>`` (a match mode's figure: ``<name>_accuracy``),
    #: ``groups.<category>``, ``headline.<metric>`` (the overall headline figure
    #: when it is that mean: LoCoMo's ``f1_mean``) or ``overall`` (the run's overall
    #: headline figure)
    metric: str

    @property
    def own(self) -> bool:
        """A column of a run's own stream, not one of the paper's (:func:`stream_column`)."""
        return self.key.startswith(_OWN)

    @property
    def csv_name(self) -> str:
        """The CSV header: the key, or a run's own stream by its name."""
        return self.stream if self.own else self.key


COLUMNS: tuple[PaperColumn, ...] = (
    PaperColumn("aime_24", "AIME-24", "", "aime_2024", "accuracy"),
    PaperColumn("aime_25", "AIME-25", "", "aime_2025", "accuracy"),
    PaperColumn("gpqa", "GPQA", "", "gpqa_diamond", "accuracy"),
    PaperColumn("mmlu_pro_eco", "MMLU-Pro", "Eco", "mmlu_pro", "groups.economics"),
    PaperColumn("mmlu_pro_eng", "MMLU-Pro", "Eng", "mmlu_pro", "groups.engineering"),
    PaperColumn("mmlu_pro_philo", "MMLU-Pro", "Philo", "mmlu_pro", "groups.philosophy"),
    PaperColumn("toolbench_api", "ToolBench", "API", "toolbench", "figure.api"),
    PaperColumn("toolbench_acc", "ToolBench", "Acc.", "toolbench", "accuracy"),
)

#: LoCoMo's headline, the overall mean F1: after Avg. and not in it, shown only when
#: some row has it (see the module docstring).
LOCOMO = PaperColumn("locomo_f1", "LoCoMo", "mean F1", "overall", "headline.f1_mean")
EXTRA_COLUMNS: tuple[PaperColumn, ...] = (LOCOMO,)
ALL_COLUMNS: tuple[PaperColumn, ...] = (*COLUMNS, *EXTRA_COLUMNS)

#: The streams the paper's columns read: a run's other streams are columns of their own.
PAPER_STREAMS = frozenset(column.stream for column in COLUMNS)
#: The run's overall headline figure, the last column of a table of the runs' own streams.
OVERALL_COLUMN = PaperColumn("overall", "Overall", "", "overall", "overall")


def stream_column(name: str) -> PaperColumn:
    """The column of a run's own stream ``name`` (not one of the paper's): its accuracy."""
    return PaperColumn(f"{_OWN}{name}", name, "", name, "accuracy")


#: The entries the average is taken over: each column alone, ToolBench's two as one.
AVERAGE_ENTRIES: tuple[tuple[str, ...], ...] = (
    ("aime_24",), ("aime_25",), ("gpqa",), ("mmlu_pro_eco",), ("mmlu_pro_eng",), ("mmlu_pro_philo",),
    ("toolbench_api", "toolbench_acc"),
)


@dataclass(frozen=True)
class Cell:
    value: float | None
    low: float | None = None
    high: float | None = None
    tasks: int | None = None


@dataclass(frozen=True)
class Row:
    method: str
    cells: Mapping[str, Cell]
    average: float | None
    #: How many of the average's entries the run has (7 for the paper's).
    entries: int
    #: Runs averaged into the row: 1, or its replicates (then every value is their
    #: mean, and an interval clustered by task, see :func:`replicate_row`).
    replicates: int = 1
    average_low: float | None = None
    average_high: float | None = None


@dataclass(frozen=True)
class Table:
    rows: Sequence[Row]
    notes: Sequence[str] = field(default_factory=tuple)
    #: The paper's layout: the columns after Avg. that some row fills (:data:`EXTRA_COLUMNS`,
    #: then the runs' other streams). The runs' own streams (``paper`` False): every column.
    extra: Sequence[PaperColumn] = field(default_factory=tuple)
    #: Whether the table has the paper's columns (see :func:`layout`).
    paper: bool = True


def _interval(value: object) -> tuple[float | None, float | None]:
    if isinstance(value, list | tuple) and len(value) == 2:
        return number(value[0]), number(value[1])
    return None, None


def cell(run: RunData, column: PaperColumn) -> Cell:
    """The value the run's summary gives for ``column`` (an empty cell when it has none)."""
    if column.metric.startswith("headline."):
        return _headline_cell(run, column.metric.removeprefix("headline."))
    metrics = run.overall if column.metric == "overall" else run.streams.get(column.stream)
    if metrics is None:
        return Cell(None)
    tasks = metrics.tasks
    if column.metric == "overall":
        metric, _, value = headline(metrics)
        if metric != "accuracy":
            return _headline_cell(run, metric)
        return Cell(value, *_interval(metrics.accuracy_ci), _count(tasks))
    if column.metric.startswith("groups."):
        group = metrics.groups.get(column.metric.removeprefix("groups."))
        if group is None:
            return Cell(None)
        return Cell(number(group.accuracy), *_interval(group.accuracy_ci), _count(group.tasks))
    # a figure is summarised as ``<name>_accuracy`` (summary.StreamMetrics, columns.figure_column)
    if column.metric.startswith("figure."):
        name = column.metric.removeprefix("figure.")
        value, bounds = metrics.figure_value(name, "accuracy"), metrics.figure_value(name, "accuracy_ci")
    else:
        value, bounds = getattr(metrics, column.metric, None), getattr(metrics, f"{column.metric}_ci", None)
    return Cell(number(value), *_interval(bounds), _count(tasks))


def _headline_cell(run: RunData, metric: str) -> Cell:
    """The run's overall headline when it is ``metric`` (LoCoMo's ``f1_mean``), with
    the 95 % interval (Wilson on the effective number of tasks) of summary.json's ``categories.overall``."""
    found, _, value = headline(run.overall)
    if found != metric:
        return Cell(None)
    categories = run.summary.categories
    overall = categories.overall if categories is not None else None
    low, high = (number(overall.ci_low), number(overall.ci_high)) if overall is not None else (None, None)
    return Cell(value, low, high, _count(run.overall.tasks))


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def layout(runs: Sequence[RunData]) -> tuple[bool, tuple[PaperColumn, ...]]:
    """``(paper, columns beyond the paper's)`` for a table of ``runs`` (see the
    module docstring): the paper's layout when some run fills one of its columns,
    with the LoCoMo column when filled and the runs' other streams after it; else
    each of the runs' streams and the overall figure."""
    filled = {column for run in runs for column in ALL_COLUMNS if cell(run, column).value is not None}
    others: list[str] = []
    for run in runs:
        if cell(run, LOCOMO).value is not None:
            continue  # a LoCoMo run's conversations are its LoCoMo column
        others += [name for name in run.streams if name not in PAPER_STREAMS and name not in others]
    if filled:
        return True, (*(c for c in EXTRA_COLUMNS if c in filled), *(stream_column(name) for name in others))
    return False, (*(stream_column(name) for name in others), OVERALL_COLUMN)


def run_row(run: RunData, label: str | None = None, extra: Sequence[PaperColumn] = ()) -> Row:
    """One run's row: its summary's values for the paper's columns and ``extra``,
    and their average (see the module docstring)."""
    cells = {column.key: cell(run, column) for column in (*ALL_COLUMNS, *extra)}
    entries = []
    for keys in AVERAGE_ENTRIES:
        values = [cells[key].value for key in keys]
        present = [value for value in values if value is not None]
        if present:
            entries.append(sum(present) / len(present))
    average = sum(entries) / len(entries) if entries else None
    return Row(run.label if label is None else label, cells, average, len(entries))


def column_scores(run: RunData, column: PaperColumn) -> dict[TaskKey, float]:
    """The run's per-task scores behind ``column``'s cell (1/0, or a task's F1): what
    an interval across replicates is built over (:func:`replicate_row`)."""
    if column.metric.startswith("headline."):
        metric = shared_headline(run.scores)
        return values(run, metric) if metric is not None and metric.name == column.metric.removeprefix("headline.") else {}
    if column.metric == "accuracy":
        return {key: float(outcome) for key, outcome in outcomes(run, column.stream).items()}
    if column.metric == "overall":  # the run's headline over all its tasks: the mean it declares, or 1/0
        metric = shared_headline(run.scores)
        return values(run, metric) if metric is not None else {key: float(o) for key, o in outcomes(run).items()}
    found: dict[TaskKey, float] = {}
    for scored in run.scores:
        if scored.stream != column.stream:
            continue
        key = (column.stream, scored.task_id)
        right = scored.correct and not scored.error
        if column.metric.startswith("groups."):
            if str(scored.group) == column.metric.removeprefix("groups."):
                found[key] = float(right)
        elif column.metric.startswith("figure."):
            found[key] = float(_figure_match(scored, column.metric.removeprefix("figure.")))
    return found


def _figure_match(scored: Score, name: str) -> bool:
    """Whether a scored task has the figure ``name`` (ToolBench's API match); a failed episode has none."""
    mode = scored.match_mode
    if scored.error or mode not in MATCH_MODES:
        return False
    return any(bool(scored.details.get(metric.detail)) for metric in MATCH_MODES.get(mode).metrics if metric.name == name)


@dataclass(frozen=True)
class _Clustered:
    """A replicate row's cell: the estimate and interval, and the standard error the average needs."""

    estimate: float | None
    low: float | None
    high: float | None
    standard_error: float | None


def _clustered(runs: Sequence[RunData], column: PaperColumn) -> _Clustered:
    """The interval of ``column`` over the tasks every replicate scored, each task
    averaged over the replicates (:func:`..analysis.clustered.estimate_arm`)."""
    scores = [column_scores(run, column) for run in runs]
    shared = set(scores[0]).intersection(*scores[1:])
    estimate = estimate_arm([[found[key] for found in scores] for key in scores[0] if key in shared])
    if estimate.variance is None:
        return _Clustered(None, None, None, None)
    return _Clustered(estimate.estimate, estimate.low, estimate.high, estimate.variance.standard_error())


def replicate_row(label: str, runs: Sequence[RunData], extra: Sequence[PaperColumn] = ()) -> Row:
    """A method run several times (independent replicates): each value is the mean of
    the replicates' values, its 95 % interval clustered by task (each task averaged
    over the replicates, Wilson on the effective number of tasks:
    :func:`..analysis.clustered.estimate_arm`); the average's is normal, from its entries'
    standard errors (streams are independent samples of tasks; ToolBench's two
    entries, on the same tasks, add up as if fully correlated). A cell some replicate
    lacks stays empty."""
    rows = [run_row(run, extra=extra) for run in runs]
    if len(rows) == 1:
        return run_row(runs[0], label, extra)
    cells: dict[str, Cell] = {}
    errors: dict[str, float | None] = {}
    for column in (*ALL_COLUMNS, *extra):
        values_ = [row.cells[column.key].value for row in rows]
        tasks = {row.cells[column.key].tasks for row in rows}
        if any(value is None for value in values_):
            cells[column.key] = Cell(None)
            continue
        present = [value for value in values_ if value is not None]
        clustered = _clustered(runs, column)
        errors[column.key] = clustered.standard_error
        # the estimate the interval is of (the mean over the tasks every replicate scored), so the
        # value is always inside its interval; the replicates' own mean where there is none
        value = clustered.estimate if clustered.estimate is not None else sum(present) / len(present)
        cells[column.key] = Cell(value, clustered.low, clustered.high, tasks.pop() if len(tasks) == 1 else None)
    averages = [row.average for row in rows]
    average = sum(a for a in averages if a is not None) / len(averages) if all(a is not None for a in averages) else None
    low, high = _average_interval(average, errors, cells)
    return Row(
        label, cells, average, min(row.entries for row in rows), replicates=len(rows), average_low=low, average_high=high,
    )


def _average_interval(
    average: float | None, errors: Mapping[str, float | None], cells: Mapping[str, Cell]
) -> tuple[float | None, float | None]:
    """average +/- z * sqrt(sum over entries of (se / entries)^2), within [0, 1]."""
    if average is None:
        return None, None
    entries = []
    for keys in AVERAGE_ENTRIES:
        present = [errors.get(key) for key in keys if cells[key].value is not None]
        if not present:
            continue
        if any(error is None for error in present):
            return None, None
        entries.append(sum(error for error in present if error is not None) / len(present))
    if not entries:
        return None, None
    half = z_quantile() * math.sqrt(sum(error * error for error in entries)) / len(entries)
    return max(0.0, average - half), min(1.0, average + half)


def build_table(runs: Sequence[RunData]) -> Table:
    """One row per run."""
    paper, extra = layout(runs)
    return _table([run_row(run, extra=extra) for run in runs], paper, extra)


def build_replicate_table(groups: Sequence[tuple[str, Sequence[RunData]]]) -> Table:
    """One row per method, each the mean over its replicate runs (:func:`replicate_row`)."""
    paper, extra = layout([run for _, runs in groups for run in runs])
    return _table([replicate_row(label, runs, extra) for label, runs in groups], paper, extra)


def _table(rows: Sequence[Row], paper: bool, extra: Sequence[PaperColumn]) -> Table:
    notes = []
    own = [column for column in extra if column.own]
    if paper and own:
        notes.append(
            f"{', '.join(column.group for column in own)}: not streams of the paper's table, each a column of its "
            "own after Avg. and not part of it"
        )
    if LOCOMO in extra:
        notes.append(
            f"{_heading(LOCOMO)}: the run's overall mean F1 over every question (the figure LoCoMo is judged on, "
            "summary.json's overall headline), not an accuracy and not part of Avg."
        )
    for row in rows:
        if row.replicates > 1:
            notes.append(f"{row.method}: the mean of {row.replicates} replicate runs")
        if paper and row.entries and row.entries < len(AVERAGE_ENTRIES):
            missing = [
                " / ".join(_heading(c) for c in COLUMNS if c.key in keys)
                for keys in AVERAGE_ENTRIES
                if all(row.cells[key].value is None for key in keys)
            ]
            notes.append(
                f"{row.method}: the average is over {row.entries} of {len(AVERAGE_ENTRIES)} entries "
                f"(no {', '.join(missing)}), so it is not comparable with the paper's"
            )
    sizes: dict[str, set[int]] = {}
    for row in rows:
        for key, value in row.cells.items():
            if value.tasks is not None:
                sizes.setdefault(key, set()).add(value.tasks)
    for column in (*COLUMNS, *extra):
        if len(sizes.get(column.key, set())) > 1:
            counts = ", ".join(f"{row.method}: {row.cells[column.key].tasks}" for row in rows if row.cells[column.key].tasks)
            notes.append(f"{_heading(column)}: the runs scored different numbers of tasks ({counts})")
    return Table(rows, tuple(notes), tuple(extra), paper)


def _heading(column: PaperColumn) -> str:
    return f"{column.group} {column.name}".strip()


AVERAGE_NOTE = (
    "Avg.: mean of the seven dataset entries, ToolBench counted once as the mean of API and Acc. "
    "(the reading that fits the paper's printed averages); cells are the runs' summary.json accuracies"
)


def _shown(value: float | None, digits: int, dash: str) -> str:
    return dash if value is None else f"{value:.{digits}f}"


def _with_ci(cell_: Cell, digits: int, ci: bool, dash: str) -> str:
    text = _shown(cell_.value, digits, dash)
    if ci and cell_.value is not None and cell_.low is not None and cell_.high is not None:
        text += f" [{cell_.low:.{digits}f}, {cell_.high:.{digits}f}]"
    return text


def _row_cells(table: Table, row: Row) -> list[Cell]:
    """A row's cells in column order, Avg. included where the table has it."""
    if not table.paper:
        return [row.cells[c.key] for c in table.extra]
    return [*(row.cells[c.key] for c in COLUMNS), _average(row), *(row.cells[c.key] for c in table.extra)]


def _headings(table: Table) -> list[str]:
    if not table.paper:
        return [_heading(c) for c in table.extra]
    return [*(_heading(c) for c in COLUMNS), "Avg.", *(_heading(c) for c in table.extra)]


STREAMS_NOTE = (
    "None of the paper's streams ran: the columns are the runs' own streams, each cell the stream's summary.json "
    "accuracy; Overall: the run's figure over all its tasks (its headline: the accuracy, or the mean its match "
    "mode declares); no Avg., as the paper's average is over its own datasets"
)


def _leading_note(table: Table) -> str:
    return AVERAGE_NOTE if table.paper else STREAMS_NOTE


def to_markdown(table: Table, *, ci: bool = False, digits: int = 2) -> str:
    header = ["Method", *(_markdown_text(text) for text in _headings(table))]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":---", *(["---:"] * (len(header) - 1))]) + "|",
    ]
    for row in table.rows:
        cells = [_markdown_text(row.method), *(_with_ci(item, digits, ci, _DASH) for item in _row_cells(table, row))]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [_leading_note(table) + (f"; [low, high]: {_interval_note(table)}" if ci else ""), *table.notes]
    return "\n".join(lines) + "\n\n" + "\n".join(f"* {_markdown_text(note)}" for note in notes) + "\n"


def _average(row: Row) -> Cell:
    """The average as a cell: with its interval for a row of replicates (a single run's
    average, a mean of accuracies over different task sets, has none)."""
    return Cell(row.average, row.average_low, row.average_high)


def _interval_note(table: Table) -> str:
    replicated = {row.replicates > 1 for row in table.rows}
    # a single run's LoCoMo mean F1 carries the summary's interval of a mean, not Wilson's of a share
    locomo = (
        f" ({_heading(LOCOMO)}: 95 % Wilson interval on the effective number of tasks)"
        if LOCOMO in table.extra and any(row.replicates == 1 and row.cells[LOCOMO.key].value is not None for row in table.rows)
        else ""
    )
    average = "; Avg.: normal, from the entries' standard errors" if table.paper else ""
    replicates = (
        "95 % interval clustered by task over the replicate runs (each task averaged over the replicates, Wilson on "
        f"the effective number of tasks{average}; docs/statistics.md)"
    )
    if replicated == {True}:
        return replicates
    if True in replicated:
        return f"95 % Wilson interval for a single run{locomo}; for a method run several times, {replicates}"
    return f"95 % Wilson interval{locomo}"


def _markdown_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text.replace("\n", " "))


def to_latex(table: Table, *, ci: bool = False, digits: int = 2) -> str:
    """A booktabs tabular with the paper's two-level header (MMLU-Pro and ToolBench span)."""
    header = [
        r"Method & AIME-24 & AIME-25 & GPQA & \multicolumn{3}{c}{MMLU-Pro} & \multicolumn{2}{c}{ToolBench} & Avg."
        + "".join(f" & {latex_escape(c.group)}" for c in table.extra) + r" \\",
        r"\cmidrule(lr){5-7}\cmidrule(lr){8-9}",
        r" & & & & Eco & Eng & Philo & API & Acc. &" + "".join(f" & {latex_escape(c.name)}" for c in table.extra)
        + r" \\",
    ] if table.paper else ["Method" + "".join(f" & {latex_escape(text)}" for text in _headings(table)) + r" \\"]
    lines = [
        "% " + latex_escape(_leading_note(table) + (f"; [low, high]: {_interval_note(table)}" if ci else "")),
        *(f"% {latex_escape(note)}" for note in table.notes),
        r"\begin{tabular}{l" + "c" * len(_headings(table)) + "}",
        r"\toprule",
        *header,
        r"\midrule",
    ]
    for row in table.rows:
        cells = [latex_escape(row.method)]
        for item in _row_cells(table, row):
            text = _shown(item.value, digits, "--")
            if ci and item.value is not None and item.low is not None and item.high is not None:
                text += rf" {{\scriptsize [{item.low:.{digits}f}, {item.high:.{digits}f}]}}"
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_csv(table: Table, *, ci: bool = False) -> str:
    """Full precision, empty where a run has no value; ``--ci`` adds low/high columns,
    and a table with replicate rows a ``replicates`` column."""
    header = ["method"]
    names = [c.csv_name for c in COLUMNS] + ["avg"] if table.paper else []
    for name in [*names, *(c.csv_name for c in table.extra)]:
        header += [name, f"{name}_ci_low", f"{name}_ci_high"] if ci else [name]
    replicated = any(row.replicates > 1 for row in table.rows)
    if replicated:
        header.append("replicates")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in table.rows:
        values: list[Any] = [row.method]
        for item in _row_cells(table, row):
            values += [_csv(item.value), _csv(item.low), _csv(item.high)] if ci else [_csv(item.value)]
        if replicated:
            values.append(row.replicates)
        writer.writerow(values)
    return out.getvalue()


def _csv(value: float | None) -> str:
    return "" if value is None else repr(round(value, 6))


FORMATS = ("markdown", "latex", "csv")


def render(table: Table, form: str, *, ci: bool = False, digits: int = 2) -> str:
    if form == "latex":
        return to_latex(table, ci=ci, digits=digits)
    if form == "csv":
        return to_csv(table, ci=ci)
    return to_markdown(table, ci=ci, digits=digits)


def replicate_groups(
    run_dirs: Sequence[Path | str], labels: Sequence[str] | None = None
) -> list[tuple[str, list[RunData]]]:
    """The runs grouped by label (the ``labels`` given, else their run names), in the
    order each label first appears."""
    if labels is not None and len(labels) != len(run_dirs):
        raise ReportError(
            f"{len(labels)} label(s) given for {len(run_dirs)} run directories; give one label per run"
        )
    groups: dict[str, list[RunData]] = {}
    for index, directory in enumerate(run_dirs):
        run = load_run(directory, labels[index] if labels is not None else None)
        groups.setdefault(run.label, []).append(run)
    return list(groups.items())


def write_table(
    run_dirs: Sequence[Path | str],
    output: Path | str | None = None,
    *,
    form: str = "markdown",
    labels: Sequence[str] | None = None,
    ci: bool = False,
    digits: int = 2,
    replicates: bool = False,
) -> str:
    """``evomemory table``: the runs' table as text, written to ``output`` when given
    (:class:`~.rundata.ReportError` for a run that cannot be read or a file that
    cannot be written). ``replicates``: runs with the same label (the ``labels`` given,
    else their run names) are replicates of one method, shown as one row of means."""
    if replicates:
        table = build_replicate_table(replicate_groups(run_dirs, labels))
    else:
        table = build_table(load_runs(run_dirs, labels))
    text = render(table, form, ci=ci, digits=digits)
    if output is not None:
        path = Path(output)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            raise ReportError(f"cannot write {path}: {error.strerror or error}; {WRITE_HINT}") from None
    return text


__all__ = [
    "ALL_COLUMNS",
    "AVERAGE_ENTRIES",
    "COLUMNS",
    "EXTRA_COLUMNS",
    "FORMATS",
    "LOCOMO",
    "OVERALL_COLUMN",
    "PAPER_STREAMS",
    "STREAMS_NOTE",
    "Cell",
    "PaperColumn",
    "Row",
    "Table",
    "build_replicate_table",
    "build_table",
    "latex_escape",
    "layout",
    "render",
    "replicate_groups",
    "replicate_row",
    "run_row",
    "stream_column",
    "to_csv",
    "to_latex",
    "to_markdown",
    "write_table",
]
