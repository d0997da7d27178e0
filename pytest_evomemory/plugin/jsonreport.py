"""pytest-json-report integration, registered only when that plugin is active.

Dashboards read one JSON file: each task test carries its score and costs in its
``metadata`` (from the item's ``evomemory_*`` user properties, see
:func:`..reporting.properties.task_properties`), and the report's top-level ``evomemory`` block
carries the run's summary with its schema version and what was benchmarked (the
agent, its model and the memory backend), as docs/artefacts.md describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..reporting.properties import PROPERTY_PREFIX


class JsonReportHooks:
    """Per-task metadata from each item's user properties; the run's summary at the end.

    ``block`` returns the report's ``evomemory`` block once the run is summarized
    (the session decides its shape: one run's summary, or every arm's and their
    comparison), ``None`` before.
    """

    def __init__(self, block: Callable[[], dict[str, Any] | None]) -> None:
        self.block = block

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
        if call.when != "call":
            return {}
        task = {
            key[len(PROPERTY_PREFIX):]: value
            for key, value in item.user_properties
            if key.startswith(PROPERTY_PREFIX)
        }
        return {"evomemory": task} if task else {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        block = self.block()
        if block is not None:
            from ..redaction import redact_strings

            # as the run directory writes it: redacted, strict JSON (no bare NaN)
            json_report["evomemory"] = redact_strings(block)
