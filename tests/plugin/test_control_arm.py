"""A stream without memory (the control arm) is spread over xdist workers task by
task; a stream with memory stays whole, in order, on one worker. Either way the
results equal a serial run's.

Sessions run in this process (``pytester.runpytest``; the -n 2 workers are processes
anyway)."""

from __future__ import annotations

import json
import re
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
    assert workers["sample_facts"] == {"gw0", "gw1"}, workers
    assert workers["sample_choice"] == {"gw0", "gw1"}, workers
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
