"""Decisions both drivers (the pytest plugin, ``evomemory run``) take from the engine,
checked on the engine alone: no pytest session, no subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.errors import ConfigError
from pytest_evomemory.memory import InProcessMemory
from pytest_evomemory.reporting.progress import DEFAULT_INTERVAL, progress_interval
from pytest_evomemory.runtime.notrun import FailedStream, NotRun
from pytest_evomemory.runtime.session import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_TASKS,
    EXIT_OK,
    EXIT_USAGE,
    Outcome,
)

from ..conftest import SAMPLE_MEMORY_RUN


@pytest.mark.parametrize(
    ("outcome", "driver", "status"),
    [
        (Outcome(ran=True), EXIT_OK, EXIT_OK),
        (Outcome(failed=True, ran=True), EXIT_OK, EXIT_FAILED),  # a gate missed, a failed episode
        (Outcome(failed=True, ran=True), EXIT_NO_TASKS, EXIT_FAILED),
        (Outcome(interrupted=True, failed=True), EXIT_OK, EXIT_INTERRUPTED),  # resumable before failed
        (Outcome(stopped="2 failed episodes reached --max-errors", failed=True), EXIT_OK, EXIT_INTERRUPTED),
        # the driver's own failure or interruption stands (pytest's -x: tests failed)
        (Outcome(stopped="stopped early by -x/--maxfail"), EXIT_FAILED, EXIT_FAILED),
        (Outcome(failed=True), EXIT_INTERRUPTED, EXIT_INTERRUPTED),
        (Outcome(), EXIT_USAGE, EXIT_USAGE),
        # nothing collected: a resume with nothing left (or an empty shard) completes its run
        (Outcome(ran=True, complete_when_empty=True), EXIT_NO_TASKS, EXIT_OK),
        (Outcome(ran=True), EXIT_NO_TASKS, EXIT_NO_TASKS),
        (Outcome(ran=True, complete_when_empty=True), EXIT_OK, EXIT_OK),
    ],
)
def test_one_exit_status_for_both_drivers(outcome: Outcome, driver: int, status: int) -> None:
    assert outcome.exit_status(driver) == status


def test_the_cli_has_no_status_of_its_own() -> None:
    assert Outcome(stopped="the cost cap").exit_status() == EXIT_INTERRUPTED
    assert Outcome(failed=True).exit_status() == EXIT_FAILED
    assert Outcome().exit_status() == EXIT_OK


@pytest.mark.parametrize("raw", ["-5", "nan", "inf", "soon"])
def test_a_progress_interval_that_is_no_duration_is_refused_naming_the_setting(raw: str) -> None:
    with pytest.raises(ConfigError) as refused:
        progress_interval(raw, "evomemory_progress_interval")
    assert str(refused.value) == (
        f"ini option evomemory_progress_interval must be a number of seconds (0 or more), got {raw!r}; "
        "write e.g. evomemory_progress_interval = 10"
    )


@pytest.mark.parametrize(("raw", "seconds"), [(None, DEFAULT_INTERVAL), ("", DEFAULT_INTERVAL), ("0", 0.0), ("2.5", 2.5)])
def test_a_progress_interval_in_seconds(raw: str | None, seconds: float) -> None:
    assert progress_interval(raw, "evomemory_progress_interval") == seconds


# --------------------------------------------------------------------------- tasks that do not run


def test_a_stream_that_could_not_start_fails_its_first_task_and_skips_the_others() -> None:
    failed = FailedStream("arm:s", "stream 's' could not start: store down")
    first, second = failed.next_task("s"), failed.next_task("s")
    assert (first.failure, first.refused) == ("stream 's' could not start: store down", False)
    assert second == NotRun("not run: stream 's' could not start (see its first task)")


def test_a_refused_session_runs_no_task_and_fails_none() -> None:
    refused = FailedStream("s", "memory factory m:f returned a dict", refused=True)
    first, second = refused.next_task("s"), refused.next_task("s")
    assert first.refused and second.refused
    assert first.failure == "memory factory m:f returned a dict" and second.failure is None  # told once
    assert first.reason == "not run: the evomemory session is refused (see its error)"


def _second_stream_memory(second: Callable[[], Any]) -> Callable[[Any, Any], Any]:
    opened: list[object] = []

    def factory(memory_config: Any, context: Any) -> Any:
        opened.append(context)
        return second() if len(opened) == 2 else InProcessMemory()

    return factory


def _store_down() -> Any:
    raise ConnectionError("store down")


@pytest.mark.parametrize(
    ("second", "says"),
    [
        (_store_down, "raised ConnectionError: store down"),
        # a refusal once results are recorded fails that stream only (errors.SessionRefused)
        (lambda: {"not": "a memory"}, "returned a dict, which does not implement the MemorySystem protocol"),
    ],
    ids=["raises", "not_a_memory"],
)
def test_a_stream_that_could_not_start_is_one_failure_and_the_session_goes_on(
    tmp_path: Path, second: Callable[[], Any], says: str
) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=2)
    summary = run_benchmark(config, tmp_path / "out", memory_factory=_second_stream_memory(second))
    [failure] = summary["failed_episodes"]
    assert (failure["stream"], failure["phase"]) == ("sample_choice", "start")
    assert failure["reason"].startswith("stream 'sample_choice' could not start: ") and says in failure["reason"]
    assert {name: stream["tasks"] for name, stream in summary["streams"].items()} == {
        "sample_facts": 2, "sample_choice": 0
    }
    assert summary["completion"]["complete"] is False
