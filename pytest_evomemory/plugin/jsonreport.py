"""pytest-json-report integration, registered only when that plugin is active."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


class JsonReportHooks:
    """Per-task metadata from each item's user properties; the run's summary at the end."""

    def __init__(self, summary: Callable[[], dict[str, Any] | None]) -> None:
        self.summary = summary

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
        if call.when != "call":
            return {}
        scores = {key: value for key, value in item.user_properties if key.startswith("evomemory_")}
        return {"evomemory": scores} if scores else {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        summary = self.summary()
        if summary is not None:
            json_report["evomemory"] = summary
