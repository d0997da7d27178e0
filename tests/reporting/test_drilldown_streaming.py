"""report.html's drill-down reads a long run's records as its pages are written:
it holds a page's worth of them, not the run's (issue 29: at 20,000 tasks the
report held ~100 MB at the end of the session)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from pytest_evomemory.reporting import drilldown
from pytest_evomemory.reporting.drilldown import read_task_pages, task_sections

TASKS = 250  # more than two pages per stream


def _records(streams: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """A run's records in the order a run writes them; every 7th task failed its
    episode (no feedback turn, no feedback transcript)."""
    scores, responses, transcripts = [], [], {}
    for stream in streams:
        transcripts[stream] = []
        for position in range(TASKS):
            task_id = f"{stream}-{position}"
            failed = position % 7 == 3
            scores.append({"stream": stream, "task_id": task_id, "position": position, "correct": position % 2 == 0,
                           "error": "boom" if failed else None, "extracted": f"x{position}", "target": f"t{position}",
                           "match_mode": "exact", "reason": "r", "raw_answer": f"a{position}"})
            kinds = ("task",) if failed else ("task", "feedback")
            for kind in kinds:
                responses.append({"stream": stream, "task_id": task_id, "kind": kind, "usage": {"total_tokens": position},
                                  "final_answer": f"a{position}", "memory_recalls": 1})
                transcripts[stream].append({"task_id": task_id, "kind": kind,
                                            "messages": [{"role": "user", "content": f"{kind} {position}"}]})
    return scores, responses, transcripts


def _interleaved(responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two streams' responses as two xdist workers write them: each stream in its order, mixed."""
    first = [r for r in responses if r["stream"] == "a"]
    second = [r for r in responses if r["stream"] == "b"]
    mixed: list[dict[str, Any]] = []
    while first or second:
        mixed.extend(first[:3])
        mixed.extend(second[:2])
        del first[:3], second[:2]
    return mixed


def _page(scores: list[dict[str, Any]], responses: list[dict[str, Any]],
          transcripts: Mapping[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    def by_stream(stream: str) -> Iterator[dict[str, Any]]:
        return iter(transcripts.get(stream, ()))

    return read_task_pages("".join(task_sections(lambda: iter(scores), iter(responses), by_stream)))


@pytest.fixture
def most_held(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most entries the report held at once, read ahead of the task asking for them."""
    seen = [0]
    take = drilldown._Ahead.take

    def counting(self: Any, wanted: Any, later: Any) -> Any:
        found = take(self, wanted, later)
        seen[0] = max(seen[0], len(self._held))
        return found

    monkeypatch.setattr(drilldown._Ahead, "take", counting)
    return seen


def test_a_serial_runs_records_are_held_a_few_at_a_time(most_held: list[int]) -> None:
    scores, responses, transcripts = _records(("a", "b"))
    pages = _page(scores, responses, transcripts)
    assert most_held[0] <= 2  # a failed task's missing turn: the next task's record, read past
    tasks = pages["a"] + pages["b"]
    assert len(tasks) == 2 * TASKS
    failed = [task for task in tasks if task["v"] == "e"]
    assert failed and all("F" not in task and task["ft"] is None for task in failed)
    assert all(task["T"][0] == int(task["p"]) - 1 and task["tt"] for task in tasks)
    assert all(task["F"][0] == int(task["p"]) - 1 and task["ft"] for task in tasks if task["v"] != "e")


def test_records_in_another_order_give_the_same_pages() -> None:
    """xdist's workers mix the streams' responses (the other stream's are held until
    its pages come); scores in no order are held and sorted."""
    scores, responses, transcripts = _records(("a", "b"))
    shuffled = scores[:]
    random.Random(29).shuffle(shuffled)
    expected = _page(scores, responses, transcripts)
    assert _page(scores, _interleaved(responses), transcripts) == expected
    assert _page(shuffled, responses, transcripts) == expected



@pytest.mark.parametrize("held", [1_000, 100])
def test_a_short_runs_scores_are_read_once_a_long_runs_again(monkeypatch: pytest.MonkeyPatch, held: int) -> None:
    """Up to drilldown.HELD_SCORES tasks the scores of the first read (each stream's
    verdicts and order) are the pages' too; past it scores.jsonl is read again
    rather than held. The pages are the same either way, in order or not."""
    scores, responses, transcripts = _records(("a", "b"))
    monkeypatch.setattr(drilldown, "HELD_SCORES", 0)  # every score read again for the pages
    expected = _page(scores, responses, transcripts)
    monkeypatch.setattr(drilldown, "HELD_SCORES", held)
    for given in (scores, sorted(scores, key=lambda scored: -scored["position"])):
        reads = [0]

        def read_scores(given: list[dict[str, Any]] = given, reads: list[int] = reads) -> Iterator[dict[str, Any]]:
            reads[0] += 1
            return iter(given)

        def by_stream(stream: str) -> Iterator[dict[str, Any]]:
            return iter(transcripts.get(stream, ()))

        pages = read_task_pages("".join(task_sections(read_scores, iter(responses), by_stream)))
        assert reads[0] == (1 if len(scores) <= held else 2)
        assert pages == expected
