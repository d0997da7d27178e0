"""The dry run a user makes before a paid one: the shipped ``sample_mock`` arms through
both doors, serial and on two workers, and a bad mock config refused before any task."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_evomemory.cli import main as evomemory


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(pytester.path / "response-cache"))
    monkeypatch.chdir(pytester.path)
    return pytester.path


@pytest.mark.slow
def test_the_dry_run_arms_gate_alike_serial_on_two_workers_and_without_pytest(
    pytester: pytest.Pytester, project: Path
) -> None:
    arms = ["--evomemory-config=sample_mock_no_memory", "--evomemory-config=sample_mock"]
    parallel = pytester.runpytest("-p", "no:randomly", *arms, "-n", "2", "--evomemory-min-gain=10",
                                  "--evomemory-output-dir=parallel")
    parallel.assert_outcomes(passed=48)  # 24 tasks, each an item running both arms
    assert parallel.ret == 0
    parallel.stdout.fnmatch_lines(["*sample_mock*+58.3 pp*"])
    serial = pytester.runpytest("-p", "no:randomly", "-p", "no:xdist", *arms, "--evomemory-min-gain=70",
                                "--evomemory-output-dir=serial")
    assert serial.ret == 1  # the gate is missed: memory adds 58.3 points, not 70
    assert evomemory(["run", "--config", "sample_mock", "--output-dir", "cli", "-q"]) == 0
    for other in (project / "serial" / "sample_mock", project / "cli"):
        assert (other / "scores.jsonl").read_text() == (project / "parallel" / "sample_mock" / "scores.jsonl").read_text()


def test_a_bad_mock_config_stops_the_pytest_session_before_any_task(pytester: pytest.Pytester, project: Path) -> None:
    (project / "run.yaml").write_text(yaml.safe_dump({
        "name": "bad", "benchmark": {"benchmark": "sample"},
        "agent": {"kind": "tiny", "model": {"provider": "mock", "mock": {"mode": "answers", "answers": "nope.yaml"}}},
    }))
    result = pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml")
    assert result.ret == 4
    output = result.stdout.str() + result.stderr.str()
    assert "key 'model.mock.answers'" in output and "nope.yaml: file not found" in output
    assert "Traceback" not in output and "passed" not in output
    assert not (project / "evomemory-results").exists()
