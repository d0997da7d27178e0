"""Repeats through pytest, serial and under xdist: each replicate is an arm of its own
(items ``<arm>@r<i>:<stream>/<task>``, its own run directory and memory per stream).
The statistics and ``evomemory run`` are tested in tests/runtime/test_replicates.py."""

from __future__ import annotations

import json

import pytest

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN, read_jsonl
from ..schema import assert_json_report_valid


@pytest.mark.parametrize(
    "workers", [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)]
)
def test_replicates_run_as_arms_with_their_own_memory(pytester: pytest.Pytester, workers: list[str]) -> None:
    args = ["-p", "no:randomly", f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-repeats=2",
            "--evomemory-output-dir=rep", "-v", "--json-report", "--json-report-file=report.json", *workers]
    result = pytester.runpytest(*args)  # in process: under -n 2 the workers are processes anyway
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=48)
    output = result.stdout.str()
    assert "test_task[sample_memory@r1:sample_facts/f01]" in output
    assert "test_task[sample_memory@r2:sample_choice/c12]" in output
    rep = pytester.path / "rep"
    # the replicates differ only in their seed, which the given order and the model-free
    # agent do not read: each scores as the run alone does (14 of 24), so no replicate
    # recalled what the other retained
    outcomes = []
    for index in (1, 2):
        scores = read_jsonl(rep / f"r{index}" / "scores.jsonl")
        outcomes.append([(s["stream"], s["task_id"], s["correct"]) for s in scores])
        summary = json.loads((rep / f"r{index}" / "summary.json").read_text(encoding="utf-8"))
        assert summary["overall"]["correct"] == 14 and summary["replicate"]["index"] == index
    assert outcomes[0] == outcomes[1]
    document = json.loads((rep / "replicates.json").read_text(encoding="utf-8"))
    assert document["arms"][0]["overall"]["accuracies"] == [14 / 24, 14 / 24]
    assert "2 replicate(s), seeds 0, 1" in output
    # the files named as a single comparison names its two: the page, then its data
    assert f"comparison: {rep.resolve() / 'replicates.html'}" in output
    assert f"comparison data: {rep.resolve() / 'replicates.json'}" in output
    # the JSON report: every replicate an arm, and the comparison across them
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert_json_report_valid(report)
    block = report["evomemory"]
    assert [(arm["name"], arm["replicate"]["seed"]) for arm in block["arms"]] == [
        ("sample_memory@r1", 0), ("sample_memory@r2", 1)
    ]
    assert block["replicates"] == document and block["comparison"] is None


def test_the_gain_gate_of_replicates_fails_the_session_and_reaches_the_json_report(pytester: pytest.Pytester) -> None:
    """As a user gates CI on it: a missed gate is exit 1, and pytest-json-report's
    ``gains`` carry each verdict with its replicates and interval (the figures are
    tests/runtime/test_replicates.py's)."""
    result = pytester.runpytest(
        "-p", "no:randomly", f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", f"--evomemory-config={SAMPLE_MEMORY_RUN}",
        "--evomemory-repeats=2", "--evomemory-limit=2", "--evomemory-min-gain=100", "--evomemory-output-dir=rep",
        "--json-report", "--json-report-file=report.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["MISSED: overall gain of sample_memory over sample_no_memory * the per-task mean over 2 replicates*"])
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert_json_report_valid(report)
    [gain] = report["evomemory"]["gains"]
    assert (gain["scope"], gain["replicates"], gain["met"]) == ("overall", 2, False)
    mean = json.loads((pytester.path / "rep" / "replicates.json").read_text(encoding="utf-8"))["vs_baseline"][0]["overall"]
    assert gain["difference_points"] == pytest.approx(mean["mean"] * 100)
    # no task differs here: the paired t is 0/0, and the test is the exact sign-flip's
    assert (gain["requires"], gain["test"], gain["p_value"]) == ("estimate", "sign-flip", mean["p_value"])
    assert mean["test"] == "sign-flip" and gain["interval_method"] == "Agresti-Min on the effective number of tasks"
