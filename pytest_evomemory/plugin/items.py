"""The benchmark's test items. The plugin adds this module to pytest's arguments
when the benchmark is on, so no user test file is needed.

Each item is one task (id ``<stream>/<task-id>``); its body runs and scores the
task turn. Feedback and reset happen in the ``evomemory_episode`` fixture's
teardown, so they run after the score is recorded and before the next task.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .stash import SESSION_KEY

#: The node id of a benchmark item: ``...::test_task[<stream>/<task id>]``.
ITEM_ID = re.compile(r"::test_task\[([^/\]]+)/(.+)\]$")


def stream_of_nodeid(nodeid: str) -> str | None:
    match = ITEM_ID.search(nodeid)
    return match.group(1) if match else None


def task_of_nodeid(nodeid: str) -> tuple[str, str] | None:
    match = ITEM_ID.search(nodeid)
    return (match.group(1), match.group(2)) if match else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "evomemory_sample" in metafunc.fixturenames:
        metafunc.config.stash[SESSION_KEY].parametrize(metafunc)


def test_task(evomemory_episode: Any, request: pytest.FixtureRequest) -> None:
    __tracebackhide__ = True
    outcome = evomemory_episode.run_task()
    score = outcome.scored.score
    # user_properties (not the record_property fixture) reach JUnit XML in every
    # junit_family, and pytest-json-report's metadata.
    request.node.user_properties.extend([
        ("evomemory_correct", score.correct),
        ("evomemory_extracted", score.extracted),
        ("evomemory_target", score.target),
        ("evomemory_match_mode", score.match_mode),
    ])
