"""How a snapshot save touches the disk: few files, in place, and still exact.

The runtime saves every stream's memory after every episode, so a save is on the
per-task profile (docs/performance.md). These tests pin what keeps it cheap (files
kept open, or one open per file; no pathlib, no re-created files) together with what must not be
traded for it: a shorter manifest or label over a longer one still reads back,
a torn tail is still cut, a slot removed behind the process's back is rebuilt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.memory import base as base_module
from pytest_evomemory.memory import keptfiles
from pytest_evomemory.memory import recordlog as recordlog_module
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.recordlog import RecordLog
from pytest_evomemory.memory.snapshot import (
    SNAPSHOT_SLOTS,
    SnapshotDamaged,
    StreamSnapshots,
    supports_snapshots,
)

#: the run config fingerprint the snapshots are written under (a run's ``config_fingerprint``)
CONFIG = "a" * 64


def records(count: int, start: int = 1) -> list[dict[str, Any]]:
    return [{"id": i, "content": f"lesson {i}", "metadata": {"n": i}} for i in range(start, start + count)]


def test_a_shorter_manifest_over_a_longer_one_reads_back(tmp_path: Path) -> None:
    log = RecordLog(tmp_path, "inprocess")
    stored = records(3)
    log.save(3, lambda last: [r for r in stored if r["id"] > last], {"next_id": 4, "note": "x" * 500})
    log.save(3, lambda last: [r for r in stored if r["id"] > last], {"next_id": 4})
    assert log.load() == (stored, {"next_id": 4})
    text = (tmp_path / "manifest.json").read_text()
    assert text.endswith(" ") and json.loads(text)["state"] == {"next_id": 4}  # padded in place


def test_an_emptied_store_is_written_anew_with_a_fresh_manifest(tmp_path: Path) -> None:
    log = RecordLog(tmp_path, "inprocess")
    before = records(5)
    log.save(5, lambda last: [r for r in before if r["id"] > last], {"next_id": 6})
    after = records(2, start=6)  # reset, then two new records (ids go on)
    log.save(2, lambda last: [r for r in after if r["id"] > last], {"next_id": 8})
    assert log.load() == (after, {"next_id": 8})
    refilled = records(7, start=6)  # reset and refilled past the old count: only the count gives it away
    log.save(7, lambda last: [r for r in refilled if r["id"] > last], {"next_id": 13})
    assert log.load() == (refilled, {"next_id": 13})


def test_a_large_first_save_is_written_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recordlog_module, "_WRITE_CHUNK", 64)  # several writes
    log = RecordLog(tmp_path, "inprocess")
    stored = records(40)
    log.save(40, lambda last: [r for r in stored if r["id"] > last], {"next_id": 41})
    assert log.load() == (stored, {"next_id": 41})


def test_a_store_that_yields_too_few_records_is_an_error(tmp_path: Path) -> None:
    from pytest_evomemory.core.errors import MemoryBackendError

    with pytest.raises(MemoryBackendError, match="reports 3 records but yielded 2"):
        RecordLog(tmp_path, "inprocess").save(3, lambda last: records(2), {})


def test_an_unreadable_manifest_stops_the_save(tmp_path: Path) -> None:
    from pytest_evomemory.core.errors import MemoryBackendError

    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(MemoryBackendError, match=r"manifest\.json is unreadable"):
        RecordLog(tmp_path, "inprocess").save(1, lambda last: records(1), {})


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        opened.append(os.path.basename(os.fspath(path)))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return opened


@pytest.mark.parametrize("budget", [1000, 0], ids=["kept open", "no descriptors to spare"])
def test_a_steady_state_save_opens_no_file_or_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """Label and manifest stay open from one save to the next (each looked at once,
    ``fstat``, to notice a slot removed behind the process's back), or, with no
    descriptors to spare, are opened once each; every file is rewritten in place
    (an open or a re-created file costs a hundred small writes on some file
    systems); the record log stays open, and no file's size is asked nor the state
    listed: this process wrote them, and knows them (with many chains in one process
    each system call hands the interpreter lock to another chain). With no
    descriptors to spare the log is no exception: it is opened at each save, and
    its size checked."""
    monkeypatch.setattr(keptfiles.BUDGET, "remaining", budget)
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    for episode in range(1, SNAPSHOT_SLOTS + 2):
        memory.retain(f"episode {episode} lesson")
        snapshots.save(memory, episode)
    opened = count_opens(monkeypatch)
    looked: list[str] = []

    def spying(name: str) -> Any:
        real = getattr(os, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            looked.append(name)
            return real(*args, **kwargs)

        return spy

    for name in ("fstat", "scandir", "stat", "lstat"):
        monkeypatch.setattr(os, name, spying(name))
    memory.retain("one more lesson")
    snapshots.save(memory, SNAPSHOT_SLOTS + 2)
    if budget:
        assert opened == [] and looked == ["fstat", "fstat"]
    else:  # the record log too is kept only within the budget: opened, and its size checked
        assert sorted(opened) == ["episodes.json", "manifest.json", "records-1.jsonl"] and looked == ["fstat"]
    monkeypatch.undo()
    restored = InProcessMemory()
    snapshots.restore(restored, SNAPSHOT_SLOTS + 2)
    assert len(restored) == SNAPSHOT_SLOTS + 2
    snapshots.release()  # the stream ended: the log is closed, and opened again by a later save
    memory.retain("after the end")
    snapshots.save(memory, SNAPSHOT_SLOTS + 3)
    restored = InProcessMemory()
    snapshots.restore(restored, SNAPSHOT_SLOTS + 3)
    assert len(restored) == SNAPSHOT_SLOTS + 3


def test_a_slot_removed_behind_the_process_is_rebuilt(tmp_path: Path) -> None:
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    for episode in range(1, SNAPSHOT_SLOTS + 1):
        memory.retain(f"episode {episode} lesson")
        snapshots.save(memory, episode)
    import shutil

    shutil.rmtree(tmp_path / "slot-1")  # the slot episode SNAPSHOT_SLOTS + 1 reuses
    memory.retain("the next lesson")
    snapshots.save(memory, SNAPSHOT_SLOTS + 1)
    restored = InProcessMemory()
    snapshots.restore(restored, SNAPSHOT_SLOTS + 1)
    assert len(restored) == SNAPSHOT_SLOTS + 1  # whole, not appended to a missing log


def test_a_label_left_longer_by_another_stream_is_overwritten_cleanly(tmp_path: Path) -> None:
    slot = tmp_path / "slot-1"
    slot.mkdir()
    (slot / "episodes.json").write_text(json.dumps({"stream": "a-much-longer-stream-name" * 4, "episodes": 9}))
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    memory.retain("lesson one")
    snapshots.save(memory, 1)
    label = json.loads((slot / "episodes.json").read_text())
    assert {key: label[key] for key in ("stream", "episodes", "memory")} == {
        "stream": "s1", "episodes": 1, "memory": "InProcessMemory"
    }
    assert snapshots.completed_prefixes() == [1]


class Capable:
    def snapshot(self, directory: Path) -> None: ...

    def restore(self, directory: Path) -> None: ...


class Bare:
    pass


def test_the_capability_check_remembers_only_classes_that_offer_both_methods() -> None:
    assert supports_snapshots(Capable()) and supports_snapshots(Capable())
    assert Capable in base_module._CAPABLE_TYPES
    dressed = Bare()
    dressed.snapshot = lambda directory: None  # type: ignore[attr-defined]
    dressed.restore = lambda directory: None  # type: ignore[attr-defined]
    assert supports_snapshots(dressed)
    assert Bare not in base_module._CAPABLE_TYPES
    assert not supports_snapshots(Bare())


class _NotesBeside(InProcessMemory):
    """Overrides ``snapshot`` to write a file of its own beside the RecordLog: its
    base's word (``snapshot_writes_only_a_record_log``) does not cover it."""

    def snapshot(self, directory: Path) -> None:
        super().snapshot(directory)
        (directory / "notes.txt").write_text(f"{len(self)} records\n")


def test_a_subclass_writing_files_of_its_own_has_its_state_listed(tmp_path: Path) -> None:
    from pytest_evomemory.memory.recordlog import writes_only_a_record_log
    from pytest_evomemory.memory.snaplabel import LABEL, parse_label

    assert writes_only_a_record_log(InProcessMemory()) and not writes_only_a_record_log(_NotesBeside())
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = _NotesBeside()
    for episode in range(1, SNAPSHOT_SLOTS + 3):
        memory.retain(f"episode {episode} lesson")
        snapshots.save(memory, episode)
    slot = snapshots.verify(SNAPSHOT_SLOTS + 2)
    label, _ = parse_label((slot / LABEL).read_bytes())
    assert label is not None and sorted(label.files) == ["manifest.json", "notes.txt"]
    (slot / "state" / "notes.txt").write_text("changed after the label\n")
    with pytest.raises(SnapshotDamaged):
        snapshots.verify(SNAPSHOT_SLOTS + 2)
