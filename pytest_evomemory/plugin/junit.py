"""What ran, as JUnit XML testsuite properties: a CI system's test view names the model.

Each task's score is already a testcase property (``evomemory_*``, see
:mod:`.items`); the agent, memory and model are the run's, so they are written once,
as global properties of the suite, from the summary's record of what ran
(:mod:`pytest_evomemory.identity`), never from the config alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ..identity import describe_component, describe_model, merge_identity


def identity_properties(summary: Mapping[str, Any], arm: str | None = None) -> list[tuple[str, str]]:
    """``evomemory_agent``, ``evomemory_memory`` and ``evomemory_model`` of one run
    (each value prefixed ``<arm>: `` when a session runs several arms)."""
    ran = summary.get("ran")
    identity = merge_identity(ran if isinstance(ran, Mapping) else {}, {})
    prefix = f"{arm}: " if arm is not None else ""
    agent, memory = identity.get("agent"), identity.get("memory")
    return [
        ("evomemory_agent", prefix + describe_component(agent if isinstance(agent, Mapping) else None)),
        ("evomemory_memory", prefix + describe_component(memory if isinstance(memory, Mapping) else None)),
        ("evomemory_model", prefix + describe_model(identity.get("model"))),
    ]


def add_identity_properties(config: pytest.Config, runs: Sequence[tuple[str, Mapping[str, Any] | None]]) -> None:
    """Add each finished run's identity to the JUnit XML file, when one is written."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, summary in runs:
        if summary is None:
            continue
        for key, value in identity_properties(summary, name if len(runs) > 1 else None):
            xml.add_global_property(key, value)
