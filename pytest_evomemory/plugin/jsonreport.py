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
            from ..reporting.summary import SCHEMA_VERSION

            json_report["evomemory"] = {"schema_version": SCHEMA_VERSION, **with_what_ran(block)}


def run_identity(run_config: Any) -> dict[str, Any]:
    """What was configured, without secrets (configs only name key variables);
    :func:`with_what_ran` puts what actually ran over it."""
    from ..identity import configured_model

    agent = run_config.agent
    return {
        "agent": {"kind": agent.kind, "memory_strategy": agent.memory_strategy, "options": dict(agent.options)},
        "model": configured_model(agent.model, run_config.base_dir),
        "memory": None if agent.memory_strategy == "none" else {
            "backend": run_config.memory.backend, "top_k": run_config.memory.top_k,
        },
        "overrides": list(run_config.overrides),
    }


def with_what_ran(block: dict[str, Any]) -> dict[str, Any]:
    """The block with each run's ``agent``, ``model`` and ``memory`` taken from what
    ran (its summary's ``ran``): a conftest factory's classes, the model file or
    the names the server reported, not the config's kind and defaults."""
    from ..identity import run_identity as identity_of

    def identified(entry: Any) -> Any:
        if not isinstance(entry, dict) or not isinstance(entry.get("ran"), dict):
            return entry
        return {**entry, **identity_of(entry["ran"], entry)}

    arms = block.get("arms")
    if isinstance(arms, dict):
        return {**block, "arms": {name: identified(entry) for name, entry in arms.items()}}
    result: dict[str, Any] = identified(block)
    return result
