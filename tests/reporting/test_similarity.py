"""Gain versus similarity: the per-task similarity the runtime records, the statistics
against hand computation, and compare.json / compare.html built from two real runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.analysis.similarity import (
    SIMILARITY_KEY,
    analyse,
    fisher_interval,
    pearson,
    ranks,
    recall_similarity,
    spearman,
)
from pytest_evomemory.reporting.html import write_comparison
from pytest_evomemory.rundocs.compare import SimilarityPoint
from pytest_evomemory.util.text import similarity

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN


def test_a_tasks_similarity_is_the_closest_recalled_record() -> None:
    prompt = "In Quillhaven, what colour are the post boxes?"
    recalled = [{"content": "Task: Which river flows through Quillhaven?"}, {"content": "Task: post boxes colour"}]
    assert recall_similarity(prompt, recalled, recalls=1) == round(
        max(similarity(prompt, r["content"]) for r in recalled), 6
    )
    assert recall_similarity(prompt, recalled, recalls=1) == round(similarity(prompt, "Task: post boxes colour"), 6)
    assert recall_similarity(prompt, [], recalls=1) == 0.0  # recalled, nothing came back
    assert recall_similarity(prompt, [], recalls=0) is None  # never recalled: unknown


def test_pearson_and_its_fisher_interval_match_a_hand_computation() -> None:
    xs, ys = [0.1, 0.2, 0.4, 0.8, 0.9], [0.0, -1.0, 0.0, 1.0, 1.0]
    # by hand: means 0.48 and 0.2; sxy = 1.02, sxx = 0.508, syy = 2.8
    r = 1.02 / math.sqrt(0.508 * 2.8)
    assert r == pytest.approx(0.855242, abs=1e-6)
    assert pearson(xs, ys) == pytest.approx(r)
    low, high = fisher_interval(r, 5) or (0, 0)
    half = 1.959963984540054 / math.sqrt(2)
    assert (low, high) == pytest.approx((math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)))
    assert pearson([1, 2], [1, 2]) is None and pearson([1, 1, 1], [0, 1, 0]) is None
    # no interval where Fisher's z is infinite: [1, 1] would be a zero-width certainty
    assert fisher_interval(0.5, 3) is None and fisher_interval(1.0, 10) is None and fisher_interval(-1.0, 5) is None


@pytest.mark.parametrize(("tasks", "slope"), [(6, 0.0), (12, 5.0), (24, 2.0), (100, 5.0)])
def test_the_fisher_interval_covers_the_correlation_of_simulated_gains(tasks: int, slope: float) -> None:
    """Gains of -1, 0, +1 (far from the bivariate normal Fisher assumes): a task's
    similarity s ~ Beta(2, 3), the memory arm right with chance expit(-0.5 + slope s),
    the control with 0.35. Over 1,000 experiments (fixed seed) the interval covers the
    population's correlation (from 400,000 tasks) in 93-97 %, as the bench's rule."""
    generator = np.random.default_rng(tasks)

    def draw(count: int, size: int) -> tuple[Any, Any]:
        similarity = generator.beta(2, 3, size=(size, count))
        memory = generator.random((size, count)) < 1 / (1 + np.exp(0.5 - slope * similarity))
        control = generator.random((size, count)) < 0.35
        return similarity, memory.astype(float) - control.astype(float)

    xs, ys = draw(400_000, 1)
    truth = float(np.corrcoef(xs[0], ys[0])[0, 1])
    covered = total = 0
    for x, y in zip(*draw(tasks, 1000), strict=True):
        interval = fisher_interval(pearson(list(x), list(y)), tasks)
        if interval is not None:
            assert -1 < interval[0] < interval[1] < 1
            total += 1
            covered += interval[0] <= truth <= interval[1]
    assert total >= 950 and 93.0 <= 100 * covered / total <= 97.5, (covered, total)


def test_spearman_uses_average_ranks_for_ties() -> None:
    assert ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [0, 0, 1, 1]) == pytest.approx(pearson([1, 2, 3, 4], [1.5, 1.5, 3.5, 3.5]))


def test_bins_hold_the_mean_gain_and_the_top_edge_is_inside() -> None:
    given = [(0.05, 0), (0.1, -1), (0.5, 1), (0.55, 0), (1.0, 1)]
    points = [SimilarityPoint(task_id=f"t{i}", similarity=s, gain=g) for i, (s, g) in enumerate(given)]
    result = analyse(points, left_out=2)
    bins = {(b.low, b.high): (b.tasks, b.mean_gain) for b in result.bins}
    assert bins[(0.0, 0.2)] == (2, -0.5)
    assert bins[(0.4, 0.6)] == (2, 0.5)
    assert bins[(0.8, 1.0)] == (1, 1.0)
    assert bins[(0.2, 0.4)] == (0, None)
    assert result.tasks == 5 and result.tasks_without_similarity == 2
    assert result.mean_gain == pytest.approx(0.2)


def test_compare_correlates_the_memory_arms_gain_with_what_it_recalled(tmp_path: Path) -> None:
    control, memory = tmp_path / "control", tmp_path / "memory"
    run_benchmark(load_run_config(SAMPLE_NO_MEMORY_RUN), control)
    run_benchmark(load_run_config(SAMPLE_MEMORY_RUN), memory)
    memory_scores = [json.loads(line) for line in (memory / "scores.jsonl").read_text().splitlines()]
    control_scores = [json.loads(line) for line in (control / "scores.jsonl").read_text().splitlines()]
    assert all(SIMILARITY_KEY in s for s in memory_scores)  # the memory arm recalls in every task
    assert not any(SIMILARITY_KEY in s for s in control_scores)  # the control never recalls
    assert next(s for s in memory_scores if s["position"] == 0)[SIMILARITY_KEY] == 0.0  # nothing stored yet

    files = write_comparison([control, memory], tmp_path / "compare.html", ["control", "memory"])
    document = json.loads(files.json.read_text())
    facts = document["similarity"]["streams"]["sample_facts"][0]
    assert document["similarity"]["control"] == "control" and facts["label"] == "memory"
    # recomputed by hand from the two runs' scores
    solved = {s["task_id"]: int(s["correct"]) for s in control_scores if s["stream"] == "sample_facts"}
    pairs = [(s[SIMILARITY_KEY], int(s["correct"]) - solved[s["task_id"]]) for s in memory_scores if s["stream"] == "sample_facts"]
    assert facts["tasks"] == 12 == len(pairs)
    assert facts["pearson_r"] == pytest.approx(pearson([p[0] for p in pairs], [p[1] for p in pairs]))
    assert facts["pearson_r"] > 0  # the sample's repeated tasks are the ones memory gets right
    assert sorted((p["similarity"], p["gain"]) for p in facts["points"]) == sorted(pairs)

    page = files.html.read_text()
    assert page.count('<svg class="similarity"') == 2  # one per stream for the one memory arm
    assert "Gain versus similarity" in page and "r = " in page

