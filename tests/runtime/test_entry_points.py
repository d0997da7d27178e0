"""pytest and ``evomemory run`` are two drivers of one Session: for the same input they
write the same artefacts, exit with the same status and refuse with the same words,
each naming the flag as its user typed it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FOREIGN_PLUGINS_OFF
from tests.plugin.guarantee_project import AGENT, RUN, make_project

#: Each entry point's spelling of an option.
FLAGS = {"pytest": "--evomemory-", "cli": "--"}


def run(entry: str, project: Path, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``pytest --evomemory-NAME=...`` or ``evomemory run --NAME=...`` in ``project``."""
    words = [option.replace("--@", FLAGS[entry]) for option in options]
    if entry == "pytest":
        command = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", *words]
    else:
        command = [sys.executable, "-m", "pytest_evomemory.cli", "run", "-q", *words]
    environment = {**os.environ, "PROJECT": str(project), **(env or {})}
    environment.pop("PYTHONPATH", None)  # the project's pytest settings decide, as for a user
    # no options from the suite's own settings, only its foreign plugins kept out (tests/conftest.py)
    environment["PYTEST_ADDOPTS"] = FOREIGN_PLUGINS_OFF
    return subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True, timeout=240)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's repository: its agent under ``src/``, importable through the
    ``pythonpath`` ini setting only (as the README tells users to set it up)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "scripted_agent.py").write_text(AGENT, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n', encoding="utf-8")
    (tmp_path / "run.yaml").write_text(RUN.format(name="g"), encoding="utf-8")
    return tmp_path


ENTRIES = pytest.mark.parametrize("entry", ["pytest", "cli"])


def _stable(summary: dict[str, Any]) -> dict[str, Any]:
    for block in [summary["overall"], *summary["streams"].values()]:
        block.pop("seconds")
        block["per_stimulus"].pop("seconds")
    return {k: v for k, v in summary.items() if k not in ("started", "finished", "wall_seconds")}


def test_both_write_the_same_artefacts_with_a_factory_found_through_pythonpath(project: Path) -> None:
    plugin = run("pytest", project, "--@config=run.yaml", "--@output-dir=by-pytest")
    # evomemory run: the sample's two streams at once (its chains); pytest: one after the other
    cli = run("cli", project, "--@config=run.yaml", "--@output-dir=by-cli")
    assert (plugin.returncode, cli.returncode) == (0, 0), plugin.stdout + plugin.stderr + cli.stdout + cli.stderr
    first, second = project / "by-pytest", project / "by-cli"
    assert (first / "scores.jsonl").read_text() == (second / "scores.jsonl").read_text()
    timeless = [re.sub(r'"seconds": [0-9.e-]+', '"seconds": 0', (where / "responses.jsonl").read_text())
                for where in (first, second)]
    assert timeless[0] == timeless[1]  # record for record, in stream order
    assert _stable(json.loads((first / "summary.json").read_text())) == _stable(
        json.loads((second / "summary.json").read_text())
    )
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in second.iterdir())


@ENTRIES
@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--@limit=0"], "--@limit must be at least 1 (a whole number of tasks per stream), got '0'"),
        (["--@limit=x"], "--@limit must be at least 1"),
        (["--@max-errors=-1"], "--@max-errors must be at least 1"),
        (["--@min-accuracy=lots"], "--@min-accuracy 'lots': expected [STREAM=]FRACTION"),
        (["--@min-gain=10"], "--@min-gain gates the gain of an arm over the baseline"),
        (["--@set=agent.kind=nope"], "unknown agent kind 'nope'"),
        (["--@stream=sample_trivia"], "--@stream: unknown stream(s) 'sample_trivia'"),
        (["--@output-dir="], "--@output-dir is given an empty value"),
    ],
)
def test_a_refusal_is_one_line_exit_4_naming_the_flag_as_typed(
    entry: str, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], options: list[str], says: str
) -> None:
    """In this process (a refusal comes before any factory is imported, so the
    project's ``pythonpath`` plays no part): both drivers, one Session's words."""
    project = pytester.path
    (project / "run.yaml").write_text(RUN.format(name="g"), encoding="utf-8")
    (project / "scripted_agent.py").write_text(AGENT, encoding="utf-8")
    pytester.syspathinsert()
    words = ["--@config=run.yaml", *options]
    if entry == "pytest":
        result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-q",
                                    *(word.replace("--@", FLAGS[entry]) for word in words))
        status, output = int(result.ret), result.stdout.str() + result.stderr.str()
    else:
        from pytest_evomemory.cli import main as evomemory

        status = evomemory(["run", "-q", *(word.replace("--@", FLAGS[entry]) for word in words)])
        captured = capsys.readouterr()
        output = captured.out + captured.err
    assert status == 4, output
    assert says.replace("--@", FLAGS[entry]) in output
    other = "--evomemory-" if entry == "cli" else None
    if other is not None:
        assert other not in output, output  # the CLI never answers in the plugin's words
    assert "Traceback" not in output
    assert not (project / "evomemory-results").exists()  # nothing was written


@pytest.fixture
def in_process(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``in_process(entry, *options, actions={...})`` runs either door in this process
    in the project of ``project``'s files (the agent importable from the rootdir), and
    returns ``(exit status, output)``: a subprocess per run cost about 2 s of start-up,
    and the doors' exit statuses and words are the same in process. The project's
    ``pythonpath`` setting and the exit status a shell sees are a subprocess's:
    ``test_both_write_the_same_artefacts_with_a_factory_found_through_pythonpath``."""
    from pytest_evomemory.cli import main as evomemory

    make_project(pytester, monkeypatch)
    monkeypatch.chdir(pytester.path)

    def run_in_process(entry: str, *options: str, actions: dict[str, str] | None = None) -> tuple[int, str]:
        monkeypatch.setenv("ACTIONS", json.dumps(actions or {}))
        words = [option.replace("--@", FLAGS[entry]) for option in options]
        if entry == "pytest":
            result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-q", *words)
            capsys.readouterr()
            return int(result.ret), result.stdout.str() + result.stderr.str()
        capsys.readouterr()
        status = evomemory(["run", "-q", *words])
        captured = capsys.readouterr()
        return status, captured.out + captured.err

    return run_in_process


@ENTRIES
def test_a_missed_gate_and_a_failed_episode_exit_1(entry: str, in_process: Any, pytester: pytest.Pytester) -> None:
    assert in_process(entry, "--@config=run.yaml", "--@min-accuracy=0.99")[0] == 1
    status, output = in_process(entry, "--@config=run.yaml", actions={"f02/task": "raise"})
    assert status == 1, output
    # both say why they fail; evomemory run has no FAILED line of pytest's to say it
    assert "evomemory: 1 failed episode(s), counted as wrong; the session fails" in output
    summary = json.loads((pytester.path / "evomemory-results" / "g" / "summary.json").read_text())
    assert [f["task_id"] for f in summary["failed_episodes"]] == ["f02"]


@ENTRIES
def test_a_resume_reapplies_the_limit_and_with_nothing_left_exits_as_the_run(
    entry: str, in_process: Any, pytester: pytest.Pytester
) -> None:
    status, output = in_process(
        entry, "--@config=run.yaml", "--@limit=2", "--@max-errors=1", actions={"f02/task": "raise"}
    )
    assert status == 2, output  # stopped early, resumable
    run_dir = pytester.path / "evomemory-results" / "g"
    assert json.loads((run_dir / "summary.json").read_text())["completion"]["complete"] is False
    status, output = in_process(entry, f"--@resume={run_dir}")
    assert status == 1, output  # f02 stays a failed episode
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completion"] == {"complete": True, "tasks_planned": 4, "tasks_run": 4, "reason": None}
    status, output = in_process(entry, f"--@resume={run_dir}")  # nothing left to run: not pytest's exit 5
    assert status == 1, output


def _stream_lines(text: str) -> list[str]:
    """The streams' progress lines, eta aside (the agent's pace differs run to run)."""
    return [line.split("  eta ")[0] for line in text.splitlines() if line.startswith("evomemory sample_")]


@pytest.mark.parametrize("quiet", [False, True])
def test_both_print_the_same_stream_lines_as_the_ini_interval_says(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, quiet: bool
) -> None:
    """``evomemory_progress_interval`` (read by both) at 0: a line after every task,
    the same lines through either door; ``-q``: only each stream's last line."""
    from pytest_evomemory.cli import main as evomemory

    project = pytester.path
    (project / "run.yaml").write_text(RUN.format(name="g"), encoding="utf-8")
    (project / "scripted_agent.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.setenv("PROJECT", str(project))
    pytester.syspathinsert()
    pytester.makeini("[pytest]\nevomemory_progress_interval = 0\n")
    quieter = ["-q"] if quiet else []
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *quieter,
                                "--evomemory-config=run.yaml", "--evomemory-output-dir=by-pytest")
    assert result.ret == 0, result.stdout.str()
    by_pytest = _stream_lines(result.stdout.str())
    capsys.readouterr()  # pytest's own output, as the in-process run wrote it
    # one chain at a time, as pytest without xdist runs them (several at once, the
    # session has one line: tests/runtime/test_chains.py)
    assert evomemory(["run", *quieter, "--config=run.yaml", "--output-dir=by-cli", "--chains=1"]) == 0
    printed = capsys.readouterr().out
    assert _stream_lines(printed) == by_pytest
    per_stream = 1 if quiet else 3  # three tasks per stream
    assert len(by_pytest) == 2 * per_stream
    assert by_pytest[per_stream - 1].startswith("evomemory sample_facts: 3/3  acc ")
    verdicts = [line for line in printed.splitlines() if line.startswith("sample_facts/")]
    assert len(verdicts) == (0 if quiet else 3)


def test_the_cli_refuses_a_progress_interval_that_is_no_duration_as_pytest_does(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_evomemory.cli import main as evomemory

    (pytester.path / "run.yaml").write_text(RUN.format(name="g"), encoding="utf-8")
    pytester.makeini("[pytest]\nevomemory_progress_interval = soon\n")
    assert evomemory(["run", "--config=run.yaml"]) == 4
    error = capsys.readouterr().err
    assert "evomemory_progress_interval must be a number of seconds (0 or more), got 'soon'" in error
    assert not (pytester.path / "evomemory-results").exists()
