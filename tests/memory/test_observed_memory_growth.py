"""What the runtime's view of a memory keeps: a turn's own writes and recalls, not the stream's.

Each turn's response carries what that turn wrote and recalled (the records and
transcripts are made from it); the observed memory itself keeps no more than the
turn in progress and the one before it, so a 20,000-task stream does not keep
20,000 tasks' hits in memory a second time.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_evomemory.agents.base import Turn
from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample, Stimulus, TaskView
from pytest_evomemory.evaluation import EvoMemoryEvaluator
from pytest_evomemory.memory import InProcessMemory, ObservedMemory
from pytest_evomemory.memory.observed import TurnLog
from pytest_evomemory.runtime import StreamRun, run_stream
from pytest_evomemory.runtime.memory import mark
from pytest_evomemory.runtime.records import FeedbackRecord, Record


class RememberingAgent:
    """Recalls before each task and retains the target in feedback (deterministic_recall)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        turn.begin_step()
        if isinstance(stimulus, TaskView):
            self.memory.recall(stimulus.prompt)
            turn.call_tool("final_answer", {"answer": "x"})
            return
        self.memory.retain(f"lesson of {stimulus.task_id}: falcons nest on cliffs", {"task": stimulus.task_id})
        turn.call_tool("final_answer", {"answer": FEEDBACK_ACKNOWLEDGEMENT})

    def reset(self) -> None: ...


def test_each_turn_gets_its_own_writes_and_recalls_and_nothing_older_is_kept() -> None:
    observed = ObservedMemory(InProcessMemory(), "s")
    run = StreamRun("s", RememberingAgent(observed), observed, EvoMemoryEvaluator(), "deterministic_recall", max_steps=4)
    samples = [
        BenchmarkSample(task_id=f"t{n}", stream="s", position=n, prompt=f"where do falcons nest {n}", target="x")
        for n in range(300)
    ]
    records: list[Record] = []
    for position, outcome in enumerate(run_stream(run, samples, records.append)):
        task = outcome.response
        assert task.memory_writes == ()
        expected_hits = min(position, observed.default_top_k)
        assert len(task.memory_recalled) == expected_hits
        assert all("falcons nest" in hit["content"] for hit in task.memory_recalled)
        # what the runtime view still holds: at most the last two turns' entries
        assert len(list(observed.writes)) <= 1 and len(list(observed.recalled)) <= observed.default_top_k
    feedback = [record.response for record in records if isinstance(record, FeedbackRecord)]
    assert [[w["content"] for w in r.memory_writes] for r in feedback[:2]] == [
        ["lesson of t0: falcons nest on cliffs"], ["lesson of t1: falcons nest on cliffs"]
    ]
    assert len(feedback) == 300 and all(len(r.memory_writes) == 1 for r in feedback)
    assert len(observed.writes) == 300  # counted from the stream's start, kept only lately


def test_marks_slice_a_turn_and_forget_what_came_before_the_previous_one() -> None:
    observed = ObservedMemory(InProcessMemory(), "s")
    for turn in range(50):
        before = mark(observed)
        observed.retain(f"note {turn} about harbors")
        observed.recall("harbors")
        after = mark(observed)
        assert [w["content"] for w in observed.writes[before.writes : after.writes]] == [f"note {turn} about harbors"]
        assert len(observed.recalled[before.recalled : after.recalled]) == min(turn + 1, observed.default_top_k)
    with pytest.raises(IndexError, match="forgotten"):
        observed.writes[0:1]
    assert observed.writes[-1]["content"] == "note 49 about harbors"


def test_a_turn_log_indexes_absolutely_and_drops_only_what_is_asked() -> None:
    log: TurnLog[int] = TurnLog()
    log.extend(range(10))
    log.forget_before(4)
    assert len(log) == 10 and list(log) == [4, 5, 6, 7, 8, 9]
    assert log[4:7] == [4, 5, 6] and log[9] == 9 and log[-1] == 9 and log[10:] == []
    with pytest.raises(IndexError):
        log[3]
    log.forget_before(2)  # never goes back
    assert list(log) == [4, 5, 6, 7, 8, 9]
    log.forget_before(99)
    assert list(log) == [] and len(log) == 10
    log.append(10)
    assert log[10:11] == [10]
