"""Progress while a session runs (reporting/progress.py): one verdict, one line, both drivers."""

from __future__ import annotations

from pytest_evomemory.reporting.progress import ProgressBoard, task_verdict


def test_a_tasks_verdict_is_correct_wrong_or_a_failed_episode() -> None:
    assert task_verdict({"correct": True}) == "correct"
    assert task_verdict({"correct": False}) == "wrong"
    assert task_verdict({"correct": True, "error": "timeout"}) == "error"


def test_a_resumed_streams_line_counts_the_interrupted_runs_tasks_too() -> None:
    board = ProgressBoard(interval=0)
    board.start({"s": 2}, lambda key: [{"stream": key, "correct": True}] if key == "s" else [])
    assert board.add("s", [{"scored": {"correct": False}}], show=False) is None  # the task's feedback is not in yet
    line = board.add("s", [{"response": {"seconds": 1.0}}]) or ""
    assert line.startswith("evomemory s: 2/3  acc 50.0%")
    assert board.add("elsewhere", [{"scored": {"correct": True}}]) is None  # not a stream of this session


def test_only_a_streams_final_line_when_asked_for_final_lines_only() -> None:
    board = ProgressBoard(interval=0, final_only=True)
    board.start({"s": 2}, lambda key: [])
    assert board.add("s", [{"scored": {"correct": True}}]) is None
    assert (board.add("s", [{"scored": {"correct": True}}]) or "").startswith("evomemory s: 2/2  acc 100.0%")


def test_a_stream_judged_on_a_mean_shows_that_mean_and_its_line_needs_no_feedback_turn() -> None:
    """LoCoMo's questions have no feedback turn: the line is due when the task's
    teardown brings no records, and it shows mean F1 (the stream's headline), as the
    table at the end does, not the exact-match accuracy."""
    board = ProgressBoard(interval=0)
    board.start({"conv": 2}, lambda key: [])
    questions = [
        {"correct": False, "match_mode": "locomo_f1", "details": {"f1": 0.5}},
        {"correct": True, "match_mode": "locomo_f1", "details": {"f1": 1.0}},
    ]
    assert board.add("conv", [{"scored": questions[0]}], show=False) is None  # the task's call phase
    assert (board.add("conv", []) or "").startswith("evomemory conv: 1/2  mean F1 50.0%")  # its teardown
    board.add("conv", [{"scored": questions[1]}], show=False)
    assert (board.add("conv", []) or "").startswith("evomemory conv: 2/2  mean F1 75.0%")
    assert board.add("conv", [], show=False) is None
