"""The benchmark's test items. The plugin adds this module to pytest's arguments
when ``--evomemory-config`` is given, so no user test file is needed.

Each item is one task (id ``<stream>/<task-id>``); its body runs and scores the
task turn. Feedback and reset happen in the ``evomemory_episode`` fixture's
teardown, so they run after the score is recorded and before the next task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._session import Episode


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "evomemory_sample" in metafunc.fixturenames:
        from .plugin import get_session

        get_session(metafunc.config).parametrize(metafunc)


def test_task(evomemory_episode: Episode, request: pytest.FixtureRequest) -> None:
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
