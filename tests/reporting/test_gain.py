"""The gain gate on comparison documents built from known outcome tables."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.gain import GainThreshold, check_gains, parse_min_gain
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.options import render
from pytest_evomemory.reporting.compare import build_comparison
from pytest_evomemory.reporting.rundata import RunData


def _run(label: str, outcomes: dict[str, list[bool]]) -> RunData:
    scores = [
        {"stream": stream, "task_id": f"t{index}", "position": index, "correct": correct}
        for stream, results in outcomes.items()
        for index, correct in enumerate(results)
    ]
    streams = {
        stream: {"tasks": len(results), "correct": sum(results)} for stream, results in outcomes.items()
    }
    overall = {"tasks": len(scores), "correct": sum(s["correct"] for s in scores)}
    summary: dict[str, Any] = {"run": label, "streams": streams, "overall": overall}
    return RunData(run_dir=Path(label), label=label, summary=summary, given_scores=scores)


def _document() -> dict[str, Any]:
    control = _run("control", {"a": [False] * 10, "b": [True] * 5 + [False] * 5})
    memory = _run("memory", {"a": [True] * 6 + [False] * 4, "b": [True] * 5 + [False] * 5})
    return build_comparison([control, memory])


def test_a_gate_reads_the_paired_difference_in_points() -> None:
    document = _document()
    gates = parse_min_gain(["30", "a=60", "b=0.1"], ["a", "b"])
    results = {(r.threshold.scope, r.met) for r in check_gains(document, gates)}
    # overall: 6 of 20 more -> +30 points; a: +60; b: +0
    assert results == {("overall", True), ("a", True), ("b", False)}
    by_scope = {r.threshold.scope: r for r in check_gains(document, gates)}
    assert by_scope["overall"].difference == pytest.approx(0.30)
    assert by_scope["a"].paired_tasks == 10
    assert by_scope["a"].p_value == pytest.approx(2 / 2**6)  # six discordant tasks, all one way
    assert "met: a gain of memory over control +60.0 points over 10 paired tasks" in by_scope["a"].describe()
    assert by_scope["b"].describe().startswith("MISSED: b gain of memory over control +0.0 points")
    # compare.json's power: 6 of 20 tasks discordant, all one way: sd(d)^2 = 0.3 - 0.3^2
    power = document["overall"]["vs_baseline"][0]["power"]
    sd = math.sqrt(0.3 - 0.3**2)
    assert power["sd_difference"] == pytest.approx(sd) and power["tasks"] == 20 and power["replicates"] == 1
    assert power["minimum_detectable_effect"] == pytest.approx((1.959964 + 0.841621) * sd / math.sqrt(20), rel=1e-6)


def test_streams_are_judged_before_overall_and_a_later_margin_replaces_an_earlier_one() -> None:
    gates = parse_min_gain(["5", "a=1", "10"], ["a"])
    assert gates == [GainThreshold("overall", 10.0), GainThreshold("a", 1.0)]
    assert [r.threshold.scope for r in check_gains(_document(), gates)] == ["a", "overall"]


def test_an_incomplete_comparison_meets_no_gate() -> None:
    results = check_gains(_document(), [GainThreshold("overall", -100.0)], complete=False)
    assert [r.met for r in results] == [False]
    assert results[0].describe().startswith("MISSED (incomplete run): overall gain")
    assert results[0].document().written()["complete"] is False


def test_a_stream_no_run_covered_in_common_misses() -> None:
    control = _run("control", {"a": [False, False]})
    memory = _run("memory", {"b": [True, True]})
    document = build_comparison([control, memory])
    result = check_gains(document, [GainThreshold("a", -50.0)])[0]
    assert (result.difference, result.paired_tasks, result.met) == (None, 0, False)
    assert "n/a (no task both ran)" in result.describe()


@pytest.mark.parametrize(
    ("value", "message"),
    [("lots", "expected [STREAM=]POINTS"), ("a=", "expected [STREAM=]POINTS"), ("x=5", "unknown stream 'x'"),
     ("150", "between -100 and 100"), ("nan", "between -100 and 100")],
)
def test_bad_margins_are_refused_with_the_option_named(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_min_gain([value], ["a"])
    assert render(str(raised.value), "pytest").startswith("--evomemory-min-gain")
    assert message in str(raised.value)
    assert raised.value.option == "min-gain"


def test_a_gate_can_require_the_lower_bound_or_the_p_value() -> None:
    """``min-gain-by``: the same +30 points overall (McNemar p = 2/2^6 over 20 tasks,
    Agresti & Min's interval about [+7, +48]) meets a 10-point margin on the estimate and on
    the p-value, misses it on the lower bound of a 20-point margin, and misses the
    p-value rule on stream b (+0 points, p = 1)."""
    document = _document()
    overall = document["overall"]["vs_baseline"][0]
    low = overall["ci_low"] * 100
    assert 0 < low < 20 < overall["difference"] * 100

    def verdict(margin: str, requires: str) -> list[bool]:
        return [r.met for r in check_gains(document, parse_min_gain([margin], ["a", "b"], requires=requires))]

    assert verdict("20", "estimate") == [True] and verdict("20", "lower-bound") == [False]
    assert verdict(f"{low - 0.01}", "lower-bound") == [True]
    assert verdict("20", "p-value") == [True] and verdict("b=0", "p-value") == [False]
    (result,) = check_gains(document, parse_min_gain(["20"], ["a", "b"], requires="lower-bound"))
    line = result.describe()
    # the verdict line carries the estimate and the bound, and says what was required
    assert line.startswith("MISSED: overall gain of memory over control +30.0 points over 20 paired tasks, 95% CI [")
    assert f"[{low:+.1f}, " in line and line.endswith("minimum +20.0 points (required of the 95% CI's lower bound)")
    assert result.document().written()["requires"] == "lower-bound" and result.document().written()["test"] == "McNemar"
    with pytest.raises(ConfigError, match="requires one of estimate, lower-bound, p-value"):
        parse_min_gain(["5"], [], requires="bound")
