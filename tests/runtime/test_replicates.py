"""Repeats: each arm run as independent replicates within one session, and the
comparison across them (mean ± CI, per-replicate paired tests, sequence robustness).

Runtime-level (``evomemory run`` in-process) with the model-free recall baseline on
the sample streams; the one pytester smoke (serial and ``-n 2``) is in
tests/plugin/test_replicates_plugin.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.stats import student_t_cdf
from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.reporting.compare import build_comparison
from pytest_evomemory.reporting.replicates import build_replicate_comparison
from pytest_evomemory.reporting.rundata import RunData
from pytest_evomemory.runtime.order import order_streams
from pytest_evomemory.streams import load_benchmark
from tests.conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN, read_jsonl
from tests.schema import assert_run_dir_valid, assert_valid

#: t(0.975, 9), from any table of Student's t
T_975_9 = 2.2621571627409915
#: the standard normal's 0.975 quantile
Z_975 = 1.959963984540054


def _run(label: str, correct: list[bool], replicate: int, seed: int, order: str = "given") -> RunData:
    """A run of ten tasks of stream ``s`` in memory: its outcomes and its summary."""
    scores = [{"stream": "s", "task_id": f"t{i}", "position": i, "correct": ok} for i, ok in enumerate(correct)]
    accuracy = sum(correct) / len(correct)
    metrics = {"tasks": len(correct), "correct": sum(correct), "accuracy": accuracy}
    summary = {"run": label, "streams": {"s": metrics}, "overall": metrics,
               "replicate": {"index": replicate, "count": 3, "seed": seed}}
    config = {"name": label, "benchmark": {"order": order}, "agent": {}, "memory": {}}
    return RunData(Path(f"/runs/{label}/r{replicate}"), label, summary, {"run": config}, scores)


def _first(n: int) -> list[bool]:
    return [i < n for i in range(10)]


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval written out, for the hand computations below."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_replicate_statistics_match_a_hand_computation() -> None:
    # control 5, 6, 7 of 10; memory 6, 8, 7 of 10 (replicate 3: t0 lost, t7 won)
    control = [_run("control", _first(5), 1, 0), _run("control", _first(6), 2, 1), _run("control", _first(7), 3, 2)]
    third = [1 <= i < 8 for i in range(10)]
    memory = [_run("memory", _first(6), 1, 0), _run("memory", _first(8), 2, 1), _run("memory", third, 3, 2)]
    document = build_replicate_comparison([("control", control), ("memory", memory)])
    assert_valid("replicates.json", {**document, "comparisons": [], "generated": "now"})
    assert document["replicates"] == 3 and document["seeds"] == [0, 1, 2]

    base = document["arms"][0]["overall"]
    assert base["accuracies"] == [0.5, 0.6, 0.7]
    assert base["mean"] == pytest.approx(0.6) and base["sd"] == pytest.approx(0.1) and base["tasks"] == 10
    # per task over the 3 replicates: t0-t4 1, t5 2/3, t6 1/3, t7-t9 0; their mean 0.6;
    # cluster-robust variance sum((m - 0.6)^2) / 10^2, effective n = 0.6 * 0.4 / that
    # (within [10, 30]), Wilson with t(0.975, 9) = 2.262157
    control_means = [1, 1, 1, 1, 1, 2 / 3, 1 / 3, 0, 0, 0]
    variance = sum((m - 0.6) ** 2 for m in control_means) / 100
    effective = 0.24 / variance
    assert base["effective_tasks"] == pytest.approx(effective) and 10 < effective < 30
    low, high = _wilson(0.6, effective, T_975_9)
    assert (base["ci_low"], base["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    # within-task variance: the mean of each task's variance over its 3 replicates (1/3 for t5 and t6)
    split = base["variance"]
    assert split["within_tasks"] == pytest.approx(2 * (1 / 3) / 10)
    task_variance = sum((m - 0.6) ** 2 for m in control_means) / 9
    assert split["between_tasks"] == pytest.approx(task_variance - split["within_tasks"] / 3)

    versus = document["vs_baseline"][0]
    overall = versus["overall"]
    # memory per task: t0 2/3, t1-t5 1, t6 2/3, t7 2/3, t8-t9 0 (mean 0.7); the per-task differences
    # -1/3, 0, 0, 0, 0, 1/3, 1/3, 2/3, 0, 0: mean 0.1 (the mean of the replicates' differences, too)
    assert overall["differences"] == [pytest.approx(0.1), pytest.approx(0.2), pytest.approx(0.0)]
    assert overall["mean"] == pytest.approx(0.1) and overall["paired_tasks"] == 10
    memory_means = [2 / 3, 1, 1, 1, 1, 1, 2 / 3, 2 / 3, 0, 0]
    # Agresti & Min on the effective number of tasks: over the 30 (task, replicate) pairs 4 only the
    # memory arm solved (t5 in r1, t6-t7 in r2, t7 in r3) and 1 only the control (t0 in r3); the design
    # effect of the per-task differences within [1, 3]; half a pseudo-observation per cell; t(9)
    differences = [b - a for a, b in zip(control_means, memory_means, strict=True)]
    cluster_variance = sum((d - 0.1) ** 2 for d in differences) / 100
    pairs = 30 * ((4 / 30 + 1 / 30 - 0.1**2) / 30) / cluster_variance
    assert 10 < pairs < 30
    gained, lost = (4 / 30 * pairs + 0.5) / (pairs + 2), (1 / 30 * pairs + 0.5) / (pairs + 2)
    half = T_975_9 * math.sqrt((gained + lost - (gained - lost) ** 2) / (pairs + 2))
    assert (overall["ci_low"], overall["ci_high"]) == (
        pytest.approx(gained - lost - half), pytest.approx(gained - lost + half)
    )
    # the paired t-test on the per-task differences: t = 0.1 / (sd / sqrt(10)), 9 degrees of freedom
    sd = math.sqrt(sum((d - 0.1) ** 2 for d in differences) / 9)
    t = 0.1 / (sd / math.sqrt(10))
    assert overall["test"] == "paired t"
    assert overall["p_value"] == pytest.approx(2 * (1 - student_t_cdf(t, 9)))
    power = overall["power"]  # (1.959964 + 0.841621) * sd(d) / sqrt(10), sd with divisor n
    assert power["minimum_detectable_effect"] == pytest.approx(
        (1.959964 + 0.841621) * math.sqrt(sum((d - 0.1) ** 2 for d in differences) / 10) / math.sqrt(10), rel=1e-5
    )
    # McNemar per replicate: 1 discordant (p = 1), 2 the same way (p = 2 * 1/4), 1 each way (p = 1)
    tests = overall["per_replicate"]
    assert [(t["only_baseline_correct"], t["only_this_correct"]) for t in tests] == [(0, 1), (0, 2), (1, 1)]
    assert [t["mcnemar_p"] for t in tests] == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(1.0)]
    assert [t["seed"] for t in tests] == [0, 1, 2] and versus["sequence_robustness"] is None
    assert versus["streams"]["s"] == overall  # one stream: the same numbers
    assert not [w for w in document["warnings"] if "replicate(s) per arm" in w]  # 3 replicates: no warning


def test_replicate_intervals_are_never_zero_width_and_stay_in_range() -> None:
    """Seeds that agree give Wilson's interval on the tasks (not [p, p]); an arm that
    solved nothing gets an upper bound; two replicates are warned about."""
    agree = [_run("control", _first(7), index, index - 1) for index in (1, 2)]
    nothing = [_run("none", _first(0), index, index - 1) for index in (1, 2)]
    document = build_replicate_comparison([("control", agree), ("none", nothing)])
    assert_valid("replicates.json", {**document, "comparisons": [], "generated": "now"})
    same = document["arms"][0]["overall"]
    # every task the same in both replicates: the design effect is K, at its bound: nothing is estimated
    # from the spread of the task means, so Wilson's interval on the 10 tasks, z as for one run
    assert (same["ci_low"], same["ci_high"]) == tuple(pytest.approx(b) for b in _wilson(0.7, 10, Z_975))
    assert same["ci_low"] < 0.7 < same["ci_high"] and same["effective_tasks"] == pytest.approx(10)
    zero = document["arms"][1]["overall"]
    assert zero["mean"] == 0 and zero["ci_low"] == 0 and 0.2 < zero["ci_high"] < 1
    difference = document["vs_baseline"][0]["overall"]
    assert -1 <= difference["ci_low"] < -0.7 < difference["ci_high"] <= 1
    assert any("2 replicate(s) per arm" in warning for warning in document["warnings"])


def test_two_orders_of_one_arm_are_sequence_robustness() -> None:
    given = _run("e2h", _first(5), 1, 0, "easy_to_hard")
    other = _run("h2e", [2 <= i < 9 for i in range(10)], 1, 0, "hard_to_easy")
    document = build_comparison([given, other])
    (entry,) = document["sequence_robustness"]
    assert (entry["baseline_order"], entry["order"]) == ("easy_to_hard", "hard_to_easy")
    # t0, t1 lost, t5..t8 won: +2 of 10, McNemar on 6 discordant, 2 against 4: p = 2 * P(X <= 2 | 6, 1/2)
    assert entry["overall"]["difference"] == pytest.approx(0.2)
    assert entry["overall"]["mcnemar_p"] == pytest.approx(2 * (1 + 6 + 15) / 64)
    assert entry["overall"]["ci_low"] < 0.2 < entry["overall"]["ci_high"]
    # another agent is no second order of the same arm
    changed = RunData(other.run_dir, "h2e", other.summary, {"run": {**other.run.run.written(), "agent": {"kind": "x"}}},
                      other.given_scores)
    assert build_comparison([given, changed])["sequence_robustness"] == []


def _cli(tmp_path: Path, *args: str) -> int:
    return evomemory(["run", "--output-dir", str(tmp_path / "out"), "--limit", "4", *args])


def test_repeated_arms_run_as_replicates_and_pair_replicate_by_replicate(tmp_path: Path) -> None:
    code = _cli(tmp_path, "--config", str(SAMPLE_NO_MEMORY_RUN), "--config", str(SAMPLE_MEMORY_RUN),
                "--repeats", "2", "--set", "benchmark.order=shuffle")
    assert code == 0
    out = tmp_path / "out"
    manifest = json.loads((out / "arms.json").read_text(encoding="utf-8"))
    assert_valid("arms.json", manifest)
    assert [arm["name"] for arm in manifest["arms"]] == [
        "sample_no_memory@r1", "sample_no_memory@r2", "sample_memory@r1", "sample_memory@r2"
    ]
    assert manifest["repeats"] == 2
    for arm in ("sample_no_memory", "sample_memory"):
        for index, seed in ((1, 0), (2, 1)):
            run_dir = out / arm / f"r{index}"
            assert_run_dir_valid(run_dir)
            run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
            summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
            assert run["replicate"] == summary["replicate"] == {"index": index, "count": 2, "seed": seed}
            assert run["run"]["benchmark"]["seed"] == seed and summary["run"] == arm
            assert all(stream["order"] == {**stream["order"], "kind": "shuffle", "seed": seed} for stream in run["streams"])
    document = json.loads((out / "replicates.json").read_text(encoding="utf-8"))
    assert_valid("replicates.json", document)
    assert document["comparisons"] == ["compare-r1.html", "compare-r2.html"]
    page = (out / "replicates.html").read_text(encoding="utf-8")
    assert "Evo-Memory replicates: sample_no_memory vs sample_memory" in page and 'href="compare-r2.html"' in page
    for index in (1, 2):
        compare = json.loads((out / f"compare-r{index}.json").read_text(encoding="utf-8"))
        assert_valid("compare.json", compare)
        assert [run["label"] for run in compare["runs"]] == ["sample_no_memory", "sample_memory"]
        assert compare["runs"][1]["run_dir"] == str(out / "sample_memory" / f"r{index}")
        # the per-replicate McNemar test in replicates.json is that replicate's comparison
        paired = document["vs_baseline"][0]["overall"]["per_replicate"][index - 1]
        assert paired["mcnemar_p"] == compare["overall"]["vs_baseline"][0]["mcnemar_p"]
    means = [arm["overall"]["mean"] for arm in document["arms"]]
    accuracies = [[json.loads((out / arm / f"r{i}" / "summary.json").read_text())["overall"]["accuracy"]
                   for i in (1, 2)] for arm in ("sample_no_memory", "sample_memory")]
    assert means == [pytest.approx(sum(a) / 2) for a in accuracies]

    # a resume of the directory continues every replicate (the repeats come from arms.json)
    before = (out / "sample_memory" / "r2" / "scores.jsonl").read_bytes()
    assert evomemory(["run", "--resume", str(out)]) == 0
    assert (out / "sample_memory" / "r2" / "scores.jsonl").read_bytes() == before

    # evomemory table --replicates reads the replicate run dirs as they are: one row per arm
    table = tmp_path / "table.csv"
    dirs = [str(out / arm / f"r{i}") for arm in ("sample_no_memory", "sample_memory") for i in (1, 2)]
    assert evomemory(["table", *dirs, "--replicates", "--format", "csv", "-o", str(table)]) == 0
    rows = table.read_text(encoding="utf-8").splitlines()
    assert [row.split(",")[0] for row in rows[1:]] == ["sample_no_memory", "sample_memory"]
    assert rows[0].endswith("replicates") and all(row.endswith(",2") for row in rows[1:])
    # the sample streams are not the paper's: they are the table's columns, each cell the replicates' mean
    assert rows[0].split(",")[:4] == ["method", "sample_facts", "sample_choice", "overall"]
    for row, arm in zip(rows[1:], document["arms"], strict=True):
        cells = row.split(",")
        assert [float(cells[1]), float(cells[3])] == [
            pytest.approx(arm["streams"]["sample_facts"]["mean"], abs=1e-6), pytest.approx(arm["overall"]["mean"], abs=1e-6)]
    # replicates.html draws the gains and each arm's curve across its replicates
    assert page.count('class="forest"') == 1 and page.count('<g class="gain"') == 3  # two streams and overall
    assert page.count('<svg class="curve"') == 2 and page.count('class="band"') == 4  # two arms per stream


def test_repeats_are_reproducible_from_their_seeds(
    tmp_path: Path, write_run_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_run_config(
        "shuffled", benchmark={"benchmark": "sample", "order": "shuffle", "seeds": [3, 11]}
    )
    assert evomemory(["run", "--config", str(config), "--output-dir", str(tmp_path / "rep")]) == 0
    # one config repeated: its replicates sit in the run's directory, with the comparison across them
    document = json.loads((tmp_path / "rep" / "replicates.json").read_text(encoding="utf-8"))
    assert document["seeds"] == [3, 11] and document["vs_baseline"] == [] and document["comparisons"] == []
    # a replicate is resumed with its session, never on its own
    assert evomemory(["run", "--resume", str(tmp_path / "rep" / "r1")]) == 4
    assert "resume the session's directory" in capsys.readouterr().err
    for index, seed in ((1, 3), (2, 11)):
        replicate = tmp_path / "rep" / f"r{index}"
        # the order a replicate ran is the shuffle its seed draws ...
        expected = order_streams(
            load_benchmark(BenchmarkConfig(benchmark="sample"), Path("."), "b"),
            BenchmarkConfig(benchmark="sample", order="shuffle", seed=seed), Path("."), "b",
        )
        ran = json.loads((replicate / "run.json").read_text(encoding="utf-8"))["streams"]
        assert [s["order"]["tasks_sha256"] for s in ran] == [s.order.tasks_sha256 for s in expected]
        # ... and a single run with that seed gives the same outcomes, task by task
        single = tmp_path / f"single-{seed}"
        assert evomemory(["run", "--config", str(config), "--output-dir", str(single),
                          "--set", "benchmark.seeds=null", "--set", f"benchmark.seed={seed}"]) == 0
        outcomes = [[(s["stream"], s["task_id"], s["correct"]) for s in read_jsonl(d / "scores.jsonl")]
                    for d in (replicate, single)]
        assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(("benchmark", "args", "says"), [
    ({"repeats": 2, "seeds": [1, 2]}, [], "not both"),
    ({"seeds": [1, 1]}, [], "listed twice"),
    ({"repeats": 2}, ["--config", str(SAMPLE_MEMORY_RUN)], "replicates pair by seed"),
    ({"repeats": 2}, ["--config", str(SAMPLE_MEMORY_RUN), "--min-gain", "0"], "replicates pair by seed"),
    ({}, ["--repeats", "2", "--min-gain", "0"], "gates the gain of an arm over the baseline"),
    ({}, ["--config", str(SAMPLE_MEMORY_RUN), "--min-gain-by", "lower-bound"], "says what --min-gain requires"),
    ({}, ["--config", str(SAMPLE_MEMORY_RUN), "--min-gain", "5", "--min-gain-by", "bound"],
     "--min-gain-by must be one of estimate, lower-bound, p-value"),
])
def test_repeats_that_cannot_pair_are_refused_before_any_task(
    tmp_path: Path, write_run_config: Any, capsys: pytest.CaptureFixture[str],
    benchmark: dict[str, Any], args: list[str], says: str,
) -> None:
    config = write_run_config("repeated", benchmark={"benchmark": "sample", **benchmark})
    assert _cli(tmp_path, "--config", str(config), *args) == 4
    error = capsys.readouterr().err
    assert says in error and error.count("\n") == 1 and "Traceback" not in error
    assert not (tmp_path / "out").exists()



def test_the_gain_gate_of_replicates_judges_the_mean_paired_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--min-gain`` with repeats: each arm's per-task mean difference across the
    replicates (replicates.json) against the margin, its interval and paired t p beside
    it; a missed gate fails the session (exit 1), as without repeats. ``--min-gain-by
    lower-bound`` judges the interval's lower bound instead."""
    args = ["--config", str(SAMPLE_NO_MEMORY_RUN), "--config", str(SAMPLE_MEMORY_RUN), "--repeats", "2"]
    assert _cli(tmp_path, *args, "--min-gain", "-100", "--min-gain", "sample_facts=100") == 1
    printed = capsys.readouterr()
    out = printed.out + printed.err  # a missed gate's lines are errors
    document = json.loads((tmp_path / "out" / "replicates.json").read_text(encoding="utf-8"))
    for scope, verdict in (("sample_facts", "MISSED"), ("overall", "met")):
        figures = document["vs_baseline"][0][scope] if scope == "overall" else document["vs_baseline"][0]["streams"][scope]
        low, high = figures["ci_low"] * 100, figures["ci_high"] * 100
        line = (f"{verdict}: {scope} gain of sample_memory over sample_no_memory {figures['mean'] * 100:+.1f} points, "
                f"the per-task mean over 2 replicates on {figures['paired_tasks']} paired tasks, "
                f"95% CI [{low:+.1f}, {high:+.1f}] (Agresti-Min on the effective number of tasks), "
                f"paired t p={figures['p_value']:.3g}")
        assert line in out, out
    assert "1 gain gate(s) missed; the session fails" in out
    # met: the same session passes
    assert _cli(tmp_path / "again", *args, "--min-gain", "-100") == 0
    capsys.readouterr()
    # a positive estimate whose interval reaches below the margin: met on the estimate, missed on the bound
    overall = document["vs_baseline"][0]["overall"]
    assert overall["mean"] > 0 > overall["ci_low"]
    assert _cli(tmp_path / "estimate", *args, "--min-gain", "0") == 0
    assert _cli(tmp_path / "bound", *args, "--min-gain", "0", "--min-gain-by", "lower-bound") == 1
    printed = capsys.readouterr()
    out = printed.out + printed.err
    assert f"MISSED: overall gain of sample_memory over sample_no_memory {overall['mean'] * 100:+.1f} points" in out
    assert "minimum +0.0 points (required of the 95% CI's lower bound)" in out


def test_a_session_of_one_arm_in_two_orders_shows_its_sequence_robustness(
    tmp_path: Path, write_run_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    given = write_run_config("given", benchmark={"benchmark": "sample"})
    shuffled = write_run_config("shuffled", benchmark={"benchmark": "sample", "order": "shuffle", "order_seed": 5})
    assert _cli(tmp_path, "--config", str(given), "--config", str(shuffled)) == 0
    out = tmp_path / "out"
    document = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert_valid("compare.json", document)
    (entry,) = document["sequence_robustness"]
    assert (entry["label"], entry["baseline_order"], entry["order"]) == ("shuffled", "given", "shuffle")
    # the order difference is the paired comparison of the two runs, task by task
    assert entry["overall"] == {key: document["overall"]["vs_baseline"][0][key] for key in entry["overall"]}
    assert "Sequence robustness" in (out / "compare.html").read_text(encoding="utf-8")
    assert "sequence robustness: shuffled (shuffle) - baseline (given)" in capsys.readouterr().out


def test_arms_whose_replicates_scored_other_tasks_are_paired_on_the_shared_ones_and_say_so() -> None:
    """The memory arm's replicates scored 8 of the 10 tasks: each arm's interval keeps
    its own tasks (10 and 8), the difference and its test pair the 8 both scored, and
    a warning names the counts (as compare.json's do for one run)."""
    control = [_run("control", _first(5), index, index - 1) for index in (1, 2)]
    memory = [_run("memory", _first(6)[:8], index, index - 1) for index in (1, 2)]
    document = build_replicate_comparison([("control", control), ("memory", memory)])
    assert [arm["overall"]["tasks"] for arm in document["arms"]] == [10, 8]
    versus = document["vs_baseline"][0]["overall"]
    assert versus["paired_tasks"] == 8 and versus["mean"] == pytest.approx(1 / 8)  # t5 gained, on 8 tasks
    assert ("s: memory and control scored different tasks; the difference uses the 8 tasks every replicate of "
            "both scored (2 only in control, 0 only in memory); each arm's interval uses its own") in document["warnings"]


def test_replicates_of_other_seeds_do_not_pair() -> None:
    """Replicate i of each arm is paired with the baseline's replicate i: given in
    another seed order, they would pair unlike histories, so that is refused, naming them."""
    from pytest_evomemory.reporting.rundata import ReportError

    control = [_run("control", _first(5), index, seed) for index, seed in ((1, 0), (2, 1))]
    memory = [_run("memory", _first(6), index, seed) for index, seed in ((1, 1), (2, 0))]
    with pytest.raises(ReportError, match="replicate 1 of memory ran with seed 1 and the baseline's with seed 0"):
        build_replicate_comparison([("control", control), ("memory", memory)])
