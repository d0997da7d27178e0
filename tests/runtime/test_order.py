"""Task order as an experimental factor: benchmark.order, its sources of difficulty,
its record in run.json, and resume refusing another order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.configs.load import order_keys_problem
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.rundir import RunDirError
from pytest_evomemory.runtime.order import check_resume_order, order_streams, task_order_digest
from pytest_evomemory.runtime.run import BenchmarkRun
from pytest_evomemory.streams import Stream
from pytest_evomemory.streams.evomemory.converters import aime_problem_number, gpqa_difficulty


def stream(name: str, difficulties: list[float | None]) -> Stream:
    samples = tuple(
        BenchmarkSample(
            f"t{index}", name, index, f"question {index}", "x",
            metadata={} if value is None else {"difficulty": value},
        )
        for index, value in enumerate(difficulties)
    )
    return Stream(name, samples, "exact")


def ids(ordered: Stream) -> list[str]:
    return [sample.task_id for sample in ordered.samples]


def config(**keys: Any) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate({"benchmark": "files", **keys})


# --------------------------------------------------------------------------- orders


def test_given_keeps_the_source_order_and_records_it() -> None:
    (ordered,) = order_streams([stream("s", [3, 1, 2])], config(), Path("."), "b.yaml")
    assert ids(ordered) == ["t0", "t1", "t2"]
    assert ordered.order.written() == {"kind": "given", "tasks_sha256": task_order_digest(["t0", "t1", "t2"])}


def test_shuffle_is_reproducible_from_its_seed_and_differs_per_seed_and_stream() -> None:
    streams = [stream("a", [None] * 20), stream("b", [None] * 20)]

    def shuffled(**keys: Any) -> list[list[str]]:
        return [ids(s) for s in order_streams(streams, config(order="shuffle", **keys), Path("."), "b.yaml")]

    first = shuffled(seed=7)
    assert first == shuffled(seed=7)  # reproducible
    assert first != shuffled(seed=8)
    assert first[0] != first[1]  # each stream its own permutation
    assert sorted(first[0]) == sorted(ids(streams[0]))  # the same tasks, only reordered
    assert shuffled(order_seed=7, seed=99) == first  # order_seed wins over seed (which also seeds GPQA)
    ordered = order_streams(streams, config(order="shuffle", seed=7), Path("."), "b.yaml")[0]
    assert [sample.position for sample in ordered.samples] == list(range(20))
    assert ordered.order.kind == "shuffle" and ordered.order.seed == 7
    # pinned: a run's order must be reproducible by a later version from its recorded seed
    (eight,) = order_streams([stream("a", [None] * 8)], config(order="shuffle", seed=7), Path("."), "b.yaml")
    assert ids(eight) == ["t2", "t7", "t0", "t6", "t3", "t1", "t4", "t5"]


def test_difficulty_orders_keep_ties_in_the_source_order() -> None:
    source = [stream("s", [2, 1, 3, 1, 2])]
    (easy,) = order_streams(source, config(order="easy_to_hard"), Path("."), "b.yaml")
    (hard,) = order_streams(source, config(order="hard_to_easy"), Path("."), "b.yaml")
    assert ids(easy) == ["t1", "t3", "t0", "t4", "t2"]
    assert ids(hard) == ["t2", "t0", "t4", "t1", "t3"]
    assert easy.order.difficulty == "source: the task's metadata.difficulty"


def test_a_stream_without_difficulty_is_refused_naming_it_and_the_way_out() -> None:
    with pytest.raises(ConfigError, match=r"stream 'plain' has none for 2 task\(s\).*order_from"):
        order_streams([stream("s", [1, 2]), stream("plain", [1, None, None])], config(order="easy_to_hard"), Path("."), "b.yaml")


def test_order_keys_are_checked_against_the_order(tmp_path: Path) -> None:
    assert order_keys_problem(config(order="shuffle", order_from="runs/ref")) is not None
    assert "order_from" in str(order_keys_problem(config(order="shuffle", order_from="runs/ref")))
    assert "order_seed" in str(order_keys_problem(config(order="easy_to_hard", order_seed=3)))
    assert order_keys_problem(config(order="shuffle", order_seed=3)) is None
    assert order_keys_problem(config(order="hard_to_easy", order_from=["a", "b"])) is None
    with pytest.raises(ValueError, match="names no run"):
        config(order="easy_to_hard", order_from=[])
    # the loader refuses them with the file's name, before any stream is read
    path = write_run(tmp_path, {"order": "given", "order_from": "reference"}, "mismatched")
    with pytest.raises(ConfigError, match=r"mismatched\.yaml.*key 'order_from' gives difficulties, which order 'given'"):
        load_run_config(path)
    with pytest.raises(ConfigError, match=r"key 'order_seed' seeds order 'shuffle', not 'easy_to_hard'"):
        load_run_config(path, ["benchmark.order=easy_to_hard", "benchmark.order_seed=3", "benchmark.order_from=null"])


# --------------------------------------------------------------------------- difficulty from the source


def test_aime_difficulty_is_the_problem_number_in_its_exam() -> None:
    assert aime_problem_number("https://artofproblemsolving.com/wiki/index.php/2024_AIME_I_Problems/Problem_7") == 7
    assert aime_problem_number("https://artofproblemsolving.com/wiki/index.php/2024_AIME_II_Problems/Problem_15") == 15
    assert aime_problem_number("https://example.org/no-number") is None
    assert aime_problem_number(None) is None


def test_gpqa_difficulty_is_the_mean_of_its_recorded_estimates() -> None:
    record = {
        "Writer's Difficulty Estimate": "Hard graduate level (could be a question on a hard graduate exam for PhD students in the domain)",
        "Question Difficulty_EV_1": "Easy undergraduate level (or easier)",
        "Question Difficulty_EV_2": "Post-graduate level or harder (only individuals with years of highly specialized expertise could reliably answer correctly)",
    }
    assert gpqa_difficulty(record) == pytest.approx((3 + 1 + 4) / 3)
    assert gpqa_difficulty({"Writer's Difficulty Estimate": "Hard undergraduate level (could be ...)"}) == 2
    assert gpqa_difficulty({"Question Difficulty_EV_1": "", "Other": "x"}) is None


# --------------------------------------------------------------------------- through a run


def write_run(directory: Path, benchmark: dict[str, Any], name: str = "run") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "name": name,
        "benchmark": {"benchmark": "sample", "limit": 6, **benchmark},
        "agent": {"kind": "recall_baseline"},
        "memory": {"backend": "inprocess", "top_k": 4},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_order_from_a_reference_run_puts_solved_tasks_first_and_is_recorded(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_benchmark(load_run_config(write_run(tmp_path, {})), reference)
    scores = [json.loads(line) for line in (reference / "scores.jsonl").read_text().splitlines()]
    solved = [s["task_id"] for s in scores if s["stream"] == "sample_facts" and s["correct"]]
    unsolved = [s["task_id"] for s in scores if s["stream"] == "sample_facts" and not s["correct"]]
    assert solved and unsolved  # the baseline learns along the stream: some of each

    path = write_run(tmp_path, {"order": "easy_to_hard", "order_from": "reference"}, "ordered")
    benchmark = BenchmarkRun(load_run_config(path), tmp_path / "out")
    facts = benchmark.by_name["sample_facts"]
    assert [s.task_id for s in facts.samples] == solved + unsolved
    document = benchmark.run_document("now")
    recorded = {s["name"]: s["order"] for s in document.written()["streams"]}
    assert recorded["sample_facts"]["kind"] == "easy_to_hard"
    assert recorded["sample_facts"]["difficulty"].startswith("order_from: 1 - share of 1 reference run")
    assert recorded["sample_facts"]["tasks_sha256"] == task_order_digest(solved + unsolved)


def test_order_from_a_missing_or_partial_run_is_refused_before_any_task(tmp_path: Path) -> None:
    path = write_run(tmp_path, {"order": "hard_to_easy", "order_from": "nowhere"}, "bad")
    with pytest.raises(ConfigError, match=r"order_from.*nowhere"):
        BenchmarkRun(load_run_config(path), tmp_path / "out")
    partial = tmp_path / "partial"
    run_benchmark(load_run_config(write_run(tmp_path, {"limit": 2}, "short")), partial)
    path = write_run(tmp_path, {"order": "hard_to_easy", "order_from": "partial"}, "bad2")
    with pytest.raises(ConfigError, match=r"no result for 4 task\(s\) of stream 'sample_facts'"):
        BenchmarkRun(load_run_config(path), tmp_path / "out")


def test_resume_refuses_another_order(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_benchmark(load_run_config(write_run(tmp_path, {})), reference)
    path = write_run(tmp_path, {"order": "hard_to_easy", "order_from": "reference"}, "ordered")
    out = tmp_path / "out"
    run_benchmark(load_run_config(path), out)
    run_benchmark(load_run_config(path), out, resume=True)  # the same order: fine

    # the config names the same reference run, whose results changed behind its back
    scores = reference / "scores.jsonl"
    flipped = [{**json.loads(line), "correct": not json.loads(line)["correct"]} for line in scores.read_text().splitlines()]
    scores.write_text("".join(json.dumps(s) + "\n" for s in flipped))
    # edited alone, the records no longer add up to the summary: refused as damage
    with pytest.raises(ConfigError, match=r"key 'order_from': .*scores\.jsonl does not add up to its summary\.json"):
        run_benchmark(load_run_config(path), out, resume=True)
    summary = json.loads((reference / "summary.json").read_text())
    for metrics in (*summary["streams"].values(), summary["overall"]):
        metrics["correct"] = metrics["tasks"] - metrics["errors"] - metrics["correct"]
    (reference / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(RunDirError, match="stream 'sample_facts' would run its tasks in another order"):
        run_benchmark(load_run_config(path), out, resume=True)

    # another seed is another config: the fingerprint says what changed
    shuffled = write_run(tmp_path, {"order": "shuffle", "order_seed": 1}, "shuffled")
    run_benchmark(load_run_config(shuffled), tmp_path / "shuffled")
    reseeded = write_run(tmp_path, {"order": "shuffle", "order_seed": 2}, "shuffled")
    with pytest.raises(RunDirError, match=r"order_seed \(was 1, now 2\)"):
        run_benchmark(load_run_config(reseeded), tmp_path / "shuffled", resume=True)


def test_a_run_json_from_before_orders_were_recorded_resumes_only_in_the_given_order(tmp_path: Path) -> None:
    given = order_streams([stream("s", [2, 1])], config(), Path("."), "b.yaml")
    check_resume_order({"streams": [{"name": "s"}]}, given, tmp_path)
    reordered = order_streams([stream("s", [2, 1])], config(order="easy_to_hard"), Path("."), "b.yaml")
    with pytest.raises(RunDirError, match="given then, easy_to_hard"):
        check_resume_order({"streams": [{"name": "s"}]}, reordered, tmp_path)
