"""Intervals across replicates, clustered by task (reporting.clustered): their
properties against hand computations, and their coverage on simulated benchmarks
whose truth is known (benchmarks/bench_statistics.py's model, at a modest size and a
fixed seed: deterministic)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_evomemory.reporting.clustered import (
    arm_interval,
    as_scores,
    difference_interval,
    estimate_arm,
    estimate_difference,
    variance_split,
)
from pytest_evomemory.reporting.stats import (
    PairedTable,
    mcnemar_exact,
    newcombe_paired_interval,
    wilson_interval,
)

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_statistics.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_statistics_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_replicate_is_wilsons_interval() -> None:
    outcomes = [1.0] * 7 + [0.0] * 5
    estimate = estimate_arm([[value] for value in outcomes])
    assert (estimate.low, estimate.high) == tuple(pytest.approx(b) for b in wilson_interval(7, 12))
    assert estimate.effective_tasks == 12 and estimate.variance is not None and estimate.variance.within_tasks is None


def test_agreeing_seeds_are_not_more_tasks_and_nothing_solved_has_an_upper_bound() -> None:
    # every task the same in 4 replicates: the design effect is 4, an interval on 10 tasks (t with 9 df)
    same = as_scores([[1.0] * 4] * 6 + [[0.0] * 4] * 4)
    _, low, high, effective = arm_interval(same)
    assert float(effective) == pytest.approx(10)
    assert 0 < float(low) < 0.6 < float(high) < 1
    one = estimate_arm([[1.0]] * 6 + [[0.0]] * 4)
    assert float(high) - float(low) > (one.high or 0) - (one.low or 0)  # t(9) is wider than z
    _, low, high, _ = arm_interval(as_scores([[0.0] * 3] * 10))
    assert float(low) == 0 and 0.2 < float(high) < 0.4
    # every task solved in exactly 2 of 3 seeds: no spread between tasks, the design effect is 1
    _, low, high, effective = arm_interval(as_scores([[1.0, 1.0, 0.0]] * 10))
    assert float(effective) == 30 and 0 < float(low) < 2 / 3 < float(high) < 1


def test_a_difference_of_one_replicate_is_newcombe_and_mcnemar() -> None:
    first = [[1.0], [1.0], [0.0], [0.0], [1.0], [0.0]]
    second = [[1.0], [0.0], [1.0], [1.0], [1.0], [1.0]]
    found = estimate_difference(first, second, binary=True)
    table = PairedTable(both=2, only_first=1, only_second=3, neither=0)
    assert (found.low, found.high) == newcombe_paired_interval(table)
    assert found.test == "McNemar" and found.p_value == mcnemar_exact(1, 3)
    assert found.difference == pytest.approx(2 / 6)


def test_a_difference_stays_in_range_and_is_never_zero_width() -> None:
    nothing = as_scores([[0.0] * 3] * 8)
    everything = as_scores([[1.0] * 3] * 8)
    _, low, high = difference_interval(nothing, everything)
    assert 0 < float(low) < float(high) <= 1
    _, low, high = difference_interval(nothing, nothing)
    assert float(low) < 0 < float(high)
    found = estimate_difference(nothing.tolist(), nothing.tolist(), binary=True)
    assert found.p_value == 1.0 and found.test == "paired t"


def test_the_variance_split_matches_a_hand_computation() -> None:
    scores = as_scores([[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0]])
    split = variance_split(scores)
    means = [2 / 3, 0, 1, 1 / 3]
    within = (1 / 3 + 0 + 0 + 1 / 3) / 4  # each task's variance over its 3 replicates (n - 1)
    total = float(np.var(means, ddof=1))
    assert split.within_tasks == pytest.approx(within)
    assert split.between_tasks == pytest.approx(total - within / 3)
    assert split.standard_error() == pytest.approx(math.sqrt(total / 4))
    assert split.standard_error(replicates=6) < split.standard_error() and split.seed_share is not None
    assert split.standard_error(tasks=8) == pytest.approx(split.standard_error() / math.sqrt(2))


@pytest.mark.parametrize(("replicates", "accuracy"), [(3, 0.1), (3, 0.5), (5, 0.5), (5, 0.9)])
def test_the_intervals_cover_the_truth_of_simulated_benchmarks(replicates: int, accuracy: float) -> None:
    """400 simulated experiments of 40 tasks (fixed seed): each 95 % interval covers
    the population's accuracy and gain in 91-98.5 % of them."""
    bench = _bench()
    generator = np.random.default_rng(7 + replicates)
    found = bench.cell(generator, 400, 40, replicates, accuracy)
    assert 91.0 <= found["arm"] <= 98.5, found
    assert 91.0 <= found["difference"] <= 98.5, found


def test_the_benchmark_prints_its_table_and_flags_a_missed_cell(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    assert bench.main(["--experiments", "60", "--tasks", "24", "--replicates", "1,3", "--accuracies", "0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["K", "tasks", "p", "gain"]
    rows = [line.split() for line in lines[3:5]]
    assert [(row[0], row[1], row[2]) for row in rows] == [("1", "24", "0.50"), ("3", "24", "0.50")]
    assert all(0 <= float(value) <= 100 for row in rows for value in row[4:6])
    # a band no interval can meet is reported, and --strict turns it into the exit status
    bench.LOW, bench.HIGH = 99.9, 100.0
    try:
        assert bench.main(["--experiments", "60", "--tasks", "24", "--replicates", "3", "--accuracies", "0.5",
                           "--strict"]) == 1
    finally:
        bench.LOW, bench.HIGH = 93.0, 97.0
    assert "MISSED: arm interval covers" in capsys.readouterr().out
