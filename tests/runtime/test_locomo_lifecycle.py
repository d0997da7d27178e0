"""A conversation stream's life cycle on the pytest-free engine: ingestion, then
questions with no feedback; ingestion in the efficiency figures; resume never
ingests twice; the full-context arm; evidence recall."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import run_benchmark
from pytest_evomemory.agents.baseline import RecallBaselineAgent
from pytest_evomemory.agents.tiny import TinyAgent
from pytest_evomemory.config import AgentConfig, MemoryConfig, ModelConfig
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.errors import SessionRefused
from pytest_evomemory.core.tools import Tool
from pytest_evomemory.core.types import (
    INGESTION_ACKNOWLEDGEMENT,
    ConversationSession,
    MemoryHit,
    Stimulus,
    TaskView,
)
from pytest_evomemory.memory import InProcessMemory
from pytest_evomemory.memory.base import MemoryContext, MemorySystem
from pytest_evomemory.models.base import ChatCompletion, ModelToolCall
from pytest_evomemory.runtime import StreamRun
from pytest_evomemory.runtime.run import BenchmarkRun
from pytest_evomemory.streams.locomo import SAMPLE_FILE, read_file

Log = list[tuple[str, str, str]]
SESSIONS = {"conv-sample-1": 3, "conv-sample-2": 2}
QUESTIONS = {"conv-sample-1": 9, "conv-sample-2": 6}


class LoggingMemory(InProcessMemory):
    """The in-process memory (snapshots and all), logging each ingest call."""

    def __init__(self, log: Log, stream: str) -> None:
        super().__init__()
        self.log, self.stream = log, stream

    def ingest(self, session: ConversationSession) -> None:
        self.log.append((self.stream, "ingest", session.session_id))
        super().ingest(session)


class LoggingAgent:
    """The recall baseline, logging each stimulus and reset; optionally interrupted."""

    def __init__(self, inner: RecallBaselineAgent, log: Log, stream: str, stop_at: str | None) -> None:
        self.inner, self.log, self.stream, self.stop_at = inner, log, stream, stop_at

    def respond(self, stimulus: Stimulus, turn: Any) -> None:
        self.log.append((self.stream, stimulus.kind, stimulus.task_id))
        if f"{self.stream}/{stimulus.task_id}" == self.stop_at:
            raise KeyboardInterrupt
        if isinstance(stimulus, TaskView):
            assert "Not mentioned" not in stimulus.prompt or "Select the correct answer" in stimulus.prompt
        self.inner.respond(stimulus, turn)

    def reset(self) -> None:
        self.log.append((self.stream, "reset", ""))
        self.inner.reset()


def factories(log: Log, stop_at: str | None = None) -> tuple[Callable[..., Any], Callable[..., MemorySystem]]:
    streams: list[str] = []

    def memory(config: MemoryConfig, context: MemoryContext) -> MemorySystem:
        streams.append(context.stream)
        return LoggingMemory(log, context.stream)

    def agent(config: AgentConfig, memory: MemorySystem | None) -> LoggingAgent:
        return LoggingAgent(RecallBaselineAgent(config, memory), log, streams[-1] if streams else "?", stop_at)

    return agent, memory


def run(
    write_run_config: Callable[..., Path], tmp_path: Path, *, ingest: str = "memory", strategy: str = "deterministic_recall",
    stop_at: str | None = None, resume: bool = False, name: str = "locomo",
) -> tuple[Log, Any, Path]:
    config_path = write_run_config(
        name=name,
        benchmark={"benchmark": "locomo_sample", "ingest": ingest},
        agent={"kind": "recall_baseline", "memory_strategy": strategy},
    )
    log: Log = []
    agent, memory = factories(log, stop_at)
    out = tmp_path / f"out-{name}"
    summary = run_benchmark(load_run_config(config_path), out, agent_factory=agent, memory_factory=memory, resume=resume)
    return log, summary, out


def complete(summary: Mapping[str, Any]) -> bool:
    return bool(summary["completion"]["complete"])


def jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_memory_ingests_every_session_in_order_before_the_first_question(
    write_run_config: Callable[..., Path], tmp_path: Path
) -> None:
    log, result, out = run(write_run_config, tmp_path)
    for stream, sessions in SESSIONS.items():
        events = [(kind, task) for s, kind, task in log if s == stream]
        ingested = [task for kind, task in events if kind == "ingest"]
        assert ingested == [f"session_{i}" for i in range(1, sessions + 1)]
        first_question = events.index(("task", "q001"))
        assert all(kind == "ingest" for kind, _ in events[:first_question])
        # the episode is task -> reset: no feedback ever
        kinds = [kind for kind, _ in events[first_question:]]
        assert kinds == ["task", "reset"] * QUESTIONS[stream]
    responses = jsonl(out / "responses.jsonl")
    assert {r["kind"] for r in responses} == {"task"}
    assert result["overall"]["stimuli"] == 15 and result["overall"]["feedback_turns"] == 0
    assert complete(result) and not result["failed_episodes"]


def test_scores_carry_the_f1_and_the_evidence_recall(write_run_config: Callable[..., Path], tmp_path: Path) -> None:
    _, _, out = run(write_run_config, tmp_path)
    scores = jsonl(out / "scores.jsonl")
    assert len(scores) == 15 and all(s["match_mode"] == "locomo_f1" for s in scores)
    assert any(0 < s["value"] < 1 for s in scores)
    recalls = [s["details"]["evidence_recall"] for s in scores]
    assert all(isinstance(r, float) and 0 <= r <= 1 for r in recalls) and 1.0 in recalls
    assert {s["group"] for s in scores} == {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}
    _, _, control = run(write_run_config, tmp_path, strategy="none", name="control")
    control_scores = jsonl(control / "scores.jsonl")
    assert all(s["details"]["evidence_recall"] is None for s in control_scores)  # nothing was recalled by design


def test_agent_ingestion_turns_are_unscored_counted_and_followed_by_a_reset(
    write_run_config: Callable[..., Path], tmp_path: Path
) -> None:
    log, result, out = run(write_run_config, tmp_path, ingest="agent")
    events = [(kind, task) for s, kind, task in log if s == "conv-sample-1"]
    assert events[:6] == [("ingestion", "session_1"), ("reset", ""), ("ingestion", "session_2"), ("reset", ""),
                          ("ingestion", "session_3"), ("reset", "")]
    assert not any(kind == "ingest" for kind, _ in events)  # the memory's own ingest is not used
    responses = jsonl(out / "responses.jsonl")
    ingestion = [r for r in responses if r["kind"] == "ingestion"]
    assert [(r["stream"], r["task_id"]) for r in ingestion] == [
        ("conv-sample-1", "session_1"), ("conv-sample-1", "session_2"), ("conv-sample-1", "session_3"),
        ("conv-sample-2", "session_1"), ("conv-sample-2", "session_2"),
    ]
    assert sum(r["memory_retains"] for r in ingestion) == 17 + 9  # one record per turn
    assert all(r["protocol_violation"] is None for r in ingestion)
    overall = result["overall"]
    assert (overall["tasks"], overall["stimuli"], overall["agent_turns"]) == (15, 20, 20)
    assert len(jsonl(out / "scores.jsonl")) == 15


@pytest.mark.parametrize("ingest", ["memory", "agent"])
def test_a_resumed_conversation_never_ingests_twice_and_ends_as_the_uninterrupted_run(
    write_run_config: Callable[..., Path], tmp_path: Path, ingest: str
) -> None:
    _, _, whole = run(write_run_config, tmp_path, ingest=ingest, name="whole")
    _, stopped, out = run(write_run_config, tmp_path, ingest=ingest, stop_at="conv-sample-1/q004", name="resumed")
    assert not complete(stopped)
    log, resumed, _ = run(write_run_config, tmp_path, ingest=ingest, resume=True, name="resumed")
    first = [(kind, task) for s, kind, task in log if s == "conv-sample-1"]
    assert not any(kind in ("ingest", "ingestion") for kind, _ in first)  # restored from its snapshot
    assert [task for kind, task in first if kind == "task"] == [f"q{i:03d}" for i in range(4, 10)]
    second = [task for s, kind, task in log if s == "conv-sample-2" and kind in ("ingest", "ingestion")]
    assert second == ["session_1", "session_2"]  # a stream that had not started ingests as usual
    assert complete(resumed)

    def values(directory: Path) -> list[tuple[str, str, float, Any]]:
        return [(s["stream"], s["task_id"], s["value"], s["details"]["evidence_recall"])
                for s in jsonl(directory / "scores.jsonl")]

    assert values(out) == values(whole)
    kinds = [(r["stream"], r["kind"], r["task_id"]) for r in jsonl(out / "responses.jsonl") if r["kind"] != "task"]
    whole_kinds = [(r["stream"], r["kind"], r["task_id"]) for r in jsonl(whole / "responses.jsonl") if r["kind"] != "task"]
    assert sorted(kinds) == sorted(whole_kinds)  # each ingestion turn recorded exactly once


def test_a_run_interrupted_during_ingestion_ingests_again_from_scratch(
    write_run_config: Callable[..., Path], tmp_path: Path
) -> None:
    _, stopped, out = run(write_run_config, tmp_path, ingest="agent", stop_at="conv-sample-1/session_2")
    assert not complete(stopped)
    assert not [r for r in jsonl(out / "responses.jsonl") if r["kind"] == "ingestion"]  # never a partial ingestion
    log, resumed, _ = run(write_run_config, tmp_path, ingest="agent", resume=True)
    ingested = [task for s, kind, task in log if s == "conv-sample-1" and kind == "ingestion"]
    assert ingested == ["session_1", "session_2", "session_3"]
    journal = [r["task_id"] for r in jsonl(out / "responses.jsonl") if r["kind"] == "ingestion" and r["stream"] == "conv-sample-1"]
    assert journal == ["session_1", "session_2", "session_3"] and complete(resumed)


def test_slot_zero_restores_the_ingested_memory_without_ingesting(
    write_run_config: Callable[..., Path], tmp_path: Path
) -> None:
    """What an xdist worker taking over a stream with no question completed does."""
    config = load_run_config(write_run_config(benchmark={"benchmark": "locomo_sample"}))
    benchmark = BenchmarkRun(config, tmp_path / "out")
    log: Log = []
    agent, memory = factories(log)
    first = benchmark.open_stream("conv-sample-1", agent_factory=agent, memory_factory=memory)
    first.prepare_memory(None)
    assert [entry[2] for entry in log] == ["session_1", "session_2", "session_3"]
    assert first.snapshots is not None and first.snapshots.completed_prefixes() == [0]
    taken_over = benchmark.open_stream("conv-sample-1", agent_factory=agent, memory_factory=memory)
    taken_over.prepare_memory(0)
    assert len(log) == 3  # no second ingestion
    assert taken_over.memory is not None and len(taken_over.memory.backend) == 17  # type: ignore[arg-type]
    first.close()
    taken_over.close()


class PlainMemory:
    """A memory system without an ``ingest`` method."""

    def __init__(self) -> None:
        self.inner = InProcessMemory()
        self.default_top_k = 4

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        return self.inner.retain(content, metadata)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        return self.inner.recall(query, top_k)

    def reset(self) -> None:
        self.inner.reset()

    def close(self) -> None:
        self.inner.close()

    def tools(self) -> Sequence[Tool]:
        return self.inner.tools()


def test_a_memory_that_cannot_ingest_refuses_the_session_once_before_any_task(
    write_run_config: Callable[..., Path], tmp_path: Path
) -> None:
    """The instance a conftest factory builds declares nothing up front: the first
    stream's build asks it, and the whole session is refused there, once, with what
    to do, before any record (exit 4 through either door)."""
    config = load_run_config(write_run_config(benchmark={"benchmark": "locomo_sample"}))
    with pytest.raises(SessionRefused) as refused:
        run_benchmark(config, tmp_path / "out", memory_factory=lambda c, ctx: PlainMemory())
    message = str(refused.value)
    assert "memory PlainMemory has no ingest(session) method" in message and "ingest: agent" in message
    # It names the factory that built the memory, not the memory config it did not come from.
    assert message.startswith("memory factory ") and "<lambda>" in message.split(":", 2)[1]
    assert str(config.sources.get("memory", "memory config")) not in message
    assert not (tmp_path / "out" / "scores.jsonl").exists()


# ----------------------------------------------------------------------- the full-context arm


class ScriptedModel:
    """Answers every request with final_answer("x"), keeping the requests."""

    def __init__(self) -> None:
        self.requests: list[list[Mapping[str, Any]]] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> ChatCompletion:
        self.requests.append([dict(m) for m in messages])
        call = ModelToolCall("c1", "final_answer", json.dumps({"answer": "the Heron"}))
        return ChatCompletion(None, (call,))


def _sample_stream_run(full_context: bool, n_ctx: int = 4096) -> tuple[StreamRun, ScriptedModel]:
    from pytest_evomemory.config import BenchmarkConfig
    from pytest_evomemory.evaluation import EvoMemoryEvaluator
    from pytest_evomemory.streams import load_benchmark

    stream = load_benchmark(BenchmarkConfig(benchmark="locomo_sample", streams=["conv-sample-1"]), Path.cwd())[0]
    model = ScriptedModel()
    config = AgentConfig(kind="tiny", memory_strategy="none", full_context=full_context,
                         model=ModelConfig(context_window=n_ctx, max_tokens=32))
    agent = TinyAgent(config, None, model=model)
    live = StreamRun(stream.name, agent, None, EvoMemoryEvaluator(), "none", 4, feedback=False,
                     sessions=stream.sessions, full_context=full_context)
    return live, model


def test_the_full_context_arm_sees_the_whole_conversation_and_the_control_arm_none() -> None:
    from pytest_evomemory.config import BenchmarkConfig
    from pytest_evomemory.streams import load_benchmark

    stream = load_benchmark(BenchmarkConfig(benchmark="locomo_sample", streams=["conv-sample-1"]), Path.cwd())[0]
    live, model = _sample_stream_run(True)
    outcome = live.run_task(stream.samples[0])
    prompt = model.requests[0][-1]["content"]
    for session in stream.sessions:
        assert f"DATE: {session.date_time}\nCONVERSATION:" in prompt
        assert all(turn.render() in prompt for turn in session.turns)
    assert prompt.endswith(stream.samples[0].prompt) and "left out" not in prompt
    assert outcome.scored.score.value == 1.0
    assert outcome.scored.score.details["evidence_recall"] is None  # no memory: not applicable
    control, control_model = _sample_stream_run(False)
    control.run_task(stream.samples[0])
    assert "CONVERSATION:" not in control_model.requests[0][-1]["content"]


def test_a_conversation_longer_than_the_context_keeps_its_most_recent_turns() -> None:
    from pytest_evomemory.config import BenchmarkConfig
    from pytest_evomemory.streams import load_benchmark

    stream = load_benchmark(BenchmarkConfig(benchmark="locomo_sample", streams=["conv-sample-1"]), Path.cwd())[0]
    live, model = _sample_stream_run(True, n_ctx=900)  # room for a few hundred characters
    live.run_task(stream.samples[0])
    prompt = model.requests[0][-1]["content"]
    last, first = stream.sessions[-1].turns[-1], stream.sessions[0].turns[0]
    assert last.render() in prompt and first.render() not in prompt
    assert "earliest turns are left out to fit the context" in prompt


def test_tiny_agent_ingests_by_turn_without_a_model_call_under_exprag() -> None:
    from pytest_evomemory.runtime.ingestion import ingestion_stimulus
    from pytest_evomemory.runtime.memory import IsolationGuard, observe

    sessions = read_file(SAMPLE_FILE)[0].sessions
    model = ScriptedModel()
    memory = observe(InProcessMemory(), "conv-sample-1", IsolationGuard())
    config = AgentConfig(kind="tiny", memory_strategy="deterministic_recall", model=ModelConfig())
    from pytest_evomemory.evaluation import EvoMemoryEvaluator

    live = StreamRun("conv-sample-1", TinyAgent(config, memory, model=model), memory, EvoMemoryEvaluator(),
                     "deterministic_recall", 4)
    response = live.deliver(ingestion_stimulus(sessions[0], ["Ilse", "Tomasz"]), "session_1")
    assert response.kind == "ingestion" and response.final_answer == INGESTION_ACKNOWLEDGEMENT
    assert response.memory_retains == len(sessions[0].turns) and model.requests == []
    assert response.protocol_violation is None
    assert memory.writes[0]["metadata"]["dia_id"] == "D1:1"


def test_an_ingestion_turn_with_another_final_answer_is_a_recorded_violation() -> None:
    from pytest_evomemory.evaluation import EvoMemoryEvaluator
    from pytest_evomemory.runtime.ingestion import ingestion_stimulus

    sessions = read_file(SAMPLE_FILE)[0].sessions
    model = ScriptedModel()  # answers "the Heron" instead of the acknowledgement
    config = AgentConfig(kind="tiny", memory_strategy="tool_use", model=ModelConfig(), protocol="tools")
    memory = InProcessMemory()
    from pytest_evomemory.runtime.memory import IsolationGuard, observe

    observed = observe(memory, "conv-sample-1", IsolationGuard())
    live = StreamRun("conv-sample-1", TinyAgent(config, None, model=model), observed, EvoMemoryEvaluator(), "tool_use", 4)
    response = live.deliver(ingestion_stimulus(sessions[0]), "session_1")
    tools = model.requests[0]
    assert "Session recorded" in tools[-1]["content"]
    assert response.protocol_violation == (
        "ingestion turn ended with final_answer('the Heron') instead of final_answer(\"Session recorded\")"
    )


def test_full_context_on_streams_without_a_conversation_is_refused_up_front() -> None:
    from pytest_evomemory.config import BenchmarkConfig
    from pytest_evomemory.core.errors import ConfigError
    from pytest_evomemory.runtime.ingestion import check_conversation_options
    from pytest_evomemory.streams import load_benchmark

    evo = load_benchmark(BenchmarkConfig(benchmark="sample"), Path.cwd())
    with pytest.raises(ConfigError, match=r"agent.yaml: key 'full_context': streams 'sample_facts', 'sample_choice' hold no"):
        check_conversation_options(True, evo, "agent.yaml")
    check_conversation_options(False, evo, "agent.yaml")
    check_conversation_options(True, load_benchmark(BenchmarkConfig(benchmark="locomo_sample"), Path.cwd()), "a")


# ----------------------------------------------------------------------- records, figures, resume fallbacks


def test_an_ingestion_turn_travels_as_a_typed_record_and_counts_as_a_stimulus() -> None:
    from pytest_evomemory.runtime.records import IngestionRecord, ResultCollector, from_wire

    response = {
        "stream": "conv-sample-1", "task_id": "session_1", "kind": "ingestion", "final_answer": INGESTION_ACKNOWLEDGEMENT,
        "agent_turns": 1, "tool_calls": [], "memory_retains": 3, "memory_recalls": 0, "seconds": 0.0,
        "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "protocol_violation": None,
    }
    record = IngestionRecord(response=response, arm="memory")
    wire = record.wire()
    assert wire["type"] == "ingestion" and from_wire(wire) == record
    collector = ResultCollector(["conv-sample-1"])
    collector.add(record)
    overall = collector.metrics()["overall"]
    assert (overall.stimuli, overall.feedback_turns, overall.tasks, overall.memory_retains) == (1, 0, 0, 3)
    assert collector.failed_episode_count == 0


def test_the_summary_reports_the_mean_f1_beside_the_accuracy(
    write_run_config: Callable[..., Path], tmp_path: Path
) -> None:
    from pytest_evomemory.reporting.columns import stream_columns

    _, summary, out = run(write_run_config, tmp_path)
    scores = jsonl(out / "scores.jsonl")
    for stream in SESSIONS:
        values = [s["value"] for s in scores if s["stream"] == stream]
        metrics = summary["streams"][stream]
        assert metrics["figures"] == {"f1": "F1"}
        assert metrics["f1_mean"] == pytest.approx(sum(values) / len(values))
        assert metrics["f1_sum"] == pytest.approx(sum(values), abs=1e-6)
        assert "f1_matches" not in metrics  # a mean, not a share of tasks
    column = next(c for c in stream_columns(list(summary["streams"].values()), "terminal") if c.header == "F1 / Acc.")
    metrics = summary["streams"]["conv-sample-1"]
    assert column.cell(metrics) == f"{metrics['f1_mean']:.1%} / {metrics['accuracy']:.1%}"
    # the comparison of two arms shows each one's mean F1 in the same column
    from pytest_evomemory.reporting.compare import build_comparison
    from pytest_evomemory.reporting.rundata import load_runs

    _, control, control_out = run(write_run_config, tmp_path, strategy="none", name="control")
    document = build_comparison(load_runs([control_out, out], ["control", "memory"]))
    assert document["figures"] == {"f1": "F1"}
    entries = document["streams"]["conv-sample-1"]["runs"]
    assert [entry["f1_mean"] for entry in entries] == [
        control["streams"]["conv-sample-1"]["f1_mean"], metrics["f1_mean"],
    ]
    assert column.cell(entries[1]) == f"{metrics['f1_mean']:.1%} / {metrics['accuracy']:.1%}"


@pytest.mark.parametrize("lost", ["newest", "all"])
def test_a_resume_that_falls_back_to_an_older_snapshot_records_each_ingestion_turn_once(
    write_run_config: Callable[..., Path], tmp_path: Path, lost: str
) -> None:
    """Snapshots lost after the interruption: the stream continues from the newest one
    left (its ingestion turns kept), or, with none left, ingests again (the old
    ingestion turns dropped, not counted twice)."""
    import shutil

    _, whole, whole_out = run(write_run_config, tmp_path, ingest="agent", name="whole")
    _, stopped, out = run(write_run_config, tmp_path, ingest="agent", stop_at="conv-sample-1/q004", name="resumed")
    assert not complete(stopped)
    memory = out / "memory" / "conv-sample-1"
    shutil.rmtree(memory / "slot-3" if lost == "newest" else memory)
    log, resumed, _ = run(write_run_config, tmp_path, ingest="agent", resume=True, name="resumed")
    first = [(kind, task) for s, kind, task in log if s == "conv-sample-1"]
    ingested = [task for kind, task in first if kind == "ingestion"]
    assert ingested == ([] if lost == "newest" else ["session_1", "session_2", "session_3"])
    again = [task for kind, task in first if kind == "task"]
    assert again == [f"q{i:03d}" for i in range(3 if lost == "newest" else 1, 10)]
    assert complete(resumed)
    kinds = sorted((r["stream"], r["kind"], r["task_id"]) for r in jsonl(out / "responses.jsonl"))
    assert kinds == sorted((r["stream"], r["kind"], r["task_id"]) for r in jsonl(whole_out / "responses.jsonl"))
    assert resumed["overall"]["stimuli"] == whole["overall"]["stimuli"] == 20
