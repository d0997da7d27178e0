"""Resuming a session of arms continues only the arms that session started (issue 23):
an arm directory still holding an earlier session's complete run is not adopted as
this session's; the resume runs that arm afresh (the earlier run moves to history/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory
from tests.plugin.guarantee_project import RUN, calls, make_project


def _run_json(directory: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads((directory / "run.json").read_text(encoding="utf-8"))
    return document


def test_a_resumed_session_of_arms_never_adopts_an_arm_another_session_ran(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(pytester, monkeypatch)
    monkeypatch.chdir(project)
    for name in ("a", "b"):
        (project / f"{name}.yaml").write_text(RUN.format(name=name), encoding="utf-8")
    # one chain at a time: the session stops in arm a before b starts (with chains at
    # once b would run beside it)
    arms = ["run", "-q", "--config=a.yaml", "--config=b.yaml", "--chains=1"]
    results = project / "evomemory-results"

    assert evomemory(arms) == 0  # session 1: both arms complete
    earlier_b = _run_json(results / "b")["session"]

    # session 2, the same command, stopped in arm a (its first arm) by a failed episode
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    assert evomemory([*arms, "--max-errors=1"]) == 2
    second = _run_json(results / "a")["session"]
    assert second != earlier_b
    assert _run_json(results / "b")["session"] == earlier_b  # b not reached: session 1's run still there

    monkeypatch.delenv("ACTIONS")
    (project / "calls.log").unlink()
    capsys.readouterr()
    status = evomemory(["run", "-q", f"--resume={results}"])
    assert status == 1, capsys.readouterr()  # a's f02 stays a failed episode
    # b belongs to session 1: the resume of session 2 runs it afresh, all of it
    assert _run_json(results / "b")["session"] == second
    ran_b = [line for line in calls(project) if line.endswith("/task")]
    assert len(ran_b) >= 6  # a's remaining tasks and every task of b
    summary_b = json.loads((results / "b" / "summary.json").read_text(encoding="utf-8"))
    assert summary_b["completion"]["complete"] is True and summary_b["overall"]["tasks"] == 6
    (kept,) = (results / "b" / "history").iterdir()  # session 1's run of b, moved aside, not lost
    assert _run_json(kept)["session"] == earlier_b
