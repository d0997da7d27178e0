"""Sequence robustness is found whatever set the order, and an order that cannot
order is refused.

Two runs are the same arm in two orders when their resolved configs (run.json) are
equal apart from the order keys and some stream's recorded order differs
(:func:`pytest_evomemory.reporting.compare.order_only`): the order may come from the
config file, ``--set`` (``--evomemory-set``: tests/plugin/test_order_plugin.py), a
repeated session's arms or a merge of shards. Runtime level: ``evomemory run``,
``compare`` and ``merge`` in-process, the model-free recall baseline on the sample
streams.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.rundocs.compare import NO_OTHER_ORDER
from pytest_evomemory.runtime.order import order_streams

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN
from ..schema import assert_valid
from .test_order import config, stream


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _compare(tmp_path: Path, *run_dirs: Path) -> dict[str, Any]:
    output = tmp_path / "compare.html"
    assert evomemory(["compare", *map(str, run_dirs), "-o", str(output)]) == 0
    document = _json(output.with_suffix(".json"))
    assert_valid("compare.json", document)
    return dict(document)


def _orders(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(entry["label"], entry["baseline_order"], entry["order"]) for entry in document["sequence_robustness"]]


def test_two_orders_set_on_the_command_line_are_sequence_robustness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented recipe: one config, the order set with ``--set`` (run.json's
    ``overrides`` then differ, and the baseline has none); before, never reported."""
    given, shuffled, again = tmp_path / "given", tmp_path / "shuffled", tmp_path / "again"
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(given), "-q"]) == 0
    for directory in (shuffled, again):
        assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(directory), "-q",
                          "--set", "benchmark.order=shuffle", "--set", "benchmark.order_seed=4"]) == 0
    document = _compare(tmp_path, given, shuffled)
    assert _orders(document) == [("sample_memory #2", "given", "shuffle")]  # one run name twice
    (entry,) = document["sequence_robustness"]
    assert entry["overall"]["paired_tasks"] == 24
    assert "sequence robustness: sample_memory #2 (shuffle) - baseline (given)" in capsys.readouterr().out
    # the same order spelled another way is no second order; a shuffle of another seed is
    assert _orders(_compare(tmp_path, shuffled, again)) == []
    spelled = tmp_path / "spelled"
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(spelled), "-q",
                      "--set", "benchmark.order=given", "--limit", "12"]) == 0
    assert _orders(_compare(tmp_path, given, spelled)) == []
    reseeded = tmp_path / "reseeded"
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(reseeded), "-q",
                      "--set", "benchmark.order=shuffle", "--set", "benchmark.order_seed=9"]) == 0
    assert _orders(_compare(tmp_path, shuffled, reseeded)) == [("sample_memory #2", "shuffle seed 4", "shuffle seed 9")]
    # anything else set besides the order is another arm, not another order
    other = tmp_path / "other"
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(other), "-q",
                      "--set", "benchmark.order=shuffle", "--set", "memory.top_k=1"]) == 0
    assert _orders(_compare(tmp_path, given, other)) == []
    seeded = tmp_path / "seeded"  # benchmark.seed also orders GPQA's options: not the order alone
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(seeded), "-q",
                      "--set", "benchmark.order=shuffle", "--set", "benchmark.seed=4"]) == 0
    assert _orders(_compare(tmp_path, given, seeded)) == []


def test_two_orders_of_an_arm_across_replicates_and_in_a_merge_are_sequence_robustness(
    tmp_path: Path, write_run_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two config files of one arm, each its own order (one from a shared benchmark
    file, one inline): in a repeated session (replicates.json), and in the merge of a
    sharded session (compare.json) equal to the session run on one machine."""
    monkeypatch.chdir(tmp_path)
    agent = {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"}
    (tmp_path / "bench.yaml").write_text("benchmark: sample\nlimit: 6\n", encoding="utf-8")
    forward = write_run_config("forward", benchmark="bench.yaml", agent=agent)
    backward = write_run_config("backward", benchmark={"benchmark": "sample", "limit": 6, "order": "shuffle"}, agent=agent)
    arms = ["--config", str(forward), "--config", str(backward)]
    assert evomemory(["run", *arms, "--repeats", "2", "--output-dir", "repeated", "-q"]) == 0
    replicates = _json(tmp_path / "repeated" / "replicates.json")
    assert replicates["vs_baseline"][0]["sequence_robustness"] == {"baseline_order": "given", "order": "shuffle"}

    assert evomemory(["run", *arms, "--output-dir", "whole", "-q"]) == 0
    for index in (1, 2):
        assert evomemory(["run", *arms, "--shard", f"{index}/2", "--output-dir", f"shard-{index}", "-q"]) == 0
    assert evomemory(["merge", "shard-1", "shard-2", "--output-dir", "merged"]) == 0
    merged, whole = (_json(tmp_path / name / "compare.json") for name in ("merged", "whole"))
    assert _orders(merged) == _orders(whole) == [("backward", "given", "shuffle")]
    assert merged["sequence_robustness"][0]["overall"] == whole["sequence_robustness"][0]["overall"]


def test_arms_that_differ_in_more_than_their_order_are_not_sequence_robustness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """...and the comparison says why there is none, in compare.json, the terminal and
    the page: never an empty list to be read as "the order made no difference"."""
    assert evomemory(["run", "--config", str(SAMPLE_NO_MEMORY_RUN), "--output-dir", str(tmp_path / "a"), "-q"]) == 0
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(tmp_path / "b"), "-q",
                      "--set", "benchmark.order=shuffle"]) == 0
    capsys.readouterr()
    methods = _json(tmp_path / "a" / "summary.json")["methods"]  # summary.json names its intervals' methods too
    assert methods["accuracy_ci"].startswith("95% Wilson score interval") and "denominator" in methods
    document = _compare(tmp_path, tmp_path / "a", tmp_path / "b")
    assert _orders(document) == []
    [note] = document["sequence_robustness_notes"]
    assert note.startswith("sample_memory ran another order (shuffle) than the baseline (given) but also differs in ")
    assert "agent" in note and "not sequence robustness" in note
    assert f"sequence robustness: {note}" in capsys.readouterr().out
    assert "not sequence robustness" in (tmp_path / "compare.html").read_text(encoding="utf-8")
    # two arms in one order: no order to compare, and the file says that too
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(tmp_path / "c"), "-q"]) == 0
    assert _compare(tmp_path, tmp_path / "a", tmp_path / "c")["sequence_robustness_notes"] == [NO_OTHER_ORDER]
    assert "sequence robustness" not in capsys.readouterr().out  # nothing asked, nothing printed


# --------------------------------------------------------------------------- an order that cannot order


@pytest.mark.parametrize("kind", ["easy_to_hard", "hard_to_easy"])
def test_a_difficulty_order_of_tasks_all_tied_is_refused_naming_why(kind: str) -> None:
    with pytest.raises(ConfigError, match=rf"key 'order': {kind} cannot order stream 'flat': every one of its 3 tasks "
                                          r"has difficulty 2 \(source: the task's metadata\.difficulty\)"):
        order_streams([stream("s", [1, 2]), stream("flat", [2, 2, 2])], config(order=kind), Path("."), "b.yaml")
    # one task has no order to get wrong; partial ties keep the source order (tests/runtime/test_order.py)
    (single,) = order_streams([stream("one", [5])], config(order=kind), Path("."), "b.yaml")
    assert single.order.kind == kind


@pytest.mark.parametrize("solved", ["none", "all"])
def test_an_order_from_a_run_that_solved_none_or_all_is_refused_before_any_task(
    tmp_path: Path, write_run_config: Any, capsys: pytest.CaptureFixture[str], solved: str
) -> None:
    """The control solved nothing (or everything): easy_to_hard would run the source
    order, as hard_to_easy would, and the comparison would read "+0.0 pp, p 1.000"."""
    reference = tmp_path / "reference"
    assert evomemory(["run", "--config", str(SAMPLE_NO_MEMORY_RUN), "--output-dir", str(reference), "-q"]) == 0
    if solved == "all":  # every score right, the summary counted from them, as a run would write it
        scores = [{**json.loads(line), "correct": True} for line in (reference / "scores.jsonl").read_text().splitlines()]
        (reference / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scores))
        summary = _json(reference / "summary.json")
        for metrics in (*summary["streams"].values(), summary["overall"]):
            metrics["correct"] = metrics["tasks"]
        (reference / "summary.json").write_text(json.dumps(summary))
    capsys.readouterr()
    out = tmp_path / "out"
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", str(out),
                      "--set", "benchmark.order=easy_to_hard", "--set", f"benchmark.order_from={reference}"]) == 4
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error, error
    assert (f"key 'order_from': easy_to_hard cannot order stream 'sample_facts': the reference run(s) solved {solved} "
            "of its 12 tasks, so every task is equally difficult") in error
    assert not out.exists()  # refused before anything ran or was written
