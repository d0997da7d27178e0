"""Chains at once (``evomemory run --chains N``): a grid run concurrently in one process
gives the artefacts of the serial run, and the model side's limits hold across chains.

Runtime-level: ``evomemory run`` in-process against the scripted server (TinyAgent:
every answer goes through the model client, the memory through its tools)."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.memory.factory import MEMORY_BACKENDS
from pytest_evomemory.runtime.chains import Lane, chains_in_flight, plan_lanes
from pytest_evomemory.testing.scripted_server import ScriptedServer, echo_policy

#: what differs between two runs of one grid however they ran: times, the session, paths
_VOLATILE = re.compile(
    r'"(started|finished|generated|at|seconds|wall_seconds|session|command_line|run_dir|path|directory)": '
    r'("[^"]*"|[0-9.e-]+|\[[^\]]*\])'
)


def _stable(text: str, root: Path) -> str:
    return _VOLATILE.sub(r'"\1": "-"', text.replace(str(root), "<output dir>"))


def _agent(server: ScriptedServer, strategy: str, **model: Any) -> dict[str, Any]:
    return {
        "kind": "tiny", "memory_strategy": strategy, "max_steps": 6,
        "model": {"model": "scripted", "base_url": server.base_url, "api_key_env": None, "cache": False,
                  "max_retries": 0, **model},
    }


@pytest.fixture
def grid(tmp_path: Path, write_run_config: Callable[..., Path]) -> Iterator[tuple[ScriptedServer, list[str]]]:
    """Three arms (control, tool use, deterministic recall) x 2 replicates x the
    sample streams: 12 chains."""
    with ScriptedServer(echo_policy, latency_s=0.002) as server:
        configs = [
            write_run_config("control", agent=_agent(server, "none")),
            write_run_config("tools", agent=_agent(server, "tool_use")),
            write_run_config("recall", agent=_agent(server, "deterministic_recall")),
        ]
        yield server, [arg for config in configs for arg in ("--config", str(config))]


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_grid_run_at_once_writes_the_serial_runs_artefacts(
    grid: tuple[ScriptedServer, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    _, configs = grid
    common = ["run", *configs, "--repeats", "2", "--limit", "5", "-q"]
    assert evomemory([*common, "--chains", "1", "--output-dir", str(tmp_path / "serial")]) == 0
    assert evomemory([*common, "--chains", "12", "--output-dir", str(tmp_path / "grid")]) == 0
    serial, grid_files = _files(tmp_path / "serial"), _files(tmp_path / "grid")
    assert serial.keys() == grid_files.keys()
    assert any(name.endswith("scores.jsonl") for name in serial)
    assert any(name.startswith("tools/r1/memory/") for name in serial), "the final memory of each stream is compared too"
    for name, content in serial.items():
        if name.endswith(".html"):
            continue  # the report renders the same documents; its time stamps are not worth parsing
        if name.endswith((".json", ".jsonl")):
            assert _stable(grid_files[name].decode(), tmp_path / "grid") == _stable(
                content.decode(), tmp_path / "serial"
            ), name
        else:
            assert grid_files[name] == content, name


def test_chains_at_once_share_the_endpoints_connection_cap(
    grid: tuple[ScriptedServer, list[str]], tmp_path: Path, write_run_config: Callable[..., Path],
) -> None:
    """``max_connections: 2`` holds however many chains run (12 here); a chain is
    serial, so with the cap lifted several of them are in flight together."""
    server, _ = grid
    server.latency_s = 0.02
    capped = write_run_config("capped", agent=_agent(server, "none", max_connections=2))
    assert evomemory(["run", "--config", str(capped), "--repeats", "6", "--limit", "3", "-q", "--chains", "12",
                      "--output-dir", str(tmp_path / "capped")]) == 0
    assert server.in_flight_max == 2
    server.in_flight_max = 0
    free = write_run_config("free", agent=_agent(server, "none"))
    assert evomemory(["run", "--config", str(free), "--repeats", "6", "--limit", "3", "-q", "--chains", "12",
                      "--output-dir", str(tmp_path / "free")]) == 0
    assert server.in_flight_max > 2


def test_chains_of_a_backend_that_cannot_share_its_process_form_one_lane() -> None:
    assert MEMORY_BACKENDS.get("mem0").concurrent is False
    assert MEMORY_BACKENDS.get("langmem").concurrent is False
    assert all(MEMORY_BACKENDS.get(name).concurrent for name in ("inprocess", "sqlite", "postgres", "dense"))
    lanes = plan_lanes([
        ("a:s1", set()), ("m:s1", {"mem0"}), ("a:s2", set()), ("m:s2", {"mem0"}),
        ("l:s1", {"local"}), ("x:s1", {"mem0", "local"}), ("a:s3", set()),
    ])
    assert lanes == [
        Lane(("a:s1",)),
        Lane(("m:s1", "m:s2", "l:s1", "x:s1"), ("local", "mem0")),  # linked through x
        Lane(("a:s2",)),
        Lane(("a:s3",)),
    ]
    assert chains_in_flight(None, 40) == 16 and chains_in_flight(None, 3) == 3 and chains_in_flight(64, 40) == 40


def test_the_pytest_door_names_the_option_it_runs_chains_with(tmp_path: Path) -> None:
    from pytest_evomemory.core.errors import ConfigError
    from pytest_evomemory.options import PYTEST_FLAGS, read_options
    from pytest_evomemory.reporting.reports import REPORTS
    from pytest_evomemory.runtime.session import Session, SessionSetup
    from tests.conftest import SAMPLE_MEMORY_RUN

    options = read_options({"evomemory_config": [str(SAMPLE_MEMORY_RUN)], "evomemory_chains": "4"}, PYTEST_FLAGS)
    with pytest.raises(ConfigError, match=r"--evomemory-chains: pytest runs one chain per xdist worker.*-n N"):
        Session.open(SessionSetup(options, PYTEST_FLAGS, tmp_path, writes=False), reports=REPORTS)


def test_many_chains_show_one_line_for_the_session_and_each_chain_once(
    grid: tuple[ScriptedServer, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, configs = grid
    (tmp_path / "pytest.ini").write_text("[pytest]\nevomemory_progress_interval = 0\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert evomemory(["run", *configs, "--limit", "3", "--chains", "6", "--output-dir", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    chain_lines = [line for line in lines if re.match(r"evomemory \w+:sample_\w+: ", line)]
    assert len(chain_lines) == 6 and all("3/3" in line and "eta done" in line for line in chain_lines)
    session_lines = [line for line in lines if line.startswith("evomemory session: chains ")]
    assert session_lines and re.search(r"chains 6/6 done, 0 running  tasks 18/18  calls \d+ \(", session_lines[-1])
    assert len([line for line in lines if re.search(r"sample_\w+/\w+ \[\d+\] (correct|wrong|error)$", line)]) == 18


def test_each_running_chains_last_event_on_request(tmp_path: Path) -> None:
    from pytest_evomemory.cli.run import RunProgress
    from pytest_evomemory.options import CLI_FLAGS, SessionOptions
    from pytest_evomemory.reporting.progress import ProgressBoard
    from pytest_evomemory.reporting.reports import REPORTS
    from pytest_evomemory.runtime.records import TaskRecord
    from pytest_evomemory.runtime.session import Session, SessionSetup
    from tests.conftest import SAMPLE_MEMORY_RUN

    session = Session.open(SessionSetup(SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),)), CLI_FLAGS, tmp_path,
                                        writes=False), reports=REPORTS)
    try:
        progress = RunProgress(session, ProgressBoard(10), verdicts=False, grid=True)
        progress.chain_started("sample_facts")
        progress.chain_started("sample_choice")
        progress.record("sample_facts", TaskRecord.model_validate({
            "response": {"stream": "sample_facts", "task_id": "f01", "kind": "task", "messages": []},
            "scored": {"stream": "sample_facts", "task_id": "f01", "position": 0, "correct": True},
        }))
        progress.chain_ended("sample_choice")
        assert progress.chain_lines() == ["evomemory sample_facts: f01 [1] correct"]
        assert progress.session_line().startswith("evomemory session: chains 1/2 done, 1 running  tasks 1/")
    finally:
        session.release()


def test_ctrl_c_interrupts_every_chain_and_the_resume_completes_the_serial_runs_scores(
    tmp_path: Path, write_run_config: Callable[..., Path],
) -> None:
    """Ctrl-C reaches the main thread only: every chain's model call in flight ends as
    a serial run's would (its task not recorded), and the resume completes the run."""
    import _thread

    requests, pressed = 0, [math.inf]

    def interrupting(request: Any) -> Any:
        nonlocal requests
        requests += 1
        if requests == 12:
            pressed[0] = time.monotonic()
            _thread.interrupt_main()  # Ctrl-C, while six chains have calls in flight
        if time.monotonic() < pressed[0] + 1.0:
            time.sleep(0.5)  # still answering when the driver's thread sees the Ctrl-C
        return echo_policy(request)

    with ScriptedServer(interrupting, latency_s=0.01) as server:
        config = write_run_config("memory", agent=_agent(server, "tool_use"))
        common = ["run", "--config", str(config), "--repeats", "3", "--limit", "4", "-q"]
        assert evomemory([*common, "--chains", "6", "--output-dir", str(tmp_path / "cut")]) == 2
        cut = json.loads((tmp_path / "cut" / "r1" / "summary.json").read_text(encoding="utf-8"))
        assert cut["completion"]["complete"] is False
        assert evomemory(["run", "--resume", str(tmp_path / "cut"), "--chains", "6", "-q"]) == 0
        assert evomemory([*common, "--chains", "1", "--output-dir", str(tmp_path / "serial")]) == 0
    for replicate in ("r1", "r2", "r3"):
        for name in ("scores.jsonl", "responses.jsonl"):
            resumed = (tmp_path / "cut" / replicate / name).read_text(encoding="utf-8")
            serial = (tmp_path / "serial" / replicate / name).read_text(encoding="utf-8")
            assert _stable(resumed, tmp_path) == _stable(serial, tmp_path), (replicate, name)


def test_the_chains_of_a_backend_that_cannot_share_its_process_never_overlap(
    grid: tuple[ScriptedServer, list[str]], tmp_path: Path, write_run_config: Callable[..., Path],
) -> None:
    """Two arms of a backend declaring ``concurrent=False`` and one of a backend that
    may: the first two arms' four chains run one at a time, beside the third's."""
    from pytest_evomemory.memory.base import MemoryBackend
    from pytest_evomemory.memory.inprocess import InProcessMemory

    server, _ = grid
    open_now: list[int] = [0, 0]  # instances open now, the most ever

    class Counted(InProcessMemory):
        def close(self) -> None:
            open_now[0] -= 1
            super().close()

    def opener(config: Any, context: Any) -> InProcessMemory:
        open_now[0] += 1
        open_now[1] = max(open_now)
        return Counted(default_top_k=config.top_k)

    MEMORY_BACKENDS.register("one_at_a_time", MemoryBackend("one_at_a_time", open=opener, concurrent=False))
    try:
        configs = [
            write_run_config(name, agent=_agent(server, "deterministic_recall"), memory={"backend": backend})
            for name, backend in (("first", "one_at_a_time"), ("second", "one_at_a_time"), ("free", "inprocess"))
        ]
        assert evomemory(["run", *(arg for c in configs for arg in ("--config", str(c))), "--limit", "3", "-q",
                          "--output-dir", str(tmp_path / "out")]) == 0
    finally:
        MEMORY_BACKENDS.unregister("one_at_a_time")
    assert open_now == [0, 1]
    for name in ("first", "second", "free"):
        summary = json.loads((tmp_path / "out" / name / "summary.json").read_text(encoding="utf-8"))
        assert summary["completion"]["complete"] is True


def test_two_arms_records_are_written_at_once_and_the_intake_closes_after_both(tmp_path: Path) -> None:
    """An arm's records are written under that arm's lock only: while one arm's write
    is held up, another arm's records go in (the session's lock is not held across
    the writing); closing the intake waits for the held-up write to be whole."""
    import threading

    from pytest_evomemory.options import CLI_FLAGS, SessionOptions
    from pytest_evomemory.reporting.reports import REPORTS
    from pytest_evomemory.runtime.records import TaskRecord
    from pytest_evomemory.runtime.session import Session, SessionSetup
    from tests.conftest import SAMPLE_MEMORY_RUN

    session = Session.open(SessionSetup(SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), repeats=2), CLI_FLAGS,
                                        tmp_path, writes=False), reports=REPORTS)
    first, second = session.plan.arms
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []
    add = first.add

    def held_up(records: Any) -> None:
        entered.set()
        assert release.wait(60)
        add(records)
        order.append("first arm written")

    first.add = held_up  # type: ignore[method-assign]

    def record(arm: str, task_id: str) -> TaskRecord:
        return TaskRecord.model_validate({
            "evomemory_arm": arm,
            "response": {"stream": "sample_facts", "task_id": task_id, "kind": "task", "messages": []},
            "scored": {"stream": "sample_facts", "task_id": task_id, "position": 0, "correct": True},
        })

    def close() -> None:
        session.collector.close_intake()
        order.append("intake closed")

    writer = threading.Thread(target=session.collector.add_records, args=([record(first.name, "f01")],))
    other = threading.Thread(target=session.collector.add_records, args=([record(second.name, "f01")],))
    closer = threading.Thread(target=close)
    try:
        writer.start()
        assert entered.wait(60)
        other.start()
        other.join(60)
        assert not other.is_alive(), "the second arm's records waited for the first arm's write"
        assert [outcome.task_id for outcome in second.run.collector.scores] == ["f01"]
        closer.start()
        closer.join(0.2)  # were it not waiting, it would be done by now (or later: the order still tells)
        release.set()
        writer.join(60)
        closer.join(60)
        assert order == ["first arm written", "intake closed"]
        assert [outcome.task_id for outcome in first.run.collector.scores] == ["f01"]
        assert session.collector.add_records([record(second.name, "f02")]) == "the session is over"
    finally:
        release.set()
        session.release()


def test_a_sigterm_while_two_chains_write_is_raised_once_when_the_last_section_ends() -> None:
    """Termination.critical counts the sections of every thread: SIGTERM while two
    chains write is deferred, not raised when the first ends, raised once when the
    last ends (there, on the thread that ends it), and not again after."""
    import signal
    import threading

    from pytest_evomemory.runtime.signals import Termination, is_sigterm

    termination = Termination()
    inside, leave = threading.Event(), threading.Event()
    raised: list[str] = []

    def chain() -> None:
        try:
            with termination.critical():
                inside.set()
                assert leave.wait(60)
        except KeyboardInterrupt:
            raised.append("chain")

    other = threading.Thread(target=chain)
    other.start()
    assert inside.wait(60)
    try:
        with termination.critical():
            termination._on_sigterm(signal.SIGTERM, None)  # what the handler does when SIGTERM comes
            leave.set()
            other.join(60)
            assert raised == [] and termination.terminated
    except KeyboardInterrupt as interrupt:
        assert is_sigterm(interrupt)
        raised.append("last")
    assert raised == ["last"]
    with termination.critical():
        pass


def test_an_arm_whose_chains_all_ended_finishes_while_another_arms_chain_runs(
    tmp_path: Path, write_run_config: Callable[..., Path],
) -> None:
    """The arm's summary and report are written as its last chain ends, not at the
    session's end: here while the other arm's model call is held until they are;
    that arm finishes at the end, complete. (That the files are the serial run's:
    ``test_a_grid_run_at_once_writes_the_serial_runs_artefacts``.)"""
    out = tmp_path / "out"
    seen: list[tuple[bool, bool, bool]] = []

    def holding(request: Any) -> Any:
        if request.get("model") == "slow" and not seen:  # (both slow chains' first calls may wait)
            report = out / "fast" / "report.html"
            deadline = time.monotonic() + 60
            while not report.is_file() and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append((report.is_file(), (out / "slow" / "summary.json").exists(), (out / "compare.json").exists()))
        return echo_policy(request)

    with ScriptedServer(holding) as server:
        fast = write_run_config("fast", agent=_agent(server, "deterministic_recall"))
        slow_agent = _agent(server, "deterministic_recall")
        slow = write_run_config("slow", agent={**slow_agent, "model": {**slow_agent["model"], "model": "slow"}})
        assert evomemory(["run", "--config", str(fast), "--config", str(slow), "--limit", "2", "-q", "--chains", "4",
                          "--output-dir", str(out)]) == 0
    assert seen and set(seen) == {(True, False, False)}, "the fast arm did not finish while the slow one ran"
    for arm in ("fast", "slow"):
        summary = json.loads((out / arm / "summary.json").read_text(encoding="utf-8"))
        assert summary["completion"]["complete"] is True and summary["wall_seconds"] >= 0
    assert (out / "compare.json").is_file()


def test_ctrl_c_after_an_arm_finished_early_leaves_it_complete_and_the_resume_completes_the_other(
    tmp_path: Path, write_run_config: Callable[..., Path],
) -> None:
    import _thread

    out = tmp_path / "out"
    pressed: list[bool] = []

    def interrupting(request: Any) -> Any:
        if request.get("model") == "slow" and not pressed:
            pressed.append(True)
            deadline = time.monotonic() + 60
            while not (out / "fast" / "report.html").is_file() and time.monotonic() < deadline:
                time.sleep(0.01)
            _thread.interrupt_main()  # Ctrl-C once the fast arm has finished, the slow one's call in flight
            time.sleep(0.5)
        return echo_policy(request)

    with ScriptedServer(interrupting) as server:
        agent = _agent(server, "deterministic_recall")
        fast = write_run_config("fast", agent=agent)
        slow = write_run_config("slow", agent={**agent, "model": {**agent["model"], "model": "slow"}})
        assert evomemory(["run", "--config", str(fast), "--config", str(slow), "--limit", "2", "-q", "--chains", "4",
                          "--output-dir", str(out)]) == 2
        completion = {arm: json.loads((out / arm / "summary.json").read_text(encoding="utf-8"))["completion"]
                      for arm in ("fast", "slow")}
        assert completion["fast"]["complete"] is True
        assert completion["slow"]["complete"] is False and "interrupted" in completion["slow"]["reason"]
        assert evomemory(["run", "--resume", str(out), "--chains", "4", "-q"]) == 0
    assert json.loads((out / "slow" / "summary.json").read_text(encoding="utf-8"))["completion"]["complete"] is True
