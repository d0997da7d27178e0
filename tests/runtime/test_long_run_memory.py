"""What a long run keeps in memory per task (issue 29): the summary's figures of each
score and response, not the records; pytest's kept reports without the task's
records and properties once every plugin has read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.categories import category_summary
from pytest_evomemory.analysis.summary import outcome, summarize
from pytest_evomemory.plugin.controller import ReleaseRecords
from pytest_evomemory.rundir import SCORES, RunWriter, dumps

STREAMS = ["a", "b"]


def _scored(stream: str, position: int, **extra: Any) -> dict[str, Any]:
    return {"stream": stream, "task_id": f"{stream}{position}", "position": position, "correct": position % 2 == 0,
            "value": 1.0 if position % 2 == 0 else 0.0, "raw_answer": "x" * 500, "extracted": "x", "target": "y",
            "match_mode": "exact", "reason": "a long reason " * 20, "details": {"normalized_target": "y" * 200},
            "group": None, **extra}


def test_the_collector_keeps_what_the_summary_counts_of_a_score_and_the_same_figures() -> None:
    tool = {"match_mode": "toolbench", "group": "g1", "details": {"api_match": True, "call": "c" * 300}}
    scores = [_scored("a", 0), _scored("a", 1, error="boom", traceback="tb"), _scored("b", 0, **tool),
              _scored("b", 1, **{**tool, "details": {"api_match": False, "evidence_recall": 0.5, "stems": ["s"] * 50}})]
    kept = [outcome(scored) for scored in scores]
    assert all({"raw_answer", "reason", "target"}.isdisjoint(k.model_fields_set) for k in kept)
    assert "details" not in kept[0].model_fields_set and kept[2].details == {"api_match": True}
    assert kept[3].details == {"api_match": False, "evidence_recall": 0.5}  # the categories table reads it
    assert kept[1].traceback == "tb" and kept[1].error == "boom"
    full, compact = summarize(STREAMS, scores, []), summarize(STREAMS, kept, [])
    assert {n: m.document().written() for n, m in full.items()} == {n: m.document().written() for n, m in compact.items()}
    assert category_summary(scores, detail="api_match") == category_summary(kept, detail="api_match")


def _write(writer: RunWriter, scores: list[dict[str, Any]]) -> None:
    for scored in scores:
        writer.add_score(scored)


def test_scores_jsonl_is_put_in_stream_order_from_its_own_lines(tmp_path: Path) -> None:
    """xdist's arrival order is rewritten in stream order, line for line as written;
    a serial run's file, already in order, is left as it is."""
    arrived = [_scored("b", 0), _scored("a", 0), _scored("b", 1), _scored("a", 1), _scored("a", 2)]
    writer = RunWriter(tmp_path)
    _write(writer, arrived)
    writer.finalize_scores([outcome(s) for s in arrived], STREAMS)
    expected = [dumps(s) + "\n" for s in sorted(arrived, key=lambda s: (STREAMS.index(s["stream"]), s["position"]))]
    assert (tmp_path / SCORES).read_text(encoding="ascii") == "".join(expected)

    serial = tmp_path / "serial"
    writer = RunWriter(serial)
    _write(writer, sorted(arrived, key=lambda s: (STREAMS.index(s["stream"]), s["position"])))
    before = (serial / SCORES).stat()
    writer.finalize_scores([outcome(json.loads(line)) for line in expected], STREAMS)
    after = (serial / SCORES).stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_a_scores_file_changed_under_the_run_is_still_sorted(tmp_path: Path) -> None:
    arrived = [_scored("b", 0), _scored("a", 1), _scored("a", 0)]
    writer = RunWriter(tmp_path)
    _write(writer, arrived)
    with (tmp_path / SCORES).open("a", encoding="ascii") as handle:
        handle.write(dumps(_scored("a", 5)) + "\n")
    writer.finalize_scores([outcome(s) for s in arrived], STREAMS)
    lines = [json.loads(line) for line in (tmp_path / SCORES).read_text(encoding="ascii").splitlines()]
    assert [(s["stream"], s["position"]) for s in lines] == [("a", 0), ("a", 1), ("a", 5), ("b", 0)]


def test_a_tasks_report_keeps_neither_its_records_nor_its_properties_once_read() -> None:
    """JUnit XML and pytest-json-report read the properties in their own logreport;
    then pytest keeps the report to the end of the session without them."""
    report = pytest.TestReport(
        "evomemory::test_task[s/t1]", ("x", 0, "t"), {}, "passed", None, "teardown",
        user_properties=[("evomemory_correct", True), ("mine", 1), ("evomemory_reason", "r" * 200)],
    )
    report.evomemory_records = [{"type": "task"}]  # type: ignore[attr-defined]
    ReleaseRecords().pytest_runtest_logreport(report)
    assert report.user_properties == [("mine", 1)]
    assert not report.evomemory_records  # type: ignore[attr-defined]
    plain = pytest.TestReport("test_x.py::test_x", ("x", 0, "t"), {}, "passed", None, "call", user_properties=[("a", 1)])
    properties = plain.user_properties
    ReleaseRecords().pytest_runtest_logreport(plain)
    assert plain.user_properties is properties and properties == [("a", 1)]
