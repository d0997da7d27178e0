"""The report statistics against published worked examples and reference implementations.

Published values:

* Wilson intervals: Newcombe (1998), "Two-sided confidence intervals for the single
  proportion: comparison of seven methods", Statist. Med. 17:857-872, Table II,
  method 3 (81/263, 15/148, 0/20, 1/29, 29/29).
* Paired difference and exact McNemar: Fagerland, Lydersen & Laake (2017),
  *Statistical Analysis of Contingency Tables*, chapter 8, the Cavo et al. (2012)
  table [[59, 6], [16, 80]]: the Wald interval with Agresti-Min adjustment -0.0621
  (-0.1182 to -0.0045), McNemar exact conditional P = 0.052479, as asserted by the
  authors' R package ocbe-uio/contingencytables, tests/testthat/test-ch8.R at commit
  ac7bf36e91360ed47c269d65bc54e0134d7fdde1 (data in R/datasets.R).

Reference implementation re-implemented below: ocbe-uio/contingencytables
R/Wald_CI_AgrestiMin_paired_2x2.R (Agresti & Min 2005, its standard error written
on the pseudo-counts), checked on every table with n <= 12.
"""

from __future__ import annotations

import itertools
import math

import pytest

from pytest_evomemory.analysis.stats import (
    PairedTable,
    Proportion,
    compare_paired,
    mcnemar_exact,
    pair,
    paired_difference_interval,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("successes", "total", "low", "high"),
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718), (29, 29, 0.8830, 1.0)],
)
def test_wilson_matches_newcombe_1998_table_ii(successes: int, total: int, low: float, high: float) -> None:
    got = wilson_interval(successes, total)
    assert round(got[0], 4) == low and round(got[1], 4) == high


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    assert Proportion(0, 0).to_dict() == {"correct": 0, "tasks": 0, "accuracy": None, "ci_low": None, "ci_high": None}
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_cavo_2012_paired_difference_and_exact_mcnemar() -> None:
    # Rows: the measure whose accuracy is subtracted from (this run), columns: the baseline.
    table = PairedTable(both=59, only_first=16, only_second=6, neither=80)
    comparison = compare_paired(
        {i: i < 59 + 16 for i in range(161)},  # baseline right on the first 75 tasks
        {i: i < 59 or 75 <= i < 81 for i in range(161)},  # both on 59, this run alone on 6
    )
    assert comparison.table == table
    assert round(comparison.difference or 0, 4) == -0.0621
    low, high = paired_difference_interval(table) or (0, 0)
    assert (round(low, 4), round(high, 4)) == (-0.1182, -0.0045)
    assert round(mcnemar_exact(16, 6), 6) == 0.052479
    assert comparison.to_dict()["mcnemar_p"] == mcnemar_exact(16, 6)


def _binomial_two_sided(k: int, n: int) -> float:
    """Brute force: the probability of every outcome no more likely than k, under p = 1/2."""
    probabilities = [math.comb(n, i) / 2**n for i in range(n + 1)]
    return min(1.0, sum(p for p in probabilities if p <= probabilities[k] * (1 + 1e-12)))


@pytest.mark.parametrize("n", range(0, 31))
def test_mcnemar_equals_the_two_sided_binomial_test(n: int) -> None:
    for k in range(n + 1):
        expected = 1.0 if n == 0 else _binomial_two_sided(k, n)
        assert mcnemar_exact(k, n - k) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_agrees_with_scipy_binomtest() -> None:
    stats = pytest.importorskip("scipy.stats")
    for b, c in [(0, 1), (1, 7), (16, 6), (40, 60), (250, 300), (3, 3)]:
        assert mcnemar_exact(b, c) == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def _contingencytables_agresti_min(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """contingencytables' Wald_CI_AgrestiMin_paired_2x2 on [[a, b], [c, d]], line by line.

    a: both right, b: first measure right only, c: second measure right only,
    d: both wrong; the interval is for p1 - p2 = (b - c) / n.
    """
    n12, n21 = b + 0.5, c + 0.5
    total = a + b + c + d + 2.0
    se = math.sqrt((n12 + n21) - (n12 - n21) ** 2 / total) / total
    z = 1.959963984540054
    return max(-1.0, (n12 - n21) / total - z * se), min((n12 - n21) / total + z * se, 1.0)


def test_agresti_min_matches_contingencytables_on_every_small_table() -> None:
    checked = 0
    for n in range(1, 13):
        for a, b, c in itertools.product(range(n + 1), repeat=3):
            d = n - a - b - c
            if d < 0:
                continue
            # Our "second" is the package's first measure (p1), our baseline its second.
            ours = paired_difference_interval(PairedTable(both=a, only_first=c, only_second=b, neither=d))
            assert ours == pytest.approx(_contingencytables_agresti_min(a, b, c, d), abs=1e-12), (a, b, c, d)
            checked += 1
    assert checked > 1000


def test_the_paired_interval_stays_in_range_holds_the_estimate_and_is_never_zero_width() -> None:
    for n in range(1, 61):
        for gained in range(n + 1):
            for lost in range(n + 1 - gained):
                low, high = paired_difference_interval(PairedTable(n - gained - lost, lost, gained, 0)) or (0, 0)
                assert -1 <= low <= (gained - lost) / n <= high <= 1 and low < high, (n, gained, lost)


def test_interval_contains_the_estimate_and_flips_with_the_arms() -> None:
    for table in [PairedTable(3, 1, 5, 2), PairedTable(0, 0, 0, 4), PairedTable(10, 0, 0, 0), PairedTable(0, 6, 0, 0)]:
        low, high = paired_difference_interval(table) or (0, 0)
        difference = (table.only_second - table.only_first) / table.total
        assert -1 <= low <= difference <= high <= 1
        swapped = PairedTable(table.both, table.only_second, table.only_first, table.neither)
        assert paired_difference_interval(swapped) == pytest.approx((-high, -low))


def test_pairing_uses_only_the_tasks_both_ran() -> None:
    table = pair({"a": True, "b": False, "c": True}, {"b": True, "c": True, "d": False})
    assert table == PairedTable(both=1, only_first=0, only_second=1, neither=0)
    empty = compare_paired({"a": True}, {"b": True})
    assert empty.difference is None and empty.interval is None and empty.p_value is None


def test_an_order_pair_without_a_shared_task_says_why_it_has_no_figure() -> None:
    """Sequence robustness of two orders that share no scored task (one stopped
    before any): no difference, interval or p, and the reason instead, in the file
    (every paired test's ``no_test``) and on the terminal line."""
    from pytest_evomemory.analysis.stats import NO_PAIRS, order_difference
    from pytest_evomemory.reporting.terminal import _sequence_lines
    from pytest_evomemory.rundocs.compare import PairedTest, SequenceRobustness

    empty = order_difference({("s", "1"): True}, {("s", "2"): False}).to_dict()
    assert (empty["difference"], empty["ci_low"], empty["mcnemar_p"], empty["no_test"]) == (None, None, None, NO_PAIRS)
    assert order_difference({("s", "1"): True}, {("s", "1"): False}).to_dict()["no_test"] is None
    entry = SequenceRobustness(label="b", baseline_order="given", order="shuffle", overall=PairedTest(**empty))
    assert _sequence_lines([entry]) == [f"sequence robustness: b (shuffle) - baseline (given): {NO_PAIRS}"]
