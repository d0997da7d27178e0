"""pytest-json-report integration, registered only when that plugin is active."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._session import EvoMemorySession


class JsonReportHooks:
    def __init__(self, session: EvoMemorySession) -> None:
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
        if call.when != "call":
            return {}
        scores = {key: value for key, value in item.user_properties if key.startswith("evomemory_")}
        return {"evomemory": scores} if scores else {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        if self.session.summary is not None:
            json_report["evomemory"] = self.session.summary
