"""A user's agent and memory misbehaving, at the runtime level: each failure is
recorded against its own task and turn with one line naming what the user's code
did, the other tasks and streams keep their results, and nothing of one stream's
agent or memory reaches another. (The doors' smoke cases are at the end.)"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import (
    FEEDBACK_ACKNOWLEDGEMENT,
    BenchmarkSample,
    MemoryHit,
    load_run_config,
    run_benchmark,
)
from pytest_evomemory.agents.base import Turn
from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.core.tools import Tool
from pytest_evomemory.core.types import Stimulus, Usage
from pytest_evomemory.evaluation import EvoMemoryEvaluator
from pytest_evomemory.memory import InProcessMemory, memory_tools
from pytest_evomemory.runtime import ObservedMemory, StreamRun, run_episode
from pytest_evomemory.runtime.records import ErrorRecord, FeedbackErrorRecord, Record, TaskRecord

from ..conftest import SAMPLE_MEMORY_RUN


def sample(i: int, stream: str = "s") -> BenchmarkSample:
    return BenchmarkSample(task_id=f"t{i}", stream=stream, position=i, prompt=f"say {i}", target=str(i))


class Agent:
    """Answers ``ok``; ``fail`` (kind, task id) -> what to raise there; ``reset`` runs ``on_reset``."""

    def __init__(self, fail: Mapping[tuple[str, str], BaseException] | None = None,
                 reset_fails_after: str | None = None) -> None:
        self.fail = dict(fail or {})
        self.reset_fails_after = reset_fails_after
        self.last: str | None = None
        self.resets = 0

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        turn.begin_step()
        failure = self.fail.get((stimulus.kind, stimulus.task_id))
        if failure is not None:
            raise failure
        self.last = stimulus.task_id
        turn.call_tool("final_answer", {"answer": "ok" if stimulus.kind == "task" else FEEDBACK_ACKNOWLEDGEMENT})

    def reset(self) -> None:
        self.resets += 1
        if self.last is not None and self.last == self.reset_fails_after:
            raise ValueError("reset lost its state")
        self.last = None


def stream_run(agent: Any, memory: Any = None, stream: str = "s") -> StreamRun:
    observed = ObservedMemory(memory, stream) if memory is not None else None
    return StreamRun(stream, agent, observed, EvoMemoryEvaluator(), "deterministic_recall" if memory else "none",
                     max_steps=3)


def drive(run: StreamRun, count: int) -> list[Record]:
    records: list[Record] = []
    for i in range(count):
        run_episode(run, sample(i, run.stream), records.append)
    return records


class UserCancel(BaseException):
    """A BaseException of the user's own (a library's cancellation, say)."""


@pytest.mark.parametrize("raised", [UserCancel("cancelled"), SystemExit(0), ValueError("bad")], ids=type)
@pytest.mark.parametrize("kind", ["task", "feedback"])
def test_anything_but_ctrl_c_raised_by_the_agent_fails_its_own_turn_only(raised: BaseException, kind: str) -> None:
    records = drive(stream_run(Agent({(kind, "t1"): raised})), 3)
    failed = [r for r in records if isinstance(r, ErrorRecord | FeedbackErrorRecord)]
    assert len(failed) == 1, records
    reason = failed[0].failure.reason if isinstance(failed[0], FeedbackErrorRecord) else failed[0].scored.error
    assert reason is not None and reason.startswith(f"{kind} turn of s/t1 failed: {type(raised).__name__}: ")
    assert "test_user_faults.py" in reason  # where the user's code raised
    scored = [r.scored.task_id for r in records if isinstance(r, TaskRecord | ErrorRecord)]
    assert scored == ["t0", "t1", "t2"]  # every task scored once, under its own id


def test_ctrl_c_from_the_agent_is_an_interrupt_not_a_failure() -> None:
    run = stream_run(Agent({("task", "t0"): KeyboardInterrupt()}))
    with pytest.raises(KeyboardInterrupt):
        run_episode(run, sample(0), lambda record: None)


def test_a_failing_reset_is_recorded_on_its_task_and_stops_the_stream() -> None:
    agent = Agent(reset_fails_after="t1")
    records = drive(stream_run(agent), 4)
    failures = [r.failure for r in records if isinstance(r, FeedbackErrorRecord)]
    assert len(failures) == 1 and failures[0].task_id == "t1"  # recorded once, against the task it followed
    assert failures[0].reason.startswith("the agent's reset after s/t1 failed: ValueError: reset lost its state (at ")
    assert failures[0].traceback is not None and "reset lost its state" in failures[0].traceback
    errors = {r.scored.task_id: r.scored.error for r in records if isinstance(r, ErrorRecord)}
    # the agent may still hold t1's answer: no later task is given to it, each is a failure naming why
    assert sorted(errors) == ["t2", "t3"]
    assert all(str(e).startswith("stream 's' stopped: the agent's reset after s/t1 failed") for e in errors.values())
    assert agent.resets == 2  # t0's, and the one that failed: a stopped agent is not reset again


def test_one_agent_or_memory_object_for_two_streams_is_refused(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=2)
    shared_agent = Agent()
    summary = run_benchmark(config, tmp_path / "agent", agent_factory=lambda c, m: shared_agent)
    second = summary["failed_episodes"]
    assert len(second) == 1 and "returned for stream" in second[0]["reason"], second
    assert "the same tests.runtime.test_user_faults.Agent object it returned for stream" in second[0]["reason"]
    assert summary["streams"][second[0]["stream"]]["tasks"] == 0
    shared_memory = InProcessMemory()
    summary = run_benchmark(config, tmp_path / "memory", memory_factory=lambda c, x: shared_memory)
    assert ["memory system factory" in f["reason"] for f in summary["failed_episodes"]] == [True]
    # a fresh object per call, as documented, runs every stream
    summary = run_benchmark(config, tmp_path / "fresh", agent_factory=lambda c, m: Agent())
    assert summary["failed_episodes"] == []


class ShapedMemory(InProcessMemory):
    """An adapter whose recall returns ``hits`` once something was retained."""

    def __init__(self, hits: Any = None, record_id: Any = "keep") -> None:
        super().__init__()
        self.hits = hits
        self.record_id = record_id

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> Any:
        stored = super().retain(content, metadata)
        return stored if self.record_id == "keep" else self.record_id

    def recall(self, query: str, top_k: int | None = None) -> Any:
        return self.hits

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)


HIT = MemoryHit("1", "text", 1.0)
BAD_HITS: dict[str, tuple[Any, str]] = {
    "none": (None, "recall returned None, not a list of MemoryHit"),
    "a_dict": ({"1": "text"}, "recall returned a dict, not a list of MemoryHit"),
    "strings": (["text"], "recall returned a str as record 0; return pytest_evomemory.MemoryHit objects"),
    "too_many": ([MemoryHit(str(i), "t", 1.0) for i in range(5)], "recall returned 5 records for top_k=4"),
    "same_id_twice": ([HIT, HIT], "recall returned record '1' twice"),
    "content_none": ([MemoryHit("1", None, 1.0)], "record 0 with content None; content must be text"),  # type: ignore[arg-type]
    "id_none": ([MemoryHit(None, "t", 1.0)], "record 0 with record_id None"),  # type: ignore[arg-type]
    "score_nan": ([MemoryHit("1", "t", float("nan"))], "record 0 with score nan; score must be a finite number"),
    "score_text": ([MemoryHit("1", "t", "high")], "record 0 with score 'high'"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(BAD_HITS))
@pytest.mark.parametrize("through", ["direct", "tool"])
def test_a_recall_of_the_wrong_shape_is_the_memorys_error_naming_it(case: str, through: str) -> None:
    hits, expected = BAD_HITS[case]
    observed = ObservedMemory(ShapedMemory(hits), "s")
    observed.retain("something")  # a recall before any write must be empty (the guard): write first
    with pytest.raises(MemoryBackendError) as failed:
        if through == "direct":
            observed.recall("q")
        else:
            recall = next(tool for tool in observed.tools() if tool.name == "recall")
            recall.handler({"query": "q"})
    message = str(failed.value)
    assert message.startswith("memory ShapedMemory") and expected in message, message
    assert "docs/memory.md" in message


def test_a_recall_of_the_right_shape_passes_unchanged() -> None:
    observed = ObservedMemory(ShapedMemory([HIT, MemoryHit(2, "other", 0)]), "s")  # type: ignore[arg-type]
    observed.retain("something")
    assert observed.recall("q", top_k=2) == [HIT, MemoryHit(2, "other", 0)]  # type: ignore[arg-type]


@pytest.mark.parametrize("record_id", [None, 1.5, True, object()])
def test_a_retain_returning_no_id_is_the_memorys_error(record_id: Any) -> None:
    observed = ObservedMemory(ShapedMemory(record_id=record_id), "s")
    with pytest.raises(MemoryBackendError, match=r"memory ShapedMemory of stream 's': retain returned .* as the record's id"):
        observed.retain("something")
    retain = next(tool for tool in ObservedMemory(ShapedMemory(record_id=record_id), "s").tools() if tool.name == "retain")
    with pytest.raises(MemoryBackendError, match="as the record's id"):
        retain.handler({"content": "something"})


def test_a_memory_of_the_wrong_shape_fails_its_own_stream_through_a_run(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=3)
    summary = run_benchmark(config, tmp_path / "out", memory_factory=lambda c, x: ShapedMemory(None))
    reasons = [f["reason"] for f in summary["failed_episodes"]]
    assert reasons and all("recall returned None, not a list of MemoryHit" in r for r in reasons), reasons
    for stream in summary["streams"].values():
        assert stream["tasks"] == 3 and stream["errors"] == 3  # every task in the denominator, none lost


# --------------------------------------------------------------------------- the two doors

AGENT = '''
from pytest_evomemory.agents.baseline import RecallBaselineAgent


class Agent(RecallBaselineAgent):
    def reset(self):
        if self._current_task is not None and self._current_task.task_id == "t1":
            raise ValueError("reset lost its state")
        super().reset()


def create(config, memory):
    return Agent(config, memory)
'''


def _project(root: Path, module: str) -> Path:
    """A repository whose agent ``module`` (a name of its own per test: no import cache
    between them) fails its reset after task t1."""
    (root / f"{module}.py").write_text(AGENT, encoding="utf-8")
    (root / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"p{i}", "target": f"a{i}"}) + "\n" for i in range(3)),
        encoding="utf-8",
    )
    run = root / "run.yaml"
    run.write_text(
        "name: user\noutput_dir: results\nbenchmark: {benchmark: files, files: [{name: mine, path: tasks.jsonl}]}\n"
        f"agent: {{kind: '{module}:create'}}\nmemory: {{backend: inprocess}}\n",
        encoding="utf-8",
    )
    return run


def _check_results(results: Path) -> None:
    scores = [json.loads(line) for line in (results / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["task_id"] for s in scores] == ["t0", "t1", "t2"]
    assert scores[1].get("error") is None
    assert "stream 'mine' stopped: the agent's reset after mine/t1" in scores[2]["error"]
    summary = json.loads((results / "summary.json").read_text(encoding="utf-8"))
    assert summary["streams"]["mine"]["tasks"] == 3 and summary["streams"]["mine"]["errors"] == 1


def _run_failing(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *options: str
) -> str:
    """``evomemory run`` in the repository of ``run``: failed episodes (exit 1), not an
    internal error (3), and no traceback; what it wrote to stderr."""
    monkeypatch.chdir(run.parent)
    monkeypatch.syspath_prepend(str(run.parent))
    status = evomemory(["run", "--config", str(run), "-q", *options])
    captured = capsys.readouterr()
    assert status == 1, captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err and "internal error" not in captured.err
    return captured.err


def test_a_failing_reset_through_evomemory_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    captured = _run_failing(_project(tmp_path, "failing_reset_cli"), monkeypatch, capsys)
    assert "the agent's reset after mine/t1 failed: ValueError: reset lost its state (at " in captured
    _check_results(tmp_path / "results")


def test_a_failing_reset_through_pytest(pytester: pytest.Pytester) -> None:
    run = _project(pytester.path, "failing_reset_pytest")
    pytester.syspathinsert()
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert "INTERNALERROR" not in output and "pytest_evomemory/runtime" not in output  # the user's frames only
    assert "ValueError: reset lost its state" in output
    _check_results(pytester.path / "results")


class UnsavableMemory(InProcessMemory):
    """Declares snapshot/restore (so the run saves it after each episode), but cannot."""

    def snapshot(self, directory: Path) -> None:
        raise NotImplementedError("snapshots are for later")

    def restore(self, directory: Path) -> None:
        raise NotImplementedError("snapshots are for later")

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)


def test_a_memory_whose_own_snapshot_fails_is_charged_to_the_episode_it_followed(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=3)
    summary = run_benchmark(config, tmp_path / "out", memory_factory=lambda c, x: UnsavableMemory())
    for name, stream in summary["streams"].items():
        assert stream["tasks"] == 3, name  # no task lost or counted twice
        failures = [f for f in summary["failed_episodes"] if f["stream"] == name]
        saved = [f for f in failures if f["reason"].startswith("the memory backend failed to save its snapshot after")]
        assert len(saved) == 1, failures  # said once, against the episode it followed
        assert saved[0]["reason"].startswith(f"the memory backend failed to save its snapshot after {name}/")
        assert "NotImplementedError: snapshots are for later (at " in saved[0]["reason"]
        assert saved[0]["task_id"] == summary_first_task(tmp_path / "out", name)
        # the memory's state after a failed snapshot is unknown: the rest of the stream stops
        stopped = [f for f in failures if f not in saved]
        assert len(stopped) == 2 and all("stopped: the memory backend failed to save" in f["reason"] for f in stopped)


def summary_first_task(run_dir: Path, stream: str) -> str:
    scores = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    return str(next(s["task_id"] for s in scores if s["stream"] == stream and s["position"] == 0))


class ToolsMemory(InProcessMemory):
    """An adapter whose ``tools()`` returns ``declared`` (or raises it)."""

    def __init__(self, declared: Any) -> None:
        super().__init__()
        self.declared = declared

    def tools(self) -> Any:
        if isinstance(self.declared, Exception):
            raise self.declared
        return self.declared


def _final_answer_tool() -> Tool:
    from pytest_evomemory.core.tools import FINAL_ANSWER_TOOL

    return Tool(FINAL_ANSWER_TOOL, lambda arguments: "mine")


BAD_TOOLS: dict[str, tuple[Any, str]] = {
    "none": (None, "tools() returned None, not a list of Tool"),
    "names": (["retain", "recall"], "tools() returned a str as tool 0; return pytest_evomemory.Tool"),
    "raises": (RuntimeError("no tools today"), "memory backend failed during tools in stream 's': RuntimeError"),
    "final_answer": ([_final_answer_tool()], "tools() declares a tool named 'final_answer', which is the turn's own"),
    "twice": ("twice", "tools() declares two tools named 'retain'"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOOLS))
def test_tools_a_memory_cannot_offer_fail_its_stream_as_the_memorys(case: str) -> None:
    declared, expected = BAD_TOOLS[case]
    memory = ToolsMemory(declared)
    if declared == "twice":
        memory.declared = memory_tools(memory) * 2
    run = StreamRun("s", Agent(), ObservedMemory(memory, "s"), EvoMemoryEvaluator(), "tool_use", max_steps=3)
    records = drive(run, 3)
    errors = [r.scored.error for r in records if isinstance(r, ErrorRecord)]
    assert len(errors) == 3 and expected in str(errors[0]), errors  # every task in the denominator
    assert all(str(e).startswith("stream 's' stopped: the memory backend failed at task t0") for e in errors[1:])


def test_a_default_top_k_that_is_no_number_is_the_memorys_error() -> None:
    memory = ShapedMemory([HIT])
    memory.default_top_k = None  # type: ignore[assignment]
    observed = ObservedMemory(memory, "s")
    observed.retain("something")
    with pytest.raises(MemoryBackendError, match=r"was asked for top_k=None, which is no number of records"):
        observed.recall("q")


class Swallowing:
    """Catches what the turn raises at it (past the step limit, a wrong usage) and answers anyway."""

    def __init__(self, misuse: str) -> None:
        self.misuse = misuse

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        try:
            if self.misuse == "steps":
                for _ in range(10):  # ten model calls in a turn of three
                    turn.begin_step()
            else:
                turn.begin_step()
                turn.record_usage(Usage(prompt_tokens=-5, completion_tokens=0))
        except Exception:
            pass
        turn.call_tool("final_answer", {"answer": "ok" if stimulus.kind == "task" else FEEDBACK_ACKNOWLEDGEMENT})

    def reset(self) -> None:
        pass


@pytest.mark.parametrize(("misuse", "expected"), [
    ("steps", "no final_answer within the turn limit of 3 model calls"),
    ("usage", "the agent recorded token usage prompt_tokens=-5"),
])
def test_an_error_the_turn_raised_fails_the_turn_though_the_agent_caught_it(misuse: str, expected: str) -> None:
    records = drive(stream_run(Swallowing(misuse)), 2)
    errors = [r.scored.error for r in records if isinstance(r, ErrorRecord)]
    assert len(errors) == 2, records  # figures it under-reported (model calls, tokens) are not kept as a clean turn
    assert all(expected in str(e) and "the agent caught this error and went on" in str(e) for e in errors), errors


class RetainsInReset(Agent):
    """Keeps the memory it was built with, and writes to it in ``reset``."""

    def __init__(self, memory: Any) -> None:
        super().__init__()
        self.memory = memory

    def reset(self) -> None:
        super().reset()
        self.memory.retain("remembered outside any turn")


def test_a_reset_that_uses_the_memory_is_a_violation_on_the_task_it_followed() -> None:
    run = stream_run(Agent(), InProcessMemory())
    assert run.memory is not None
    run.agent = RetainsInReset(run.memory)
    records = drive(run, 2)
    failures = [r.failure for r in records if isinstance(r, FeedbackErrorRecord)]
    assert [f.task_id for f in failures] == ["t0", "t1"], records
    assert failures[0].reason.startswith("the agent's reset after s/t0 used the memory (1 retain); reset must clear")
    assert all(isinstance(r, TaskRecord) for r in records if isinstance(r, TaskRecord | ErrorRecord))  # tasks scored


MEMORY = '''
from pytest_evomemory.memory import InProcessMemory, memory_tools


class Memory(InProcessMemory):
    """Recalls None in stream 'b' once something was stored (an adapter's bug)."""

    def __init__(self, stream):
        super().__init__()
        self.stream = stream

    def recall(self, query, top_k=None):
        return None if self.stream == "b" and len(self) else super().recall(query, top_k)

    def tools(self):
        return memory_tools(self)


def make(config, context):
    return Memory(context.stream)
'''


def _two_streams(root: Path, module: str) -> Path:
    """Streams a and b, the recall baseline, and a memory ``module`` broken in stream b only."""
    (root / f"{module}.py").write_text(MEMORY, encoding="utf-8")
    for stream in "ab":
        (root / f"{stream}.jsonl").write_text(
            "".join(json.dumps({"id": f"{stream}{i}", "prompt": f"what is {stream}", "target": "x"}) + "\n"
                    for i in range(3)),
            encoding="utf-8",
        )
    run = root / "run.yaml"
    run.write_text(
        "name: user\noutput_dir: results\n"
        "benchmark: {benchmark: files, files: [{name: a, path: a.jsonl}, {name: b, path: b.jsonl}]}\n"
        f"agent: {{kind: recall_baseline}}\nmemory: {{backend: '{module}:make'}}\n",
        encoding="utf-8",
    )
    return run


def _check_streams(results: Path) -> None:
    summary = json.loads((results / "summary.json").read_text(encoding="utf-8"))
    a, b = summary["streams"]["a"], summary["streams"]["b"]
    assert (a["tasks"], a["errors"], a["memory_retains"]) == (3, 0, 3)  # stream a runs as if b were fine
    assert (b["tasks"], b["errors"]) == (3, 2)  # b0 recalls an empty memory; b1 fails, b2 stops
    reasons = [f["reason"] for f in summary["failed_episodes"]]
    assert all(f["stream"] == "b" for f in summary["failed_episodes"])
    assert "memory Memory of stream 'b': recall returned None, not a list of MemoryHit" in reasons[0]


def test_a_memory_broken_in_one_stream_through_evomemory_run_with_chains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_failing(_two_streams(tmp_path, "broken_in_b_cli"), monkeypatch, capsys, "--chains", "4")
    _check_streams(tmp_path / "results")


@pytest.mark.slow
def test_a_memory_broken_in_one_stream_through_pytest_xdist(pytester: pytest.Pytester) -> None:
    run = _two_streams(pytester.path, "broken_in_b_xdist")
    (pytester.path / "conftest.py").write_text("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n",
                                               encoding="utf-8")
    result = pytester.runpytest_subprocess(f"--evomemory-config={run}", "-n", "2", "-p", "no:randomly",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert "INTERNALERROR" not in output and "pytest_evomemory/" not in output.replace("pytest_evomemory/memory/", "")
    _check_streams(pytester.path / "results")
