"""Damaged upstream files and misbehaving downloads: one clear error naming the file
(and record) and what to do, before any model call, or the genuine values read.

Complements test_materialize.py (pins, hand-placed files, gating, offline) with the
classes a hostile mirror or an interrupted copy produce: a server error, a body cut
short, a file cut at a line boundary, ids and answers re-saved as doubles, null ids.
Every record here is invented (tests/streams/conftest.py).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.core.errors import DataError
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.streams.base import Stream
from pytest_evomemory.streams.evomemory.catalog import STREAMS
from pytest_evomemory.streams.evomemory.materialize import stream_file
from pytest_evomemory.streams.evomemory.stream import ConvertOptions

from .conftest import (
    AIME_RECORDS,
    MMLU_RECORDS,
    TOOLBENCH_RECORDS,
    FakeHub,
    count_to,
    jsonl_bytes,
    upstream_files,
)

EVERY_CATEGORY = ConvertOptions(mmlu_pro_categories="all")


def _load(tmp_path: Path) -> dict[str, Stream]:
    return {stream.name: stream for stream in load_benchmark(BenchmarkConfig(benchmark="evomemory_single_turn"), tmp_path)}


def test_the_catalog_declares_the_genuine_record_counts() -> None:
    """The counts verified against the genuine files (research notes, docs/streams.md)."""
    assert {name: spec.source.rows for name, spec in STREAMS.items()} == {
        "aime_2024": 30,
        "gpqa_diamond": 198,
        "mmlu_pro": 12_032,
        "toolbench": 186,
    }


@pytest.mark.parametrize("how", ["hand-copied", "downloaded"])
def test_an_unpinned_file_cut_at_a_line_boundary_is_refused_by_its_count(
    hub: FakeHub, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A JSON Lines file cut after a whole line still parses: without a pinned hash
    it used to be adopted, and the run measured the first part of the stream."""
    count_to(monkeypatch, "toolbench", len(TOOLBENCH_RECORDS))
    cut = jsonl_bytes(TOOLBENCH_RECORDS[:1])
    target = stream_file(STREAMS["toolbench"], data_dir)
    if how == "hand-copied":
        target.parent.mkdir(parents=True)
        target.write_bytes(cut)
    else:
        hub.put(STREAMS["toolbench"], cut)
    with pytest.raises(DataError) as refused:
        _load(tmp_path)
    message = str(refused.value)
    assert "stream 'toolbench'" in message and "it holds 1 records, the genuine file at revision ac21e1892e63 holds 2" in message
    if how == "hand-copied":
        assert f"{target} is unreadable" in message and f"delete {target}" in message
        assert target.read_bytes() == cut  # the user's file is theirs to delete
    else:
        assert "is unusable" in message and not target.exists()
    hub.put(STREAMS["toolbench"], upstream_files()["toolbench"])
    target.unlink(missing_ok=True)
    assert len(_load(tmp_path)["toolbench"].samples) == 2


@pytest.mark.parametrize(
    ("fault", "says", "others_tried"),
    [
        ("500", r"answered HTTP 500; retry later", True),
        ("cut", r"the download from http://127\.0\.0\.1:\d+ broke off \(RemoteProtocolError: .*received \d+ bytes", False),
        ("html", r"is unusable: line 1 is not valid JSON", True),
    ],
)
def test_a_download_that_fails_midway_says_what_happened_and_installs_nothing(
    hub: FakeHub, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, says: str, others_tried: bool
) -> None:
    """A 500 was reported as "could not be reached (LocalEntryNotFoundError ...)" (and
    the hub had answered); a body cut short as "could not be reached" too."""
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # huggingface_hub's retry backoff
    hub.faults[STREAMS["aime_2024"].source.filename] = fault
    hub.faults[STREAMS["toolbench"].source.filename] = fault
    with pytest.raises(DataError) as refused:
        _load(tmp_path)
    message = str(refused.value)
    assert re.search(r"stream 'aime_2024': [^\n]*" + says.replace("line 1 is not valid JSON", "not a readable parquet"), message)
    assert re.search(r"stream 'toolbench': [^\n]*" + says, message), message
    assert "Traceback" not in message and "LocalEntryNotFoundError" not in message
    assert not stream_file(STREAMS["aime_2024"], data_dir).exists()
    assert not stream_file(STREAMS["toolbench"], data_dir).exists()
    # the hub answered: the streams after a server error or a bad body are still
    # fetched; a connection that broke off stops the others waiting on it
    assert stream_file(STREAMS["mmlu_pro"], data_dir).exists() is others_tried


def test_a_killed_downloads_leftovers_are_cleared_by_the_next_download(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    """Each download gets a fresh folder under .tmp, so a partial file is never read,
    but the folders of killed downloads piled up for ever."""
    leftover = data_dir / ".tmp" / "mmlu_pro-k1lled"
    leftover.mkdir(parents=True)
    (leftover / "test-00000-of-00001.parquet").write_bytes(upstream_files()["mmlu_pro"][:100])
    other = data_dir / ".tmp" / "mmlu_pro_extra-k1lled"  # another stream's, whose name starts alike
    other.mkdir()
    assert len(_load(tmp_path)["mmlu_pro"].samples) == 3
    assert not leftover.exists() and other.exists()
    assert list((data_dir / ".tmp").iterdir()) == [other]


def test_ids_and_answers_resaved_as_doubles_read_as_the_integers_they_hold() -> None:
    """A parquet re-export that turns integer columns into doubles made AIME's task
    ids '60.0' (resume and comparisons then match nothing) and targets '9.0'."""
    doubles = [dict(record, id=float(record["id"]), answer=float(record["answer"])) for record in AIME_RECORDS]
    samples = STREAMS["aime_2024"].convert(doubles, ConvertOptions())
    assert [(s.task_id, s.target, s.metadata["source_id"]) for s in samples] == [("60", "9", 60), ("61", "13", 61), ("62", "99", 62)]
    mmlu = [dict(record, question_id=float(record["question_id"])) for record in MMLU_RECORDS]
    assert [s.task_id for s in STREAMS["mmlu_pro"].convert(mmlu, EVERY_CATEGORY)] == ["70", "71", "72", "73"]


@pytest.mark.parametrize(
    ("name", "records", "says"),
    [
        ("aime_2024", [AIME_RECORDS[0], dict(AIME_RECORDS[1], id=None)], r"record 1: field 'id' must be an id \(an integer or text\), got None"),
        ("aime_2024", [dict(AIME_RECORDS[0], id=60.5)], r"record 0: field 'id' must be an id .*got 60\.5"),
        ("mmlu_pro", [MMLU_RECORDS[0], dict(MMLU_RECORDS[1], question_id=None)], r"record 1 \(question_id None\): field 'question_id' must be an id"),
        ("mmlu_pro", [MMLU_RECORDS[0], dict(MMLU_RECORDS[2], category=None)], r"record 1 \(question_id 72\): field 'category' must be a non-empty string"),
    ],
    ids=["aime_null_id", "aime_fractional_id", "mmlu_null_question_id", "mmlu_null_category"],
)
def test_a_record_without_its_id_or_category_is_refused_naming_the_record(
    name: str, records: list[dict[str, object]], says: str
) -> None:
    """A null MMLU-Pro question_id became the task id 'None'; a null category was
    read as the category 'none' and reported as the config's unknown category."""
    options = EVERY_CATEGORY if name == "mmlu_pro" else ConvertOptions()
    with pytest.raises(DataError, match=rf"stream '{name}': " + says):
        STREAMS[name].convert(records, options)
    if "category" in says:  # the paper's category filter reads every category first
        with pytest.raises(DataError, match=says):
            STREAMS[name].convert(records, ConvertOptions())


def test_a_key_given_twice_in_an_upstream_line_is_refused(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    """json keeps the last of two keys silently: a second 'api_call' in an edited
    copy of the (unpinned) APIBench file replaced the target; a user's task file
    refuses it, and so does the upstream reader now."""
    good = upstream_files()["toolbench"]
    edited = good.replace(b'"provider": "PyTorch"', b'"provider": "PyTorch", "api_call": "anything"', 1)
    target = stream_file(STREAMS["toolbench"], data_dir)
    target.parent.mkdir(parents=True)
    target.write_bytes(edited)
    with pytest.raises(DataError, match=r"toolbench.*is unreadable \(line 1 is not valid JSON \(the key 'api_call' appears twice"):
        _load(tmp_path)
