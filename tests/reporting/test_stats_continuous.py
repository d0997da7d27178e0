"""Statistics for a continuous per-task score (LoCoMo's F1): a single run's interval
of the mean and of the paired mean difference, the Wilcoxon signed-rank test and
the per-category table."""

from __future__ import annotations

import math
import random

import pytest

from pytest_evomemory.analysis.categories import category_summary, score_value
from pytest_evomemory.analysis.clustered import mean_interval, paired_mean_interval, t_quantile
from pytest_evomemory.analysis.stats import (
    average_ranks,
    wilcoxon_signed_rank,
    wilson_interval,
)


def pairs(first: list[float], second: list[float]) -> tuple[dict[int, float], dict[int, float]]:
    return dict(enumerate(first)), dict(enumerate(second))


# ----------------------------------------------------------------------- Wilcoxon


def test_exact_p_for_small_samples_without_ties_by_hand() -> None:
    # all five differences positive: W+ = 15, reached by 1 of 32 sign patterns
    result = wilcoxon_signed_rank(*pairs([0.0] * 5, [0.1, 0.2, 0.3, 0.4, 0.5]))
    assert (result.statistic, result.method, result.p_value) == (15, "exact", pytest.approx(2 / 32))
    # one negative of rank 2 among six: W+ = 19; 3 of 64 patterns have W+ <= 2
    result = wilcoxon_signed_rank(*pairs([0.0] * 6, [0.1, -0.2, 0.3, 0.4, 0.5, 0.6]))
    assert (result.statistic, result.p_value) == (19, pytest.approx(2 * 3 / 64))


def test_ties_and_zeros_in_a_small_sample_enumerate_every_sign_flip() -> None:
    # non-zero differences 0.5, 0.5, -0.5, 1 (a zero dropped): ranks 2, 2, 2, 4, W+ = 8;
    # 4 of the 16 flips reach W+ >= 8
    result = wilcoxon_signed_rank(*pairs([0.0] * 5, [0.5, 0.5, -0.5, 1.0, 0.0]))
    assert (result.statistic, result.method, result.nonzero) == (8, "permutation", 4)
    assert result.p_value == pytest.approx(2 * 4 / 16)


def test_all_tied_differences_reduce_to_the_normal_sign_test() -> None:
    # 20 up, 10 down, 5 unchanged: every |d| tied, so z is the sign test's (20 - 15) / sqrt(30 / 4)
    first = [0.5] * 35
    second = [1.0] * 20 + [0.0] * 10 + [0.5] * 5
    result = wilcoxon_signed_rank(*pairs(first, second))
    z = (20 - 15) / math.sqrt(30 / 4)
    assert result.method == "normal" and result.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_no_difference_at_all_is_p_one_and_only_shared_tasks_count() -> None:
    assert wilcoxon_signed_rank({"a": 0.5, "b": 1.0}, {"a": 0.5, "b": 1.0, "c": 0.0}).p_value == 1.0


def test_no_pair_at_all_is_no_test_not_p_one() -> None:
    """Zero paired tasks is not "no difference": the test refuses, and says why."""
    for first, second in (({}, {}), ({"a": 0.5}, {}), ({"a": 0.5}, {"b": 0.5})):
        with pytest.raises(ValueError, match="no task was scored in both runs"):
            wilcoxon_signed_rank(first, second)


def test_average_ranks() -> None:
    assert average_ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]


def test_agrees_with_scipy_on_every_branch() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    checked = set()
    for _ in range(36):
        n = rng.choice([5, 8, 11, 30, 50, 51, 120])
        shape = rng.choice(["continuous", "f1"])
        if shape == "continuous":
            first = [rng.random() for _ in range(n)]
            second = [rng.random() for _ in range(n)]
        else:
            first = [rng.choice([0.0, 0.0, 0.5, 1.0, 0.4]) for _ in range(n)]
            second = [rng.choice([0.0, 0.5, 1.0, 1.0, 0.25]) for _ in range(n)]
        if first == second:
            continue
        ours = wilcoxon_signed_rank(*pairs(first, second))
        theirs = stats.wilcoxon([b - a for a, b in zip(first, second, strict=True)])
        assert ours.p_value == pytest.approx(float(theirs.pvalue), rel=1e-9, abs=1e-12), (n, shape)
        checked.add(ours.method)
    assert checked == {"exact", "permutation", "normal"}


# ----------------------------------------------------------------------- one run's intervals of a mean


def test_yes_no_scores_get_wilsons_interval_and_nothing_solved_an_upper_bound() -> None:
    estimate = mean_interval([0.0, 1.0] * 50)
    assert (estimate.mean, estimate.n) == (0.5, 100)
    assert (estimate.low, estimate.high) == pytest.approx(wilson_interval(50, 100))
    none = mean_interval([0.0] * 24)
    assert (none.low, none.high) == pytest.approx(wilson_interval(0, 24))
    assert mean_interval([]).mean is None


def test_continuous_scores_estimate_their_design_effect() -> None:
    """F1 scores between 0 and 1 vary less than yes/no outcomes of the same mean: the
    interval is Wilson's on more effective tasks (with t), by hand, and narrower than
    Wilson's on the tasks; scores that do not spread still give an interval."""
    values = [0.0] * 10 + [1.0] * 5 + [0.25, 0.5, 0.75, 0.5, 0.25, 0.75, 0.5, 0.5, 0.25]
    n = len(values)
    estimate = mean_interval(values)
    mean = sum(values) / n
    weight = 0.5  # half a pseudo-outcome at 0 and at 1
    centre = (sum(values) + weight) / (n + 2 * weight)
    spread = (sum((v - centre) ** 2 for v in values) + weight * (centre**2 + (1 - centre) ** 2)) / (n + 2 * weight)
    effective = n / max(spread / (centre * (1 - centre)), 0.25)
    z = t_quantile(n - 1)
    middle = (mean + z * z / (2 * effective)) / (1 + z * z / effective)
    half = z / (1 + z * z / effective) * math.sqrt(mean * (1 - mean) / effective + z * z / (4 * effective**2))
    assert (estimate.low, estimate.high) == pytest.approx((middle - half, middle + half))
    wilson = wilson_interval(round(mean * n), n)
    assert estimate.high - estimate.low < wilson[1] - wilson[0]
    flat = mean_interval([0.5] * 24)
    assert flat.low is not None and flat.high is not None and 0 < flat.low < 0.5 < flat.high < 1


def test_the_paired_mean_difference_keeps_tasks_together() -> None:
    rng = random.Random(3)
    first = [rng.random() * 0.8 for _ in range(80)]
    shifted = paired_mean_interval(*pairs(first, [value + 0.2 for value in first]))
    independent = paired_mean_interval(*pairs(first, [rng.random() * 0.8 + 0.2 for _ in range(80)]))
    assert shifted.mean == pytest.approx(0.2) and shifted.n == 80
    assert shifted.low is not None and shifted.high is not None and shifted.low < 0.2 < shifted.high
    # paired by task: the correlation of the runs' scores narrows it against unrelated runs
    assert independent.low is not None and independent.high is not None
    assert shifted.high - shifted.low < (independent.high - independent.low) / 2
    same = paired_mean_interval(*pairs(first, first))
    assert same.mean == 0.0 and same.low is not None and same.high is not None and same.low <= 0.0 <= same.high
    assert paired_mean_interval({}, {}).mean is None and -1 <= independent.low <= independent.high <= 1


# ----------------------------------------------------------------------- per category


def _scored(group: str, value: float, recall: float | None = None, error: bool = False) -> dict[str, object]:
    item: dict[str, object] = {"group": group, "value": value, "correct": value >= 0.5,
                               "details": {"evidence_recall": recall}}
    if error:
        item.update(error="model unreachable", value=0.0, correct=False, details={})
    return item


def test_category_summary_gives_mean_f1_per_category_in_the_papers_order() -> None:
    scores = [
        _scored("single-hop", 1.0, 1.0), _scored("single-hop", 0.25, 0.0), _scored("multi-hop", 0.5, 0.5),
        _scored("adversarial", 0.0, None), _scored("temporal", 0.0, error=True),
    ]
    summary = category_summary(scores)
    rows = {row["category"]: row for row in summary["by_category"]}
    # the paper's table order, upstream's evaluation_stats.py keys = [4, 1, 2, 3, 5]
    assert list(rows) == ["single-hop", "multi-hop", "temporal", "adversarial"]
    single = rows["single-hop"]
    assert (single["tasks"], single["mean"], single["correct"], single["evidence_recall"]) == (2, 0.625, 1, 0.5)
    assert rows["temporal"]["mean"] == 0.0  # a failed episode counts, as 0
    overall = summary["overall"]
    assert overall["mean"] == pytest.approx(1.75 / 5) and overall["ci_low"] <= overall["mean"] <= overall["ci_high"]
    assert overall["evidence_recall"] == pytest.approx(0.5) and overall["evidence_questions"] == 3


def test_score_value_reads_the_declared_figure_first() -> None:
    item = {"value": 0.25, "correct": False, "details": {"f1": 0.75}}
    assert score_value(item, "f1") == 0.75 and score_value(item) == 0.25
    assert score_value({"value": 0.25, "details": {}}, "f1") == 0.25


def test_score_value_falls_back_to_correct_for_yes_no_scores() -> None:
    assert score_value({"correct": True}) == 1.0
    assert score_value({"correct": True, "value": 0.75}) == 0.75
    assert score_value({"correct": True, "value": 1.0, "error": "x"}) == 0.0
