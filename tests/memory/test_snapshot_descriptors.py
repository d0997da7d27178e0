"""The files a stream's snapshots keep open between saves, and the system calls they spare.

A save rewrites its slot's label and manifest in place; with many chains in one
process every system call hands the interpreter lock to another chain, so they
stay open from one save to the next (bounded by a process-wide budget of
descriptors), a new slot is made without reading or removing anything, and a
directory another stream already synced is not synced again. None of it may
cost a guarantee: a slot removed or replaced behind the process's back is
written anew, running out of descriptors is no failure, and a save killed before
its label never leaves a label that restores, or that a resumed run builds on.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.memory import keptfiles
from pytest_evomemory.memory import snapshot as snapshot_module
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.snaplabel import LABEL, parse_label
from pytest_evomemory.memory.snapshot import SNAPSHOT_SLOTS, SnapshotDamaged, StreamSnapshots

#: the run config fingerprint the snapshots are written under (a run's ``config_fingerprint``)
CONFIG = "a" * 64


@pytest.fixture(autouse=True)
def only_the_first_save_is_durable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which slot holds which episode must not depend on the machine's speed: only
    the first save is durable, so slot-1 is kept and episode 9 goes to slot-8."""
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 3600.0)


@pytest.fixture(autouse=True)
def budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of this test's own (restored afterwards, whatever the test spent)."""
    monkeypatch.setattr(keptfiles.BUDGET, "remaining", 1000)


def saved(snapshots: StreamSnapshots, memory: InProcessMemory, episodes: range) -> None:
    for episode in episodes:
        memory.retain(f"episode {episode} lesson")
        snapshots.save(memory, episode)


def restored_size(snapshots: StreamSnapshots, completed: int) -> int:
    fresh = InProcessMemory()
    snapshots.restore(fresh, completed)
    return len(fresh)


@pytest.mark.parametrize("removed", ["slot", "state", "label"])
def test_a_file_removed_behind_the_process_while_kept_open_is_written_anew(tmp_path: Path, removed: str) -> None:
    """The kept label or manifest of slot-2 is unlinked (the slot, its state, or the
    label alone removed): the next save into slot-2 notices it and writes files a
    resume finds, never into the unlinked ones."""
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    saved(snapshots, memory, range(1, SNAPSHOT_SLOTS + 2))
    slot = tmp_path / "slot-2"
    assert os.fspath(slot / LABEL) in snapshots._progress.kept.files  # the premise: it is kept open
    target = {"slot": slot, "state": slot / "state", "label": slot / LABEL}[removed]
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    saved(snapshots, memory, range(SNAPSHOT_SLOTS + 2, SNAPSHOT_SLOTS + 3))
    assert snapshots.intact(SNAPSHOT_SLOTS + 2)
    assert restored_size(snapshots, SNAPSHOT_SLOTS + 2) == SNAPSHOT_SLOTS + 2


def test_a_label_replaced_behind_the_process_is_the_one_written(tmp_path: Path) -> None:
    """A label renamed over (an editor's save, a copy put back) is another file than
    the one kept open: the save writes the file the slot now holds."""
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    saved(snapshots, memory, range(1, SNAPSHOT_SLOTS + 2))
    label = tmp_path / "slot-2" / LABEL
    copy = tmp_path / "copy.json"
    shutil.copyfile(label, copy)
    os.replace(copy, label)
    saved(snapshots, memory, range(SNAPSHOT_SLOTS + 2, SNAPSHOT_SLOTS + 3))
    written, _ = parse_label(label.read_bytes())
    assert written is not None and written.episodes == SNAPSHOT_SLOTS + 2
    assert restored_size(snapshots, SNAPSHOT_SLOTS + 2) == SNAPSHOT_SLOTS + 2


def test_the_descriptors_kept_stay_within_the_process_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keptfiles.BUDGET, "remaining", 5)
    streams = [StreamSnapshots(tmp_path / name, name, CONFIG) for name in ("s1", "s2")]
    memories = [InProcessMemory(), InProcessMemory()]
    for episode in range(1, 2 * SNAPSHOT_SLOTS):
        for snapshots, memory in zip(streams, memories, strict=True):
            saved(snapshots, memory, range(episode, episode + 1))
    # the labels and manifests kept, and the record logs: one budget for every descriptor kept
    logs = [snapshots._progress.tracker for snapshots in streams]
    kept = sum(len(snapshots._progress.kept.files) for snapshots in streams)
    assert all(tracker is not None and tracker.writer is not None for tracker in logs)
    assert kept + len(logs) == 5 and keptfiles.BUDGET.remaining == 0
    for snapshots in streams:
        assert restored_size(snapshots, 2 * SNAPSHOT_SLOTS - 1) == 2 * SNAPSHOT_SLOTS - 1
        snapshots.release()
    assert keptfiles.BUDGET.remaining == 5  # every one given back


@pytest.mark.parametrize("where", ["a new slot's label", "a manifest, its label in use"])
def test_running_out_of_descriptors_closes_the_kept_ones_and_the_save_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The first open that finds the process out of descriptors (EMFILE) closes the
    stream's idle kept files, never the label the save is writing, and the save
    and the next ones go on, keeping nothing open."""
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    first = SNAPSHOT_SLOTS if where.startswith("a new") else SNAPSHOT_SLOTS + 2
    saved(snapshots, memory, range(1, first))
    if where.startswith("a manifest"):
        shutil.rmtree(tmp_path / "slot-2" / "state")  # its kept manifest is gone: opened anew
    assert snapshots._progress.kept.files
    real = os.open
    refused: list[str] = []

    def out_of_descriptors(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if not refused:
            refused.append(os.path.relpath(path, tmp_path))
            raise OSError(errno.EMFILE, "Too many open files", os.fspath(path))
        return real(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", out_of_descriptors)
    saved(snapshots, memory, range(first, SNAPSHOT_SLOTS + 4))
    assert refused == (["slot-0/episodes.json"] if where.startswith("a new") else ["slot-2/state/manifest.json"])
    assert snapshots._progress.kept.files == {} and snapshots._progress.kept.lent == {}
    monkeypatch.undo()
    assert all(snapshots.intact(completed) for completed in range(first, SNAPSHOT_SLOTS + 4))
    assert restored_size(snapshots, SNAPSHOT_SLOTS + 3) == SNAPSHOT_SLOTS + 3


def test_running_out_of_descriptors_at_the_record_log_keeps_nothing_and_the_save_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record log is kept open under the same budget and the same rule as the
    labels and manifests: its open finding the process out of descriptors (EMFILE)
    closes the stream's idle kept files and is tried once more, and from then on no
    descriptor, the log's included, is kept between saves."""
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    saved(snapshots, memory, range(1, SNAPSHOT_SLOTS + 2))
    snapshots.release()  # the stream's files closed: the next save opens the log again
    saved(snapshots, memory, range(SNAPSHOT_SLOTS + 2, SNAPSHOT_SLOTS + 3))  # its label and manifest kept again
    assert snapshots._progress.kept.files
    tracker = snapshots._progress.tracker
    assert tracker is not None and tracker.writer is not None
    tracker.close()  # the log alone closed (as after a failed save): the next save opens it
    real = os.open
    refused: list[str] = []

    def out_of_descriptors(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if not refused and os.fspath(path).endswith(".jsonl"):
            refused.append(os.path.relpath(path, tmp_path))
            raise OSError(errno.EMFILE, "Too many open files", os.fspath(path))
        return real(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", out_of_descriptors)
    saved(snapshots, memory, range(SNAPSHOT_SLOTS + 3, SNAPSHOT_SLOTS + 5))
    assert refused == ["log/records-1.jsonl"]
    assert keptfiles.BUDGET.exhausted
    tracker = snapshots._progress.tracker
    assert snapshots._progress.kept.files == {} and tracker is not None and tracker.writer is None
    monkeypatch.undo()
    assert restored_size(snapshots, SNAPSHOT_SLOTS + 4) == SNAPSHOT_SLOTS + 4


class _NotesBeside(InProcessMemory):
    """Writes a file of its own beside the RecordLog: not a RecordLog-only memory."""

    def snapshot(self, directory: Path) -> None:
        super().snapshot(directory)
        (directory / "notes.txt").write_text(f"{len(self)} records\n")


@pytest.mark.parametrize("kind", [InProcessMemory, _NotesBeside], ids=["record log only", "own files"])
def test_a_save_killed_before_its_label_never_leaves_a_label_that_restores_or_is_built_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type[InProcessMemory]
) -> None:
    """Killed after the memory wrote slot-2 for episode 10 and before its label: a
    RecordLog-only memory's slot keeps episode 2's label (not invalidated first:
    its checksums no longer match the manifest, so it never verifies); a memory
    writing files of its own finds it invalidated. A resumed process restores
    episode 9 and re-runs episode 10 into the slot, which holds exactly its memory."""
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = kind()
    saved(snapshots, memory, range(1, SNAPSHOT_SLOTS + 2))

    def killed(*args: Any, **kwargs: Any) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(snapshot_module, "label_bytes", killed)
    memory.retain("killed run, episode 10 lesson")
    with pytest.raises(KeyboardInterrupt):
        snapshots.save(memory, SNAPSHOT_SLOTS + 2)
    monkeypatch.undo()
    left, _ = parse_label((tmp_path / "slot-2" / LABEL).read_bytes())
    if kind is InProcessMemory:
        assert left is not None and left.episodes == 2
        with pytest.raises(SnapshotDamaged, match=r"slot-2: state/manifest\.json does not match its checksum"):
            snapshots.verify(2)
    else:
        assert left is None
    snapshots.release()

    resumed = StreamSnapshots(tmp_path, "s1", CONFIG)
    again = kind()
    resumed.restore(again, SNAPSHOT_SLOTS + 1)
    again.retain("resumed run, episode 10 lesson")
    resumed.save(again, SNAPSHOT_SLOTS + 2)
    check = kind()
    resumed.restore(check, SNAPSHOT_SLOTS + 2)
    assert [hit.content for hit in check.recall("resumed killed", top_k=20) if "episode 10" in hit.content] == [
        "resumed run, episode 10 lesson"
    ]
    assert len(check) == SNAPSHOT_SLOTS + 2


def test_a_directory_another_streams_sync_covered_is_not_synced_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two streams of a run share its memory/ folder: the second's first durable save
    does not sync it again when the first's sync started after the second's folder
    was made; a stream whose folder is made after that sync syncs it itself."""
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 0.0)
    synced: list[str] = []
    real = snapshot_module.sync_path

    def spy(path: str, *, directory: bool = False) -> None:
        if directory:
            synced.append(path)
        real(path, directory=directory)

    monkeypatch.setattr(snapshot_module, "sync_path", spy)
    memory_folder = os.fspath(tmp_path / "run" / "memory")
    first, second, third = (StreamSnapshots.for_stream(tmp_path / "run", name, CONFIG) for name in ("s1", "s2", "s3"))
    for snapshots in (first, second):
        snapshots.clear()
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 3600.0)  # made, not yet synced
    saved(first, InProcessMemory(), range(1, 2))
    saved(second, InProcessMemory(), range(1, 2))
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 0.0)
    synced.clear()
    saved(first, InProcessMemory(), range(2, 3))
    saved(second, InProcessMemory(), range(2, 3))
    assert synced.count(memory_folder) == 1
    assert os.fspath(second.directory) in synced  # its own folder is its own to sync
    saved(third, InProcessMemory(), range(1, 2))
    assert synced.count(memory_folder) == 2


@pytest.mark.parametrize("memory_folder", [True, False], ids=["another stream made memory/", "the first stream"])
def test_a_new_streams_first_save_makes_its_folders_without_probing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_folder: bool
) -> None:
    """A stream starting from its first task found no folder of its own (``clear``):
    its first save makes the stream's folder, the slot, its state and the log folder
    outright (no ``mkdir`` that fails, no ``stat``), and starts log generation 1 in a
    log folder it just made, so nothing is listed, nor the new log's size asked (with
    many chains in one process each system call hands the interpreter lock over)."""
    run = tmp_path / "run"
    run.mkdir()
    if memory_folder:
        (run / "memory").mkdir()
    snapshots = StreamSnapshots.for_stream(run, "s1", CONFIG)
    snapshots.clear()
    calls: list[str] = []

    def spying(name: str) -> Any:
        real = getattr(os, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            try:
                result = real(*args, **kwargs)
            except OSError as error:
                calls.append(f"{name} failed: {errno.errorcode[error.errno or 0]}")
                raise
            calls.append(name)
            return result

        return spy

    for name in ("mkdir", "stat", "lstat", "fstat", "listdir", "scandir"):
        monkeypatch.setattr(os, name, spying(name))
    saved(snapshots, InProcessMemory(), range(1, 2))
    if memory_folder:  # the usual case: every stream but a run's first
        assert calls == ["mkdir"] * 4
    else:  # the run's memory folder too: one mkdir fails (ENOENT), and os.makedirs looks
        assert "listdir" not in calls and "scandir" not in calls and "fstat" not in calls
        assert calls.count("mkdir failed: ENOENT") == 1 and calls.count("mkdir") == 5
    monkeypatch.undo()
    assert sorted(os.listdir(snapshots.directory)) == ["log", "slot-1"]
    assert os.listdir(snapshots.log_directory) == ["records-1.jsonl"]
    assert restored_size(snapshots, 1) == 1


def test_a_log_reopened_at_no_bytes_drops_what_a_killed_save_left_in_it(tmp_path: Path) -> None:
    """A log this process knows as empty (its first save held no record, then the
    stream's files were closed) is emptied as it is opened again, with no ``fstat``:
    bytes a killed save appended are never part of a later snapshot."""
    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    snapshots.clear()
    memory = InProcessMemory()
    snapshots.save(memory, 1)  # no record yet: log generation 1, empty
    snapshots.release()
    log = tmp_path / "log" / "records-1.jsonl"
    assert log.read_bytes() == b""
    log.write_bytes(b'{"id": 99, "content": "a killed save\'s tail"}\n')
    saved(snapshots, memory, range(2, 4))
    snapshots.release()
    assert log.read_bytes().count(b"\n") == 2 and b"killed" not in log.read_bytes()
    fresh = InProcessMemory()
    snapshots.restore(fresh, 3)
    assert [hit.content for hit in fresh.recent()] == [hit.content for hit in memory.recent()]


_TAKE_OVER = """
import sys
from pathlib import Path
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.snapshot import StreamSnapshots
directory, done, until = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
snapshots = StreamSnapshots(directory, "s1", "a" * 64)
memory = InProcessMemory()
snapshots.restore(memory, done)
for episode in range(done + 1, until + 1):
    memory.retain(f"episode {episode} lesson")
    snapshots.save(memory, episode)
snapshots.release()
"""


def test_a_second_process_takes_the_stream_over_while_the_first_keeps_its_files_open(tmp_path: Path) -> None:
    """An xdist worker that takes a stream over (or a resumed run) writes the slots
    in place while the process before it still holds its labels and manifests open:
    what the second one saved is what a resume finds, whatever the first one's
    descriptors then do (closed at its stream's end)."""
    import subprocess
    import sys

    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    memory = InProcessMemory()
    saved(snapshots, memory, range(1, SNAPSHOT_SLOTS + 2))
    assert snapshots._progress.kept.files
    until = 3 * SNAPSHOT_SLOTS
    subprocess.run(
        [sys.executable, "-c", _TAKE_OVER, os.fspath(tmp_path), str(SNAPSHOT_SLOTS + 1), str(until)],
        check=True, capture_output=True, timeout=120,
    )
    snapshots.release()
    assert StreamSnapshots(tmp_path, "s1", CONFIG).newest_intact(until) == until
    assert restored_size(StreamSnapshots(tmp_path, "s1", CONFIG), until) == until
