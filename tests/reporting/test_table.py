"""``evomemory table``: a table shaped like the paper's Table 1 whose cells equal the
runs' summaries, in Markdown, LaTeX and CSV, with intervals on request."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.stats import wilson_interval
from pytest_evomemory.cli import main
from pytest_evomemory.reporting.rundata import load_runs
from pytest_evomemory.reporting.table import (
    COLUMNS,
    build_replicate_table,
    build_table,
    latex_escape,
    replicate_groups,
    to_csv,
    to_latex,
    to_markdown,
)

OUTCOMES = {
    "aime_2024": [True, False, False, True, False],
    "gpqa_diamond": [True, True, False, False],
    "mmlu_pro": [True, False, True, True, False, True],
    "toolbench": [True, False, False, True],
}


def paper_run(make_run: Callable[..., Path], name: str, outcomes: dict[str, list[bool]], api: list[bool]) -> Path:
    """A run over the four streams, with MMLU-Pro categories and ToolBench's API figure
    in its summary as summary.py writes them."""
    directory = make_run(name, outcomes)
    summary = json.loads((directory / "summary.json").read_text())
    if "mmlu_pro" in outcomes:
        mmlu = outcomes["mmlu_pro"]
        categories = {"economics": mmlu[0:2], "engineering": mmlu[2:4], "philosophy": mmlu[4:6]}
        summary["streams"]["mmlu_pro"]["groups"] = {
            name: {"tasks": len(o), "correct": sum(o), "accuracy": sum(o) / len(o),
                   "accuracy_ci": list(wilson_interval(sum(o), len(o)))}
            for name, o in categories.items()
        }
    if "toolbench" in outcomes:
        tools = summary["streams"]["toolbench"]
        tools["figures"] = {"api": "API"}
        tools["api_matches"] = sum(api)
        tools["api_accuracy"] = sum(api) / len(api)
        tools["api_accuracy_ci"] = list(wilson_interval(sum(api), len(api)))
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def summary_value(directory: Path, stream: str, metric: str) -> float:
    metrics: dict[str, Any] = json.loads((directory / "summary.json").read_text())["streams"][stream]
    if metric.startswith("groups."):
        return float(metrics["groups"][metric.removeprefix("groups.")]["accuracy"])
    if metric.startswith("figure."):  # ToolBench's API: the figure's <name>_accuracy
        return float(metrics[f"{metric.removeprefix('figure.')}_accuracy"])
    return float(metrics[metric])


def test_cells_equal_the_summaries_and_the_average_counts_toolbench_once(make_run: Callable[..., Path]) -> None:
    first = paper_run(make_run, "exprag", OUTCOMES, api=[True, True, False, True])
    second = paper_run(make_run, "baseline", {k: [not o for o in v] for k, v in OUTCOMES.items()}, api=[False] * 4)
    table = build_table(load_runs([first, second]))
    for row, directory in zip(table.rows, (first, second), strict=True):
        for column in COLUMNS:
            if column.stream == "aime_2025":
                assert row.cells[column.key].value is None
                continue
            assert row.cells[column.key].value == summary_value(directory, column.stream, column.metric)
        values = {key: cell.value for key, cell in row.cells.items()}
        toolbench = (values["toolbench_api"] + values["toolbench_acc"]) / 2  # type: ignore[operator]
        six = [values[k] for k in ("aime_24", "gpqa", "mmlu_pro_eco", "mmlu_pro_eng", "mmlu_pro_philo")]
        assert row.average == pytest.approx((sum(six) + toolbench) / 6)  # type: ignore[arg-type]
        assert row.entries == 6
    # exprag by hand: 2/5, 2/4, (1/2, 2/2, 1/2), (3/4 API, 2/4 Acc.)
    assert table.rows[0].average == pytest.approx((0.4 + 0.5 + 0.5 + 1.0 + 0.5 + 0.625) / 6)
    assert any("6 of 7 entries (no AIME-25)" in note for note in table.notes)


def test_markdown_latex_and_csv_show_the_same_numbers(make_run: Callable[..., Path]) -> None:
    run = paper_run(make_run, "my_memory", OUTCOMES, api=[True, True, False, True])
    table = build_table(load_runs([run]))
    markdown = to_markdown(table)
    assert markdown.splitlines()[0] == (
        "| Method | AIME-24 | AIME-25 | GPQA | MMLU-Pro Eco | MMLU-Pro Eng | MMLU-Pro Philo | "
        "ToolBench API | ToolBench Acc. | Avg. |"
    )
    assert markdown.splitlines()[2] == "| my_memory | 0.40 | \u2013 | 0.50 | 0.50 | 1.00 | 0.50 | 0.75 | 0.50 | 0.59 |"
    latex = to_latex(table)
    assert r"\multicolumn{3}{c}{MMLU-Pro} & \multicolumn{2}{c}{ToolBench}" in latex
    assert r"my\_memory & 0.40 & -- & 0.50 & 0.50 & 1.00 & 0.50 & 0.75 & 0.50 & 0.59 \\" in latex
    rows = list(csv.DictReader(io.StringIO(to_csv(table))))
    assert rows[0]["method"] == "my_memory" and rows[0]["aime_25"] == ""
    assert float(rows[0]["toolbench_api"]) == 0.75 and float(rows[0]["avg"]) == pytest.approx(table.rows[0].average)


def test_ci_adds_the_summarys_wilson_intervals(make_run: Callable[..., Path]) -> None:
    run = paper_run(make_run, "m", OUTCOMES, api=[True, True, False, True])
    table = build_table(load_runs([run]))
    low, high = wilson_interval(2, 5)
    assert f"0.40 [{low:.2f}, {high:.2f}]" in to_markdown(table, ci=True)
    assert rf"0.40 {{\scriptsize [{low:.2f}, {high:.2f}]}}" in to_latex(table, ci=True)
    row = next(csv.DictReader(io.StringIO(to_csv(table, ci=True))))
    assert float(row["aime_24_ci_low"]) == pytest.approx(low, abs=1e-6)
    assert float(row["toolbench_api_ci_high"]) == pytest.approx(wilson_interval(3, 4)[1], abs=1e-6)


SAMPLE = {"sample_facts": [True, False, True, True], "sample_choice": [False, True, False]}


def test_runs_on_other_streams_get_their_own_streams_as_columns_in_every_format(make_run: Callable[..., Path]) -> None:
    """Not a row of dashes: the columns are the runs' streams (in the order the runs
    list them) and the run's overall figure, each cell its summary's, with --ci its
    Wilson interval; no Avg., which only the paper's datasets define."""
    first = make_run("memory", SAMPLE)
    second = make_run("other", {"sample_choice": [True, True, False], "mine": [True]})
    table = build_table(load_runs([first, second]))
    assert not table.paper and [c.csv_name for c in table.extra] == ["sample_facts", "sample_choice", "mine", "overall"]
    facts, choice = wilson_interval(3, 4), wilson_interval(1, 3)
    overall = json.loads((first / "summary.json").read_text())["overall"]
    markdown = to_markdown(table, ci=True).splitlines()
    assert markdown[0] == "| Method | sample_facts | sample_choice | mine | Overall |"
    assert markdown[2] == (
        f"| memory | 0.75 [{facts[0]:.2f}, {facts[1]:.2f}] | 0.33 [{choice[0]:.2f}, {choice[1]:.2f}] | \u2013 | "
        f"{overall['accuracy']:.2f} [{overall['accuracy_ci'][0]:.2f}, {overall['accuracy_ci'][1]:.2f}] |"
    )
    assert markdown[3].startswith("| other | \u2013 | 0.67 [") and "Avg." not in markdown[0]
    assert "None of the paper's streams ran" in markdown[5] and "95 % Wilson interval" in markdown[5]
    latex = to_latex(table, ci=True)
    assert r"\begin{tabular}{lcccc}" in latex and r"Method & sample\_facts & sample\_choice & mine & Overall \\" in latex
    assert rf"memory & 0.75 {{\scriptsize [{facts[0]:.2f}, {facts[1]:.2f}]}} & 0.33" in latex
    rows = list(csv.DictReader(io.StringIO(to_csv(table, ci=True))))
    assert list(rows[0]) == ["method", *(f"{name}{end}" for name in ("sample_facts", "sample_choice", "mine", "overall")
                                         for end in ("", "_ci_low", "_ci_high"))]
    assert float(rows[0]["sample_facts"]) == 0.75 and float(rows[0]["sample_facts_ci_low"]) == pytest.approx(facts[0], abs=1e-6)
    assert rows[0]["mine"] == "" and float(rows[1]["mine"]) == 1.0
    assert float(rows[1]["overall"]) == pytest.approx(3 / 4)


def test_replicates_on_other_streams_are_rows_of_means(make_run: Callable[..., Path]) -> None:
    groups = replicate_groups(
        [make_run("a1", SAMPLE), make_run("a2", {"sample_facts": [True] * 4, "sample_choice": [True] * 3})], ["A", "A"]
    )
    table = build_replicate_table(groups)
    (row,) = table.rows
    assert not table.paper and row.replicates == 2
    assert row.cells["stream:sample_facts"].value == pytest.approx((0.75 + 1.0) / 2)
    assert row.cells["overall"].value == pytest.approx((4 / 7 + 1.0) / 2)
    # intervals clustered by task, as for the paper's columns: every cell has one, within [0, 1]
    for key in ("stream:sample_facts", "stream:sample_choice", "overall"):
        found = row.cells[key]
        assert found.low is not None and found.high is not None and 0 <= found.low < found.value < found.high <= 1  # type: ignore[operator]
    markdown = to_markdown(table, ci=True)
    assert "clustered by task" in markdown and "standard errors" not in markdown  # no Avg., so nothing of its interval
    assert "A: the mean of 2 replicate runs" in markdown


def test_a_mix_keeps_the_papers_layout_with_other_streams_after_the_average(make_run: Callable[..., Path]) -> None:
    run = paper_run(make_run, "mixed", {"aime_2024": [True, False], "sample_facts": [True, True, False, True]}, api=[])
    table = build_table(load_runs([run]))
    assert table.paper and [c.csv_name for c in table.extra] == ["sample_facts"]
    row = table.rows[0]
    assert row.average == 0.5 and row.cells["stream:sample_facts"].value == 0.75  # not in the average
    header = to_markdown(table).splitlines()[0]
    assert header.endswith("| ToolBench Acc. | Avg. | sample_facts |")
    assert "sample_facts: not streams of the paper's table" in to_markdown(table)
    assert r"& Avg. & sample\_facts \\" in to_latex(table)
    assert next(csv.DictReader(io.StringIO(to_csv(table))))["sample_facts"] == "0.75"


def test_labels_are_escaped_for_each_format() -> None:
    assert latex_escape("a_b & 50% #1 {x}") == r"a\_b \& 50\% \#1 \{x\}"


def test_the_command_prints_and_writes_the_table(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = paper_run(make_run, "m", OUTCOMES, api=[True, True, False, True])
    assert main(["table", str(run), "--format", "csv", "--labels", "ReMem (mine)"]) == 0
    printed = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert printed["method"] == "ReMem (mine)" and float(printed["gpqa"]) == summary_value(run, "gpqa_diamond", "accuracy")
    target = tmp_path / "out" / "table.tex"
    assert main(["table", str(run), "--format", "latex", "--ci", "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    assert target.read_text().startswith("% Avg.")

    assert main(["table", str(tmp_path / "nowhere")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("evomemory: error: ") and error.count("\n") == 1 and "is not a directory" in error
    assert main(["table", str(run), "--labels", "a,b"]) == 2
    assert "one per run" in capsys.readouterr().err


# --------------------------------------------------------------------------- replicates


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_replicates_of_a_method_are_one_row_of_means_with_intervals_clustered_by_task(tmp_path: Path) -> None:
    """Three replicate runs of one method (same run name, three directories) and one
    single run: the method's cells are the replicates' mean with the interval
    clustered by task (docs/statistics.md), checked against a hand computation."""
    from .conftest import write_run_dir

    aime = [[True, True, False, False, False], [True, True, True, False, False], [True, True, True, True, False]]
    gpqa = [[True, False, False, False], [True, True, False, False], [True, True, False, False]]
    replicates = [
        write_run_dir(tmp_path / f"exprag-{index}", "exprag", {"aime_2024": a, "gpqa_diamond": g})
        for index, (a, g) in enumerate(zip(aime, gpqa, strict=True))
    ]
    single = write_run_dir(tmp_path / "control", "control", {"aime_2024": [False] * 5, "gpqa_diamond": [True] * 4})
    groups = replicate_groups([*replicates, single])
    assert [(label, len(runs)) for label, runs in groups] == [("exprag", 3), ("control", 1)]
    table = build_replicate_table(groups)
    exprag, control = table.rows
    assert (exprag.replicates, control.replicates) == (3, 1)
    # AIME-24 by hand: per task over the replicates 1, 1, 2/3, 1/3, 0 (mean 0.6); cluster-robust
    # variance sum((m - 0.6)^2) / 5^2; effective n 0.24 / that; Wilson with t(0.975, 4) = 2.776445
    aime_means = [1, 1, 2 / 3, 1 / 3, 0]
    low, high = _wilson(0.6, 0.24 / (sum((m - 0.6) ** 2 for m in aime_means) / 25), 2.776445)
    aime_cell = exprag.cells["aime_24"]
    assert aime_cell.value == pytest.approx(0.6) and aime_cell.tasks == 5
    assert aime_cell.low == pytest.approx(low, abs=1e-6) and aime_cell.high == pytest.approx(high, abs=1e-6)
    # GPQA: 0.25, 0.5, 0.5; the average (two entries) is the mean of the replicates' averages, its
    # interval normal from the entries' standard errors sqrt(var(task means) / tasks)
    assert exprag.cells["gpqa"].value == pytest.approx(1.25 / 3)
    averages = [(0.4 + 0.25) / 2, (0.6 + 0.5) / 2, (0.8 + 0.5) / 2]
    mean = sum(averages) / 3
    gpqa_means = [1, 2 / 3, 0, 0]

    def error(means: list[float]) -> float:
        centre = sum(means) / len(means)
        return math.sqrt(sum((m - centre) ** 2 for m in means) / (len(means) - 1) / len(means))

    half = 1.959964 * math.sqrt(error(aime_means) ** 2 + error(gpqa_means) ** 2) / 2
    assert exprag.average == pytest.approx(mean)
    assert exprag.average_low == pytest.approx(mean - half, abs=1e-6)
    assert exprag.cells["aime_25"].value is None
    # the single run keeps its own values and its summary's Wilson intervals
    assert control.cells["gpqa"].value == 1.0 and control.average_low is None
    w_low, w_high = wilson_interval(4, 4)
    assert control.cells["gpqa"].low == pytest.approx(w_low) and control.cells["gpqa"].high == pytest.approx(w_high)
    markdown = to_markdown(table, ci=True)
    assert f"| exprag | 0.60 [{low:.2f}, {high:.2f}] |" in markdown
    assert "exprag: the mean of 3 replicate runs" in markdown and "clustered by task over the replicate runs" in markdown
    rows = list(csv.DictReader(io.StringIO(to_csv(table, ci=True))))
    assert [row["replicates"] for row in rows] == ["3", "1"]
    assert float(rows[0]["avg_ci_high"]) == pytest.approx(mean + half, abs=1e-6)


def test_a_replicate_cell_is_the_estimate_its_interval_is_of(tmp_path: Path) -> None:
    """Replicates that scored different tasks (one stopped after 6): the cell is the
    mean over the tasks every replicate scored, the estimate its clustered interval is
    of, so it is inside it; before, the replicates' own mean (1/6 and 1, 0.58) was
    printed beside the interval of the 6 shared tasks, [0.61, 1], outside it."""
    from .conftest import write_run_dir

    runs = [
        write_run_dir(tmp_path / "m-1", "m", {"gpqa_diamond": [True] * 6 + [False] * 30}),
        write_run_dir(tmp_path / "m-2", "m", {"gpqa_diamond": [True] * 6}),
    ]
    [row] = build_replicate_table(replicate_groups(runs)).rows
    cell = row.cells["gpqa"]
    assert cell.value == 1.0 and cell.low is not None and cell.high is not None
    assert cell.low <= cell.value <= cell.high
    assert cell.low == pytest.approx(wilson_interval(6, 6)[0])  # seeds that agree: Wilson on the 6 tasks


def test_the_command_groups_replicates_by_label(
    make_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_run("a1", {"aime_2024": [True, False]})
    second = make_run("a2", {"aime_2024": [True, True]})
    other = make_run("b", {"aime_2024": [False, False]})
    arguments = ["table", str(first), str(second), str(other), "--format", "csv", "--replicates", "--labels", "A,A,B"]
    assert main(arguments) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(row["method"], float(row["aime_24"]), row["replicates"]) for row in rows] == [("A", 0.75, "2"), ("B", 0.0, "1")]
    # without --replicates every run is a row of its own
    assert main(["table", str(first), str(second), "--format", "csv", "--labels", "A,A"]) == 0
    assert [row["method"] for row in csv.DictReader(io.StringIO(capsys.readouterr().out))] == ["A", "A"]


# --------------------------------------------------------------------------- LoCoMo


def test_a_locomo_row_shows_its_mean_f1_labelled_so_alone_and_as_replicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A LoCoMo run is judged on its mean F1, not on the share with F1 >= 0.5: its row
    shows summary.json's overall headline in a column of its own ("LoCoMo mean F1",
    after Avg. and not in it), and a row of replicates the mean replicates.json reports
    (its replicates differ in the seed of the adversarial option order)."""
    out = tmp_path / "locomo"
    assert main(["run", "--config", "locomo_sample_memory", "--repeats", "2", "--limit", "2", "--output-dir", str(out), "-q"]) == 0
    capsys.readouterr()
    replicates = json.loads((out / "replicates.json").read_text())
    assert replicates["figure"] == "mean F1"
    memory_runs = [out / f"r{i}" for i in (1, 2)]
    summary = json.loads((memory_runs[0] / "summary.json").read_text())
    f1, accuracy = summary["overall"]["f1_mean"], summary["overall"]["accuracy"]
    assert f1 > 0 and f1 != accuracy  # the two figures differ, so the test tells them apart

    # one run: its mean F1 with the summary's interval of a mean, labelled, outside the average
    table = build_table(load_runs([memory_runs[0]]))
    cell = table.rows[0].cells["locomo_f1"]
    overall = summary["categories"]["overall"]
    assert (cell.value, cell.low, cell.high) == (f1, overall["ci_low"], overall["ci_high"])
    assert table.rows[0].average is None and [c.key for c in table.extra] == ["locomo_f1"]
    markdown = to_markdown(table, ci=True)
    assert "| Avg. | LoCoMo mean F1 |" in markdown and f"| {f1:.2f} [" in markdown
    assert "LoCoMo mean F1: 95 % Wilson interval on the effective number of tasks" in markdown
    assert "LoCoMo mean F1: the run's overall mean F1" in markdown
    assert r"& Avg. & LoCoMo \\" in to_latex(table) and r"& mean F1 \\" in to_latex(table)

    # replicates: one row per arm, each the mean of its replicates' mean F1, as replicates.json
    assert main(["table", *(str(d) for d in memory_runs), "--replicates", "--format", "csv", "--ci"]) == 0
    rows = {row["method"]: row for row in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    for arm in replicates["arms"]:
        assert float(rows[arm["label"]]["locomo_f1"]) == pytest.approx(arm["overall"]["mean"], abs=1e-6)
        assert rows[arm["label"]]["replicates"] == "2" and rows[arm["label"]]["avg"] == ""

    # an Evo-Memory table keeps the paper's shape: no LoCoMo column
    from .conftest import write_run_dir

    evo = build_table(load_runs([write_run_dir(tmp_path / "evo", "evo", {"aime_2024": [True, False]})]))
    assert evo.extra == () and "LoCoMo" not in to_markdown(evo)


@pytest.mark.parametrize("accuracy", [0.1, 0.5])
def test_the_average_interval_of_replicates_covers_the_truth_of_simulated_tables(accuracy: float) -> None:
    """The Avg. of a row of replicates (normal, from its seven entries' clustered
    standard errors: ``_average_interval``) covers the population's accuracy in
    93-97 % of 400 simulated tables (fixed seed; benchmarks/bench_statistics.py's
    tasks, 3 replicates, entries of the paper's sizes), up to the simulation's error."""
    import importlib.util

    import numpy as np

    from pytest_evomemory.analysis.clustered import estimate_arm
    from pytest_evomemory.reporting.table import AVERAGE_ENTRIES, Cell, _average_interval

    spec = importlib.util.spec_from_file_location(
        "bench_statistics_table", Path(__file__).parents[2] / "benchmarks" / "bench_statistics.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    generator = np.random.default_rng(int(accuracy * 100))
    sizes = (30, 30, 198, 80, 90, 100, 120)
    experiments = 400
    draws = [bench.simulate(generator, experiments, size, 3, accuracy)[0] for size in sizes]
    covered = 0
    for index in range(experiments):
        cells: dict[str, Cell] = {}
        errors: dict[str, float | None] = {}
        for keys, scores in zip(AVERAGE_ENTRIES, draws, strict=True):
            estimate = estimate_arm(scores[index].tolist())
            assert estimate.variance is not None
            for key in keys:  # ToolBench's API and Acc. on the same tasks
                cells[key] = Cell(estimate.estimate)
                errors[key] = estimate.variance.standard_error()
        average = sum(float(draws[i][index].mean()) for i in range(len(sizes))) / len(sizes)
        low, high = _average_interval(average, errors, cells)
        assert low is not None and high is not None and 0 <= low < high <= 1
        covered += low <= accuracy <= high
    assert bench.miss(100 * covered / experiments, experiments) is None, covered
