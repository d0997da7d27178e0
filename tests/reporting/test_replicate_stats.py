"""Student's t (behind the intervals across replicates, analysis.clustered) and the
difference between two orders of one arm, each against a hand computation or a table."""

from __future__ import annotations

import math

import pytest

from pytest_evomemory.analysis.stats import (
    compare_paired,
    order_difference,
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


def test_two_orders_of_one_replicate_pair_by_task() -> None:
    easy_to_hard = {("s", "t1"): True, ("s", "t2"): True, ("s", "t3"): False, ("s", "t4"): True}
    hard_to_easy = {("s", "t1"): True, ("s", "t2"): False, ("s", "t3"): False, ("s", "t4"): False}
    result = order_difference(easy_to_hard, hard_to_easy)
    assert result.difference == pytest.approx(-0.5)  # 1/4 - 3/4: two tasks lost, none gained
    assert result.table.only_first == 2 and result.table.only_second == 0
    assert result.p_value == pytest.approx(0.5)  # exact McNemar on 2 discordant tasks
    assert result.to_dict() == compare_paired(easy_to_hard, hard_to_easy).to_dict()


def test_replicates_that_differ_beyond_their_seed_noise_are_warned() -> None:
    """replicates.json's arms carry the F test of a replicate-level effect, and an arm
    whose p is below 0.05 gets a warning naming F, its degrees of freedom and p: the
    intervals leave such an effect out (docs/statistics.md)."""
    from pytest_evomemory.analysis.clustered import estimate_arm
    from pytest_evomemory.reporting.replicates import _replicate_effects
    from pytest_evomemory.rundocs.compare import ArmScope, ReplicateArm

    # 40 tasks; replicate 1 solves every task, 2 half of them, 3 none: a seed effect
    shifted = estimate_arm([[1.0, float(i % 2), 0.0] for i in range(40)]).to_dict()
    effect = shifted["replicate_effect"]
    assert (effect["first_df"], effect["second_df"]) == (2, 80) and effect["p_value"] < 1e-6
    # the same outcomes spread across replicates task by task: no seed effect
    balanced = estimate_arm([[1.0, float(i % 2), 0.0][i % 3:] + [1.0, float(i % 2), 0.0][:i % 3]
                             for i in range(40)]).to_dict()
    assert balanced["replicate_effect"]["p_value"] > 0.05
    arms = [ReplicateArm(label=label, overall=ArmScope(**document))
            for label, document in (("shifted", shifted), ("balanced", balanced))]
    [warning] = _replicate_effects(arms)
    assert warning.startswith("shifted: its replicates differ more than the seed noise within tasks explains (F = ")
    assert "on 2 and 80 df" in warning and "too narrow" in warning
