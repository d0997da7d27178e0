"""Power (analysis.power, evomemory power): the formulas against hand computations
and a simulation, and the command as a shell sees it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pytest_evomemory.analysis.power import (
    Plan,
    discordance_sd,
    least_sd,
    minimum_detectable_effect,
    power_at,
    tasks_needed,
)
from pytest_evomemory.cli import main

#: z(0.975) + z(0.80), from any normal table
Z_SUM = 1.959964 + 0.841621


def test_the_minimum_detectable_effect_and_the_tasks_a_gain_needs_invert_each_other() -> None:
    assert minimum_detectable_effect(0.5, 100) == pytest.approx(Z_SUM * 0.5 / 10, rel=1e-6)
    needed = tasks_needed(0.1, 0.5)
    assert needed == math.ceil((Z_SUM * 0.5 / 0.1) ** 2) == 197
    assert minimum_detectable_effect(0.5, needed) <= 0.1 < minimum_detectable_effect(0.5, needed - 1)
    assert power_at(minimum_detectable_effect(0.5, 100), 0.5, 100) == pytest.approx(0.80, abs=1e-6)


def test_the_power_formula_matches_a_simulated_paired_test() -> None:
    """Per-task differences of sd 0.5 and mean the MDE on 200 tasks: a two-sided z-test
    at 0.05 rejects in about 80 % of 4,000 simulated experiments (fixed seed)."""
    effect = minimum_detectable_effect(0.5, 200)
    draws = np.random.default_rng(3).normal(effect, 0.5, size=(4000, 200))
    z = draws.mean(axis=1) / (draws.std(axis=1, ddof=1) / math.sqrt(200))
    assert 0.77 <= float((np.abs(z) > 1.959964).mean()) <= 0.83


def test_the_sd_of_a_paired_yes_no_comparison_comes_from_its_discordant_tasks() -> None:
    # 24 tasks, 2 only the baseline solved, 8 only the other: p10 = 1/12, p01 = 1/3
    assert discordance_sd(2, 8, 24) == pytest.approx(math.sqrt(1 / 12 + 1 / 3 - (1 / 12 - 1 / 3) ** 2))
    # no discordant task: as if one had differed, so no comparison claims a zero MDE
    assert discordance_sd(0, 0, 24) == least_sd(24, 1) == pytest.approx(math.sqrt(1 / 24 - 1 / 24**2))


def test_a_plan_splits_the_variance_between_tasks_and_seeds() -> None:
    plan = Plan(0.5, 0.1, correlation=0.0, seed_share=0.0)
    # independent arms, no seed noise: sd^2 = 0.25 + 0.24 whatever the replicates
    assert plan.variance(1) == pytest.approx(0.49) and plan.variance(5) == pytest.approx(0.49)
    seeds = Plan(0.5, 0.1, correlation=0.0, seed_share=1.0)
    assert seeds.variance(4) == pytest.approx(0.49 / 4)  # all within-task: replicates divide it
    assert seeds.tasks_needed(4) < seeds.tasks_needed(1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        Plan(0.95, 0.1)


def test_the_power_command_prints_the_tasks_needed_per_replicate_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--gain", "10", "--tasks", "24", "--replicates", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("detecting +10 points over a baseline of 50% with 80% power, two-sided alpha 0.05")
    rows = {line.split()[0]: line.split() for line in lines[2:5]}
    plan = Plan(0.5, 0.1)
    for replicates in (1, 3, 5):
        assert rows[str(replicates)][2] == str(plan.tasks_needed(replicates))
        assert rows[str(replicates)][3] == f"{plan.minimum_detectable_effect(24, replicates) * 100:.1f}"
    assert lines[-1].startswith("24 tasks x 3 replicate(s): a gain of +10 points is NOT detectable")
    assert main(["power", "--gain", "10", "--tasks", "2000"]) == 0
    assert "is detectable with 80% power" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--gain", "-5"], "--gain must be positive"),
    (["--gain", "60"], "must be between 0 and 1"),
    (["--gain", "5", "--replicates", "0"], "--replicates must be at least 1"),
])
def test_the_power_command_refuses_what_it_cannot_plan_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["power", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_a_minimum_detectable_effect_is_never_out_of_range() -> None:
    """One paired task has no spread to estimate (before: 0.0 pp, "any gain is
    detectable"), and an MDE beyond 100 points means none is: both are null, with a
    note that says why, in compare.json's and replicates.json's ``power``."""
    from pytest_evomemory.analysis.power import BEYOND_REACH, ONE_TASK, power_entry, power_line

    one = power_entry(0.0, 1, 1, "the discordant tasks")
    assert (one.minimum_detectable_effect, one.note) == (None, ONE_TASK)
    assert power_line("memory", one) == f"power: memory: on 1 tasks: {ONE_TASK}"
    two = power_entry(discordance_sd(0, 1, 2), 2, 1, "the discordant tasks")  # 2.80 * 0.5 / sqrt(2) = 0.99
    assert two.minimum_detectable_effect == pytest.approx(Z_SUM * 0.5 / math.sqrt(2), rel=1e-6)
    beyond = power_entry(0.9, 3, 1, "the discordant tasks")  # 2.80 * 0.9 / sqrt(3) = 1.46
    assert (beyond.minimum_detectable_effect, beyond.note) == (None, BEYOND_REACH)
    for tasks in range(2, 40):
        for sd in (0.0, 0.1, 0.5, 1.0):
            entry = power_entry(sd, tasks, 3, "x")
            effect = entry.minimum_detectable_effect
            assert (effect is None) == (entry.note is not None)
            assert effect is None or 0 < effect <= 1


def test_the_power_command_never_prints_a_gain_beyond_what_the_baseline_leaves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On 2 tasks no gain from a baseline of 50 % is detectable: said so, not "110.0 points"."""
    assert Plan(0.5, 0.1).minimum_detectable_effect(2, 1) is None
    assert main(["power", "--gain", "10", "--tasks", "2"]) == 0
    out = capsys.readouterr().out
    assert "none up to +50" in out and "NOT detectable" in out
    assert power_at(0.0, 0.5, 24) == pytest.approx(0.05) and power_at(0.01, 0.5, 2) >= 0.05  # never below alpha
    shown = [float(value) for value in re.findall(r"(\d+\.\d) points", out)]
    assert all(value <= 50 for value in shown), out
