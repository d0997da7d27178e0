"""A stream without memory (the control arm) is spread over xdist workers task by
task; a stream with memory stays whole, in order, on one worker. Either way the
results equal a serial run's."""

from __future__ import annotations

import re
from pathlib import Path

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


def test_a_control_stream_runs_on_every_worker_with_serial_results(pytester: pytest.Pytester) -> None:
    serial = pytester.runpytest_subprocess(f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", "--evomemory-output-dir=serial")
    parallel = pytester.runpytest_subprocess(
        f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", "--evomemory-output-dir=parallel", "-n", "2", "-v"
    )
    serial.assert_outcomes(passed=24)
    parallel.assert_outcomes(passed=24)
    workers = _workers_per_stream(parallel.outlines)
    assert workers["sample_facts"] == {"gw0", "gw1"}, workers
    assert workers["sample_choice"] == {"gw0", "gw1"}, workers
    assert _scores(pytester.path / "parallel") == _scores(pytester.path / "serial")
    summary = (pytester.path / "parallel" / "summary.json").read_text(encoding="utf-8")
    assert '"complete": true' in summary


def test_a_memory_stream_stays_whole_on_one_worker(pytester: pytest.Pytester) -> None:
    parallel = pytester.runpytest_subprocess(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-n", "2", "-v")
    parallel.assert_outcomes(passed=24)
    workers = _workers_per_stream(parallel.outlines)
    assert all(len(names) == 1 for names in workers.values()), workers
