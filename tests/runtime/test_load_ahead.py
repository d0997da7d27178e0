"""Loading ahead (runtime/ahead.py): what a process's episodes and its end will load
at their first use is loaded on one thread while the chains' first calls wait.
No test here depends on timing: loads are held by events and checked after ``join``."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_evomemory.memory import InProcessMemory
from pytest_evomemory.options import CLI_FLAGS, SessionOptions
from pytest_evomemory.reporting.reports import REPORTS
from pytest_evomemory.runtime import session as session_module
from pytest_evomemory.runtime.ahead import LoadAhead
from pytest_evomemory.runtime.session import Session, SessionSetup

from ..conftest import SAMPLE_MEMORY_RUN


def test_loads_run_once_each_in_the_order_added_and_a_failure_does_not_stop_the_next() -> None:
    ahead = LoadAhead()
    held = threading.Event()
    ran: list[str] = []

    def first() -> None:
        held.wait()
        ran.append("first")

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("left to its point of use")

    ahead.add("first", first)
    ahead.add("broken", broken)
    ahead.add("last", lambda: ran.append("last"))
    ahead.add("first", lambda: ran.append("first again"))  # the same key: not queued
    held.set()
    ahead.join()
    assert ran == ["first", "broken", "last"]
    ahead.add("after", lambda: ran.append("after"))  # the thread had ended: a new one runs it
    ahead.join()
    assert ran == ["first", "broken", "last", "after"]


def test_join_with_nothing_queued_returns() -> None:
    LoadAhead().join()


def test_a_stream_opened_by_the_driver_queues_its_memory_and_the_records(tmp_path: Path) -> None:
    options = SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), output_dir=str(tmp_path), limit=1)
    session = Session.open(SessionSetup(options, CLI_FLAGS, tmp_path, writes=False), reports=REPORTS)
    try:
        key = next(iter(session.plan.streams_by_key))
        live = session.driver.start_stream(key, lambda record: None)
        session.driver.ahead.join()
        assert ("memory", InProcessMemory) in session.driver.ahead._added
        assert "records" in session.driver.ahead._added
        assert live.memory is not None and isinstance(live.memory.backend, InProcessMemory)
    finally:
        session.release()


def test_the_finish_is_queued_once_behind_what_the_episodes_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`Session.load_finish_ahead` (both drivers call it once their chains are
    under way) queues :func:`prepare_finish` behind a stream's own loads, once."""
    options = SessionOptions(configs=(str(SAMPLE_MEMORY_RUN),), output_dir=str(tmp_path), limit=1)
    session = Session.open(SessionSetup(options, CLI_FLAGS, tmp_path, writes=False), reports=REPORTS)
    try:
        ran: list[str] = []
        monkeypatch.setattr(session_module, "prepare_finish", lambda reports: ran.append(f"finish {reports is REPORTS}"))
        held = threading.Event()
        session.driver.ahead.add("held", lambda: (held.wait(), ran.append("episodes")))
        session.load_finish_ahead()
        session.load_finish_ahead()
        session.driver.ahead.add("after", lambda: ran.append("after"))
        held.set()
        session.driver.ahead.join()
        assert ran == ["episodes", "finish True", "after"]
    finally:
        session.release()


def _loaded_by(setup: str, probe: str, load: str) -> tuple[str, str]:
    """``probe`` (a Python expression) before and after ``load``, in a fresh
    interpreter (this one has loaded everything already) that ran ``setup`` first."""
    code = f"import sys\n{setup}\nbefore = {probe}\n{load}\nafter = {probe}\nprint(before)\nprint(after)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    before, after = result.stdout.splitlines()
    return before, after


def test_what_is_loaded_ahead_is_what_a_first_episode_would_load() -> None:
    """In a fresh interpreter: the in-process memory's numpy and the records'
    validators, none of them loaded by opening alone."""
    assert _loaded_by(
        "from pytest_evomemory.memory import InProcessMemory\n"
        "from pytest_evomemory.rundocs.records import Response\n"
        "from pytest_evomemory.rundocs.wire import TaskRecord\n"
        "from pytest_evomemory.runtime.driver import _build_record_validators",
        "('numpy' in sys.modules, Response.__pydantic_complete__, TaskRecord.__pydantic_complete__)",
        "InProcessMemory.load_ahead()\n_build_record_validators()",
    ) == ("(False, False, False)", "(True, True, True)")


def test_the_finish_is_loaded_ahead_of_it() -> None:
    """:func:`prepare_finish` (run on a thread while the chains wait on the network)
    builds the summary's and the comparison's models and imports the pages, which
    the session's end would otherwise do after the last reply (in a fresh interpreter)."""
    assert _loaded_by(
        "from pytest_evomemory.rundocs.compare import Comparison\n"
        "from pytest_evomemory.rundocs.summary import Summary\n"
        "from pytest_evomemory.runtime.run import prepare_finish\n"
        "from pytest_evomemory.reporting.reports import REPORTS",
        "(Summary.__pydantic_complete__, Comparison.__pydantic_complete__, "
        "'pytest_evomemory.reporting.html' in sys.modules)",
        "prepare_finish(REPORTS)",
    ) == ("(False, False, False)", "(True, True, True)")
