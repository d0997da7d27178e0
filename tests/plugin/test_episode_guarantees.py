"""What a run guarantees about its episodes (issue 14, section 3), through pytest
as a user runs it, serially and under ``-n 2``: lossless text, no task counted
twice, failures charged where they happened, stream order, feedback after every
task, resume of the same config only, and the user's own tracebacks.

Sessions run in this process (``pytester.runpytest``; under ``-n 2`` the workers are
processes anyway); only a run that kills itself, or is interrupted by the agent, runs
in a subprocess. One ``-n 2`` session checks where failures are charged under xdist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.rundir.jsonl import read_jsonl

from .guarantee_project import calls, importable_by_xdist_workers, make_project

RUN_DIR = Path("evomemory-results") / "g"


def summary_of(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = make_project(pytester, monkeypatch)
    importable_by_xdist_workers(pytester)
    return path


def run(pytester: pytest.Pytester, workers: list[str], *args: str) -> pytest.RunResult:
    """A session of run.yaml in this process."""
    return pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml", *workers, *args)


# --------------------------------------------------------------------------- text

# in the data: every character a line splitter might act on (a data file with a lone
# surrogate escape is refused when the stream loads, see tests/bad_input)
NASTY = ["\u2028", "\u2029", "\u0085", "\x00", "\r", "\n", "\x1c", "\x0b"]
LONE = "lone\ud800 and \udcff"  # in the agent's reply and tool arguments (t3)


def _nasty_stream(project: Path) -> None:
    rows = []
    for index in range(16):  # tasks 8-15 repeat tasks 0-7
        char = NASTY[index % 8]
        rows.append({"id": f"t{index}", "prompt": f"What is item {index % 8}{char}?", "target": f"v{index % 8}{char}x"})
    (project / "nasty.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")
    (project / "run.yaml").write_text(
        "name: g\n"
        "benchmark: {benchmark: files, files: [{name: nasty, path: nasty.jsonl}]}\n"
        "agent: {kind: 'scripted_agent:create', memory_strategy: tool_use}\n"
        "memory: {backend: inprocess}\n",
        encoding="utf-8",
    )


def test_no_character_splits_a_record_and_a_killed_run_resumes_to_the_same_memory(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _nasty_stream(project)
    monkeypatch.setenv("ACTIONS", json.dumps({"t3/task": "surrogate"}))
    reference = pytester.runpytest("--evomemory-config=run.yaml", "--evomemory-output-dir=reference")
    assert reference.ret == 0 and "Traceback" not in reference.stderr.str(), reference.stderr.str()
    ref = project / "reference"
    scores = read_jsonl(ref / "scores.jsonl")
    assert [s["task_id"] for s in scores] == [f"t{i}" for i in range(16)]
    assert [s["target"] for s in scores] == [f"v{i % 8}{NASTY[i % 8]}x" for i in range(16)]
    # later tasks repeat earlier ones: the memory (tool arguments holding the
    # targets) answered them, so the text survived memory and records alike
    assert [s["correct"] for s in scores[8:]] == [True] * 8
    responses = read_jsonl(ref / "responses.jsonl")
    assert len(responses) == 32
    assert [r["final_answer"] for r in responses if r["kind"] == "task"][3] == LONE
    transcripts = read_jsonl(ref / "transcripts" / "nasty.jsonl")
    retained = [c["arguments"]["content"] for t in transcripts for c in t["tool_calls"] if c["name"] == "retain"]
    assert LONE in retained
    assert all(f"v{i}{NASTY[i]}x" in "".join(retained) for i in range(8))
    for line in (ref / "responses.jsonl").read_bytes().split(b"\n")[:-1]:
        assert line.isascii()  # nothing a reader could split on

    monkeypatch.setenv("ACTIONS", json.dumps({"t3/task": "surrogate", "t11/task": "sigkill"}))
    # the run kills its own process: a subprocess
    pytester.runpytest_subprocess("--evomemory-config=run.yaml", "--evomemory-output-dir=killed")
    monkeypatch.setenv("ACTIONS", json.dumps({"t3/task": "surrogate"}))
    resumed = pytester.runpytest("--evomemory-resume=killed")
    assert resumed.ret == 0, resumed.stdout.str() + resumed.stderr.str()
    assert read_jsonl(project / "killed" / "scores.jsonl") == scores


# --------------------------------------------------------------------------- counting


@pytest.mark.slow
def test_a_worker_crashing_in_a_feedback_turn_never_counts_a_task_twice(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/feedback": "exit"}))
    result = run(pytester, ["-n", "2"])
    assert "INTERNALERROR" not in result.stdout.str()
    scores = read_jsonl(project / RUN_DIR / "scores.jsonl")
    keys = [(s["stream"], s["task_id"]) for s in scores]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 6
    summary = summary_of(project / RUN_DIR)
    assert summary["overall"]["tasks"] == 6
    assert summary["passed"] is False
    assert [(f["task_id"], f["phase"]) for f in summary["failed_episodes"]] == [("f02", "feedback")]
    # the crash was the machine's: the session says so, and the resume runs f02 (and the rest of its stream) again
    result.stdout.fnmatch_lines(["*a test process died while running a task*to run it again: pytest --evomemory-resume=*"])
    monkeypatch.setenv("ACTIONS", "{}")
    resumed = run(pytester, ["-n", "2"], f"--evomemory-resume={RUN_DIR}")
    assert resumed.ret == 0, resumed.stdout.str()
    summary = summary_of(project / RUN_DIR)
    assert summary["passed"] is True and summary["failed_episodes"] == [] and summary["overall"]["tasks"] == 6
    fed_back = [r["task_id"] for r in read_jsonl(project / RUN_DIR / "responses.jsonl") if r["kind"] == "feedback"]
    assert sorted(fed_back) == sorted(set(fed_back)) and "f02" in fed_back


def _closing_memory(project: Path) -> None:
    """A memory whose close fails for sample_facts only."""
    (project / "closing_memory.py").write_text(
        "from pytest_evomemory.memory import InProcessMemory\n"
        "class Closing(InProcessMemory):\n"
        "    def __init__(self, stream):\n"
        "        super().__init__()\n"
        "        self.stream = stream\n"
        "    def close(self):\n"
        "        if self.stream == 'sample_facts':\n"
        "            raise OSError('cannot flush the index')\n"
        "def create(config, context):\n"
        "    return Closing(context.stream)\n",
        encoding="utf-8",
    )
    (project / "run.yaml").write_text(
        (project / "run.yaml").read_text().replace("backend: inprocess", "backend: 'closing_memory:create'")
    )


# Serially here and in the next tests; under -n 2 by
# test_failures_are_charged_where_they_happen_under_xdist below.
def test_a_stream_teardown_failure_is_charged_to_that_stream(pytester: pytest.Pytester, project: Path) -> None:
    _closing_memory(project)
    result = run(pytester, [])
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 6, result.stdout.str()  # c01 is not charged with it
    summary = summary_of(project / RUN_DIR)
    teardown = [f for f in summary["failed_episodes"] if f["phase"] == "teardown"]
    assert [(f["stream"], f["task_id"]) for f in teardown] == [("sample_facts", None)]
    assert "cannot flush the index" in teardown[0]["reason"]
    assert summary["streams"]["sample_choice"]["errors"] == 0
    assert summary["passed"] is False and result.ret == pytest.ExitCode.TESTS_FAILED


# --------------------------------------------------------------------------- order


@pytest.mark.slow
def test_cache_options_cannot_change_the_order_of_a_stream(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a run with failures (in pytest's cache), each option reruns with the
    stream order kept; every run fails the same tasks, so each meets that cache
    (--sw last: it stops at the first failure)."""
    monkeypatch.setenv("ACTIONS", json.dumps({"f03/task": "raise", "c02/task": "raise"}))
    pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml")
    for option in ("--ff", "--lf", "--nf", "--sw"):
        (project / "calls.log").unlink()
        pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml", option)
        for stream in ("sample_facts", "sample_choice"):
            tasks = [line.split("/")[1] for line in calls(project) if line.startswith(stream) and line.endswith("/task")]
            assert tasks or option == "--sw", (option, stream)  # --sw stops at f03
            assert tasks == sorted(tasks), (option, tasks)


# --------------------------------------------------------------------------- feedback


def test_a_failed_feedback_turn_is_a_failed_episode_in_the_summary_and_the_exit_status(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/feedback": "raise"}))
    result = run(pytester, [])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = summary_of(project / RUN_DIR)
    (failure,) = summary["failed_episodes"]
    assert (failure["task_id"], failure["phase"]) == ("f02", "feedback")
    assert "deep_user_helper" in failure.get("traceback", "")
    assert summary["passed"] is False and summary["completion"]["complete"] is True


def test_feedback_follows_a_failed_task_turn_with_no_answer(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    run(pytester, []).assert_outcomes(passed=5, failed=1)
    assert "sample_facts/f02/feedback" in calls(project)
    transcripts = read_jsonl(project / RUN_DIR / "transcripts" / "sample_facts.jsonl")
    feedback = next(t for t in transcripts if t["task_id"] == "f02" and t["kind"] == "feedback")
    assert "Your submitted answer: (no answer)" in json.dumps(feedback["messages"])


@pytest.mark.slow
def test_failures_are_charged_where_they_happen_under_xdist(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One -n 2 session for the two tests above: a failed feedback turn is f02's failed
    episode (with its traceback), the teardown failure is sample_facts' alone (no
    task of sample_choice is charged with it), and both fail the session."""
    _closing_memory(project)
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/feedback": "raise"}))
    result = run(pytester, ["-n", "2"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    # every task passed (none of sample_choice is charged with the teardown); f02's
    # failed feedback turn is an error of its item
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("errors", outcomes.get("error"))) == (6, 1), result.stdout.str()
    result.stdout.fnmatch_lines(["ERROR evomemory::test_task[[]sample_facts/f02[]]*"])
    summary = summary_of(project / RUN_DIR)
    failures = {(f["stream"], f["task_id"], f["phase"]): f for f in summary["failed_episodes"]}
    assert set(failures) == {("sample_facts", "f02", "feedback"), ("sample_facts", None, "teardown")}
    assert "deep_user_helper" in failures["sample_facts", "f02", "feedback"].get("traceback", "")
    assert "cannot flush the index" in failures["sample_facts", None, "teardown"]["reason"]
    assert summary["streams"]["sample_choice"]["errors"] == 0
    assert summary["passed"] is False and summary["completion"]["complete"] is True


# --------------------------------------------------------------------------- resume


def test_resume_refuses_another_config_and_an_ini_config_never_replaces_the_runs_own(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"c02/task": "interrupt"}))
    interrupted = pytester.runpytest("--evomemory-config=run.yaml", no_reraise_ctrlc=True)
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    monkeypatch.delenv("ACTIONS")
    (project / "other.yaml").write_text((project / "run.yaml").read_text().replace("limit: 3", "limit: 2"))
    refused = pytester.runpytest("--evomemory-config=other.yaml", f"--evomemory-resume={RUN_DIR}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--evomemory-resume*the run config differs from the interrupted run's*"])
    pytester.makeini("[pytest]\nevomemory_config = other.yaml\n")
    resumed = pytester.runpytest("-p", "no:randomly", f"--evomemory-resume={RUN_DIR}")
    assert resumed.ret == 0, resumed.stdout.str()
    completion = summary_of(project / RUN_DIR)["completion"]
    assert (completion["complete"], completion["tasks_run"], completion["tasks_planned"]) == (True, 6, 6)


# --------------------------------------------------------------------------- tracebacks


def test_an_exception_in_the_users_agent_keeps_its_traceback(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    shown = run(pytester, [])
    shown.stdout.fnmatch_lines(["*def deep_user_helper(stimulus):*", "E*RuntimeError: boom in f02"])
    failures = shown.stdout.str().split("FAILURES")[1].split("evomemory: g")[0]
    assert "pytest_evomemory/" not in failures  # no frame of ours
    scored = next(s for s in read_jsonl(project / RUN_DIR / "scores.jsonl") if s["task_id"] == "f02")
    assert "deep_user_helper" in scored["traceback"] and "RuntimeError: boom in f02" in scored["traceback"]
    terse = run(pytester, [], "--tb=line")
    assert "def deep_user_helper" not in terse.stdout.str()
    terse.stdout.fnmatch_lines(["*scripted_agent.py:*RuntimeError: boom in f02*"])
