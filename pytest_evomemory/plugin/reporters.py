"""What pytest's reporters carry of the benchmark: JUnit XML and pytest-json-report.

A CI system's test view and a dashboard read one file. Each task's score is already
a testcase property (its ``evomemory_*`` user properties, set by :mod:`.items`);
here the JUnit suite gets what ran (agent, memory, model) as global properties, and
pytest-json-report gets each task's properties as its ``metadata`` and the session's
``evomemory`` block (summary, schema version, what ran) at the top, as
docs/artefacts.md describes. Their content is :mod:`..reporting.properties`' and
the session's; only their way into each reporter is here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ..reporting.properties import session_identity_properties, task_metadata

if TYPE_CHECKING:
    from ..rundocs.summary import Summary


def add_identity_properties(config: pytest.Config, runs: Sequence[tuple[str, Summary | None]]) -> None:
    """Add each finished run's identity to the JUnit XML file, when one is written
    (each value prefixed ``<arm>: `` when a session runs several arms)."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for key, value in session_identity_properties(runs):
        xml.add_global_property(key, value)


class JsonReportHooks:
    """pytest-json-report's hooks, registered only when that plugin is active.

    ``block`` returns the report's ``evomemory`` block once the run is summarized
    (the session decides its shape, one run's summary or every arm's and their
    comparison, and redacts it as the run directory is), ``None`` before.
    """

    def __init__(self, block: Callable[[], dict[str, Any] | None]) -> None:
        self.block = block

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
        task = task_metadata(item.user_properties) if call.when == "call" else {}
        return {"evomemory": task} if task else {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        block = self.block()
        if block is not None:
            json_report["evomemory"] = block
