"""rundir.iter_documents: record lines read straight into their models, with the
same answers as the dict reader (iter_jsonl) gives for lines pydantic's JSON parser
reads differently from Python's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.rundir import RESPONSES, SCORES, DamagedRecords, dumps, iter_documents, iter_jsonl
from pytest_evomemory.rundocs import DamagedDocument, Response, Score


def _score(task_id: str, **fields: object) -> dict[str, object]:
    return {"stream": "s", "task_id": task_id, "position": 0, "correct": True, "value": 1.0, "raw_answer": "a",
            "extracted": "a", "target": "a", "match_mode": "exact", "reason": "r", "details": {}, **fields}


def test_a_lone_surrogate_reads_as_python_reads_it(tmp_path: Path) -> None:
    path = tmp_path / RESPONSES
    line = dumps({"stream": "s", "task_id": "t1", "kind": "task", "final_answer": "\ud800x"})
    assert "\\ud800" in line
    path.write_text(line + "\n", encoding="ascii")
    [typed] = iter_documents(path, Response)
    assert typed.final_answer == next(iter_jsonl(path))["final_answer"] == "\ud800x"


def test_an_overlong_integer_and_deep_nesting_are_no_record(tmp_path: Path) -> None:
    path = tmp_path / SCORES
    for damaged in (
        dumps(_score("t1"))[:-1] + ', "n": ' + "9" * 5000 + "}",
        json.dumps(_score("t1", details={"d": json.loads("[" * 300 + "]" * 300)})),
    ):
        path.write_text(dumps(_score("t0")) + "\n" + damaged + "\n", encoding="ascii")
        with pytest.raises(DamagedRecords, match=r"line 2 is not valid JSON"):
            list(iter_documents(path, Score))
        with pytest.raises(DamagedRecords, match=r"line 2 is not valid JSON"):
            list(iter_jsonl(path))


def test_a_torn_last_line_is_skipped_and_a_damaged_field_named(tmp_path: Path) -> None:
    path = tmp_path / SCORES
    path.write_text(dumps(_score("t0")) + "\n" + dumps(_score("t1"))[:20], encoding="ascii")
    assert [score.task_id for score in iter_documents(path, Score)] == ["t0"]
    path.write_text(dumps(_score("t0", position=-1)) + "\n", encoding="ascii")
    with pytest.raises(DamagedDocument, match=r"record 1: key 'position': expected a whole number of at least 0"):
        list(iter_documents(path, Score))


def test_a_record_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / SCORES
    path.write_text((dumps(_score("t0")) + "\n") * 2, encoding="ascii")
    with pytest.raises(DamagedRecords, match=r"line 2: a second record of 's' 't0' \(the first is line 1\)"):
        list(iter_documents(path, Score))
