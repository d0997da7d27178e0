"""Interrupted runs resume to exactly the scores of an uninterrupted run.

Sessions run in this process (``pytester.runpytest``; under ``-n 2`` the workers are
processes anyway); only a run that kills or interrupts itself with a signal runs in a
subprocess."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ..conftest import read_jsonl
from .guarantee_project import importable_by_xdist_workers

# An agent that answers from memory (so a wrongly restored memory changes scores)
# and kills its own process at a chosen stimulus, like a crash or a Ctrl-C would.
KILLABLE_AGENT = """
import os, signal
from pytest_evomemory.agents.baseline import RecallBaselineAgent

CALLS = []

# A process started in the background by a non-interactive shell inherits SIGINT
# as ignored, and Python then never turns it into KeyboardInterrupt. Restore what
# an interactive user's Ctrl-C meets.
signal.signal(signal.SIGINT, signal.default_int_handler)

class Killable(RecallBaselineAgent):
    def respond(self, stimulus, turn):
        CALLS.append((stimulus.kind, stimulus.task_id))
        with open("calls.log", "a") as log:
            log.write(f"{stimulus.stream}/{stimulus.task_id}/{stimulus.kind}\\n")
        target = os.environ.get("KILL_AT")
        if target == f"{stimulus.task_id}/{stimulus.kind}":
            os.kill(os.getpid(), getattr(signal, os.environ["KILL_SIGNAL"]))
        return super().respond(stimulus, turn)

def create(config, memory):
    return Killable(config, memory)
"""

RUN = """
name: resumable
benchmark: {benchmark: sample}
agent: {kind: "killable_agent:create", memory_strategy: deterministic_recall}
memory: {backend: inprocess}
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The killable agent, importable by this process, a subprocess (PYTHONPATH) and
    xdist's workers."""
    pytester.makepyfile(killable_agent=KILLABLE_AGENT)
    (pytester.path / "run.yaml").write_text(RUN, encoding="utf-8")
    pytester.syspathinsert()
    importable_by_xdist_workers(pytester)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    return pytester


def _run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A session in this process."""
    return project.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


def _reference(project: pytest.Pytester) -> dict[str, Any]:
    """The uninterrupted run's scores and overall figures, made once per test process."""
    if not _REFERENCE:
        reference = _run(project, "--evomemory-config=run.yaml", "--evomemory-output-dir=reference")
        reference.assert_outcomes(passed=24)
        (project.path / "calls.log").unlink()
        _REFERENCE["scores"] = scores(project.path / "reference")
        _REFERENCE["overall"] = json.loads((project.path / "reference" / "summary.json").read_text())["overall"]
    return _REFERENCE


def scores(directory: Path) -> list[tuple[str, str, bool, str | None]]:
    return [(s["stream"], s["task_id"], s["correct"], s["extracted"]) for s in read_jsonl(directory / "scores.jsonl")]


#: The uninterrupted run's scores and overall figures, made once per test process.
_REFERENCE: dict[str, Any] = {}


def _assert_resumed_as_uninterrupted(
    project: pytest.Pytester, reference: dict[str, Any], before: list[str], killed: tuple[str, str], tasks: int
) -> None:
    """The resumed run in ``interrupted/`` equals the uninterrupted ``reference`` and
    sent no completed episode (``before``: the killed run's calls) to the agent again."""
    after = (project.path / "calls.log").read_text().splitlines()
    assert scores(project.path / "interrupted") == reference["scores"]
    summary = json.loads((project.path / "interrupted" / "summary.json").read_text())
    for key in ("tasks", "correct", "stimuli", "agent_turns", "memory_retains", "memory_recalls"):
        assert summary["overall"][key] == reference["overall"][key], key
    # completed episodes were not sent to the agent again
    killed_stream, killed_task = killed
    completed = [line for line in before if not line.startswith(f"{killed_stream}/{killed_task}/")]
    assert not set(completed) & set(after)
    assert after[0] == f"{killed_stream}/{killed_task}/task"
    responses = read_jsonl(project.path / "interrupted" / "responses.jsonl")
    assert len(responses) == 2 * tasks
    assert len({(r["stream"], r["task_id"], r["kind"]) for r in responses}) == 2 * tasks


# A kill -9 at a task turn (and with every memory) is the resume matrix's
# (tests/plugin/test_resume_matrix.py); here: a kill -9 in a feedback turn (Ctrl-C in
# the second stream: test_ctrl_c_says_how_to_continue_and_resume_keeps_the_runs_limit),
# and that no completed episode is sent to the agent again.
@pytest.mark.slow
def test_killed_run_resumes_to_the_uninterrupted_result(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = _reference(project)
    monkeypatch.setenv("KILL_AT", "f06/feedback")
    monkeypatch.setenv("KILL_SIGNAL", "SIGKILL")
    # the run kills its own process: a subprocess
    killed = project.runpytest_subprocess("--evomemory-config=run.yaml", "--evomemory-output-dir=interrupted")
    assert killed.ret != 0
    before = (project.path / "calls.log").read_text().splitlines()
    (project.path / "calls.log").unlink()
    monkeypatch.delenv("KILL_AT")
    resumed = _run(project, "--evomemory-resume=interrupted")
    assert resumed.ret == 0, resumed.stdout.str()
    _assert_resumed_as_uninterrupted(project, reference, before, ("sample_facts", "f06"), 24)


def test_resume_of_a_directory_without_a_run_is_a_clear_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--evomemory-resume=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--evomemory-resume*nowhere*pass --evomemory-config as well*"])


def test_max_errors_stops_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(broken_agent="""
        class Broken:
            def respond(self, stimulus, turn):
                raise ConnectionError("model server unreachable")
            def reset(self):
                pass
        def create(config, memory):
            return Broken()
    """)
    pytester.syspathinsert()
    (pytester.path / "run.yaml").write_text(
        "benchmark: {benchmark: sample}\nagent: {kind: 'broken_agent:create', memory_strategy: none}\n",
        encoding="utf-8",
    )
    result = pytester.runpytest("--evomemory-config=run.yaml", "--evomemory-max-errors=3")
    result.assert_outcomes(failed=3, errors=3)  # each failed task's feedback turn fails too
    result.stdout.fnmatch_lines(["*3 failed episodes reached --evomemory-max-errors*"])


# An xdist worker crash loses no other stream's results and restores the stream's
# memory: tests/plugin/test_arms.py::test_a_worker_crash_in_one_arm_is_charged_to_that_arm_and_its_memory_restored
# (the same crash, in the memory arm of a session of two arms).


def test_a_run_killed_after_its_last_episode_gets_its_summary_on_resume(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every episode completed, the summary never written: resuming runs no task and
    writes the summary of the recorded results."""
    project.runpytest("--evomemory-config=run.yaml", "--evomemory-output-dir=out").assert_outcomes(passed=24)
    out = project.path / "out"
    expected = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for name in ("summary.json", "report.html"):
        (out / name).unlink()
    resumed = project.runpytest("--evomemory-resume=out")
    resumed.assert_outcomes(deselected=24)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["overall"] == expected["overall"]
    assert summary["completion"]["complete"] is True
    assert (out / "report.html").is_file()


@pytest.mark.slow
def test_ctrl_c_says_how_to_continue_and_resume_keeps_the_runs_limit(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user stops `--evomemory-limit=4` with Ctrl-C in the second stream and types
    what the terminal says: the limit is part of the run, so the resume continues with
    it, to the uninterrupted run's result; a resume that changes it is refused naming
    the setting that differs."""
    uninterrupted = _run(project, "--evomemory-config=run.yaml", "--evomemory-limit=4", "--evomemory-output-dir=reference")
    uninterrupted.assert_outcomes(passed=8)
    (project.path / "calls.log").unlink()
    reference = {
        "scores": scores(project.path / "reference"),
        "overall": json.loads((project.path / "reference" / "summary.json").read_text())["overall"],
    }
    monkeypatch.setenv("KILL_AT", "c03/task")
    monkeypatch.setenv("KILL_SIGNAL", "SIGINT")
    # the run signals its own process: a subprocess
    killed = project.runpytest_subprocess("--evomemory-config=run.yaml", "--evomemory-limit=4",
                                          "--evomemory-output-dir=interrupted")
    assert killed.ret != 0
    killed.stdout.fnmatch_lines([
        "evomemory: the run is incomplete: 6 of 8 planned tasks ran (interrupted (Ctrl-C)); *",
        "evomemory: to continue where it stopped: pytest --evomemory-resume=interrupted",
    ])
    # pytest handled the interrupt: the summary of what ran is there
    assert json.loads((project.path / "interrupted" / "summary.json").read_text())["overall"]["tasks"] == 6
    before = (project.path / "calls.log").read_text().splitlines()
    (project.path / "calls.log").unlink()
    monkeypatch.delenv("KILL_AT")

    changed = _run(project, "--evomemory-resume=interrupted", "--evomemory-limit=3")
    assert changed.ret == pytest.ExitCode.USAGE_ERROR
    changed.stderr.fnmatch_lines(["*the run config differs from the interrupted run's at benchmark.limit (was 4, now 3)*"])

    resumed = _run(project, "--evomemory-resume=interrupted")
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.assert_outcomes(passed=2, deselected=6)
    summary = json.loads((project.path / "interrupted" / "summary.json").read_text(encoding="utf-8"))
    assert summary["completion"]["complete"] and summary["overall"]["tasks"] == 8
    assert "to continue where it stopped" not in resumed.stdout.str()
    _assert_resumed_as_uninterrupted(project, reference, before, ("sample_choice", "c03"), 8)


def test_a_selection_of_tasks_is_incomplete_without_a_resume_hint(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--evomemory-config=sample_memory", "evomemory::test_task[sample_facts/f02]")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "evomemory: the run is incomplete: 1 of 24 planned tasks ran; thresholds are not passed by an incomplete run"
    ])
    assert "--evomemory-resume" not in result.stdout.str()
