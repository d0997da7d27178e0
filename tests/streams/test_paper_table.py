"""``evomemory table`` over a real run of the four streams (invented records served by
the hub stand-in): every cell is the accuracy the run's own summary states."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.reporting.rundata import load_runs
from pytest_evomemory.reporting.table import COLUMNS, build_table

from .conftest import FakeHub


def test_table_cells_equal_a_real_runs_summary(hub: FakeHub, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "name: paper_table\nbenchmark:\n  benchmark: evomemory_single_turn\n"
        "agent:\n  kind: recall_baseline\nmemory:\n  backend: inprocess\n"
    )
    run_dir = tmp_path / "out"
    run_benchmark(load_run_config(config), run_dir)
    streams = json.loads((run_dir / "summary.json").read_text())["streams"]
    (row,) = build_table(load_runs([run_dir])).rows
    expected = {
        "aime_24": streams["aime_2024"]["accuracy"],
        "aime_25": None,
        "gpqa": streams["gpqa_diamond"]["accuracy"],
        "mmlu_pro_eco": streams["mmlu_pro"]["groups"]["economics"]["accuracy"],
        "mmlu_pro_eng": streams["mmlu_pro"]["groups"]["engineering"]["accuracy"],
        "mmlu_pro_philo": streams["mmlu_pro"]["groups"]["philosophy"]["accuracy"],
        "toolbench_api": streams["toolbench"]["api_accuracy"],
        "toolbench_acc": streams["toolbench"]["accuracy"],
    }
    assert {column.key: row.cells[column.key].value for column in COLUMNS} == expected
    assert streams["toolbench"]["api_accuracy"] is not None  # the scorer's API figure is there
    assert row.cells["gpqa"].tasks == streams["gpqa_diamond"]["tasks"] == 3
