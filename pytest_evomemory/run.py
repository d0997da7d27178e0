"""A whole benchmark run, without pytest: load streams, open them, collect results.

The pytest plugin drives these objects from hooks and fixtures; the same objects
run a benchmark from plain Python (:func:`run_benchmark`), which is what the
performance benchmarks and the resume logic use.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .agents.base import Agent
from .agents.factory import build_agent
from .benchmarks import Stream, load_benchmark
from .config import AgentConfig, MemoryConfig, RunConfig
from .episode import InstrumentedMemory, StreamRun, TaskOutcome, run_stream
from .errors import ConfigError, DataError, EvoMemoryError
from .evaluation.evomemory import EvoMemoryEvaluator
from .factories import load_factory
from .memory.base import MemorySystem
from .memory.factory import MemoryContext, build_memory
from .reporting.artefacts import RunArtefacts, package_versions, utc_now
from .reporting.summary import StreamMetrics, ThresholdResult, check_thresholds, summarize
from .types import AgentResponse, BenchmarkSample

AgentFactoryFn = Callable[[AgentConfig, MemorySystem | None], Agent]
MemoryFactoryFn = Callable[[MemoryConfig, MemoryContext], MemorySystem]

DEFAULT_OUTPUT_ROOT = "evomemory-results"


def default_run_dir(config: RunConfig, root: Path) -> Path:
    return root / DEFAULT_OUTPUT_ROOT / config.name


class BenchmarkRun:
    """The loaded streams of a run and the means to open each of them."""

    def __init__(self, config: RunConfig, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        _check_factory_references(config)
        source = config.sources.get("benchmark", "benchmark config")
        try:
            self.streams: list[Stream] = load_benchmark(config.benchmark, config.base_dir, source)
        except (ConfigError, DataError) as error:
            if source in str(error):
                raise
            raise type(error)(f"{source}: {error}") from error
        self.by_name = {stream.name: stream for stream in self.streams}

    @property
    def stream_order(self) -> list[str]:
        return [stream.name for stream in self.streams]

    def open_stream(
        self,
        name: str,
        *,
        agent_factory: AgentFactoryFn | None = None,
        memory_factory: MemoryFactoryFn | None = None,
        replay: Sequence[Mapping[str, Any]] = (),
    ) -> StreamRun:
        """A fresh memory system and agent for stream ``name``.

        ``replay`` holds the memory writes of already completed episodes (resume).
        """
        context = MemoryContext(stream=name, run_dir=self.run_dir, run_name=self.config.name)
        strategy = self.config.agent.memory_strategy
        memory: InstrumentedMemory | None = None
        if strategy != "none":
            backend = (memory_factory or build_memory)(self.config.memory, context)
            memory = InstrumentedMemory(backend, name)
            memory.replay(replay)
        try:
            agent = (agent_factory or build_agent)(
                self.config.agent, memory if strategy == "deterministic_recall" else None
            )
        except BaseException:
            if memory is not None:
                memory.close()
            raise
        return StreamRun(
            stream=name,
            agent=agent,
            memory=memory,
            evaluator=EvoMemoryEvaluator(),
            memory_strategy=strategy,
            max_steps=self.config.agent.max_steps,
        )

    def run_document(self, started: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
        return {
            "run": self.config.to_dict(),
            "streams": [
                {"name": s.name, "tasks": len(s), "match_mode": s.match_mode, "description": s.description}
                for s in self.streams
            ],
            "versions": package_versions(),
            "started": started,
            "command_line": list(sys.argv if argv is None else argv),
        }


def _check_factory_references(config: RunConfig) -> None:
    """Import ``module:factory`` agents and backends now, so a typo stops the run
    before any task instead of failing every task of every stream."""
    if ":" in config.agent.kind:
        load_factory(config.agent.kind, f"{config.sources.get('agent', 'agent config')}: key 'kind': agent")
    if ":" in config.memory.backend:
        load_factory(config.memory.backend, f"{config.sources.get('memory', 'memory config')}: key 'backend': memory")


@dataclass
class ResultCollector:
    """Gathers scored items and responses (from any process) into the artefacts.

    A failed episode is a scored item too (wrong, with ``error`` set), so the
    scores alone say every task's outcome.
    """

    stream_order: list[str]
    artefacts: RunArtefacts | None = None
    responses: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)

    def add_record(self, record: Mapping[str, Any]) -> None:
        """One record as produced by :func:`task_record`, :func:`feedback_record` or
        :func:`error_record` (the transport format between xdist workers and us)."""
        if "response" in record:
            self.responses.append(record["response"])
            if self.artefacts:
                self.artefacts.add_response(record["response"])
        if "scored" in record:
            self.scores.append(record["scored"])
            if self.artefacts:
                self.artefacts.add_score(record["scored"])

    def preload(self, responses: Sequence[Mapping[str, Any]], scores: Sequence[Mapping[str, Any]]) -> None:
        """Resume: count the completed episodes' records without writing them again."""
        self.responses += [dict(response) for response in responses]
        self.scores += [dict(scored) for scored in scores]

    def metrics(self) -> dict[str, StreamMetrics]:
        return summarize(self.stream_order, self.scores, self.responses)

    def finish(
        self, thresholds: list[ThresholdResult], started: str, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        metrics = self.metrics()
        errors = [scored for scored in self.scores if scored.get("error")]
        summary = {
            "started": started,
            "finished": utc_now(),
            "streams": {name: m.to_dict() for name, m in metrics.items() if name != "overall"},
            "overall": metrics["overall"].to_dict(),
            "thresholds": [t.to_dict() for t in thresholds],
            "passed": all(t.met for t in thresholds),
            "failed_episodes": [
                {"stream": e["stream"], "task_id": e["task_id"], "reason": e["error"]} for e in errors
            ],
            **(extra or {}),
        }
        if self.artefacts:
            self.artefacts.finalize_scores(self.scores, self.stream_order)
            self.artefacts.write_summary(summary)
            self.artefacts.close()
        return summary


def task_record(outcome_response: Mapping[str, Any], scored: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "task", "response": dict(outcome_response), "scored": dict(scored)}


def feedback_record(response: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "feedback", "response": dict(response)}


def error_record(
    sample: BenchmarkSample, reason: str, response: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A task whose episode failed: scored as wrong, with the failure as the reason."""
    scored = {
        "stream": sample.stream,
        "task_id": sample.task_id,
        "position": sample.position,
        "correct": False,
        "value": 0.0,
        "raw_answer": None,
        "extracted": None,
        "target": sample.target,
        "match_mode": sample.match_mode,
        "reason": f"episode failed: {reason}",
        "details": {},
        "error": reason,
    }
    record: dict[str, Any] = {"type": "error", "scored": scored}
    if response is not None:
        record["response"] = dict(response)
    return record


def evaluate_thresholds(
    config: RunConfig,
    metrics: Mapping[str, StreamMetrics],
    overall_override: float | None = None,
    stream_overrides: Mapping[str, float] | None = None,
) -> list[ThresholdResult]:
    """The benchmark config's thresholds, with command-line values taking precedence."""
    thresholds = config.benchmark.thresholds
    overall = overall_override if overall_override is not None else thresholds.overall
    return check_thresholds(metrics, overall, {**thresholds.streams, **(stream_overrides or {})})


class RecordedEpisode:
    """One task's episode, with every outcome turned into a transport record.

    ``run_task`` delivers and scores the task; ``finish`` gives the feedback (after a
    completed task turn) and then always resets the agent. Failures are recorded
    (an error record, or the feedback response's protocol violation) and then
    re-raised, so the pytest plugin and :func:`run_benchmark` share one recording.
    """

    def __init__(self, run: StreamRun, sample: BenchmarkSample, records: list[dict[str, Any]]) -> None:
        self.run = run
        self.sample = sample
        self.records = records
        self.outcome: TaskOutcome | None = None
        self._last_response: AgentResponse | None = None

    def _listen(self, response: AgentResponse) -> None:
        self._last_response = response
        if response.kind == "feedback":
            self.records.append(feedback_record(response.to_dict()))

    def run_task(self) -> TaskOutcome:
        self.run.listeners.append(self._listen)
        try:
            self.outcome = self.run.run_task(self.sample)
        except EvoMemoryError as error:
            last = self._last_response
            response = last.to_dict() if last is not None and last.kind == "task" else None
            self.records.append(error_record(self.sample, str(error), response))
            raise
        finally:
            self.run.listeners.remove(self._listen)
        self.records.append(task_record(self.outcome.response.to_dict(), self.outcome.scored.to_dict()))
        return self.outcome

    def finish(self) -> None:
        self.run.listeners.append(self._listen)
        try:
            if self.outcome is not None:
                self.run.give_feedback(self.sample, self.outcome.response.final_answer)
        finally:
            self.run.listeners.remove(self._listen)
            self.run.reset_agent()


def run_benchmark(
    config: RunConfig,
    run_dir: Path,
    *,
    agent_factory: AgentFactoryFn | None = None,
    memory_factory: MemoryFactoryFn | None = None,
    write_artefacts: bool = True,
) -> dict[str, Any]:
    """Run every selected stream in order, serially, and return the summary.

    Episodes that fail are recorded as errors and the stream goes on, as under pytest.
    """
    started = utc_now()
    benchmark = BenchmarkRun(config, run_dir)
    artefacts = RunArtefacts(run_dir) if write_artefacts else None
    if artefacts:
        artefacts.write_run(benchmark.run_document(started))
    collector = ResultCollector(benchmark.stream_order, artefacts)
    wall = time.perf_counter()
    for stream in benchmark.streams:
        run = benchmark.open_stream(stream.name, agent_factory=agent_factory, memory_factory=memory_factory)
        try:
            for sample in stream.samples:
                records: list[dict[str, Any]] = []
                episode = RecordedEpisode(run, sample, records)
                with contextlib.suppress(EvoMemoryError):  # recorded by the episode
                    episode.run_task()
                with contextlib.suppress(EvoMemoryError):
                    episode.finish()
                for record in records:
                    collector.add_record(record)
        finally:
            run.close()
    thresholds = evaluate_thresholds(config, collector.metrics())
    return collector.finish(thresholds, started, {"wall_seconds": round(time.perf_counter() - wall, 6)})


__all__ = [
    "BenchmarkRun",
    "RecordedEpisode",
    "ResultCollector",
    "default_run_dir",
    "error_record",
    "feedback_record",
    "run_benchmark",
    "run_stream",
    "task_record",
]
