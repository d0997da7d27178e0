"""Replicate statistics (for --evomemory-repeats, once the Session has replicates):
the t interval of a mean, the paired difference of replicates, and the difference
between two orders of one arm, each against a hand computation."""

from __future__ import annotations

import math

import pytest

from pytest_evomemory.reporting.stats import (
    compare_paired,
    order_difference,
    paired_replicate_difference,
    replicate_interval,
    student_t_cdf,
    student_t_quantile,
)


@pytest.mark.parametrize(
    ("df", "quantile"),
    # t(0.975, df) from the standard tables (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2)
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262), (29, 2.045), (100, 1.984)],
)
def test_t_quantiles_match_the_tables(df: int, quantile: float) -> None:
    assert student_t_quantile(0.975, df) == pytest.approx(quantile, abs=5e-4)
    assert student_t_cdf(student_t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-10)
    assert student_t_quantile(0.025, df) == pytest.approx(-student_t_quantile(0.975, df))


def test_t_cdf_of_one_degree_of_freedom_is_the_cauchy() -> None:
    for t in (-3.0, -0.5, 0.0, 0.7, 4.0):
        assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)


def test_mean_of_three_replicates_with_its_t_interval() -> None:
    result = replicate_interval([0.50, 0.60, 0.70])
    # by hand: mean 0.6, sd sqrt(((-0.1)^2 + 0 + 0.1^2) / 2) = 0.1, se 0.1 / sqrt(3),
    # t(0.975, 2) = 4.302653: half-width 0.248414
    assert (result.n, result.mean, result.sd) == (3, pytest.approx(0.6), pytest.approx(0.1))
    assert (result.low, result.high) == (pytest.approx(0.6 - 0.248414, abs=1e-6), pytest.approx(0.6 + 0.248414, abs=1e-6))
    assert replicate_interval([0.4]).to_dict() == {"n": 1, "mean": 0.4, "sd": None, "ci_low": None, "ci_high": None}
    assert replicate_interval([]).mean is None
    same = replicate_interval([0.5, 0.5, 0.5])
    assert (same.low, same.high) == (0.5, 0.5)


def test_paired_difference_of_replicates_uses_the_per_seed_differences() -> None:
    easy_first = [0.62, 0.58, 0.66, 0.60]
    hard_first = [0.55, 0.57, 0.58, 0.52]
    result = paired_replicate_difference(easy_first, hard_first)
    differences = [-0.07, -0.01, -0.08, -0.08]  # hard - easy, seed by seed
    mean = sum(differences) / 4
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 3)
    half = 3.182446 * sd / 2  # t(0.975, 3) * sd / sqrt(4)
    assert result.mean == pytest.approx(mean) and result.sd == pytest.approx(sd)
    assert (result.low, result.high) == (pytest.approx(mean - half, abs=1e-6), pytest.approx(mean + half, abs=1e-6))
    with pytest.raises(ValueError, match="as many of each"):
        paired_replicate_difference([0.1], [0.1, 0.2])


def test_two_orders_of_one_replicate_pair_by_task() -> None:
    easy_to_hard = {("s", "t1"): True, ("s", "t2"): True, ("s", "t3"): False, ("s", "t4"): True}
    hard_to_easy = {("s", "t1"): True, ("s", "t2"): False, ("s", "t3"): False, ("s", "t4"): False}
    result = order_difference(easy_to_hard, hard_to_easy)
    assert result.difference == pytest.approx(-0.5)  # 1/4 - 3/4: two tasks lost, none gained
    assert result.table.only_first == 2 and result.table.only_second == 0
    assert result.p_value == pytest.approx(0.5)  # exact McNemar on 2 discordant tasks
    assert result.to_dict() == compare_paired(easy_to_hard, hard_to_easy).to_dict()
