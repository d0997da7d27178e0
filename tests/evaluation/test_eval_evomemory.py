"""Only original task turns are ever scored; feedback turns never reach an evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_evomemory.agents.base import Turn
from pytest_evomemory.core.errors import ProtocolViolation
from pytest_evomemory.core.types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    AgentResponse,
    BenchmarkSample,
    Score,
    ScoredItem,
    Stimulus,
    StimulusKind,
    Usage,
)
from pytest_evomemory.evaluation import EvoMemoryEvaluator, TaskQAEvaluator
from pytest_evomemory.runtime import StreamRun, run_stream


class SpyTaskQA(TaskQAEvaluator):
    """Records every answer it is asked to score."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, object]] = []

    def score(self, sample: BenchmarkSample, answer: object) -> Score:
        self.seen.append((sample.task_id, answer))
        return super().score(sample, answer)


class SpyEvoMemory(EvoMemoryEvaluator):
    """Records the kind of every response passed for scoring."""

    def __init__(self, taskqa: TaskQAEvaluator) -> None:
        super().__init__(taskqa)
        self.kinds: list[str] = []

    def score_response(self, sample: BenchmarkSample, response: AgentResponse) -> ScoredItem:
        self.kinds.append(response.kind)
        return super().score_response(sample, response)


class AnsweringAgent:
    """Answers each task with a fixed letter and acknowledges feedback."""

    def __init__(self) -> None:
        self.stimuli: list[str] = []

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        turn.begin_step()
        self.stimuli.append(stimulus.kind)
        answer = "The answer is (B)" if stimulus.kind == "task" else FEEDBACK_ACKNOWLEDGEMENT
        turn.call_tool("final_answer", {"answer": answer})

    def reset(self) -> None:
        pass


def samples(count: int = 3) -> list[BenchmarkSample]:
    return [
        BenchmarkSample(f"q{i}", "gpqa_diamond", i, f"Question {i}", "B", "choice", ("w", "x", "y", "z"))
        for i in range(count)
    ]


def test_feedback_turns_are_never_passed_to_the_evaluator() -> None:
    taskqa = SpyTaskQA()
    evaluator = SpyEvoMemory(taskqa)
    agent = AnsweringAgent()
    records: list[Mapping[str, Any]] = []
    run = StreamRun(
        stream="gpqa_diamond", agent=agent, memory=None, evaluator=evaluator,
        memory_strategy="none", max_steps=3,
    )
    outcomes = list(run_stream(run, samples(3), records.append))

    delivered = [record.wire()["response"]["kind"] for record in records]
    assert delivered == ["task", "feedback"] * 3  # feedback turns did happen ...
    assert evaluator.kinds == ["task"] * 3  # ... but only task turns were scored
    assert taskqa.seen == [(f"q{i}", "The answer is (B)") for i in range(3)]
    assert all(answer != FEEDBACK_ACKNOWLEDGEMENT for _, answer in taskqa.seen)
    assert [outcome.scored.score.correct for outcome in outcomes] == [True] * 3


def test_run_task_and_give_feedback_directly() -> None:
    taskqa = SpyTaskQA()
    run = StreamRun("gpqa_diamond", AnsweringAgent(), None, SpyEvoMemory(taskqa), "none", 3)
    sample = samples(1)[0]
    outcome = run.run_task(sample)
    feedback = run.give_feedback(sample, outcome.response.final_answer)
    assert feedback.kind == "feedback" and feedback.final_answer == FEEDBACK_ACKNOWLEDGEMENT
    assert len(taskqa.seen) == 1


def _response(kind: StimulusKind, answer: str | None, task_id: str = "q0") -> AgentResponse:
    return AgentResponse(
        stream="gpqa_diamond", task_id=task_id, kind=kind,
        final_answer=answer, agent_turns=1, tool_calls=(), messages=(), usage=Usage(),
        memory_retains=0, memory_recalls=0, seconds=0.0,
    )


def test_score_response_refuses_feedback() -> None:
    taskqa = SpyTaskQA()
    with pytest.raises(ProtocolViolation, match="only original task turns are scored"):
        EvoMemoryEvaluator(taskqa).score_response(samples(1)[0], _response("feedback", "B"))
    assert taskqa.seen == []


def test_score_response_refuses_a_response_of_another_task() -> None:
    with pytest.raises(ProtocolViolation, match="against task"):
        EvoMemoryEvaluator().score_response(samples(2)[1], _response("task", "B", task_id="q0"))


def test_each_task_is_scored_by_its_own_streams_mode_and_feedback_never() -> None:
    taskqa = SpyTaskQA()
    choice = samples(1)[0]
    aime = BenchmarkSample("a1", "aime_2024", 0, "Find n.", "73", "aime")
    lookup = {(choice.stream, choice.task_id): choice, (aime.stream, aime.task_id): aime}
    aime_response = AgentResponse(
        stream="aime_2024", task_id="a1", kind="task", final_answer="\\boxed{073}", agent_turns=1,
        tool_calls=(), messages=(), usage=Usage(), memory_retains=0, memory_recalls=0, seconds=0.0,
    )
    evaluator = EvoMemoryEvaluator(taskqa)
    with pytest.raises(ProtocolViolation, match="only original task turns are scored"):
        evaluator.score_response(choice, _response("feedback", FEEDBACK_ACKNOWLEDGEMENT))
    responses = [_response("task", "Answer: B"), aime_response]
    items = [evaluator.score_response(lookup[(r.stream, r.task_id)], r) for r in responses]
    assert [(item.task_id, item.score.match_mode, item.score.correct) for item in items] == [
        ("q0", "choice", True),
        ("a1", "aime", True),
    ]
    assert [answer for _, answer in taskqa.seen] == ["Answer: B", "\\boxed{073}"]
