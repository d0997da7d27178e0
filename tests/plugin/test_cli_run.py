"""``evomemory run``: the same engine, artefacts, thresholds and exit codes as the plugin."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory

from .guarantee_project import make_project, wait_for


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = make_project(pytester, monkeypatch)
    monkeypatch.chdir(path)
    return path


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    for block in [summary["overall"], *summary["streams"].values()]:
        block.pop("seconds")
        block["per_stimulus"].pop("seconds")
    return {k: v for k, v in summary.items() if k not in ("started", "finished", "wall_seconds")}


def test_the_command_writes_the_artefacts_the_plugin_writes(pytester: pytest.Pytester, project: Path) -> None:
    pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml", "--evomemory-output-dir=plugin").assert_outcomes(passed=6)
    assert evomemory(["run", "--config", "run.yaml", "--output-dir", "cli", "-q"]) == 0
    plugin, cli = project / "plugin", project / "cli"
    assert (cli / "scores.jsonl").read_text() == (plugin / "scores.jsonl").read_text()
    summary = json.loads((cli / "summary.json").read_text())
    assert stable(summary) == stable(json.loads((plugin / "summary.json").read_text()))
    assert sorted(p.name for p in cli.iterdir()) == sorted(p.name for p in plugin.iterdir())
    assert summary["completion"] == {"complete": True, "tasks_planned": 6, "tasks_run": 6, "reason": None}


def test_thresholds_and_failed_episodes_exit_1(project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert evomemory(["run", "--config", "run.yaml", "--min-accuracy", "0.9", "-q"]) == 1
    assert "minimum 90.0%" in capsys.readouterr().err  # a missed gate is a failure line: stderr
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    assert evomemory(["run", "--config", "run.yaml", "-q"]) == 1
    summary = json.loads((project / "evomemory-results" / "g" / "summary.json").read_text())
    assert summary["failed_episodes"][0]["task_id"] == "f02"
    assert "deep_user_helper" in summary["failed_episodes"][0]["traceback"]
    # the earlier run moved aside, not deleted
    assert len(list((project / "evomemory-results" / "g" / "history").iterdir())) == 1


def test_the_ini_config_is_resolved_as_the_plugin_resolves_it(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """From the rootdir, wherever the command runs; a path the system refuses is one line."""
    (project / "pytest.ini").write_text("[pytest]\nevomemory_config = run.yaml\n")
    (project / "sub").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project / "sub")
        assert evomemory(["run", "--limit", "1", "-q"]) == 0
    assert (project / "sub" / "evomemory-results" / "g" / "summary.json").exists()
    assert evomemory(["run", "--compare", "y" * 300, "-q"]) == 4
    assert "File name too long; check the paths given in the options" in capsys.readouterr().err


def test_usage_errors_exit_4_before_anything_runs(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert evomemory(["run", "--config", "missing.yaml"]) == 4
    assert evomemory(["run", "--config", "run.yaml", "--min-accuracy", "lots"]) == 4
    assert evomemory(["run", "--resume", "nowhere"]) == 4
    assert "Traceback" not in capsys.readouterr().err
    # no --config and no ini config: both ways to give one are named (the command reads the ini)
    assert evomemory(["run", "-q"]) == 4
    assert "or set evomemory_config in your pytest settings" in capsys.readouterr().err
    assert not (project / "evomemory-results").exists()


def test_max_errors_stops_with_exit_2_and_resume_completes_the_run(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f01/task": "raise", "f02/task": "raise"}))
    # one chain at a time: the stop comes after exactly those two (chains at once, another
    # chain's task in flight may end too: tests/runtime/test_chains.py)
    assert evomemory(["run", "--config", "run.yaml", "--max-errors", "2", "-q", "--chains", "1"]) == 2
    run_dir = project / "evomemory-results" / "g"
    completion = json.loads((run_dir / "summary.json").read_text())["completion"]
    assert (completion["complete"], completion["tasks_run"]) == (False, 2)
    assert "--evomemory-max-errors" in completion["reason"] or "max-errors" in completion["reason"]
    monkeypatch.delenv("ACTIONS")
    assert evomemory(["run", "--resume", "evomemory-results/g", "-q"]) == 1  # f01, f02 stay failed
    assert json.loads((run_dir / "summary.json").read_text())["completion"]["complete"] is True


def test_sigterm_writes_an_incomplete_summary_and_exits_2(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f03/task": "wait"}))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_evomemory.cli", "run", "--config", "run.yaml"],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    wait_for(project / "waiting", process)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 2, output
    completion = json.loads((project / "evomemory-results" / "g" / "summary.json").read_text())["completion"]
    assert completion["complete"] is False and "SIGTERM" in completion["reason"]
    assert evomemory(["report", str(project / "evomemory-results" / "g")]) == 0
