"""The backends and the example adapter inside a real run of the plugin (pytester)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import EXAMPLE_ADAPTER

RUN_NAME = "memory_backend_run"


def write_run(pytester: pytest.Pytester, memory: dict[str, Any], name: str = RUN_NAME) -> Path:
    document = {
        "name": name,
        "benchmark": {"benchmark": "sample"},
        "agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"},
        "memory": memory,
    }
    path = pytester.path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def summary(pytester: pytest.Pytester, name: str = RUN_NAME) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        (pytester.path / "evomemory-results" / name / "summary.json").read_text(encoding="utf-8")
    )
    return document


@pytest.mark.parametrize("memory", [{"backend": "sqlite"}, {"backend": "sqlite", "embedder": "hashing"}])
def test_sqlite_backend_in_a_full_run(pytester: pytest.Pytester, memory: dict[str, Any]) -> None:
    config = write_run(pytester, memory)
    pytester.runpytest(f"--evomemory-config={config}", "-p", "no:randomly").assert_outcomes(passed=24)
    assert summary(pytester)["overall"]["accuracy"] > 0
    files = sorted(p.name for p in (pytester.path / "evomemory-results" / RUN_NAME / "memory").iterdir())
    assert "sample_facts.sqlite3" in files and "sample_choice.sqlite3" in files


def test_postgres_backend_in_a_full_run(pytester: pytest.Pytester, postgres_settings: dict[str, Any]) -> None:
    config = write_run(pytester, {"backend": "postgres", "postgres": postgres_settings}, name="pg_run_plugin")
    pytester.runpytest(f"--evomemory-config={config}", "-p", "no:randomly").assert_outcomes(passed=24)
    assert summary(pytester, "pg_run_plugin")["overall"]["accuracy"] > 0


def test_example_adapter_by_module_factory_reference(pytester: pytest.Pytester) -> None:
    config = write_run(pytester, {"backend": EXAMPLE_ADAPTER, "top_k": 4})
    pytester.runpytest(f"--evomemory-config={config}", "-p", "no:randomly").assert_outcomes(passed=24)
    document = summary(pytester)
    assert document["overall"]["accuracy"] > 0
    assert document["streams"]["sample_facts"]["memory_recalls"] > 0


def test_example_adapter_through_the_memory_factory_fixture(pytester: pytest.Pytester) -> None:
    from .test_memory_docs_blocks import documented_conftest

    pytester.makeconftest(documented_conftest())  # docs/memory.md's block, as written
    # the config names the built-in backend; the fixture overrides it
    config = write_run(pytester, {"backend": "inprocess"})
    pytester.runpytest(f"--evomemory-config={config}", "-p", "no:randomly").assert_outcomes(passed=24)
    assert summary(pytester)["overall"]["accuracy"] > 0


def test_a_store_that_cannot_be_opened_is_refused_before_any_task(pytester: pytest.Pytester) -> None:
    """A file where the store's directory goes is known before the first task: the
    session is refused there (exit 4), not each stream at its start."""
    blocker = pytester.path / "not_a_directory"
    blocker.write_text("file")
    config = write_run(pytester, {"backend": "sqlite", "sqlite": {"path": str(blocker / "{stream}.sqlite3")}})
    result = pytester.runpytest(f"--evomemory-config={config}", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert "not_a_directory is a file where a directory is expected" in error and "Traceback" not in error, error
    assert not (pytester.path / "evomemory-results").exists() or not any((pytester.path / "evomemory-results").rglob("scores.jsonl"))
