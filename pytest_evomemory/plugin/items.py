"""The benchmark's test items. The plugin adds this module to pytest's arguments
when the benchmark is on, so no user test file is needed.

Each item is one task (id ``<stream>/<task-id>``, or ``<arm>:<stream>/<task-id>``
when several arms run in one session); its body runs and scores the
task turn. Feedback and reset happen in the ``evomemory_episode`` fixture's
teardown, so they run after the score is recorded and before the next task.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ..reporting.properties import task_properties
from .stash import get_session

#: This module: the plugin adds it to pytest's arguments when the benchmark is on.
ITEMS_MODULE = Path(__file__).resolve()

#: The node id of the benchmark's module, wherever the package is installed.
NODE_PREFIX = "evomemory"
#: The node id of a benchmark item: ``evomemory::test_task[<stream>/<task id>]``; with
#: several arms the first part is ``<arm>:<stream>`` (one stream key, see arm.py).
ITEM_ID = re.compile(r"::test_task\[([^/\]]+)/(.+)\]$")
#: A command-line argument naming one task as pytest printed it (with or without
#: the ``evomemory`` prefix, which older versions did not print; ``-v`` and the
#: short summary print it, a JUnit report's name has no ``::``).
_TASK_ARGUMENT = re.compile(rf"^(?:(?:{NODE_PREFIX})?::)?test_task\[([^/\]]+/.+)\]$")


def task_argument(arg: str) -> str | None:
    """The item id (``<stream>/<task>``) when ``arg`` names one benchmark task, else None."""
    match = _TASK_ARGUMENT.match(arg)
    return match.group(1) if match else None


def stream_of_nodeid(nodeid: str) -> str | None:
    match = ITEM_ID.search(nodeid)
    return match.group(1) if match else None


def task_of_nodeid(nodeid: str) -> tuple[str, str] | None:
    match = ITEM_ID.search(nodeid)
    return (match.group(1), match.group(2)) if match else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "evomemory_sample" not in metafunc.fixturenames:
        return
    params = [
        pytest.param(task.key, task.sample, id=task.item_id, marks=[pytest.mark.evomemory])
        for task in get_session(metafunc.config).plan.tasks()
    ]
    metafunc.parametrize(
        ["evomemory_stream", "evomemory_sample"], params,
        indirect=True,
        # Session scope keeps the stream fixture alive across its tasks; the
        # sample fixture is function-scoped and only hands out request.param.
        scope="session",
    )


def test_task(evomemory_episode: Any, request: pytest.FixtureRequest) -> None:
    __tracebackhide__ = True
    outcome = evomemory_episode.run_task()
    # user_properties (not the record_property fixture) reach JUnit XML in every
    # junit_family, and pytest-json-report's metadata (reporters.py).
    arm = get_session(request.config).plan.arm_label(request.node.callspec.params["evomemory_stream"])
    request.node.user_properties.extend(task_properties(outcome.scored.document(), outcome.response.document(), arm))
