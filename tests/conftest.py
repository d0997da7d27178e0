"""Shared fixtures: paths of the shipped configs and helpers to write run configs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpcore2  # noqa: F401  (see below)
import numpy  # noqa: F401
import pytest
import pytest_randomly  # noqa: F401  (see below)
import xdist.dsession  # noqa: F401
import yaml

import pytest_evomemory.analysis.gain
import pytest_evomemory.analysis.power
import pytest_evomemory.analysis.similarity
import pytest_evomemory.memory.inprocess
import pytest_evomemory.models.openai_compat
import pytest_evomemory.plugin.activate
import pytest_evomemory.plugin.collection
import pytest_evomemory.plugin.controller
import pytest_evomemory.plugin.progress
import pytest_evomemory.plugin.reporters
import pytest_evomemory.plugin.worker
import pytest_evomemory.plugin.xdist
import pytest_evomemory.reporting.reports
import pytest_evomemory.reporting.sessionlines
import pytest_evomemory.rundocs.compare
import pytest_evomemory.rundocs.report
import pytest_evomemory.rundocs.taskmeta
import pytest_evomemory.streams.provenance  # noqa: F401  (see below)
from pytest_evomemory.core.errors import EvoMemoryError
from pytest_evomemory.core.types import AgentResponse
from pytest_evomemory.runtime import StreamRun

# pytester's in-process runs drop every module first imported during the run from
# sys.modules afterwards. The package imports numpy, the HTTP client and its
# transport (httpcore2) only when a stream first needs them, so without the
# imports above the next in-process run would import them again: numpy's C
# extension refuses that ("cannot load module more than once per process"), and a
# second copy of httpcore2 raises exceptions the first httpx2 cannot map. Importing
# them here puts them in the snapshot pytester restores (docs/configuration.md).
# The plugin's session modules (its hooks, the reports, the session's end), xdist's
# controller and pytest-randomly (which caches its scan of the installed packages'
# entry points in its module) are imported here for the same snapshot: otherwise every
# in-process run, hundreds in this suite, imports its own copy of them again
# (tests/plugin/test_newcomer.py and test_plugin.py: 10.4 -> 8.8 s of CPU),
# and a test patching one of them would patch a copy the next run does not use.
# What a fresh process imports is checked in subprocesses
# (tests/runtime/test_startup_imports.py, tests/plugin/test_plugin.py).

def capture_responses(run: StreamRun) -> list[AgentResponse]:
    """Every response the stream's turns produce, a failed turn's included."""
    captured: list[AgentResponse] = []
    deliver = run.deliver

    def capturing(stimulus: Any, task_id: str) -> AgentResponse:
        try:
            response = deliver(stimulus, task_id)
        except EvoMemoryError as error:
            if error.response is not None:
                captured.append(error.response)
            raise
        captured.append(response)
        return response

    run.deliver = capturing  # type: ignore[method-assign]
    return captured


#: What a session publishes to the processes it starts; a session must take it back when
#: it ends, or a later session of this test process (its subprocesses too) inherits it.
SESSION_VARIABLES = ("EVOMEMORY_SESSION_DIR", "EVOMEMORY_SPEND_FILE")


@pytest.fixture(autouse=True)
def _sessions_take_back_what_they_publish() -> Any:
    """Fail the test whose session left a session variable behind (and clear it, so
    the next test starts clean): a leak made two later runs share one cost cap."""
    before = {name: os.environ.get(name) for name in SESSION_VARIABLES}
    yield
    leaked = {name: os.environ.get(name) for name in SESSION_VARIABLES if os.environ.get(name) != before[name]}
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    assert not leaked, f"a session left {leaked} in the environment"


#: pytest plugins that packages of the test environment register, which no pytest
#: session a test starts needs: langsmith's (it comes with the langmem extra)
#: imports the langsmith client at start-up and hypothesis's imports its
#: observability module at session end, together about 3.5 s of CPU in *every*
#: pytester subprocess and xdist worker on this 2-core machine (a run of the
#: sample configs: 5.4 s with them, 1.8 s without). Only the sessions tests start
#: go without them (``_foreign_plugins_off``): this suite's own xdist workers need
#: hypothesis's plugin (without it ``@given`` refuses to run).
FOREIGN_PLUGINS = ("langsmith_plugin", "hypothesispytest")
FOREIGN_PLUGINS_OFF = " ".join(f"-p no:{name}" for name in FOREIGN_PLUGINS)


@pytest.fixture(autouse=True)
def _foreign_plugins_off(request: pytest.FixtureRequest, _sessions_take_back_what_they_publish: None) -> Any:
    """The sessions a pytester test starts (in-process, subprocess and their xdist
    workers) load no foreign plugin. Set after pytester's own set-up, which clears
    ``PYTEST_ADDOPTS``; undone before pytester's teardown restores the environment.
    (After the leak check's set-up, so pytester's monkeypatch is undone before it.)"""
    if "pytester" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("pytester")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_ADDOPTS", FOREIGN_PLUGINS_OFF)
        yield


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture scope
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Cases marked ``runs_first`` go first: a long case that shares no fixture
    (mypy over the package, a minute on a fresh clone without its cache) at the end
    of the collection order is the last thing one xdist worker does while the other
    has nothing left to take. The others keep their order (a stable sort)."""
    items.sort(key=lambda item: item.get_closest_marker("runs_first") is None)


REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "pytest_evomemory" / "configs"
SAMPLE_MEMORY_RUN = CONFIGS / "runs" / "sample_memory.yaml"
SAMPLE_NO_MEMORY_RUN = CONFIGS / "runs" / "sample_no_memory.yaml"


@pytest.fixture
def write_run_config(tmp_path: Path) -> Callable[..., Path]:
    """Write a run config with inline parts; returns its path."""

    def write(
        name: str = "test_run",
        benchmark: dict[str, Any] | str | None = None,
        agent: dict[str, Any] | str | None = None,
        memory: dict[str, Any] | str | None = None,
        directory: Path | None = None,
        **extra: Any,
    ) -> Path:
        document: dict[str, Any] = {
            "name": name,
            "benchmark": benchmark if benchmark is not None else {"benchmark": "sample"},
            "agent": agent if agent is not None else {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"},
            "memory": memory if memory is not None else {"backend": "inprocess"},
            **extra,
        }
        target = (directory or tmp_path) / f"{name}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(document), encoding="utf-8")
        return target

    return write


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
