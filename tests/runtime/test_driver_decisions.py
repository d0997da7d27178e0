"""Decisions both drivers (the pytest plugin, ``evomemory run``) take from the engine,
checked on the engine alone: no pytest session, no subprocess."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.memory import InProcessMemory
from pytest_evomemory.options import CLI_FLAGS, SessionOptions
from pytest_evomemory.reporting.lines import Line
from pytest_evomemory.reporting.progress import DEFAULT_INTERVAL, progress_interval
from pytest_evomemory.reporting.properties import session_identity_properties, task_metadata
from pytest_evomemory.reporting.reports import REPORTS
from pytest_evomemory.reporting.sessionlines import json_block, report
from pytest_evomemory.rundir import SharedErrorCount
from pytest_evomemory.runtime.notrun import FailedStream, NotRun
from pytest_evomemory.runtime.records import Record, RefusalRecord, from_wires, stream_error_record
from pytest_evomemory.runtime.session import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_TASKS,
    EXIT_OK,
    EXIT_USAGE,
    Outcome,
    Session,
    SessionPlan,
    SessionSetup,
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
        # refused at a stream's first build: a usage error, whatever pytest made of the stop
        (Outcome(refused="factory returned a dict", interrupted=True), EXIT_INTERRUPTED, EXIT_USAGE),
        (Outcome(refused="factory returned a dict"), EXIT_OK, EXIT_USAGE),
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


# --------------------------------------------------------------------------- records a driver receives


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """A session that writes nothing (as an xdist worker's, or --collect-only's)."""
    options = SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), output_dir=str(tmp_path), limit=2, max_errors=1)
    opened = Session.open(SessionSetup(options, CLI_FLAGS, tmp_path, writes=False), reports=REPORTS)
    try:
        yield opened
    finally:
        opened.release()


def test_in_a_worker_a_refusing_stream_sends_its_refusal_and_runs_no_task(tmp_path: Path) -> None:
    options = SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), output_dir=str(tmp_path), limit=2)
    worker = Session.open(SessionSetup(options, CLI_FLAGS, tmp_path, writes=False, worker=True), reports=REPORTS)
    try:
        key, sample = _first(worker)
        sent: list[Record] = []
        live = worker.driver.start_stream(key, sent.append, memory_factory=lambda config, context: {"not": "a memory"})
        assert isinstance(live, FailedStream) and live.refused
        [refusal] = sent  # the controller decides (Session.add_records): nothing else is recorded
        assert isinstance(refusal, RefusalRecord) and refusal.refusal.key == key
        assert "does not implement the MemorySystem protocol" in refusal.refusal.message
        first, second = (worker.driver.start_task(live, sample, sent.append) for _ in range(2))
        assert isinstance(first, NotRun) and first.refused and first.failure == refusal.refusal.message
        assert isinstance(second, NotRun) and second.failure is None and len(sent) == 1
    finally:
        worker.release()


def _first(session: Session) -> tuple[str, BenchmarkSample]:
    task = next(session.plan.tasks())
    return task.key, task.sample


def test_damaged_wire_records_are_passed_over(session: Session) -> None:
    key, sample = _first(session)
    wire = session.driver.failed_task(key, sample, "boom").wire()
    assert [record.wire() for record in from_wires([{"type": "from-another-version"}, wire, {}])] == [wire]
    assert from_wires(None) == []


def test_a_setup_failure_without_a_record_of_ours_is_one_failed_episode(session: Session) -> None:
    key, sample = _first(session)
    [failed] = session.driver.setup_failed(key, sample, [], "")
    assert failed.failed_episode == (sample.stream, sample.task_id)
    assert failed.scored.error == "its setup failed"  # type: ignore[attr-defined]
    # the session recorded the failure already (its stream could not start): not twice
    started = stream_error_record(sample.stream, "could not start", phase="start")
    assert session.driver.setup_failed(key, sample, [started], "fixture failed") == []


def test_a_task_whose_process_died_is_a_failed_episode_named_by_the_last_line(session: Session) -> None:
    key, sample = _first(session)
    [crashed] = session.collector.crashed(key, sample.task_id, "worker 'gw0' crashed while running\n\n  node down: Not properly terminated \n")
    assert crashed.scored.error == "the test process crashed: node down: Not properly terminated"  # type: ignore[attr-defined]
    assert session.collector.crashed(key, "no-such-task", "") == []
    [undetailed] = session.collector.crashed(key, sample.task_id, " \n")
    assert undetailed.scored.error == "the test process crashed: no details"  # type: ignore[attr-defined]


def test_a_worker_refusal_refuses_a_session_that_recorded_nothing(session: Session) -> None:
    assert session.driver.refuse("sample_facts", "factory returned a \x1b[2Jdict") == []
    assert session.state.refused == "factory returned a \x1b[2Jdict"
    assert session.collector.add_records([]) == "the session is refused"
    outcome = session.collector.finish()
    assert (outcome.refused, outcome.exit_status()) == ("factory returned a \x1b[2Jdict", EXIT_USAGE)
    assert all(arm.summary is None for arm in session.plan.arms)  # nothing summarized, nothing written
    assert report(session, resume_command="pytest") == [
        Line("evomemory: error: factory returned a \\x1b[2Jdict", "red", bold=True)  # one inert line
    ]


def test_a_worker_refusal_after_results_were_recorded_fails_its_stream_once(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, sample = _first(session)
    monkeypatch.setattr(SessionPlan, "started", property(lambda self: True))
    refusal = from_wires([RefusalRecord(refusal={"key": key, "message": "factory returned a dict"}).wire()])
    # one failed stream (which --max-errors=1 counts), not a refused session
    assert session.collector.add_records(refusal) == "1 failed episodes reached --max-errors"
    assert session.state.refused is None
    [failure] = session.plan.baseline.run.collector.failures
    assert failure.reason == f"stream {sample.stream!r} could not start: factory returned a dict"
    assert session.state.failed_streams == {key: failure.reason}


def test_a_worker_stops_itself_at_the_max_errors_counted_across_workers(session: Session, tmp_path: Path) -> None:
    key, sample = _first(session)
    session.state.shared_errors = SharedErrorCount(tmp_path)  # as the process that writes shares it
    assert session.driver.stop_here([], task_over=True) is None
    failed = session.driver.failed_task(key, sample, "boom")
    assert session.driver.stop_here([failed], task_over=False) == "failed episodes reached --max-errors"


# --------------------------------------------------------------------------- what the reporters carry


def test_a_tasks_json_metadata_is_its_properties_without_the_prefix() -> None:
    properties = [("evomemory_stream", "s"), ("evomemory_correct", True), ("user_key", 1)]
    assert task_metadata(properties) == {"stream": "s", "correct": True}
    assert task_metadata([("user_key", 1)]) == {}


def test_what_ran_is_named_by_arm_only_when_a_session_runs_several() -> None:
    summary = {"ran": {"agent": {"class": "a:Agent"}, "memory": {"class": "m:Memory"}, "model": None}}
    one = session_identity_properties([("g", summary)])
    assert [name for name, _ in one] == ["evomemory_agent", "evomemory_memory", "evomemory_model"]
    assert not any(value.startswith("g: ") for _, value in one)
    several = session_identity_properties([("control", summary), ("memory", None), ("mem", summary)])
    assert [value.split(": ")[0] for _, value in several] == ["control"] * 3 + ["mem"] * 3  # unfinished: none


def test_the_json_report_block_is_redacted_as_the_run_directory(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SessionPlan, "started", property(lambda self: True))
    session.collector.comparison = {"note": "key sk-proj-abcdefghijklmnopqrstuvwx", "ratio": float("nan")}
    block = json_block(session)
    assert block is not None
    assert block["comparison"] == {"note": "key ***", "ratio": "NaN"}  # strict JSON: no bare NaN
    json.dumps(block, allow_nan=False)


@pytest.mark.parametrize(("min_accuracy", "says"), [((), ""), (("0.5",), "; no threshold was checked")])
def test_a_session_that_ran_no_task_says_its_gates_were_not_checked(
    tmp_path: Path, min_accuracy: tuple[str, ...], says: str
) -> None:
    """A -k typo with a gate set: exit 5 from pytest, and the line says the gate was not
    judged (a CI reader would otherwise look for a verdict)."""
    options = SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), output_dir=str(tmp_path), min_accuracy=min_accuracy)
    session = Session.open(SessionSetup(options, CLI_FLAGS, tmp_path, writes=False), reports=REPORTS)
    try:
        session.collector.finish()
        [line] = report(session, resume_command="pytest")
    finally:
        session.release()
    assert line.text == f"evomemory: no benchmark task ran; {tmp_path} was left as it was{says}"


def test_a_session_that_ran_no_task_leaves_no_directory_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """"Left as it was" holds for a directory the session had to make: taking its lock
    made it, and nothing was written, so it is gone again; an existing one stays."""
    from pytest_evomemory.cli import main as evomemory
    from pytest_evomemory.rundir import LOCK, RunLock

    monkeypatch.chdir(tmp_path)
    made = tmp_path / "fresh" / "deeper"
    lock = RunLock(made)
    lock.acquire(("pytest",))
    lock.release()
    assert not (tmp_path / "fresh").exists()
    (tmp_path / "kept").mkdir()
    lock = RunLock(tmp_path / "kept" / "run")
    lock.acquire(("pytest",))
    lock.release()
    assert [p.name for p in (tmp_path / "kept").iterdir()] == []  # only what the lock made is removed
    # a directory the session wrote into stays whole
    assert evomemory(["run", "--config", "sample_memory", "--limit", "1", "-q", "--output-dir", "out/run"]) == 0
    assert (tmp_path / "out" / "run" / LOCK).exists() and (tmp_path / "out" / "run" / "summary.json").exists()
    capsys.readouterr()


def test_the_python_door_raises_a_refusal_the_session_ended_with(
    write_run_config: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal that reaches the session's outcome rather than being raised (a record's,
    another chain's) is raised by run_benchmark too: its caller never gets an empty
    summary for a session that refused."""
    import pytest_evomemory.runtime.serial as serial
    from pytest_evomemory.core.errors import SessionRefused
    from pytest_evomemory.runtime.outcome import Outcome

    monkeypatch.setattr(serial, "run_session", lambda session, **_: Outcome(refused="arms.json cannot be written"))
    with pytest.raises(SessionRefused, match=r"arms\.json cannot be written"):
        run_benchmark(load_run_config(write_run_config()), tmp_path / "out")
