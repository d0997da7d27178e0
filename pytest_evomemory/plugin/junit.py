"""What ran, as JUnit XML testsuite properties: a CI system's test view names the model.

Each task's score is already a testcase property (``evomemory_*``, see
:mod:`.items`); the agent, memory and model are the run's, so they are written once,
as global properties of the suite (:func:`..reporting.properties.identity_properties`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ..reporting.properties import identity_properties


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
