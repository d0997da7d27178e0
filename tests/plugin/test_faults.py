"""Faults during a run: the episode fails with its reason, the rest of the run goes on."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.testing.scripted_server import Fault, Reply, ScriptedServer, echo_policy, task_text

RUN = """
name: faults
benchmark: {{benchmark: sample, streams: [sample_facts], limit: 4}}
agent:
  kind: tiny
  memory_strategy: deterministic_recall
  max_steps: 3
  model:
    model: scripted
    base_url: {base_url}
    api_key_env: null
    cache: false
    timeout_s: 1
    max_retries: 2
    retry_backoff_s: 0
memory: {{backend: inprocess}}
"""


def failing_on(fragment: str, fault: Fault) -> Any:
    """Echo every request, except those about the task containing ``fragment``."""

    def policy(request: Mapping[str, Any]) -> Reply:
        if fragment in json.dumps(request.get("messages", [])) and "Feedback" not in task_text(request):
            return fault
        return echo_policy(request)

    return policy


@pytest.fixture
def server_for() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def start(policy: Any) -> ScriptedServer:
        servers.append(ScriptedServer(policy).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault(status=500), "EpisodeError: task turn of sample_facts/f03 failed: ModelError: *after 3 attempts*500*"),
        (Fault(status=429), "*ModelError*after 3 attempts*429*"),
        (Fault(status=200, delay_s=3.0), "*ModelError*"),
        (Fault(drop=True), "*ModelError*"),
    ],
    ids=["server-error", "rate-limited", "timeout", "disconnect"],
)
def test_a_model_fault_past_the_retries_fails_only_that_episode(
    pytester: pytest.Pytester, server_for: Any, fault: Fault, reason: str
) -> None:
    server = server_for(failing_on("lighthouse keeper", fault))  # f03
    (pytester.path / "run.yaml").write_text(RUN.format(base_url=server.base_url), encoding="utf-8")
    result = pytester.runpytest("--evomemory-config=run.yaml", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_task[[]sample_facts/f03[]]*", reason])
    assert "The above exception" not in result.stdout.str()
    summary = json.loads((pytester.path / "evomemory-results" / "faults" / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 4 and summary["overall"]["errors"] == 1
    assert summary["failed_episodes"][0]["task_id"] == "f03"
    # the endpoint is down after its retries: f03's feedback is skipped, and recorded
    # as skipped; every other task got its feedback
    run_dir = pytester.path / "evomemory-results" / "faults"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["type"], e["skipped"]["task_id"]) for e in events] == [("feedback_skipped", "f03")]
    feedback = [json.loads(line) for line in (run_dir / "responses.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in feedback if r["kind"] == "feedback"] == ["f01", "f02", "f04"]


def test_a_memory_backend_failing_mid_stream_fails_the_rest_of_the_stream_clearly(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(fragile_memory="""
        from pytest_evomemory.memory import InProcessMemory

        class Fragile(InProcessMemory):
            def recall(self, query, top_k=None):
                if len(self) >= 2:
                    raise OSError("disk I/O error")
                return super().recall(query, top_k)

        def create(config, context):
            return Fragile()
    """)
    pytester.syspathinsert()
    (pytester.path / "run.yaml").write_text(
        "benchmark: {benchmark: sample, limit: 5}\n"
        "agent: {kind: recall_baseline, memory_strategy: deterministic_recall}\n"
        "memory: {backend: 'fragile_memory:create'}\n",
        encoding="utf-8",
    )
    result = pytester.runpytest("--evomemory-config=run.yaml", "-p", "no:randomly")
    # each stream: 2 tasks pass, the 3rd hits the failure, the 4th and 5th are stopped
    result.assert_outcomes(passed=4, failed=6)
    result.stdout.fnmatch_lines([
        "*test_task[[]sample_facts/f03[]]*",
        # where in the user's own memory it failed: the plugin's frames are hidden
        "MemoryBackendError: memory backend failed during recall in stream 'sample_facts': OSError: disk I/O error"
        " (at *fragile_memory.py:6 in recall)",
        "*test_task[[]sample_facts/f04[]]*",
        "MemoryBackendError: stream 'sample_facts' stopped: the memory backend failed at task f03*",
    ])
    summary = json.loads((pytester.path / "evomemory-results" / "run" / "summary.json").read_text())
    assert summary["streams"]["sample_facts"]["errors"] == 3


def test_summary_is_written_even_when_the_run_is_interrupted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(interrupting_agent="""
        from pytest_evomemory.agents.baseline import RecallBaselineAgent

        class Interrupting(RecallBaselineAgent):
            def respond(self, stimulus, turn):
                if stimulus.task_id == "f04":
                    raise KeyboardInterrupt
                return super().respond(stimulus, turn)

        def create(config, memory):
            return Interrupting(config, memory)
    """)
    pytester.syspathinsert()
    (pytester.path / "run.yaml").write_text(
        "benchmark: {benchmark: sample}\nagent: {kind: 'interrupting_agent:create'}\n", encoding="utf-8"
    )
    # no_reraise_ctrlc: the agent's interrupt is the session's, not this test process's
    result = pytester.runpytest("--evomemory-config=run.yaml", "-p", "no:randomly", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    run_dir = Path(pytester.path / "evomemory-results" / "run")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 3
    assert len((run_dir / "scores.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize(
    "workers", [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)]
)
def test_a_task_fault_and_a_feedback_fault_land_on_their_turns_through_pytest(
    pytester: pytest.Pytester, server_for: Any, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    """f02's task turn gets a 401 quoting the key, f03's feedback turn a 500: f02 fails
    as wrong, f03 keeps its score and its teardown errors, and the key is in no output,
    JSON report or JUnit XML, serially and under pytest-xdist."""
    secret = "sk-proj-PYTESTDOOR0canary0abcdefghijklmn9876"
    monkeypatch.setenv("EVOMEMORY_DOOR_KEY", secret)

    def policy(request: Mapping[str, Any]) -> Reply:
        conversation = json.dumps(request.get("messages", []))
        feedback = "Feedback" in task_text(request)
        if "Which river flows" in conversation and not feedback:  # f02's task turn
            return Fault(401, {"error": {"message": f"Incorrect API key provided: {secret}"}})
        if "lighthouse keeper" in conversation and feedback:  # f03's feedback turn
            return Fault(status=500)
        return echo_policy(request)

    server = server_for(policy)
    run = RUN.format(base_url=server.base_url).replace("api_key_env: null", "api_key_env: EVOMEMORY_DOOR_KEY")
    run = run.replace("memory_strategy: deterministic_recall", "memory_strategy: none")  # no task quotes another
    (pytester.path / "run.yaml").write_text(run, encoding="utf-8")
    result = pytester.runpytest(
        "--evomemory-config=run.yaml", "-p", "no:randomly", *workers, "--json-report",
        "--json-report-file=report.json", "--junitxml=junit.xml",
    )
    result.assert_outcomes(passed=3, failed=1, errors=1)
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    result.stdout.fnmatch_lines([
        "*2 failed episode(s) (1 task turn(s), counted as wrong; 1 feedback turn(s), never scored); the session fails*"
    ])
    run_dir = pytester.path / "evomemory-results" / "faults"
    scores = {json.loads(line)["task_id"]: json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()}
    assert "HTTP status 401: Incorrect API key provided: ***" in scores["f02"]["error"]
    assert not scores["f03"].get("error")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["overall"]["tasks"], summary["overall"]["errors"]) == (4, 1)
    assert [(failure["task_id"], failure["phase"]) for failure in summary["failed_episodes"]] == [
        ("f02", "task"), ("f03", "feedback")
    ]
    written = [output] + [path.read_text(errors="replace") for path in pytester.path.rglob("*") if path.is_file()]
    assert not [text for text in written if secret[8:24] in text]
