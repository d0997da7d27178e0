"""The run writer appends each record whole, by one unbuffered write per line: a
short write is finished (as a buffered file's flush finished it), a failed one ends
writing with its reason and keeps every line before it. Streams that ran side by
side are put in stream order at the end."""

from __future__ import annotations

import errno
from io import FileIO
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.rundir import writer as writer_module
from pytest_evomemory.rundir.jsonl import dumps, read_jsonl
from pytest_evomemory.rundir.layout import EVENTS, RESPONSES, SCORES
from pytest_evomemory.rundir.writer import RunWriter
from pytest_evomemory.rundocs import Response, Score
from pytest_evomemory.runtime.records import feedback_skipped_record, stream_error_record

SCORED = [Score(stream="s", task_id=f"t{index}", position=index, correct=bool(index % 2), value=float(index % 2),
                raw_answer="caf\u00e9", target=f"answer-{index}", match_mode="exact") for index in range(4)]


class _Short(FileIO):
    """A file whose every write takes at most seven bytes (a write a signal cut short)."""

    def write(self, data: Any) -> int:
        return super().write(bytes(data)[:7])


class _Full(FileIO):
    """A file on a disk that fills after the first line."""

    lines = 0

    def write(self, data: Any) -> int:
        if _Full.lines >= 1:
            raise OSError(errno.ENOSPC, "No space left on device", self.name)
        _Full.lines += 1
        return super().write(data)


def test_a_short_write_is_finished_and_every_line_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "FileIO", _Short)
    writer = RunWriter(tmp_path)
    for scored in SCORED:
        writer.add_score(scored)
    writer.close()
    assert writer.failure is None
    text = (tmp_path / SCORES).read_text(encoding="ascii")
    assert text == "".join(dumps(scored) + "\n" for scored in SCORED)


def test_a_failed_write_ends_writing_and_keeps_the_lines_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "FileIO", _Full)
    _Full.lines = 0
    writer = RunWriter(tmp_path)
    for scored in SCORED:
        writer.add_score(scored)
    writer.close()
    assert writer.failure is not None and "No space left on device" in writer.failure
    assert str(tmp_path / SCORES) in writer.failure and "results written before this point are kept" in writer.failure
    assert [line["task_id"] for line in read_jsonl(tmp_path / SCORES)] == ["t0"]


# --------------------------------------------------------------------------- streams put in order at the end


def _responses(order: list[tuple[str, str]]) -> list[Response]:
    return [Response(stream=stream, task_id=task_id, kind="task", final_answer=f"{stream} {task_id}", messages=[])
            for stream, task_id in order]


INTERLEAVED = [("b", "t1"), ("a", "t1"), ("b", "t2"), ("a", "t2"), ("c", "t1"), ("a", "t3")]
STREAM_ORDER = ["a", "b", "c"]


def _interleaved_run(run_dir: Path) -> RunWriter:
    writer = RunWriter(run_dir)
    for response in _responses(INTERLEAVED):
        writer.add_response(response)
    writer.add_event(feedback_skipped_record(BenchmarkSample(stream="b", task_id="t1", position=0, prompt="p",
                                                              target="x", match_mode="exact"), "no memory"))
    writer.add_event(stream_error_record("a", "it broke"))
    return writer


def test_streams_that_ran_side_by_side_are_written_in_stream_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer orders responses.jsonl and events.jsonl by the streams it noted as
    it appended (no line parsed again), each stream's lines in the order they came."""
    writer = _interleaved_run(tmp_path)
    writer.close()
    events = (tmp_path / EVENTS).read_text(encoding="ascii")
    monkeypatch.setattr(writer_module, "json", None)  # a line parsed again would fail the rewrite
    writer.finalize_streams(STREAM_ORDER)
    assert writer.failure is None
    lines = (tmp_path / RESPONSES).read_text(encoding="ascii").splitlines(keepends=True)
    expected = sorted(_responses(INTERLEAVED), key=lambda response: STREAM_ORDER.index(response.stream))
    assert lines == [dumps(response.line()) + "\n" for response in expected]
    # an event names its stream inside its record, not as a line's stream: left as it came
    assert (tmp_path / EVENTS).read_text(encoding="ascii") == events


def test_a_file_changed_after_it_was_appended_is_ordered_by_what_it_holds(tmp_path: Path) -> None:
    """A line added or removed since the writer appended (by another hand) is no
    longer the line it noted: the file is read for its lines' streams instead."""
    writer = _interleaved_run(tmp_path)
    writer.close()
    path = tmp_path / RESPONSES
    lines = path.read_text(encoding="ascii").splitlines(keepends=True)
    del lines[1]  # a's t1: the noted streams no longer match the lines
    path.write_text("".join(lines), encoding="ascii")
    writer.finalize_streams(STREAM_ORDER)
    assert [(line["stream"], line["task_id"]) for line in read_jsonl(path)] == [
        ("a", "t2"), ("a", "t3"), ("b", "t1"), ("b", "t2"), ("c", "t1")
    ]


def test_a_resumed_runs_kept_lines_are_ordered_by_what_they_hold(tmp_path: Path) -> None:
    """Lines the writer did not append itself (a merge's whole file) are read for their streams."""
    writer = RunWriter(tmp_path)
    writer.write_records(RESPONSES, [response.line() for response in _responses(INTERLEAVED[:2])])
    for response in _responses(INTERLEAVED[2:]):
        writer.add_response(response)
    writer.finalize_streams(STREAM_ORDER)
    assert [(line["stream"], line["task_id"]) for line in read_jsonl(tmp_path / RESPONSES)] == sorted(
        INTERLEAVED, key=lambda key: STREAM_ORDER.index(key[0])
    )
