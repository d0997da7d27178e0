"""Validate artefacts against the JSON Schema the package ships (pytest_evomemory/schema)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from pytest_evomemory.schema import schema_for

_VALIDATORS: dict[str, Draft202012Validator] = {}


def problems(artefact: str, document: Any) -> list[str]:
    """What in ``document`` breaks the schema of ``artefact``, one line each (none: valid)."""
    validator = _VALIDATORS.get(artefact)
    if validator is None:
        validator = _VALIDATORS[artefact] = Draft202012Validator(schema_for(artefact))
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(document)'}: {error.message[:300]}"
        for error in validator.iter_errors(document)
    ]


def assert_valid(artefact: str, document: Any, where: str = "") -> None:
    found = problems(artefact, document)
    assert not found, f"{where or artefact} breaks the schema: " + "; ".join(found[:10])


def assert_run_dir_valid(run_dir: Path) -> None:
    """run.json, summary.json and every line of scores.jsonl and responses.jsonl."""
    for name in ("run.json", "summary.json"):
        assert_valid(name, json.loads((run_dir / name).read_text(encoding="utf-8")), str(run_dir / name))
    for name in ("scores.jsonl", "responses.jsonl"):
        lines = (run_dir / name).read_text(encoding="utf-8").splitlines()
        assert lines, f"{run_dir / name} is empty"
        for number, line in enumerate(lines, 1):
            assert_valid(name, json.loads(line), f"{run_dir / name}:{number}")


def assert_json_report_valid(report: Mapping[str, Any]) -> None:
    """The report's evomemory block and every task test's metadata."""
    assert_valid("json-report", report["evomemory"], "the JSON report's evomemory block")
    tasks = [test for test in report["tests"] if "evomemory" in (test.get("metadata") or {})]
    assert tasks, "no task test carries evomemory metadata"
    for test in tasks:
        assert_valid("json-report task metadata", test["metadata"]["evomemory"], test["nodeid"])
