"""Shards and their merge, through ``evomemory run --shard`` and ``evomemory merge``
in-process: the plan, the share each shard runs, the refusals, and the merge that
equals the run of the whole session on one machine, record for record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.runtime.shards import Cell, ShardPlan, plan_shards, session_cells
from pytest_evomemory.streams import Stream

from ..conftest import SAMPLE_MEMORY_RUN
from ..schema import assert_run_dir_valid, assert_valid

#: four streams of different sizes: the plan must balance them by work
SIZES = {"alpha": 7, "beta": 4, "gamma": 3, "delta": 2}


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without its times (they differ between any two runs)."""
    for block in [summary["overall"], *summary["streams"].values()]:
        block.pop("seconds", None)
        block.get("per_stimulus", {}).pop("seconds", None)
    return {key: value for key, value in summary.items() if key not in ("started", "finished", "wall_seconds")}


def same_run(merged: Path, whole: Path) -> None:
    """The merged run is the unsharded one: scores record for record, summary and report."""
    assert (merged / "scores.jsonl").read_text() == (whole / "scores.jsonl").read_text()
    assert (merged / "responses.jsonl").read_text().count("\n") == (whole / "responses.jsonl").read_text().count("\n")
    assert stable(json.loads((merged / "summary.json").read_text())) == stable(json.loads((whole / "summary.json").read_text()))
    assert (merged / "report.html").is_file()
    for transcript in (whole / "transcripts").iterdir():
        assert (merged / "transcripts" / transcript.name).read_text() == transcript.read_text()
    assert_run_dir_valid(merged)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A memory arm and a control arm on four ``files`` streams (the recall baseline:
    deterministic, model-free); later tasks repeat earlier ones, so memory helps."""
    files = []
    for name, size in SIZES.items():
        lines = [
            json.dumps({"id": f"{name}{index}", "prompt": f"What is the code of {name} item {index % 3}?",
                        "target": f"code-{name}-{index % 3}"})
            for index in range(size)
        ]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(f"  - {{name: {name}, path: {name}.jsonl, match_mode: exact}}\n")
    (tmp_path / "bench.yaml").write_text("benchmark: files\nfiles:\n" + "".join(files), encoding="utf-8")
    for name, strategy in (("control", "none"), ("memory", "deterministic_recall")):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nbenchmark: bench.yaml\n"
            f"agent: {{kind: recall_baseline, memory_strategy: {strategy}, baseline: {{fallback_answer: unknown}}}}\n"
            "memory: {backend: inprocess}\n",
            encoding="utf-8",
        )
    monkeypatch.chdir(tmp_path)
    return tmp_path


ARMS = ["--config", "control.yaml", "--config", "memory.yaml"]


def test_the_plan_balances_expected_calls_deterministically_and_keeps_each_stream_whole() -> None:
    # the full-size Evo-Memory streams, two arms, a task and a feedback call per task
    cells = [Cell(name, 2 * 2 * size) for name, size in
             {"aime_2024": 30, "gpqa_diamond": 198, "mmlu_pro": 2312, "toolbench": 186}.items()]
    plan = plan_shards(cells, 2, "f" * 64, ["control", "memory"])
    assert plan.cells == (("mmlu_pro",), ("aime_2024", "gpqa_diamond", "toolbench"))
    assert plan.calls == (9248, 1656) and sum(plan.calls) == sum(cell.calls for cell in cells)
    assert plan_shards(list(reversed(cells)), 2, "f" * 64, ["control", "memory"]).cells_of(1) == ("mmlu_pro",)
    # greedy longest-processing-time, not the count of cells: 7+2 | 4+3 (not 7 | 4+3+2)
    small = plan_shards([Cell("a", 7), Cell("b", 4), Cell("c", 3), Cell("d", 2)], 2, "0" * 64, ["x"])
    assert small.cells == (("a", "d"), ("b", "c")) and small.calls == (9, 7)
    assert plan_shards([Cell("a", 1)], 3, "0" * 64, ["x"]).cells == (("a",), (), ())
    index, again = ShardPlan.from_record(small.record(2))
    assert index == 2 and again == small


def test_the_arm_unit_plans_each_arms_run_of_a_stream_and_balances_the_full_grid() -> None:
    """Issue 27's grid: the four streams at full size, 2 methods x 3 orders = 6 arms, a
    task and a feedback call per task. By stream, MMLU-Pro with its six arms is 85 % of
    the work (the floor: 1.70 at N = 2); by arm, the busiest shard is within 1.2 x total/N."""
    sizes = {"aime_2024": 30, "gpqa_diamond": 198, "mmlu_pro": 2312, "toolbench": 186}
    streams = [Stream(name, tuple(BenchmarkSample(f"{name}{i}", name, i, "?", "?") for i in range(size)), "exact")
               for name, size in sizes.items()]
    arms = [f"{method}-{order}" for order in ("given", "shuffle", "easy") for method in ("control", "memory")]
    cells = session_cells([(arm, streams) for arm in arms], "arm")
    assert [cell.name for cell in cells[:7]] == [*(f"{arm}:aime_2024" for arm in arms), f"{arms[0]}:gpqa_diamond"]
    assert {cell.calls for cell in cells if cell.stream == "mmlu_pro"} == {2 * 2312}
    by_stream = plan_shards(session_cells([(arm, streams) for arm in arms]), 2, "f" * 64, arms)
    assert by_stream.unit == "stream" and max(by_stream.calls) > 1.6 * sum(by_stream.calls) / 2
    for count in (2, 4, 8):
        plan = plan_shards(cells, count, "f" * 64, arms)
        assert plan == plan_shards(list(cells), count, "f" * 64, arms) and plan.unit == "arm"  # deterministic
        assert sum(plan.calls) == sum(cell.calls for cell in cells)
        assert max(plan.calls) <= 1.2 * sum(plan.calls) / count, (count, plan.calls)
        for arm in arms:  # each arm's run of a stream is in exactly one shard, whole
            owners = plan.owners(arm)
            assert set(owners) == set(sizes)
            assert sorted(s for i in range(1, count + 1) for s in plan.streams_of(i, arm)) == sorted(sizes)
        index, again = ShardPlan.from_record(plan.record(count))
        assert index == count and again == plan
        assert plan.difference(by_stream).startswith("cells by stream, not by arm")
    # a record written before the arm unit reads as the stream unit
    old = by_stream.record(1).written()
    del old["unit"]
    assert ShardPlan.from_record(old) == (1, by_stream)
    with pytest.raises(ValueError, match="does not name its arm"):
        ShardPlan.from_record({**by_stream.record(1).written(), "unit": "arm"})


#: per unit: the option, the plan of three shards, and each shard's streams per arm
UNIT_PLANS = {
    "stream": ([], [["alpha"], ["beta"], ["gamma", "delta"]], [28, 16, 20],
               {1: {"control": {"alpha"}, "memory": {"alpha"}}, 2: {"control": {"beta"}, "memory": {"beta"}},
                3: {"control": {"gamma", "delta"}, "memory": {"gamma", "delta"}}}),
    # one arm's run of a stream per cell: shard 2 holds no run of the control arm at all
    "arm": (["--shard-by", "arm"],
            [["control:alpha", "control:gamma", "memory:delta"], ["memory:alpha", "memory:gamma"],
             ["control:beta", "memory:beta", "control:delta"]], [24, 20, 20],
            {1: {"control": {"alpha", "gamma"}, "memory": {"delta"}}, 2: {"control": set(), "memory": {"alpha", "gamma"}},
             3: {"control": {"beta", "delta"}, "memory": {"beta"}}}),
}


@pytest.mark.parametrize("unit", list(UNIT_PLANS))
def test_three_shards_merged_equal_the_run_on_one_machine(
    project: Path, capsys: pytest.CaptureFixture[str], unit: str
) -> None:
    by, cells, calls, held = UNIT_PLANS[unit]
    assert evomemory(["run", *ARMS, "--output-dir", "whole", "-q"]) == 0
    for index in (1, 2, 3):
        assert evomemory(["run", *ARMS, "--shard", f"{index}/3", *by, "--output-dir", f"shard-{index}", "-q"]) == 0
    out = capsys.readouterr().out
    assert "evomemory: shard 2/3" in out and "evomemory: shard plan (config " in out
    # each shard ran whole streams (every arm of them, or its cells' arms), and is complete on its own
    recorded = json.loads((project / "shard-1" / "memory" / "run.json").read_text())["shard"]
    assert (recorded["unit"], recorded["cells"], recorded["calls"]) == (unit, cells, calls)
    for index, arms in held.items():
        for arm, streams in arms.items():
            summary = json.loads((project / f"shard-{index}" / arm / "summary.json").read_text())
            assert set(summary["streams"]) == streams and summary["completion"]["complete"] is True
            assert_valid("run.json", json.loads((project / f"shard-{index}" / arm / "run.json").read_text()))
        # the arm unit's shard may hold one arm of a pair: it leaves the comparison to the merge
        assert (project / f"shard-{index}" / "compare.json").is_file() is (unit == "stream")
    assert ("no comparison here: with --shard-by=arm a shard may hold one arm of a pair" in out) is (unit == "arm")

    assert evomemory(["merge", "shard-3", "shard-1", "shard-2", "--output-dir", "merged", "--min-gain", "5"]) == 0
    assert "met: overall gain of memory over control" in capsys.readouterr().out
    for arm in ("control", "memory"):
        same_run(project / "merged" / arm, project / "whole" / arm)
    merged, whole = (json.loads((project / name / "compare.json").read_text()) for name in ("merged", "whole"))
    assert merged["streams"] == whole["streams"] and merged["overall"] == whole["overall"]
    record = json.loads((project / "merged" / "memory" / "run.json").read_text())
    assert record["merged"]["count"] == 3 and record["merged"]["unit"] == unit
    assert_valid("run.json", record)
    assert_valid("arms.json", json.loads((project / "merged" / "arms.json").read_text()))
    # a gain gate judges the comparison of every stream: the merge's, not a shard's
    assert evomemory(["run", *ARMS, "--shard", "1/3", *by, "--min-gain", "5", "--output-dir", "g"]) == 4
    assert "give it to 'evomemory merge'" in capsys.readouterr().err and not (project / "g").exists()


def test_shards_of_a_repeated_session_merge_to_its_replicates_and_their_comparison(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27's cell holds every arm *and replicate* of a stream: each replicate is
    planned as an arm of its own (its own calls), and the merge writes every replicate
    where the session would (``<arm>/r<i>``), the arms' manifest with its repeats, and
    replicates.json: all equal to the repeated session on one machine. (Before, the plan
    named replicates by their run name and the merge failed with a KeyError.)"""
    repeated = [*ARMS, "--repeats", "2"]
    assert evomemory(["run", *repeated, "--output-dir", "whole", "-q"]) == 0
    for index in (1, 2):
        assert evomemory(["run", *repeated, "--shard", f"{index}/2", "--output-dir", f"shard-{index}", "-q"]) == 0
    recorded = json.loads((project / "shard-1" / "memory" / "r2" / "run.json").read_text())["shard"]
    assert recorded["arms"] == ["control@r1", "control@r2", "memory@r1", "memory@r2"]
    # four arms' calls per stream: alpha (7 tasks) x 2 turns x 4 arms, and so on
    assert sorted(recorded["calls"]) == sorted([8 * (7 + 2), 8 * (4 + 3)])
    capsys.readouterr()
    assert evomemory(["merge", "shard-2", "shard-1", "--output-dir", "merged", "--min-gain", "-100"]) == 0
    assert "met: overall gain of memory over control" in capsys.readouterr().out
    for arm in ("control", "memory"):
        for replicate in ("r1", "r2"):
            same_run(project / "merged" / arm / replicate, project / "whole" / arm / replicate)
    merged, whole = (json.loads((project / name / "replicates.json").read_text()) for name in ("merged", "whole"))
    assert_valid("replicates.json", merged)
    for key in ("arms", "vs_baseline"):
        assert json.dumps(merged[key]).replace(str(project / "merged"), "") == \
            json.dumps(whole[key]).replace(str(project / "whole"), "")
    manifest = json.loads((project / "merged" / "arms.json").read_text())
    assert manifest["repeats"] == 2 and [arm["run_dir"] for arm in manifest["arms"]] == [
        "control/r1", "control/r2", "memory/r1", "memory/r2"]
    assert (project / "merged" / "compare-r2.html").is_file() and not (project / "merged" / "compare.json").exists()
    # one replicate's directory given for its shard: named, and where the shard is
    assert evomemory(["merge", "shard-1/memory/r2", "shard-2", "--output-dir", "wrong"]) == 2
    assert capsys.readouterr().err.strip() == (
        "evomemory merge: error: shard-1/memory/r2 is the run directory of 'memory@r2', one of the 4 arms of a "
        "shard; give the shard's output directory, the one holding arms.json: shard-1"
    )
    assert not (project / "wrong").exists()
    # a shard killed before one replicate ended: the merge names it; the merged session resumes whole
    shutil.rmtree(project / "merged")
    scores = project / "shard-2" / "memory" / "r2" / "scores.jsonl"
    scores.write_text(scores.read_text().splitlines(keepends=True)[0])
    (scores.parent / "summary.json").unlink()
    assert evomemory(["merge", "shard-1", "shard-2", "--output-dir", "merged"]) == 1
    assert "shard 2/2 (shard-2) is incomplete: arm 'memory@r2': no summary.json" in capsys.readouterr().err
    assert evomemory(["run", "--resume", "merged", "-q"]) == 0
    for arm in ("control", "memory"):
        for replicate in ("r1", "r2"):
            same_run(project / "merged" / arm / replicate, project / "whole" / arm / replicate)


def test_a_shard_without_cells_is_complete_and_the_sample_merges_to_the_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    config = ["--config", str(SAMPLE_MEMORY_RUN), "--limit", "4"]
    assert evomemory(["run", *config, "--output-dir", "whole", "-q"]) == 0
    for index in (1, 2, 3):  # two streams, three shards: the third runs nothing
        assert evomemory(["run", *config, "--shard", f"{index}/3", "--output-dir", f"s{index}", "-q"]) == 0
    assert "shard 3/3: no cell" in capsys.readouterr().out
    empty = json.loads((tmp_path / "s3" / "summary.json").read_text())
    assert empty["completion"] == {"complete": True, "tasks_planned": 0, "tasks_run": 0, "reason": None}
    assert evomemory(["merge", "s1", "s2", "--output-dir", "merged"]) == 0  # the empty shard may be left out
    same_run(tmp_path / "merged", tmp_path / "whole")
    # an overall gate is judged where tasks ran: not by a shard that ran none of the arm's (by stream or by arm)
    for unit in ("stream", "arm"):
        assert evomemory(["run", *config, "--shard", "3/3", "--shard-by", unit, "--min-accuracy", "0.99",
                          "--output-dir", f"gated-{unit}", "-q"]) == 0


def test_a_shard_refuses_a_directory_of_another_plan_or_another_shard(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evomemory(["run", "--config", "memory.yaml", "--shard", "1/2", "--output-dir", "s", "-q"]) == 0
    before = (project / "s" / "run.json").read_text()
    capsys.readouterr()
    for other in (["--shard", "1/3"], ["--shard", "2/2"], ["--shard", "1/2", "--limit", "2"],
                  ["--shard", "1/2", "--shard-by", "arm"]):
        assert evomemory(["run", "--config", "memory.yaml", *other, "--output-dir", "s", "-q"]) == 4
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert "--shard=" in err and "holds shard 1/" in err and "--output-dir" in err, err
    assert (project / "s" / "run.json").read_text() == before and not (project / "s" / "history").exists()
    # the same shard again replaces its own run, as any run does
    assert evomemory(["run", "--config", "memory.yaml", "--shard", "1/2", "--output-dir", "s", "-q"]) == 0
    assert "holds shard 1/2 of another plan (cells by stream, not by arm (the shard-by option))" in err
    for bad in ("0/2", "3/2", "2", "a/b", "1/2000"):
        assert evomemory(["run", "--config", "memory.yaml", "--shard", bad]) == 4
        assert "--shard must be I/N" in capsys.readouterr().err
    assert evomemory(["run", "--config", "memory.yaml", "--shard", "1/2", "--shard-by", "task"]) == 4
    assert "--shard-by must be one of stream, arm, got 'task'" in capsys.readouterr().err
    assert evomemory(["run", "--config", "memory.yaml", "--shard-by", "arm", "--output-dir", "n"]) == 4
    assert "--shard-by chooses what a shard's cell is; give --shard=I/N too" in capsys.readouterr().err
    assert not (project / "n").exists()


def test_merge_refuses_other_plans_overlaps_and_missing_shards_and_names_incomplete_ones(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = ["run", "--config", "memory.yaml", "-q"]
    for index in (1, 2, 3):
        assert evomemory([*run, "--shard", f"{index}/3", "--output-dir", f"s{index}"]) == 0
    assert evomemory([*run, "--shard", "1/2", "--output-dir", "other"]) == 0
    for index in (1, 2, 3):  # the same N by arm: another plan, whose cells name arm and stream
        assert evomemory([*run, "--shard", f"{index}/3", "--shard-by", "arm", "--output-dir", f"a{index}"]) == 0
    assert evomemory([*run, "--output-dir", "whole"]) == 0
    capsys.readouterr()

    def refused(*dirs: str) -> list[str]:
        assert evomemory(["merge", *dirs, "--output-dir", "merged"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines and all(line.startswith("evomemory merge: error: ") for line in lines), lines
        assert not (project / "merged").exists()
        return lines

    assert "shard 3/3 is missing (cells gamma, delta)" in refused("s1", "s2")[0]
    assert "both hold shard 2/3 (cells beta): their cells overlap" in refused("s1", "s2", "s2", "s3")[0]
    assert "different plans: 2 shards, not 3" in refused("s1", "s2", "s3", "other")[0]
    assert "different plans: cells by arm, not by stream" in refused("s1", "s2", "a3")[0]
    assert "shard 3/3 is missing (cells memory:gamma, memory:delta)" in refused("a1", "a2")[0]
    assert "both hold shard 1/3 (cells memory:alpha): their cells overlap" in refused("a1", "a1", "a2", "a3")[0]
    assert evomemory(["run", "--resume", "a2", "-q"]) == 0  # resumed by arm, as recorded (else another plan)
    assert evomemory(["merge", "a1", "a2", "a3", "--output-dir", "merged"]) == 0
    same_run(project / "merged", project / "whole")
    shutil.rmtree(project / "merged")
    assert "records no shard" in refused("s1", "s2", "s3", "whole")[0]
    assert "nowhere is not a directory" in refused("s1", "s2", "s3", "nowhere")[0]
    run_document = project / "s3" / "run.json"
    kept = run_document.read_bytes()
    run_document.write_bytes(kept[: len(kept) // 2])  # cut: damaged, not a shard that never started
    assert "s3/run.json is damaged (not a JSON object): the file was edited or cut; run that shard again" in refused(
        "s1", "s2", "s3")[0]
    run_document.write_bytes(kept)
    # a shard killed before it ended: two of its four tasks recorded, no summary
    scores = project / "s2" / "scores.jsonl"
    scores.write_text("".join(scores.read_text().splitlines(keepends=True)[:2]))
    (project / "s2" / "summary.json").unlink()
    assert evomemory(["merge", "s1", "s2", "s3", "--output-dir", "merged"]) == 1
    err = capsys.readouterr().err
    assert "shard 2/3 (s2) is incomplete: no summary.json" in err
    completion = json.loads((project / "merged" / "summary.json").read_text())["completion"]
    assert completion["complete"] is False and "shard 2/3" in completion["reason"]
    assert completion["tasks_run"] == 14 and completion["tasks_planned"] == 16
    # the merged run resumes on one machine; the shard resumes as itself (its shard recorded)
    assert evomemory(["run", "--resume", "merged", "-q"]) == 0
    same_run(project / "merged", project / "whole")
    assert evomemory(["run", "--resume", "s2", "-q"]) == 0
    assert json.loads((project / "s2" / "summary.json").read_text())["completion"]["tasks_run"] == 4
    assert evomemory(["merge", "s1", "s2", "s3", "--output-dir", "merged"]) == 0
    same_run(project / "merged", project / "whole")


def test_locomo_conversations_shard_and_merge_to_the_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoCoMo's cells are its conversations (ingestion and questions stay together):
    two shards merged equal the run on one machine, mean F1 per category included."""
    monkeypatch.chdir(tmp_path)
    config = ["--config", "locomo_sample_memory"]
    assert evomemory(["run", *config, "--output-dir", "whole", "-q"]) == 0
    for index in (1, 2):
        assert evomemory(["run", *config, "--shard", f"{index}/2", "--output-dir", f"s{index}", "-q"]) == 0
    shards = [json.loads((tmp_path / f"s{index}" / "run.json").read_text())["shard"] for index in (1, 2)]
    assert sorted(cell for shard in shards for cell in shard["cells"][shard["index"] - 1]) == [
        "conv-sample-1", "conv-sample-2"]
    assert evomemory(["merge", "s1", "s2", "--output-dir", "merged"]) == 0
    same_run(tmp_path / "merged", tmp_path / "whole")
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert merged["categories"] == json.loads((tmp_path / "whole" / "summary.json").read_text())["categories"]
    assert merged["categories"]
