"""pytest-json-report integration, registered only when that plugin is active.

Dashboards read one JSON file: each task test carries its score and costs in its
``metadata`` (from the item's ``evomemory_*`` user properties, see
:func:`.items.task_properties`), and the report's top-level ``evomemory`` block
carries the run's summary with its schema version and what was benchmarked (the
agent, its model and the memory backend), as docs/artefacts.md describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .items import PROPERTY_PREFIX


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
            from ..reporting.summary import SCHEMA_VERSION

            # the summary as the run directory writes it: redacted, strict JSON
            json_report["evomemory"] = redact_strings({"schema_version": SCHEMA_VERSION, **block})


def run_identity(run_config: Any) -> dict[str, Any]:
    """What was benchmarked, without secrets (configs only name key variables)."""
    agent = run_config.agent
    model = agent.model
    return {
        "agent": {"kind": agent.kind, "memory_strategy": agent.memory_strategy},
        "model": None if model is None else {
            "provider": model.provider, "model": model.model, "base_url": model.base_url,
            "temperature": model.temperature,
        },
        "memory": {"backend": run_config.memory.backend, "top_k": getattr(run_config.memory, "top_k", None)},
        "overrides": list(run_config.overrides),
    }
