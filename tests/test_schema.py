"""One JSON Schema, shipped in the package, for every document a run writes: real
artefacts of a one-arm session, a session of two arms and ``evomemory run`` are
validated against it, and one arm and several share the JSON report's shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from jsonschema import Draft202012Validator

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.rundir import SCHEMA_VERSION
from pytest_evomemory.schema import ARTEFACTS, SCHEMA_FILE, load_schema, schema_for
from pytest_evomemory.schema.generate import schema_text

from .conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN
from .schema import assert_json_report_valid, assert_run_dir_valid, assert_valid, problems


def test_the_schema_is_valid_versioned_and_shipped() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$id"].endswith(f":{SCHEMA_VERSION}")
    # the whole document is checked above, its definitions included; each artefact's
    # schema is that document pointing at a definition that exists
    for definition in set(ARTEFACTS.values()):
        assert definition in schema["$defs"]
        assert schema_for(definition)["$ref"] == f"#/$defs/{definition}"
    # every document that carries the version names the current one
    for name in ("run_json", "summary", "compare_json", "json_report"):
        assert schema["$defs"][name]["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"{SCHEMA_FILE.parent.name}/*.json"' in pyproject  # package data: in the wheel
    with pytest.raises(KeyError, match=r"no schema for 'nothing\.json'"):
        schema_for("nothing.json")


def test_the_shipped_schema_is_the_one_the_models_generate() -> None:
    """The schema is generated from the run documents' models (rundocs): a model
    changed without regenerating the file (``python -m pytest_evomemory.schema``)
    fails here, so the file and the code never describe two formats."""
    assert SCHEMA_FILE.read_text(encoding="ascii") == schema_text(), (
        "artefacts.schema.json differs from the models: run python -m pytest_evomemory.schema"
    )


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    return report


def test_a_session_of_two_arms_writes_only_what_the_schema_says(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", f"--evomemory-config={SAMPLE_MEMORY_RUN}",
        "--evomemory-output-dir=out", "--evomemory-limit=2", "--json-report", "--json-report-file=report.json",
    )
    assert result.ret == 0, result.stdout.str()
    out = pytester.path / "out"
    for arm in ("sample_no_memory", "sample_memory"):
        assert_run_dir_valid(out / arm)
    assert_valid("compare.json", json.loads((out / "compare.json").read_text(encoding="utf-8")))
    assert_valid("arms.json", json.loads((out / "arms.json").read_text(encoding="utf-8")))
    report = _report(pytester)
    assert_json_report_valid(report)
    block = report["evomemory"]
    assert [arm["name"] for arm in block["arms"]] == ["sample_no_memory", "sample_memory"]
    assert block["comparison"] is not None and block["arms"][0]["identity"]["memory"] is None


def test_one_arm_has_the_same_json_report_shape_as_several(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=out", "--evomemory-limit=2",
        "--json-report", "--json-report-file=report.json",
    )
    assert result.ret == 0, result.stdout.str()
    assert_run_dir_valid(pytester.path / "out")
    report = _report(pytester)
    assert_json_report_valid(report)
    block = report["evomemory"]
    assert len(block["arms"]) == 1 and block["comparison"] is None and block["gains"] == []
    assert {test["metadata"]["evomemory"]["arm"] for test in report["tests"]} == {"sample_memory"}


def test_evomemory_run_writes_what_the_schema_says(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_evomemory.cli", "run", f"--config={SAMPLE_MEMORY_RUN}",
         f"--output-dir={tmp_path / 'out'}", "--limit=2"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert_run_dir_valid(tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["wall_seconds"] >= 0  # the serial driver's own field is in the schema too


def _run_json(model: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "config_fingerprint": "ab" * 32, "streams": [], "started": "", "command_line": [],
        "versions": {"pytest-evomemory": "0", "python": "3"},
        "run": {"name": "x", "benchmark": {}, "memory": {}, "agent": {"model": model}},
    }


@pytest.mark.parametrize("provider", get_args(ModelConfig.model_fields["provider"].annotation))
def test_every_providers_model_section_is_what_the_schema_says(provider: str) -> None:
    """run.json holds the config's model section as the config dumps it, for every
    provider the config takes (the dry-run model's was refused by a schema that knew
    only openai and local)."""
    section = ModelConfig.model_validate({"provider": provider}).model_dump(mode="json")
    assert problems("run_json", _run_json(section)) == []
    assert problems("run_json", _run_json({**section, "provider": "another"}))


def test_a_dry_run_writes_what_the_schema_says(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_evomemory.cli", "run", "--config=sample_mock", f"--output-dir={tmp_path / 'out'}",
         "--limit=2"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert_run_dir_valid(tmp_path / "out")


def test_a_locomo_run_writes_what_the_schema_says(tmp_path: Path) -> None:
    """LoCoMo's artefacts: the mean F1 figure (``f1_sum``, ``f1_mean``) and the
    ingestion turns' responses (``ingest: agent``)."""
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_evomemory.cli", "run", "--config=locomo_sample_memory",
         f"--output-dir={tmp_path / 'out'}", "--set", "benchmark.ingest=agent"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert_run_dir_valid(tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert all(stream["figures"] == {"f1": "F1"} and stream["f1_mean"] is not None for stream in summary["streams"].values())
    lines = (tmp_path / "out" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    assert any(json.loads(line)["kind"] == "ingestion" for line in lines)


def test_the_schema_refuses_what_a_dashboard_must_not_be_handed() -> None:
    local = {"provider": "local", "file": "m.gguf", "sha256": "ab" * 32, "n_ctx": 2048, "temperature": 0.0}
    ran = {"agent": {"kind": "tiny", "memory_strategy": "none"}, "memory": None, "model": local}
    assert problems("stream_ran", ran) == []
    # a local model named by an API model name it never used (the gpt-4o-mini)
    assert problems("stream_ran", {**ran, "model": {**local, "model": "gpt-4o-mini"}})
    # an API model without the name it asked for, a hash that is not one
    assert problems("stream_ran", {**ran, "model": {"provider": "openai", "endpoint": "http://127.0.0.1:1/v1"}})
    assert problems("stream_ran", {**ran, "model": {**local, "sha256": "not a hash"}})
    # a run.json config holding the other provider's keys
    assert problems("run_json", _run_json({"provider": "local", "base_url": "x"}))
    assert problems("run_json", _run_json({"provider": "mock", "model": "mock", "model_path": "x"}))
