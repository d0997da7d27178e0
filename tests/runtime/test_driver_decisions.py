"""Decisions both drivers (the pytest plugin, ``evomemory run``) take from the engine,
checked on the engine alone: no pytest session, no subprocess."""

from __future__ import annotations

import pytest

from pytest_evomemory.errors import ConfigError
from pytest_evomemory.reporting.progress import DEFAULT_INTERVAL, progress_interval
from pytest_evomemory.runtime.session import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_TASKS,
    EXIT_OK,
    EXIT_USAGE,
    Outcome,
)


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
