"""A damaged snapshot is never trusted: it restores exactly the intact state or is refused.

The matrix damages the newest snapshot of a stream (and, in some cases, what
older ones stand on) the ways a kill -9, a power cut or a hand edit leaves it —
a file cut mid-line, one byte changed with the length kept, an emptied or a
missing file, a missing manifest or label, a slot of another stream — for the
sqlite and inprocess backends and for a third-party memory with its own
``snapshot``/``restore`` (tests/memory/consolidating_adapter.py). Each time:

* ``newest_intact`` names the newest snapshot that still verifies, and restoring
  it gives exactly the memory the uninterrupted stream had then (same recalls);
* restoring the damaged one raises :class:`SnapshotDamaged` (a ResumeRefused, an
  EvoMemoryError) naming the slot and what is wrong, and loads nothing.

And a save that cannot write (disk full, read-only) is one ArtefactWriteError
naming the file, with every earlier snapshot kept.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.core.errors import ArtefactWriteError, EvoMemoryError
from pytest_evomemory.memory import MemorySystem, build_memory, snapfiles, snaplabel
from pytest_evomemory.memory import recordlog as recordlog_module
from pytest_evomemory.memory import snapshot as snapshot_module
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.snapshot import ResumeRefused, SnapshotDamaged, StreamSnapshots
from pytest_evomemory.options import render

from .conftest import CONSOLIDATING_ADAPTER, memory_config

#: the run config fingerprint the snapshots are written under (a run's ``config_fingerprint``)
CONFIG = "a" * 64
EPISODES = 10
QUERIES = ["ferry pier schedule", "harbor lighthouse", "falcon nest cliff", "episode lesson", "quartz"]


@pytest.fixture(autouse=True)
def only_the_first_save_is_durable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which slot holds which episode must not depend on how fast this machine is:
    only a process's first save is made durable (and its slot kept out of the rotation)."""
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 3600.0)


def open_backend(backend: str, tmp_path: Path, name: str) -> MemorySystem:
    return build_memory(memory_config(backend, top_k=3), MemoryContext("s1", tmp_path / name, name))


def recalls(memory: MemorySystem) -> list[list[tuple[str, str, float]]]:
    return [[(h.record_id, h.content, round(h.score, 9)) for h in memory.recall(q, top_k=10)] for q in QUERIES]


def run_stream(memory: MemorySystem, snapshots: StreamSnapshots) -> dict[int, Any]:
    """EPISODES episodes of two retains each, a snapshot after each; what each one recalls."""
    warm = {}
    for episode in range(1, EPISODES + 1):
        memory.retain(f"episode {episode} lesson: the ferry leaves pier {episode} at {episode}:15")
        memory.retain(f"Harbor log {episode}: falcon nest on cliff {episode % 3}, quartz seen {episode}")
        snapshots.save(memory, episode)
        warm[episode] = recalls(memory)
    return warm


def slot_of(snapshots: StreamSnapshots, episodes: int) -> Path:
    for slot in snapshots.directory.glob("slot-*"):
        label = json.loads((slot / "episodes.json").read_text())
        if label.get("episodes") == episodes:
            return slot
    raise AssertionError(f"no slot labelled {episodes}")


def log_of(snapshots: StreamSnapshots) -> Path:
    (log,) = (snapshots.directory / "log").glob("records-*.jsonl")
    return log


def newest_state_file(snapshots: StreamSnapshots) -> Path:
    """The file that holds what episode EPISODES added: the shared log's tail for
    the built-in backends, the whole state file for a third-party memory."""
    state = slot_of(snapshots, EPISODES) / "state"
    files = sorted(p for p in state.rglob("*") if p.is_file() and p.name != "manifest.json")
    return files[0] if files else log_of(snapshots)


def previous_bytes(snapshots: StreamSnapshots) -> int:
    """How much of the shared log the snapshot before the newest stands on."""
    manifest = json.loads((slot_of(snapshots, EPISODES - 1) / "state" / "manifest.json").read_text())
    return int(manifest["log"]["bytes"])


# --------------------------------------------------------------------------- damage


def cut_mid_line(snapshots: StreamSnapshots) -> int:
    path = newest_state_file(snapshots)
    data = path.read_bytes()
    keep = previous_bytes(snapshots) if path.name.startswith("records-") else 0
    path.write_bytes(data[: keep + (len(data) - keep) // 2])  # half of the newest part: mid-line
    return EPISODES - 1


def flip_one_letter(snapshots: StreamSnapshots) -> int:
    path = newest_state_file(snapshots)
    data = bytearray(path.read_bytes())
    start = previous_bytes(snapshots) if path.name.startswith("records-") else 0
    index = data.index(b"quartz", start)
    data[index] = ord("Q")  # same length, one letter
    path.write_bytes(bytes(data))
    return EPISODES - 1


def empty_the_state(snapshots: StreamSnapshots) -> int:
    newest_state_file(snapshots).write_bytes(b"")
    # the built-ins' log is every snapshot's: emptied, nothing before it verifies either
    return EPISODES - 1 if not newest_state_file(snapshots).name.startswith("records-") else 0


def remove_the_state(snapshots: StreamSnapshots) -> int:
    path = newest_state_file(snapshots)
    shared = path.name.startswith("records-")
    path.unlink()
    return 0 if shared else EPISODES - 1


def remove_the_manifest_or_state(snapshots: StreamSnapshots) -> int:
    state = slot_of(snapshots, EPISODES) / "state"
    for path in state.iterdir():
        path.unlink()
    return EPISODES - 1


def remove_the_label(snapshots: StreamSnapshots) -> int:
    (slot_of(snapshots, EPISODES) / "episodes.json").unlink()
    return EPISODES - 1


def cut_the_label(snapshots: StreamSnapshots) -> int:
    label = slot_of(snapshots, EPISODES) / "episodes.json"
    label.write_bytes(label.read_bytes()[:40])
    return EPISODES - 1


def edit_the_label(snapshots: StreamSnapshots) -> int:
    """A label that claims another episode count (its checksum no longer matches)."""
    label = slot_of(snapshots, EPISODES - 1) / "episodes.json"
    label.write_bytes(label.read_bytes().replace(f'"episodes":{EPISODES - 1}'.encode(), f'"episodes":{EPISODES}'.encode()))
    (slot_of(snapshots, EPISODES) / "episodes.json").unlink()
    return EPISODES - 2


def flip_an_old_record(snapshots: StreamSnapshots) -> int:
    """Damage in what every snapshot shares (the built-ins' log) or in an old slot's own file."""
    path = newest_state_file(snapshots)
    if not path.name.startswith("records-"):
        path = next(p for p in (slot_of(snapshots, 3) / "state").iterdir())
        data = bytearray(path.read_bytes())
        data[data.index(b"ferry")] = ord("b")
        path.write_bytes(bytes(data))
        return EPISODES  # the newest slot has its own copy: intact
    data = bytearray(path.read_bytes())
    data[data.index(b"ferry")] = ord("b")
    path.write_bytes(bytes(data))
    return 0


DAMAGE: dict[str, Callable[[StreamSnapshots], int]] = {
    "cut mid-line": cut_mid_line,
    "one letter changed": flip_one_letter,
    "emptied": empty_the_state,
    "removed": remove_the_state,
    "manifest or state removed": remove_the_manifest_or_state,
    "label removed": remove_the_label,
    "label cut": cut_the_label,
    "label edited": edit_the_label,
    "an old record changed": flip_an_old_record,
}


@pytest.mark.parametrize("backend", ["sqlite", "inprocess", CONSOLIDATING_ADAPTER])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_snapshot_restores_the_intact_state_or_is_refused(
    backend: str, damage: str, tmp_path: Path
) -> None:
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    warm = run_stream(open_backend(backend, tmp_path, "warm"), snapshots)
    assert snapshots.newest_intact(EPISODES) == EPISODES

    intact = DAMAGE[damage](snapshots)

    assert snapshots.newest_intact(EPISODES) == intact
    fresh = open_backend(backend, tmp_path, "fresh")
    if intact < EPISODES:
        with pytest.raises(SnapshotDamaged) as refused:
            snapshots.restore(fresh, EPISODES)
        error = refused.value
        assert isinstance(error, ResumeRefused) and isinstance(error, EvoMemoryError)
        assert error.path is not None and Path(error.path).parent == snapshots.directory
        assert Path(error.path).name in str(error) and error.problem and error.problem in str(error)
        assert "without --evomemory-resume" in render(str(error), "pytest")
        assert fresh.recall("ferry pier") == []  # nothing was loaded
    if intact:
        restored = open_backend(backend, tmp_path, f"restored{intact}")
        snapshots.restore(restored, intact)
        assert recalls(restored) == warm[intact]
    else:
        with pytest.raises(SnapshotDamaged):
            snapshots.restore(open_backend(backend, tmp_path, "none"), 1)


def test_a_slot_of_another_stream_is_refused_by_name(tmp_path: Path) -> None:
    ours = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    theirs = StreamSnapshots.for_stream(tmp_path / "run", "s2", CONFIG)
    warm = run_stream(open_backend("inprocess", tmp_path, "a"), ours)
    run_stream(open_backend("inprocess", tmp_path, "b"), theirs)
    # their newest slot copied over ours (same episode count)
    target = slot_of(ours, EPISODES)
    shutil.rmtree(target)
    shutil.copytree(slot_of(theirs, EPISODES), target)
    assert ours.newest_intact(EPISODES) == EPISODES - 1
    with pytest.raises(SnapshotDamaged, match=rf"{target.name}: it belongs to stream 's2', not 's1'"):
        ours.restore(open_backend("inprocess", tmp_path, "c"), EPISODES)
    restored = open_backend("inprocess", tmp_path, "d")
    ours.restore(restored, EPISODES - 1)
    assert recalls(restored) == warm[EPISODES - 1]


def test_a_snapshot_of_another_memory_system_is_refused(tmp_path: Path) -> None:
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    run_stream(open_backend("inprocess", tmp_path, "a"), snapshots)
    with pytest.raises(SnapshotDamaged, match="written by memory system InProcessMemory, and this run's is SqliteMemory"):
        snapshots.restore(open_backend("sqlite", tmp_path, "b"), EPISODES)


def test_a_snapshot_written_under_another_run_config_is_never_restored(tmp_path: Path) -> None:
    """Another run of another config (another top_k, another replicate's seed) wrote
    this stream's slots: they verify byte for byte, but are not this run's memory."""
    theirs = StreamSnapshots.for_stream(tmp_path / "b", "s1", "b" * 64)
    run_stream(open_backend("inprocess", tmp_path, "b"), theirs)
    shutil.copytree(theirs.directory, StreamSnapshots.directory_for(tmp_path / "a", "s1"))
    ours = StreamSnapshots.for_stream(tmp_path / "a", "s1", CONFIG)
    assert ours.completed_prefixes() == [] and ours.newest_intact(EPISODES) == 0
    slot = slot_of(ours, EPISODES)
    with pytest.raises(SnapshotDamaged, match=rf"{slot.name}: it was written by another run's config "
                       rf"\(config bbbbbbbbbbbb, this run's aaaaaaaaaaaa\)") as refused:
        ours.restore(open_backend("inprocess", tmp_path, "c"), EPISODES)
    assert "without --evomemory-resume" in render(str(refused.value), "pytest")
    # the resume's own check, before any memory is built: one line naming the
    # directory, the stream, another run's config and what to do
    with pytest.raises(SnapshotDamaged) as foreign:
        ours.refuse_foreign()
    message = render(str(foreign.value), "cli")
    assert "\n" not in message and str(ours.directory) in message and "stream 's1'" in message
    assert "written by another run's config" in message
    assert message.endswith("put back this run's own memory/s1/ directory, or run again without --resume")
    # a save never builds on another config's state, and its label names this run's
    memory = open_backend("inprocess", tmp_path, "d")
    memory.retain("episode 1 of run a: the lighthouse is white")
    ours.save(memory, 1)
    assert ours.completed_prefixes() == [1] and ours.intact(1)
    assert json.loads((slot_of(ours, 1) / "episodes.json").read_text())["config"] == CONFIG


def test_a_label_of_the_previous_format_is_passed_over_with_its_reason(tmp_path: Path) -> None:
    """Format 2 labels named no run config: they are read as another version's, as
    any other format is (the resume falls back to an earlier snapshot, or the
    stream's first task, and says why)."""
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    run_stream(open_backend("inprocess", tmp_path, "a"), snapshots)
    for slot in snapshots.directory.glob("slot-*"):
        label = json.loads((slot / "episodes.json").read_text())
        body = {key: value for key, value in label.items() if key not in ("sha256", "config")} | {"format": 2}
        (slot / "episodes.json").write_bytes(snaplabel.CANONICAL.encode(
            {**body, "sha256": snaplabel.label_digest(body)}).encode("ascii"))
    assert snapshots.newest_intact(EPISODES) == 0 and snapshots.completed_prefixes() == []
    assert snapshots.distrusted(EPISODES).endswith(
        "is in another format (2, this version writes 3): it was written by another version of pytest-evomemory"
    )
    with pytest.raises(SnapshotDamaged, match="another format"):
        snapshots.restore(open_backend("inprocess", tmp_path, "b"), EPISODES)
    snapshots.refuse_foreign()  # not another config's: nothing to tell apart


def test_restoring_forgets_the_snapshots_after_it(tmp_path: Path) -> None:
    """Episodes after the restored one run again: their old snapshots are never restored."""
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    run_stream(open_backend("sqlite", tmp_path, "a"), snapshots)
    resumed = open_backend("sqlite", tmp_path, "b")
    snapshots.restore(resumed, 6)
    # 7..10 lost their labels; 1 is in the slot kept as the durable one
    assert snapshots.completed_prefixes() == [1, 3, 4, 5, 6]
    resumed.retain("episode 7 again: the quartz ferry")
    snapshots.save(resumed, 7)
    check = open_backend("sqlite", tmp_path, "c")
    snapshots.restore(check, 7)
    assert [h.content for h in check.recall("quartz ferry again", top_k=1)] == ["episode 7 again: the quartz ferry"]
    assert snapshots.newest_intact(10) == 7


# --------------------------------------------------------------------------- writes that fail


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
@pytest.mark.parametrize("backend", ["sqlite", "inprocess"])
def test_a_save_that_cannot_write_is_one_artefact_write_error(
    backend: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    memory = open_backend(backend, tmp_path, "a")
    memory.retain("episode 1: the ferry leaves at seven")
    snapshots.save(memory, 1)
    memory.retain("episode 2: the quartz is in the harbor")

    def full(*args: Any, **kwargs: Any) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(ArtefactWriteError) as failed:
        snapshots.save(memory, 2)
    error = failed.value
    assert error.path is not None and str(tmp_path / "run" / "memory" / "s1") in error.path
    message = str(error)
    assert "\n" not in message and os.strerror(code) in message and error.path in message
    assert "results written before it are kept" in message
    monkeypatch.undo()
    assert snapshots.newest_intact(2) == 1  # the earlier snapshot is kept, intact
    restored = open_backend(backend, tmp_path, "b")
    snapshots.restore(restored, 1)
    assert [h.content for h in restored.recall("ferry quartz", top_k=5)] == ["episode 1: the ferry leaves at seven"]


def test_a_third_party_snapshot_that_cannot_write_names_its_file(tmp_path: Path) -> None:
    class FullDisk:
        default_top_k = 3

        def snapshot(self, directory: Path) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / "notes.json"))

        def restore(self, directory: Path) -> None: ...

    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    with pytest.raises(ArtefactWriteError, match=r"notes\.json: No space left on device \(ENOSPC\)") as failed:
        snapshots.save(FullDisk(), 1)
    assert failed.value.path is not None and failed.value.path.endswith("notes.json")


def test_a_third_party_restore_that_fails_is_a_typed_refusal(tmp_path: Path) -> None:
    class Broken:
        default_top_k = 3

        def snapshot(self, directory: Path) -> None:
            (directory / "state.json").write_text("{}")

        def restore(self, directory: Path) -> None:
            raise KeyError("next")

    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    snapshots.save(Broken(), 1)
    with pytest.raises(ResumeRefused, match=r"Broken failed to restore its snapshot .*KeyError"):
        snapshots.restore(Broken(), 1)


# --------------------------------------------------------------------------- durability


def test_a_durable_save_syncs_files_then_label_and_keeps_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real = snapshot_module.datasync

    def spy(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}") if os.path.exists("/proc/self/fd") else "?")
        real(descriptor)

    for module in (snapshot_module, recordlog_module, snapfiles):  # label; log and manifest; other state files
        monkeypatch.setattr(module, "datasync", spy)
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    memory = open_backend("sqlite", tmp_path, "a")
    for episode in range(1, 3 * snapshot_module.SNAPSHOT_SLOTS):
        memory.retain(f"episode {episode} lesson")
        snapshots.save(memory, episode)
    if synced[0] != "?":
        # only the first save (the process's first) is durable: log, manifest, then the label last
        assert [Path(p).name for p in synced] == ["records-1.jsonl", "manifest.json", "episodes.json"]
    # the durable slot (episode 1's) is never reused while it is the durable one
    assert 1 in snapshots.completed_prefixes()
    assert snapshots.newest_intact(1) == 1


class _Clock:
    """``time.monotonic`` as the snapshot module sees it, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_fresh_streams_first_durable_save_comes_an_interval_in_and_a_restored_ones_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream starting from its first task (``clear``) has nothing earlier to protect:
    its saves are not synced until SYNC_INTERVAL_S after it started (a grid's chains
    would otherwise all sync at their first episode at once); a process that restored
    a snapshot makes its first save durable at once, so that the slot it restored from
    is replaced by a durable one before the rotation can overwrite it."""
    clock = _Clock()
    monkeypatch.setattr(snapshot_module, "time", clock)
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 1.0)
    synced: list[int] = []
    real = snapshot_module.datasync

    def spy(descriptor: int) -> None:  # the label's sync: one per durable save
        synced.append(descriptor)
        real(descriptor)

    monkeypatch.setattr(snapshot_module, "datasync", spy)
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    snapshots.clear()
    memory = open_backend("inprocess", tmp_path, "a")
    durable_after: list[int] = []
    for episode in range(1, 7):
        clock.now += 0.3  # episodes 1-3 within the first second, 4 past it
        memory.retain(f"episode {episode} lesson")
        before = len(synced)
        snapshots.save(memory, episode)
        if len(synced) > before:
            durable_after.append(episode)
    assert durable_after == [4]  # 1.2 s in; the next one a second after it
    assert snapshots.newest_intact(4) == 4

    restored = open_backend("inprocess", tmp_path, "b")
    again = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    again.restore(restored, 6)
    restored.retain("episode 7 lesson")
    before = len(synced)
    again.save(restored, 7)
    assert len(synced) == before + 1  # no interval waited for


def synced_directories(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every save made durable, and the directories each one synced (a list per save)."""
    monkeypatch.setattr(snapshot_module, "SYNC_INTERVAL_S", 0.0)
    saves: list[list[str]] = []
    real = snapshot_module.sync_path

    def spy(path: str, *, directory: bool = False) -> None:
        if directory:
            saves[-1].append(path)
        real(path, directory=directory)

    monkeypatch.setattr(snapshot_module, "sync_path", spy)
    return saves


def test_a_durable_save_syncs_the_directories_whose_entries_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot's first durable save syncs every directory on its path (its entries are
    new); once every slot exists and is rewritten in place, a durable save syncs the
    files and the label only: an unchanged directory has nothing to make durable."""
    saves = synced_directories(monkeypatch)
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    memory = open_backend("inprocess", tmp_path, "a")
    run = snapshots.directory
    for episode in range(1, 4 * (snapshot_module.SNAPSHOT_SLOTS + 1)):
        memory.retain(f"episode {episode} lesson")
        saves.append([])
        snapshots.save(memory, episode)
    assert saves[0] == [str(run / "slot-1" / "state"), str(run / "slot-1"), str(run / "log"), str(run), str(run.parent)]
    # the steady state: every slot reused with its own state, nothing new on any path
    assert saves[-1] == [] and saves[-2] == []
    memory.reset()  # emptied: a new log generation, whose entry must be durable with the next slot
    saves.append([])
    snapshots.save(memory, 4 * (snapshot_module.SNAPSHOT_SLOTS + 1))
    assert str(run / "log") in saves[-1]
    restored = open_backend("inprocess", tmp_path, "b")
    snapshots.restore(restored, 4 * (snapshot_module.SNAPSHOT_SLOTS + 1))
    assert len(restored) == 0


def test_a_memory_writing_its_own_files_has_its_state_directory_synced_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third-party snapshot may create or rename files (write_atomically does) on
    every save: its state directory is synced by every durable save."""
    saves = synced_directories(monkeypatch)
    snapshots = StreamSnapshots.for_stream(tmp_path / "run", "s1", CONFIG)
    memory = open_backend(CONSOLIDATING_ADAPTER, tmp_path, "a")
    for episode in range(1, 3 * (snapshot_module.SNAPSHOT_SLOTS + 1)):
        memory.retain(f"episode {episode}: the ferry leaves at {episode}")
        saves.append([])
        snapshots.save(memory, episode)
    index = (3 * (snapshot_module.SNAPSHOT_SLOTS + 1) - 1) % snapshot_module.SNAPSHOT_SLOTS
    assert [Path(path).name for path in saves[-1]] == ["state"], saves[-1]
    assert Path(saves[-1][0]).parent.name in (f"slot-{index}", f"slot-{snapshot_module.SNAPSHOT_SLOTS}")
