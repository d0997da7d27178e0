"""The garbage collector around a run's start-up (pytest_evomemory.util.heap)."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.memory import InProcessMemory
from pytest_evomemory.util.heap import StartupHeap

from ..conftest import SAMPLE_MEMORY_RUN


@pytest.fixture(autouse=True)
def collector_enabled_afterwards() -> Iterator[None]:
    yield
    assert gc.isenabled(), "a test left the collector paused"


def test_paused_until_settled_then_collecting_again() -> None:
    heap = StartupHeap(may_freeze=False)
    with heap.paused(settle_after=False):
        assert not gc.isenabled()
    assert not gc.isenabled()  # still paused: collection is not over
    heap.settle()
    assert gc.isenabled()


def test_a_failing_block_resumes_the_collector() -> None:
    heap = StartupHeap(may_freeze=False)
    with pytest.raises(RuntimeError), heap.paused(settle_after=False):
        raise RuntimeError("config error")
    assert gc.isenabled()


def test_a_collector_the_user_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        heap = StartupHeap(may_freeze=False)
        with heap.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_freezing_only_in_a_process_that_exists_for_the_run() -> None:
    code = """
import gc, os
from pytest_evomemory.util.heap import StartupHeap
os.environ.pop("PYTEST_CURRENT_TEST", None)
heap = StartupHeap.for_process(fresh=False)
assert heap.may_freeze
with heap.paused():
    kept = [object() for _ in range(10)]
assert gc.get_freeze_count() > 0 and gc.isenabled()
os.environ["PYTEST_CURRENT_TEST"] = "tests/test_x.py::test_y (call)"
assert not StartupHeap.for_process(fresh=False).may_freeze  # pytester's in-process run
assert StartupHeap.for_process(fresh=True).may_freeze
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_streams_parts_are_built_with_the_collector_paused(tmp_path: Path) -> None:
    """Session.start_stream pauses it, for either driver: the agent, model client and
    memory a stream builds live as long as the stream, start-up work like the imports."""
    seen: list[bool] = []

    def memory_factory(memory_config: Any, context: Any) -> InProcessMemory:
        seen.append(gc.isenabled())
        return InProcessMemory()

    run_benchmark(load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=1), tmp_path / "out", memory_factory=memory_factory)
    assert seen == [False, False]  # one build per stream, each paused


def test_exiting_freezes_only_in_a_process_that_exists_for_the_run() -> None:
    """At exit the heap is frozen (the interpreter's last collection skips it), where
    freezing is allowed: never in a run inside a test."""
    code = """
import gc
from pytest_evomemory.util.heap import StartupHeap
kept = [[object()] for _ in range(100)]
StartupHeap(may_freeze=False).exiting()
assert gc.get_freeze_count() == 0
StartupHeap(may_freeze=True).exiting()
assert gc.get_freeze_count() >= 100
"""
    subprocess.run([sys.executable, "-c", code], check=True)
