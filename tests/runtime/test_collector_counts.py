"""The collector's stop after each record, from counts it keeps as records arrive
(not by asking every arm): failed episodes summed over every arm, max errors, a run
directory that can no longer be written, records routed to their arm by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evomemory.options import CLI_FLAGS, SessionOptions
from pytest_evomemory.reporting.reports import REPORTS
from pytest_evomemory.runtime.records import Record, TaskRecord, WriteFailedRecord, error_record, from_wires
from pytest_evomemory.runtime.session import Session, SessionSetup

from ..conftest import SAMPLE_MEMORY_RUN


def _session(tmp_path: Path, *, writes: bool, max_errors: int | None = None) -> Session:
    options = SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), output_dir=str(tmp_path / "out"), repeats=3,
                             limit=2, max_errors=max_errors)
    session = Session.open(SessionSetup(options, CLI_FLAGS, tmp_path, writes=writes), reports=REPORTS)
    if writes:
        session.collector.preflight()
    return session


@pytest.fixture
def three_arms(tmp_path: Path) -> Iterator[Session]:
    session = _session(tmp_path, writes=False, max_errors=3)
    try:
        yield session
    finally:
        session.release()


def _failed(session: Session, arm: str, task: int) -> Record:
    """A failed episode of the ``task``-th task of ``arm``'s first stream."""
    samples = [task for task in session.plan.tasks() if task.key.startswith(f"{arm}:")]
    sample = samples[task].sample
    return error_record(sample, "boom").for_arm(arm)


def _scored(arm: str | None, task_id: str) -> TaskRecord:
    return TaskRecord.model_validate({
        "evomemory_arm": arm,
        "response": {"stream": "sample_facts", "task_id": task_id, "kind": "task", "messages": []},
        "scored": {"stream": "sample_facts", "task_id": task_id, "position": 0, "correct": True},
    })


def test_max_errors_counts_the_failed_episodes_of_every_arm(three_arms: Session) -> None:
    first, second, third = (arm.name for arm in three_arms.plan.arms)
    add = three_arms.collector.add_records
    assert add([_failed(three_arms, first, 0)]) is None
    assert add([_failed(three_arms, second, 0)]) is None
    # the same failed episode again (a second scored record of a task) is still one episode
    assert add([_failed(three_arms, second, 0)]) is None
    assert [arm.run.errors for arm in three_arms.plan.arms] == [1, 1, 0]
    assert add([_failed(three_arms, third, 1)]) == "3 failed episodes reached --max-errors"
    assert three_arms.state.stop_reason == "3 failed episodes reached --max-errors"


def test_records_of_several_arms_in_one_call_go_to_their_arms_in_order(three_arms: Session) -> None:
    first, second, third = three_arms.plan.arms
    stop = three_arms.collector.add_records([
        _scored(third.name, "f02"), _scored(first.name, "f01"), _scored("no-such-arm", "f01"),
        _scored(third.name, "f01"), _failed(three_arms, second.name, 0),
    ])
    assert stop is None  # one failed episode of three
    assert [score.task_id for score in first.run.collector.scores] == ["f01"]
    assert [score.task_id for score in third.run.collector.scores] == ["f02", "f01"]
    assert [arm.run.errors for arm in three_arms.plan.arms] == [0, 1, 0]
    assert not any(arm.started for arm in three_arms.plan.arms if not arm.run.collector.scores)


def test_a_record_without_an_arm_is_the_baselines(tmp_path: Path) -> None:
    session = _session(tmp_path, writes=False)
    try:
        [wire] = [record.wire() for record in [_scored(None, "f01")]]
        assert session.collector.add_records(from_wires([wire])) is None
        assert [score.task_id for score in session.plan.baseline.run.collector.scores] == ["f01"]
        assert all(not arm.run.collector.scores for arm in session.plan.arms[1:])
    finally:
        session.release()


def test_a_run_directory_that_can_no_longer_be_written_stops_the_session_until_its_arm_finished(
    tmp_path: Path,
) -> None:
    session = _session(tmp_path, writes=True)
    try:
        first, second, third = session.plan.arms
        add = session.collector.add_records
        assert add([_scored(first.name, "f01"), _scored(third.name, "f01")]) is None
        failure = WriteFailedRecord.model_validate(
            {"failure": {"stream": "sample_facts", "reason": "disk full"}, "evomemory_arm": third.name}
        )
        assert add([failure]) == "the results could not be written: disk full"
        assert session.state.stop_reason == "the results could not be written: disk full"
        # a finished arm's failure is its own (its summary says so), not the session's stop
        session.state.stop_reason = None
        third.finished = True
        assert add([_scored(second.name, "f01")]) is None
        third.finished = False
    finally:
        session.collector.finish()
        session.release()
