"""The benchmark's test items. The plugin adds this module to pytest's arguments
when the benchmark is on, so no user test file is needed.

Each item is one task (id ``<stream>/<task-id>``, or ``<arm>:<stream>/<task-id>``
when several arms run in one session); its body runs and scores the
task turn. Feedback and reset happen in the ``evomemory_episode`` fixture's
teardown, so they run after the score is recorded and before the next task.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ..reporting.summary import cache_counts
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
_TASK_ARGUMENT = re.compile(rf"^(?:(?:{NODE_PREFIX})?::)?(test_task\[([^/\]]+/.+)\])$")


def task_argument(arg: str) -> str | None:
    """``test_task[<stream>/<task>]`` when ``arg`` names one benchmark task, else None."""
    match = _TASK_ARGUMENT.match(arg)
    return match.group(1) if match else None


def task_id_of_argument(arg: str) -> str | None:
    """The item id (``<stream>/<task>``) an argument names, else None."""
    match = _TASK_ARGUMENT.match(arg)
    return match.group(2) if match else None


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
        for task in get_session(metafunc.config).tasks()
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
    # junit_family, and pytest-json-report's metadata (plugin/jsonreport.py).
    arm = get_session(request.config).arm_label(request.node.callspec.params["evomemory_stream"])
    request.node.user_properties.extend(task_properties(outcome.scored.to_dict(), outcome.response.to_dict(), arm))


def task_properties(scored: dict[str, Any], response: dict[str, Any], arm: str | None = None) -> list[tuple[str, Any]]:
    """What a dashboard needs of one task, as ``evomemory_<key>`` properties.

    ``cached`` is true when every model call of the task turn was replayed from
    the response cache (then ``seconds`` is not the model's latency). ``arm``
    names the task's arm (the run's name with one arm): one shape for every session.
    """
    calls, cached = cache_counts(response)
    values = {
        **({"arm": arm} if arm is not None else {}),
        "stream": scored["stream"],
        "task_id": scored["task_id"],
        "position": scored["position"],
        "correct": scored["correct"],
        "extracted": scored["extracted"],
        "target": scored["target"],
        "match_mode": scored["match_mode"],
        "reason": scored["reason"],
        "tokens": (response.get("usage") or {}).get("total_tokens", 0),
        "seconds": response.get("seconds"),
        "cached": bool(calls) and cached == calls,
        "violation": response.get("protocol_violation"),
    }
    return [(_property_name(key), value) for key, value in values.items()]


PROPERTY_PREFIX = "evomemory_"


def _property_name(key: str) -> str:
    """``evomemory_<key>``, one string for every task (spelled anew per task, the
    names were 14 strings a task that pytest's reports kept to the end of the session)."""
    return sys.intern(PROPERTY_PREFIX + key)


def is_task_property(name: object) -> bool:
    return isinstance(name, str) and name.startswith(PROPERTY_PREFIX)


def without_task_properties(properties: list[tuple[str, Any]]) -> list[tuple[str, Any]] | None:
    """``properties`` without the task's ``evomemory_*`` ones, or None when it has none.

    Once JUnit XML and pytest-json-report have read them (both at the teardown
    report's ``pytest_runtest_logreport``), they are in those files and in the run
    directory; pytest keeps every item and report to the end of the session, and
    the properties with them cost ~2 KB a task (20,000 tasks: 40 MB)."""
    if not any(is_task_property(name) for name, _ in properties):
        return None
    return [(name, value) for name, value in properties if not is_task_property(name)]
