"""The Evo-Memory episode lifecycle, with no pytest in sight.

    task  ->  unscored corrective feedback  ->  agent state reset  ->  next task

:class:`StreamRun` owns one stream's memory system and agent; :meth:`StreamRun.run_task`
delivers a task and scores its answer, :meth:`StreamRun.give_feedback` delivers the
corrective target in the same conversation, and :meth:`StreamRun.reset_agent`
clears the agent's conversation. The runtime observes every tool call and memory
operation itself, so the records in :class:`~pytest_evomemory.types.AgentResponse`
do not depend on the agent reporting honestly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .agents.base import Agent
from .errors import EpisodeError, MemoryBackendError, ProtocolViolation
from .evaluation.evomemory import EvoMemoryEvaluator
from .feedback import render_feedback
from .memory.base import MemorySystem
from .memory.tools import RECALL_SPEC, RETAIN_SPEC, memory_tools
from .tools import FINAL_ANSWER_TOOL, Tool, ToolArgumentError
from .types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    AgentResponse,
    BenchmarkSample,
    MemoryHit,
    ScoredItem,
    Stimulus,
    ToolCall,
    ToolSpec,
    Usage,
)

_T = TypeVar("_T")

#: Largest tool-call argument payload accepted from a model, in characters.
MAX_TOOL_ARGUMENT_CHARS = 2_000_000


@dataclass
class _OperationCounts:
    retains: int = 0
    recalls: int = 0
    writes: int = 0


class InstrumentedMemory:
    """Wraps the stream's memory system to count operations and catch leaks.

    Every id that ``recall`` returns must have been retained during this stream;
    anything else came from another stream (or from before the stream started)
    and is reported as a protocol violation.
    """

    def __init__(self, backend: MemorySystem, stream: str) -> None:
        self.backend = backend
        self.stream = stream
        self.counts = _OperationCounts()
        self.writes: list[dict[str, Any]] = []
        self._retained_ids: set[str] = set()

    @property
    def default_top_k(self) -> int:
        return self.backend.default_top_k

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self.counts.retains += 1
        record_id = self._guard(lambda: self.backend.retain(content, metadata), "retain")
        self._retained_ids.add(str(record_id))
        self.writes.append({"content": content, "metadata": dict(metadata or {})})
        return record_id

    def replay(self, writes: Sequence[Mapping[str, Any]]) -> None:
        """Restore a resumed stream's memory by re-applying its recorded writes."""
        for write in writes:
            self.retain(str(write["content"]), write.get("metadata") or None)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self.counts.recalls += 1
        hits = self._guard(lambda: self.backend.recall(query, top_k), "recall")
        for hit in hits:
            if str(hit.record_id) not in self._retained_ids:
                raise ProtocolViolation(
                    f"memory leak: recall in stream {self.stream!r} returned record "
                    f"{hit.record_id!r}, which was not retained in this stream; the "
                    "memory backend must start empty for every stream"
                )
        return hits

    def reset(self) -> None:
        self._guard(self.backend.reset, "reset")
        self._retained_ids.clear()

    def close(self) -> None:
        self._guard(self.backend.close, "close")

    def tools(self) -> Sequence[Tool]:
        declared = list(self.backend.tools())
        standard = {RETAIN_SPEC.name: RETAIN_SPEC, RECALL_SPEC.name: RECALL_SPEC}
        routed: list[Tool] = []
        own = {tool.name: tool for tool in memory_tools(self)}
        for tool in declared:
            if standard.get(tool.name) == tool.spec:
                routed.append(own[tool.name])  # counted and leak-guarded
            else:
                routed.append(tool)
        return routed

    def _guard(self, operation: Callable[[], _T], name: str) -> _T:
        try:
            return operation()
        except (ProtocolViolation, MemoryBackendError):
            raise
        except Exception as error:
            raise MemoryBackendError(
                f"memory backend failed during {name} in stream {self.stream!r}: "
                f"{type(error).__name__}: {error}"
            ) from error


class RuntimeTurn:
    """The runtime's implementation of :class:`~pytest_evomemory.agents.base.Turn`."""

    def __init__(self, tools: Sequence[Tool], max_steps: int) -> None:
        self._tools = {FINAL_ANSWER_TOOL.name: None, **{tool.name: tool for tool in tools}}
        self._specs = [FINAL_ANSWER_TOOL, *(tool.spec for tool in tools)]
        self.max_steps = max_steps
        self.steps = 0
        self.usage = Usage()
        self.messages: list[Mapping[str, Any]] = []
        self.tool_calls: list[ToolCall] = []
        self._final_answer: str | None = None
        self._finished = False

    @property
    def tools(self) -> Sequence[ToolSpec]:
        return list(self._specs)

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def final_answer(self) -> str | None:
        return self._final_answer

    def begin_step(self) -> None:
        if self.steps >= self.max_steps:
            raise EpisodeError(
                f"no final_answer within the turn limit of {self.max_steps} model calls "
                "(agent config key 'max_steps')"
            )
        self.steps += 1

    def record_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage

    def add_message(self, message: Mapping[str, Any]) -> None:
        self.messages.append(dict(message))

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        parsed, problem = _parse_arguments(arguments)
        if problem is not None:
            return self._record(name, {"_raw": str(arguments)[:2000]}, problem, error=True)
        assert parsed is not None
        if self._finished:
            return self._record(
                name, parsed, "error: this turn already ended with final_answer", error=True
            )
        if name not in self._tools:
            available = ", ".join(self._tools)
            return self._record(
                name, parsed, f"error: unknown tool {name!r}; available tools: {available}",
                error=True,
            )
        if name == FINAL_ANSWER_TOOL.name:
            answer = parsed.get("answer")
            if not isinstance(answer, str):
                if isinstance(answer, int | float) and not isinstance(answer, bool):
                    answer = str(answer)
                else:
                    return self._record(
                        name, parsed, "error: final_answer needs a string argument 'answer'",
                        error=True,
                    )
            self._final_answer = answer
            self._finished = True
            return self._record(name, parsed, "answer recorded")
        tool = self._tools[name]
        assert tool is not None
        try:
            result = tool.handler(parsed)
        except ToolArgumentError as error:
            return self._record(name, parsed, f"error: {error}", error=True)
        return self._record(name, parsed, result)

    def _record(self, name: str, arguments: Mapping[str, Any], result: str, *, error: bool = False) -> str:
        self.tool_calls.append(ToolCall(name, dict(arguments), result, error))
        return result


def _parse_arguments(arguments: Mapping[str, Any] | str) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(arguments, Mapping):
        return dict(arguments), None
    if len(arguments) > MAX_TOOL_ARGUMENT_CHARS:
        return None, "error: tool arguments are too large"
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        return None, f"error: tool arguments are not valid JSON ({error.msg}); send a JSON object"
    if not isinstance(value, dict):
        return None, "error: tool arguments must be a JSON object"
    return value, None


ResponseListener = Callable[[AgentResponse], None]


@dataclass
class TaskOutcome:
    """What a task turn produced: the response and the score of its answer."""

    sample: BenchmarkSample
    response: AgentResponse
    scored: ScoredItem


@dataclass
class StreamRun:
    """One stream's live state: its memory system, agent and evaluator.

    ``memory`` is the stream's own backend (wrapped for counting); it persists
    across every episode of the stream and is reset and closed by :meth:`close`.
    """

    stream: str
    agent: Agent
    memory: InstrumentedMemory | None
    evaluator: EvoMemoryEvaluator
    memory_strategy: str
    max_steps: int
    listeners: list[ResponseListener] = field(default_factory=list)
    closed: bool = False
    #: Set after the memory backend failed: the rest of the stream fails at once
    #: instead of running episodes against a memory in an unknown state.
    broken: str | None = None
    episodes_started: int = 0

    def _turn_tools(self) -> list[Tool]:
        if self.memory_strategy == "tool_use" and self.memory is not None:
            return list(self.memory.tools())
        return []

    def _deliver(self, stimulus: Stimulus, task_id: str) -> AgentResponse:
        if self.closed:
            raise EpisodeError(f"stream {self.stream!r} was already torn down")
        if self.broken is not None:
            raise MemoryBackendError(f"stream {self.stream!r} stopped: {self.broken}")
        turn = RuntimeTurn(self._turn_tools(), self.max_steps)
        before = _snapshot(self.memory)
        started = time.perf_counter()
        failure: BaseException | None = None
        try:
            self.agent.respond(stimulus, turn)
        except BaseException as error:  # recorded below, then re-raised
            failure = error
        seconds = time.perf_counter() - started
        after = _snapshot(self.memory)
        violation: str | None = None
        if failure is None and not turn.finished:
            violation = "the agent ended its turn without calling final_answer"
        elif isinstance(failure, ProtocolViolation):
            violation = str(failure)
        elif (
            failure is None
            and stimulus.kind == "feedback"
            and turn.final_answer != FEEDBACK_ACKNOWLEDGEMENT
        ):
            violation = (
                f'feedback turn ended with final_answer({turn.final_answer!r}) instead of '
                f'final_answer("{FEEDBACK_ACKNOWLEDGEMENT}")'
            )
        response = AgentResponse(
            stream=self.stream,
            task_id=task_id,
            kind=stimulus.kind,
            final_answer=turn.final_answer,
            agent_turns=max(turn.steps, 1),
            tool_calls=tuple(turn.tool_calls),
            messages=tuple(turn.messages),
            usage=turn.usage,
            memory_retains=after.retains - before.retains,
            memory_recalls=after.recalls - before.recalls,
            seconds=seconds,
            protocol_violation=violation,
            memory_writes=tuple(self.memory.writes[before.writes:after.writes]) if self.memory else (),
        )
        for listener in self.listeners:
            listener(response)
        if isinstance(failure, MemoryBackendError):
            self.broken = f"the memory backend failed at {stimulus.kind} {task_id}: {failure}"
        if failure is not None:
            if isinstance(failure, Exception) and not isinstance(failure, EpisodeError | MemoryBackendError):
                raise EpisodeError(
                    f"{stimulus.kind} turn of {self.stream}/{task_id} failed: "
                    f"{type(failure).__name__}: {failure}"
                ) from failure
            raise failure
        if violation and stimulus.kind == "task":
            raise ProtocolViolation(f"{self.stream}/{task_id}: {violation}")
        return response

    def run_task(self, sample: BenchmarkSample) -> TaskOutcome:
        """Deliver the task, then score its ``final_answer`` (the only scored item)."""
        self.episodes_started += 1
        response = self._deliver(sample.task_view(), sample.task_id)
        return TaskOutcome(sample, response, self.evaluator.score_response(sample, response))

    def give_feedback(self, sample: BenchmarkSample, submitted: str | None) -> AgentResponse:
        """Deliver the unscored corrective feedback in the same conversation."""
        return self._deliver(render_feedback(sample, submitted), sample.task_id)

    def reset_agent(self) -> None:
        """Clear the agent's conversation. No model call, no record, no memory access."""
        self.agent.reset()

    def close(self) -> None:
        """Stream teardown: empty and close the memory system."""
        if self.closed:
            return
        self.closed = True
        if self.memory is not None:
            try:
                self.memory.reset()
            finally:
                self.memory.close()


def _snapshot(memory: InstrumentedMemory | None) -> _OperationCounts:
    if memory is None:
        return _OperationCounts()
    return _OperationCounts(memory.counts.retains, memory.counts.recalls, len(memory.writes))


def run_stream(run: StreamRun, samples: Iterable[BenchmarkSample]) -> Iterator[TaskOutcome]:
    """Run a whole stream outside pytest: task, feedback, reset for each sample.

    Feedback is given only after a completed task turn; the reset always happens.
    The stream is closed when the iterator finishes or is closed early.
    """
    try:
        for sample in samples:
            try:
                outcome = run.run_task(sample)
                run.give_feedback(sample, outcome.response.final_answer)
            finally:
                run.reset_agent()
            yield outcome
    finally:
        run.close()
