"""A stream without memory (the control arm) is spread over xdist workers task by
task; a stream with memory stays whole, in order, on one worker. Either way the
results equal a serial run's.

Sessions run in this process (``pytester.runpytest``; the -n 2 workers are processes
anyway)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN, read_jsonl

_WORKER_OF_ITEM = re.compile(r"\[(gw\d+)\].*test_task\[([^/\]]+)/")


def _workers_per_stream(output: list[str]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for line in output:
        match = _WORKER_OF_ITEM.search(line)
        if match:
            seen.setdefault(match.group(2), set()).add(match.group(1))
    return seen


def _scores(run_dir: Path) -> list[tuple[str, str, int, bool, str | None]]:
    return [
        (s["stream"], s["task_id"], s["position"], s["correct"], s["extracted"])
        for s in read_jsonl(run_dir / "scores.jsonl")
    ]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


def _summary(directory: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    return document


@pytest.mark.slow
def test_a_control_stream_runs_on_every_worker_with_serial_results(pytester: pytest.Pytester) -> None:
    serial = _run(pytester, f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", "--evomemory-output-dir=serial")
    parallel = _run(
        pytester, f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", "--evomemory-output-dir=parallel", "-n", "2", "-v"
    )
    serial.assert_outcomes(passed=24)
    parallel.assert_outcomes(passed=24)
    workers = _workers_per_stream(parallel.outlines)
    # xdist's first batch hands each worker tasks of the first stream, so that stream
    # is split whatever the load; which worker takes the later tasks depends on
    # scheduling, so only "some stream ran on both workers" is asserted.
    assert set(workers) == {"sample_facts", "sample_choice"}, workers
    assert any(ran_on == {"gw0", "gw1"} for ran_on in workers.values()), workers
    assert _scores(pytester.path / "parallel") == _scores(pytester.path / "serial")
    summary = (pytester.path / "parallel" / "summary.json").read_text(encoding="utf-8")
    assert '"complete": true' in summary


@pytest.mark.slow
def test_a_memory_stream_stays_whole_on_one_worker_and_the_run_equals_the_serial_one(pytester: pytest.Pytester) -> None:
    """Scores, summary (but for timings) and every answer equal a serial run's; the
    progress lines come from the controller. (One -n 2 session for what were also
    test_plugin.py::test_parallel_run_with_xdist_equals_the_serial_run and
    test_newcomer.py::test_progress_under_xdist_comes_from_the_controller.)"""
    serial = _run(pytester, f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=serial")
    serial.assert_outcomes(passed=24)
    parallel = _run(pytester, f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=parallel", "-n", "2", "-v")
    parallel.assert_outcomes(passed=24)
    workers = _workers_per_stream(parallel.outlines)
    assert set(workers) == {"sample_facts", "sample_choice"}, workers
    assert all(len(names) == 1 for names in workers.values()), workers
    # the controller reports each stream's progress, to its final line
    finals = sorted(line for line in parallel.outlines if line.startswith("evomemory sample_") and "12/12" in line)
    assert [line.split(":")[0] for line in finals] == ["evomemory sample_choice", "evomemory sample_facts"]
    assert all("acc 58.3%" in line for line in finals)
    a, b = pytester.path / "serial", pytester.path / "parallel"
    assert (a / "scores.jsonl").read_text() == (b / "scores.jsonl").read_text()

    def stable(summary: dict[str, Any]) -> dict[str, Any]:
        for block in [summary["overall"], *summary["streams"].values()]:
            block.pop("seconds")
            block["per_stimulus"].pop("seconds")
        return {k: v for k, v in summary.items() if k not in ("started", "finished")}

    assert stable(_summary(a)) == stable(_summary(b))

    def by_task(path: Path) -> list[tuple[str, str, str, Any]]:
        rows = read_jsonl(path / "responses.jsonl")
        return sorted((r["stream"], r["task_id"], r["kind"], r["final_answer"]) for r in rows)

    assert by_task(a) == by_task(b)


@pytest.mark.slow
def test_xdist_gateways_given_by_tx_run_each_memory_stream_whole_as_n_workers_do(pytester: pytest.Pytester) -> None:
    """pytest-xdist's own gateways (``--tx``, docs/scale.md: how a session reaches other
    hosts), tried with two local ``popen`` gateways and ``--dist load``: the controller
    distributes without ``-n``, each memory stream runs whole on one gateway, and the
    scores equal a serial run's."""
    config = f"--evomemory-config={SAMPLE_MEMORY_RUN}"
    serial = _run(pytester, config, "--evomemory-output-dir=serial", "--evomemory-limit=4")
    serial.assert_outcomes(passed=8)
    gateway = f"popen//python={sys.executable}"
    remote = _run(pytester, config, "--evomemory-output-dir=remote", "--evomemory-limit=4",
                  "--tx", gateway, "--tx", gateway, "--dist", "load", "-v")
    remote.assert_outcomes(passed=8)
    workers = _workers_per_stream(remote.outlines)
    assert set(workers) == {"sample_facts", "sample_choice"} and all(len(names) == 1 for names in workers.values()), workers
    assert _scores(pytester.path / "serial") == _scores(pytester.path / "remote")
    assert '"complete": true' in (pytester.path / "remote" / "summary.json").read_text(encoding="utf-8")
