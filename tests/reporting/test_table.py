"""``evomemory table``: a table shaped like the paper's Table 1 whose cells equal the
runs' summaries, in Markdown, LaTeX and CSV, with intervals on request."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main
from pytest_evomemory.reporting.rundata import load_runs
from pytest_evomemory.reporting.stats import wilson_interval
from pytest_evomemory.reporting.table import COLUMNS, build_table, latex_escape, to_csv, to_latex, to_markdown

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


def test_a_run_without_the_papers_streams_has_an_empty_row(make_run: Callable[..., Path]) -> None:
    run = make_run("sample", {"sample_facts": [True, False]})
    table = build_table(load_runs([run]))
    assert all(cell.value is None for cell in table.rows[0].cells.values()) and table.rows[0].average is None
    assert "| sample | \u2013 |" in to_markdown(table)


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
