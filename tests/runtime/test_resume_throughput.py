"""A resume is refused only for a setting that changes results: how fast a run goes
(``model.max_concurrency``, ``model.max_connections``) is not part of the config
identity (:data:`pytest_evomemory.runtime.run.THROUGHPUT_KEYS`). A run recorded
under ``max_concurrency``'s former default of 4, whose fingerprint hashed it,
resumes after the default became unbounded, to the uninterrupted run's result."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.config import AgentConfig, ModelConfig
from pytest_evomemory.rundocs import RunFile
from pytest_evomemory.runtime import run as run_module
from tests.plugin.guarantee_project import make_project

RUN = """
name: g
benchmark: {benchmark: sample, limit: 3}
agent: {kind: "scripted_agent:create", memory_strategy: deterministic_recall, model: {provider: mock%s}}
memory: {backend: inprocess}
"""


def _fingerprint_of_the_former_version(config: Any) -> str:
    """config_fingerprint as the versions before THROUGHPUT_KEYS hashed it: every
    resolved setting but where the files were."""
    document = {key: value for key, value in config.to_dict().items()
                if key not in ("path", "sources", "paths", "selection")}
    return hashlib.sha256(json.dumps(document, sort_keys=True, ensure_ascii=True, default=str).encode()).hexdigest()


@pytest.fixture
def former_default() -> Iterator[pytest.MonkeyPatch]:
    """While its patches stand, runs are recorded as a version with max_concurrency
    defaulting to 4 recorded them (the config default and the fingerprint);
    ``undo()`` ends that (a patcher of its own: the test's other patches stay)."""
    patcher = pytest.MonkeyPatch()
    patcher.setattr(ModelConfig.model_fields["max_concurrency"], "default", 4)
    _rebuild()
    patcher.setattr(run_module, "config_fingerprint", _fingerprint_of_the_former_version)
    yield patcher
    patcher.undo()
    _rebuild()


def _rebuild() -> None:
    """The model config's validator, and the agent config's that embeds it, anew."""
    for model in (ModelConfig, AgentConfig):
        model.model_rebuild(force=True)


def _scores(directory: Path) -> list[tuple[str, str, bool]]:
    rows = [json.loads(line) for line in (directory / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    return sorted((row["stream"], row["task_id"], row["correct"]) for row in rows)


def test_a_run_recorded_under_the_former_default_resumes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, former_default: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = make_project(pytester, monkeypatch)
    monkeypatch.chdir(project)
    (project / "run.yaml").write_text(RUN % "", encoding="utf-8")
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    assert evomemory(["run", "-q", "--config=run.yaml", "--max-errors=1", "--output-dir=former"]) == 2
    recorded = RunFile.model_validate_json((project / "former" / "run.json").read_text(encoding="utf-8"))
    assert recorded.run.written()["agent"]["model"]["max_concurrency"] == 4  # as the former version wrote it
    former_fingerprint = recorded.config_fingerprint

    former_default.undo()
    _rebuild()  # this version: max_concurrency unset, THROUGHPUT_KEYS out of the fingerprint
    assert AgentConfig.model_validate({"kind": "tiny", "model": {"provider": "mock"}}).model.max_concurrency is None  # type: ignore[union-attr]
    monkeypatch.delenv("ACTIONS")
    assert evomemory(["run", "-q", "--config=run.yaml", "--output-dir=reference"]) == 0
    assert RunFile.model_validate_json((project / "reference" / "run.json").read_text()).config_fingerprint != (
        former_fingerprint
    )
    capsys.readouterr()

    assert evomemory(["run", "-q", "--resume=former"]) == 1, capsys.readouterr()  # f02 stays a failed episode
    assert "differs from the interrupted run" not in capsys.readouterr().err
    resumed = RunFile.model_validate_json((project / "former" / "run.json").read_text(encoding="utf-8"))
    assert resumed.config_fingerprint == former_fingerprint  # the run keeps the identity it was started under
    summary = json.loads((project / "former" / "summary.json").read_text(encoding="utf-8"))
    assert summary["completion"]["complete"] is True and summary["config_fingerprint"] == former_fingerprint
    reference = _scores(project / "reference")
    assert [row for row in _scores(project / "former") if row[1] != "f02"] == [r for r in reference if r[1] != "f02"]


def test_concurrency_changed_in_the_config_does_not_refuse_a_resume_and_a_result_setting_does(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(pytester, monkeypatch)
    monkeypatch.chdir(project)
    config = project / "run.yaml"
    config.write_text(RUN % "", encoding="utf-8")
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    assert evomemory(["run", "-q", "--config=run.yaml", "--max-errors=1", "--output-dir=out"]) == 2
    monkeypatch.delenv("ACTIONS")

    config.write_text(RUN % ", temperature: 0.5", encoding="utf-8")
    capsys.readouterr()
    assert evomemory(["run", "-q", "--resume=out"]) == 4
    assert "agent.model.temperature (was 0.0, now 0.5)" in capsys.readouterr().err

    config.write_text(RUN % ", max_concurrency: 2, max_connections: 3", encoding="utf-8")
    assert evomemory(["run", "-q", "--resume=out"]) == 1, capsys.readouterr()
    summary = json.loads((project / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["completion"]["complete"] is True


def test_concurrency_given_with_set_is_not_part_of_the_identity(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--set agent.model.max_concurrency=8`` names a config of the same run; a
    result setting given with ``--set`` does not."""
    from pytest_evomemory.configs.load import load_run_config

    project = make_project(pytester, monkeypatch)
    (project / "run.yaml").write_text(RUN % "", encoding="utf-8")

    def fingerprint(*overrides: str) -> str:
        return run_module.config_fingerprint(load_run_config(project / "run.yaml", overrides))

    plain = fingerprint()
    assert fingerprint("agent.model.max_concurrency=8", "agent.model.max_connections=2") == plain
    assert fingerprint("agent.model.temperature=0.5") != plain
