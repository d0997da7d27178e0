"""The run writer appends each record whole, by one unbuffered write per line: a
short write is finished (as a buffered file's flush finished it), a failed one ends
writing with its reason and keeps every line before it."""

from __future__ import annotations

import errno
from io import FileIO
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.rundir import writer as writer_module
from pytest_evomemory.rundir.jsonl import dumps, read_jsonl
from pytest_evomemory.rundir.layout import SCORES
from pytest_evomemory.rundir.writer import RunWriter
from pytest_evomemory.rundocs import Score

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
