"""The episode protocol, proven on the pytest-free core with spy agents and memories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import (
    FEEDBACK_ACKNOWLEDGEMENT,
    AgentConfig,
    BenchmarkSample,
    MemoryHit,
    ProtocolViolation,
    UserStimulus,
    load_run_config,
    run_benchmark,
)
from pytest_evomemory.agents.base import Turn
from pytest_evomemory.core.errors import EpisodeError
from pytest_evomemory.core.tools import Tool
from pytest_evomemory.core.types import AgentResponse, Score, Stimulus, TaskView, Usage
from pytest_evomemory.evaluation import EvoMemoryEvaluator, TaskQAEvaluator
from pytest_evomemory.memory import InProcessMemory, memory_tools
from pytest_evomemory.runtime import ObservedMemory, StreamRun, run_stream
from pytest_evomemory.runtime.feedback import render_feedback
from pytest_evomemory.runtime.records import FeedbackRecord, Record, TaskRecord

from ..conftest import SAMPLE_MEMORY_RUN


def sample(task_id: str, prompt: str, target: str, stream: str = "s", position: int = 0) -> BenchmarkSample:
    return BenchmarkSample(task_id=task_id, stream=stream, position=position, prompt=prompt, target=target)


class SpyMemory:
    """A memory that logs every call; backed by the in-process memory."""

    def __init__(self, log: list[str], backend: InProcessMemory | None = None) -> None:
        self.log = log
        self.inner = backend if backend is not None else InProcessMemory()
        self.default_top_k = self.inner.default_top_k

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self.log.append(f"memory.retain:{content}")
        return self.inner.retain(content, metadata)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self.log.append(f"memory.recall:{query}")
        return self.inner.recall(query, top_k)

    def reset(self) -> None:
        self.log.append("memory.reset")
        self.inner.reset()

    def close(self) -> None:
        self.log.append("memory.close")

    def tools(self) -> Sequence[Tool]:
        return memory_tools(self)


class ScriptedAgent:
    """Answers tasks with a fixed answer, logs what it sees, retains in feedback."""

    def __init__(self, log: list[str], memory: Any = None, answer: str = "42", ack: str = FEEDBACK_ACKNOWLEDGEMENT) -> None:
        self.log = log
        self.memory = memory
        self.answer = answer
        self.ack = ack
        self.conversation: list[str] = []

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        turn.begin_step()
        self.log.append(f"agent.{stimulus.kind}:{stimulus.task_id}")
        self.conversation.append(stimulus.kind)
        if isinstance(stimulus, TaskView):
            if self.memory is not None:
                self.memory.recall(stimulus.prompt)
            turn.call_tool("final_answer", {"answer": self.answer})
        else:
            if self.memory is not None:
                self.memory.retain(f"{stimulus.task_id}={stimulus.target}")
            turn.call_tool("final_answer", {"answer": self.ack})

    def reset(self) -> None:
        self.log.append(f"agent.reset(after {self.conversation})")
        self.conversation = []


class SpyEvaluator(EvoMemoryEvaluator):
    def __init__(self, log: list[str]) -> None:
        super().__init__(TaskQAEvaluator())
        self.log = log

    def score_response(self, sample: BenchmarkSample, response: AgentResponse) -> Any:
        self.log.append(f"score:{response.kind}:{response.task_id}")
        return super().score_response(sample, response)


def make_run(log: list[str], agent: Any, memory: Any = None, strategy: str = "deterministic_recall", stream: str = "s") -> StreamRun:
    wrapped = ObservedMemory(memory, stream) if memory is not None else None
    return StreamRun(stream, agent, wrapped, SpyEvaluator(log), strategy, max_steps=4)


def test_each_task_runs_task_then_feedback_then_reset_before_the_next_task() -> None:
    log: list[str] = []
    run = make_run(log, ScriptedAgent(log))
    samples = [sample("t1", "one", "42", position=0), sample("t2", "two", "7", position=1)]
    outcomes = list(run_stream(run, samples))
    assert [o.scored.score.correct for o in outcomes] == [True, False]
    assert log == [
        "agent.task:t1", "score:task:t1", "agent.feedback:t1", "agent.reset(after ['task', 'feedback'])",
        "agent.task:t2", "score:task:t2", "agent.feedback:t2", "agent.reset(after ['task', 'feedback'])",
    ]


def test_feedback_carries_the_target_exactly_as_the_source_supplies_it() -> None:
    target = "  \\frac{1}{2}  (exact bytes) "
    stimulus = render_feedback(sample("t1", "q", target), "0.5")
    assert isinstance(stimulus, UserStimulus)
    assert stimulus.target == target
    assert f"The correct answer: {target}\n" in stimulus.content
    assert stimulus.submitted_answer == "0.5"
    assert FEEDBACK_ACKNOWLEDGEMENT in stimulus.content


def test_feedback_responses_are_never_scored_and_reset_leaves_no_trace() -> None:
    log: list[str] = []
    records: list[Record] = []
    run = make_run(log, ScriptedAgent(log))
    list(run_stream(run, [sample("t1", "q", "42"), sample("t2", "q2", "42", position=1)], records.append))
    assert [line for line in log if line.startswith("score:")] == ["score:task:t1", "score:task:t2"]
    # two responses per task (task, feedback): the reset produced none
    responses = [record.wire()["response"] for record in records]
    assert [(r["kind"], r["task_id"]) for r in responses] == [("task", "t1"), ("feedback", "t1"), ("task", "t2"), ("feedback", "t2")]
    assert [record.type for record in records] == ["task", "feedback", "task", "feedback"]
    assert all(isinstance(record, TaskRecord | FeedbackRecord) for record in records)
    feedback = AgentResponse(**{**responses[1], "tool_calls": (), "messages": (), "usage": Usage(), "memory_writes": ()})
    with pytest.raises(ProtocolViolation, match="only original task turns are scored"):
        EvoMemoryEvaluator().score_response(sample("t1", "q", "42"), feedback)


def test_reset_calls_no_model_and_does_not_touch_memory() -> None:
    log: list[str] = []
    memory = SpyMemory(log)
    agent = ScriptedAgent(log, memory=None)
    run = make_run(log, agent, memory)
    run.run_task(sample("t1", "q", "42"))
    before = list(log)
    run.reset_agent()
    assert log[len(before):] == ["agent.reset(after ['task'])"]


def test_memory_persists_across_tasks_and_is_emptied_at_stream_teardown() -> None:
    log: list[str] = []
    memory = SpyMemory(log)
    run = make_run(log, ScriptedAgent(log, memory=None), memory)
    agent = ScriptedAgent(log, memory=run.memory)
    run.agent = agent
    list(run_stream(run, [sample("t1", "alpha", "42"), sample("t2", "alpha", "42", position=1)]))
    # t2's recall found what t1's feedback retained
    assert "memory.retain:t1=42" in log
    recall_t2 = log.index("memory.recall:alpha", log.index("agent.task:t2"))
    assert recall_t2 > log.index("memory.retain:t1=42")
    assert log[-2:] == ["memory.reset", "memory.close"]
    assert len(memory.inner) == 0


def test_the_framework_never_recalls_or_retains_on_the_agents_behalf() -> None:
    log: list[str] = []
    memory = SpyMemory(log)
    run = make_run(log, ScriptedAgent(log, memory=None), memory)
    list(run_stream(run, [sample("t1", "q", "42"), sample("t2", "q", "42", position=1)]))
    assert [line for line in log if line.startswith(("memory.recall", "memory.retain"))] == []


def test_a_recall_returning_another_streams_record_is_a_protocol_violation() -> None:
    log: list[str] = []
    shared = InProcessMemory()  # a buggy backend that survives across streams
    run_a = make_run(log, ScriptedAgent(log), SpyMemory(log, shared), stream="a")
    run_a.agent = ScriptedAgent(log, memory=run_a.memory)
    run_a.run_task(sample("t1", "t1 secret", "42", stream="a"))
    run_a.give_feedback(sample("t1", "t1 secret", "42", stream="a"), "42")
    run_b = make_run(log, ScriptedAgent(log), SpyMemory(log, shared), stream="b")
    run_b.agent = ScriptedAgent(log, memory=run_b.memory)
    with pytest.raises(ProtocolViolation, match="memory leak: recall in stream 'b'"):
        run_b.run_task(sample("t1", "t1 secret", "42", stream="b"))


def test_memory_tools_are_registered_only_for_tool_use() -> None:
    seen: dict[str, list[str]] = {}

    class ToolLister:
        def __init__(self, strategy: str) -> None:
            self.strategy = strategy

        def respond(self, stimulus: Stimulus, turn: Turn) -> None:
            seen[self.strategy] = [spec.name for spec in turn.tools]
            turn.call_tool("final_answer", {"answer": FEEDBACK_ACKNOWLEDGEMENT})

        def reset(self) -> None:
            pass

    for strategy in ("none", "deterministic_recall", "tool_use"):
        run = make_run([], ToolLister(strategy), InProcessMemory(), strategy=strategy)
        run.run_task(sample("t1", "q", "42"))
    assert seen == {
        "none": ["final_answer"],
        "deterministic_recall": ["final_answer"],
        "tool_use": ["final_answer", "retain", "recall"],
    }


def test_tool_use_memory_operations_are_counted_through_the_tools() -> None:
    class ToolUser:
        def respond(self, stimulus: Stimulus, turn: Turn) -> None:
            turn.begin_step()
            if stimulus.kind == "task":
                turn.call_tool("recall", '{"query": "alpha"}')
                turn.call_tool("final_answer", {"answer": "x"})
            else:
                turn.call_tool("retain", {"content": "alpha is 42"})
                turn.call_tool("final_answer", {"answer": FEEDBACK_ACKNOWLEDGEMENT})

        def reset(self) -> None:
            pass

    run = make_run([], ToolUser(), InProcessMemory(), strategy="tool_use")
    task = run.run_task(sample("t1", "alpha", "42"))
    feedback = run.give_feedback(sample("t1", "alpha", "42"), "x")
    assert (task.response.memory_recalls, task.response.memory_retains) == (1, 0)
    assert (feedback.memory_recalls, feedback.memory_retains) == (0, 1)
    assert [c.name for c in feedback.tool_calls] == ["retain", "final_answer"]


def test_a_task_turn_without_final_answer_fails_the_episode() -> None:
    class Silent:
        def respond(self, stimulus: Stimulus, turn: Turn) -> None:
            turn.begin_step()

        def reset(self) -> None:
            pass

    run = make_run([], Silent())
    with pytest.raises(ProtocolViolation, match="without calling final_answer"):
        run.run_task(sample("t1", "q", "42"))


def test_a_feedback_turn_with_another_acknowledgement_is_recorded_as_a_violation() -> None:
    log: list[str] = []
    run = make_run(log, ScriptedAgent(log, ack="ok thanks"))
    run.run_task(sample("t1", "q", "42"))
    response = run.give_feedback(sample("t1", "q", "42"), "42")
    assert response.protocol_violation is not None
    assert "instead of final_answer(\"Feedback recorded\")" in response.protocol_violation


def test_bad_tool_calls_get_error_text_and_the_turn_limit_fails_the_episode() -> None:
    results: list[str] = []

    class Confused:
        def respond(self, stimulus: Stimulus, turn: Turn) -> None:
            while True:
                turn.begin_step()
                results.append(turn.call_tool("no_such_tool", {}))
                results.append(turn.call_tool("final_answer", "{not json"))

        def reset(self) -> None:
            pass

    run = make_run([], Confused())
    with pytest.raises(EpisodeError, match="turn limit of 4"):
        run.run_task(sample("t1", "q", "42"))
    assert results[0].startswith("error: unknown tool 'no_such_tool'")
    assert "not valid JSON" in results[1]


def test_an_agent_crash_becomes_an_episode_error_naming_the_task() -> None:
    class Crashing:
        def respond(self, stimulus: Stimulus, turn: Turn) -> None:
            raise RuntimeError("boom")

        def reset(self) -> None:
            pass

    run = make_run([], Crashing())
    with pytest.raises(EpisodeError, match=r"task turn of s/t1 failed: RuntimeError: boom"):
        run.run_task(sample("t1", "q", "42"))


def test_run_benchmark_without_pytest_learns_along_the_sample_stream(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN)
    summary = run_benchmark(config, tmp_path / "out")
    facts = summary["streams"]["sample_facts"]
    assert facts["tasks"] == 12 and facts["stimuli"] == 24
    curve = facts["learning_curve"]
    assert curve[0] == 0.0 and curve[-1] > curve[3]
    assert (tmp_path / "out" / "summary.json").exists()


def test_each_stream_gets_a_fresh_memory_even_with_a_custom_factory(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN)
    created: list[InProcessMemory] = []

    def factory(memory_config: Any, context: Any) -> InProcessMemory:
        created.append(InProcessMemory())
        assert len(created[-1]) == 0
        return created[-1]

    run_benchmark(config, tmp_path / "out", memory_factory=factory)
    assert len(created) == 2 and created[0] is not created[1]


def test_scores_for_a_custom_agent_use_the_agent_config(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN)
    seen: list[AgentConfig] = []

    def agent_factory(agent_config: AgentConfig, memory: Any) -> ScriptedAgent:
        seen.append(agent_config)
        return ScriptedAgent([], answer="teal")

    summary = run_benchmark(config, tmp_path / "out", agent_factory=agent_factory)
    assert seen[0].memory_strategy == "deterministic_recall"
    # "teal" is right for the three post-box tasks of sample_facts
    assert summary["streams"]["sample_facts"]["correct"] == 3
    assert isinstance(Score(True, "a", "a", "a", "exact", "r").value, float)


def test_run_benchmark_records_failed_episodes_like_the_plugin_and_goes_on(tmp_path: Path) -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=3, streams=["sample_facts"])

    class FailsOnSecondTask(ScriptedAgent):
        def respond(self, stimulus: Stimulus, turn: Turn) -> None:
            if stimulus.kind == "task" and stimulus.task_id == "f02":
                raise ConnectionError("model server unreachable")
            super().respond(stimulus, turn)

    summary = run_benchmark(config, tmp_path / "out", agent_factory=lambda c, m: FailsOnSecondTask([], answer="teal"))
    facts = summary["streams"]["sample_facts"]
    assert (facts["tasks"], facts["correct"], facts["errors"]) == (3, 1, 1)
    assert facts["feedback_turns"] == 3  # feedback follows the failed task turn too ("no answer")
    assert summary["failed_episodes"][0]["task_id"] == "f02"
    assert "ConnectionError: model server unreachable" in summary["failed_episodes"][0]["reason"]


def test_run_json_records_each_streams_scorer_and_data(tmp_path: Path) -> None:
    import json

    from pytest_evomemory import run_benchmark

    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=1)
    run_benchmark(config, tmp_path / "out")
    document = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    streams = {stream["name"]: stream for stream in document["streams"]}
    scorer = streams["sample_choice"]["scorers"][0]
    assert scorer["mode"] == "choice" and scorer["package"] == "pytest-evomemory" and scorer["builtin"] is True
    assert scorer["module"].startswith("pytest_evomemory.evaluation")
    assert "sha256" in streams["sample_facts"]["provenance"]
    assert len(document["config_fingerprint"]) == 64


def test_a_record_log_that_fails_to_close_at_the_streams_end_is_a_write_error_and_the_memory_still_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's record log stays open between saves and is closed at its end,
    where a delayed write error (EIO, a quota on a network file system) now shows:
    it must be the run's write error (one line naming the log, recorded by the driver
    as the stream's teardown failure), not a traceback, and the memory is still
    reset and closed."""
    import errno
    import os

    from pytest_evomemory.core.errors import ArtefactWriteError
    from pytest_evomemory.memory.snapshot import StreamSnapshots

    log: list[str] = []
    memory = InProcessMemory()
    run = make_run(log, ScriptedAgent(log), memory)
    run.snapshots = StreamSnapshots(tmp_path / "memory" / "s", "s", "a" * 64)
    memory.retain("a lesson")
    run.snapshots.save(memory, 1)
    tracker = run.snapshots._progress.tracker
    assert tracker is not None and tracker.writer is not None
    kept_open = tracker.writer.descriptor
    real_close = os.close

    def close(descriptor: int) -> None:
        real_close(descriptor)
        if descriptor == kept_open:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "close", close)
    with pytest.raises(ArtefactWriteError, match=r"records-1\.jsonl: Input/output error"):
        run.close()
    assert memory._closed


def test_a_failed_save_closes_the_record_log_it_kept_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save that fails (a full disk) ends the stream's snapshots: the record log the
    earlier saves kept open is closed then, not left to the garbage collector (whose
    close would swallow an error); the save's own error is the one recorded."""
    import errno

    from pytest_evomemory.memory.snapshot import StreamSnapshots

    log: list[str] = []
    memory = InProcessMemory()
    run = make_run(log, ScriptedAgent(log), memory)
    snapshots = run.snapshots = StreamSnapshots(tmp_path / "memory" / "s", "s", "a" * 64)
    memory.retain("a lesson")
    snapshots.save(memory, 1)
    tracker = snapshots._progress.tracker
    assert tracker is not None and tracker.writer is not None

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(StreamSnapshots, "save", full)
    failed = run.episode_completed(sample("t2", "p", "x", position=1))
    assert failed is not None and "No space left on device" in failed.failure.reason
    assert run.snapshots is None and tracker.writer is None
