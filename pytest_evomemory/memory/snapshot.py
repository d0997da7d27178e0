"""Snapshot and restore: how a stream's memory survives an interrupted run.

Resume and xdist crash recovery must give every stream exactly the memory the
uninterrupted run would have had, and the framework never retains or recalls on
the agent's behalf — so it cannot rebuild a memory by replaying writes. Instead a
memory system that can save and load its own state says so by implementing
:class:`SnapshotCapable`; the runtime saves it after every completed episode
(:class:`StreamSnapshots`) and loads the snapshot of the completed prefix into a
fresh instance on resume. A memory without the capability makes resume of a
partly run stream refuse (:class:`ResumeRefused`), because any other answer
would silently score the rest of the stream against the wrong memory.

Every snapshot is verified before anything is loaded from it: its label
(:mod:`.snaplabel`) carries a SHA-256 of each file of the state and of the shared
record log prefix it stands on, and a checksum of itself, written last. A slot cut
short by a power cut, edited by hand or copied from another stream is
:class:`SnapshotDamaged`, never loaded (:mod:`.snapcheck`:
:meth:`~.snapcheck.SnapshotChecks.newest_intact` finds the newest one that
verifies). The label also names the run config that wrote it (its
``config_fingerprint``): a stream's snapshots copied in from another run of another
config (another ``top_k``, another replicate's seed) verify byte for byte, but hold
a memory the run's recorded episodes never built, and are refused
(:meth:`StreamSnapshots.refuse_foreign`).

The protocol and its errors are declared in :mod:`.base` (re-exported here);
:class:`~.recordlog.RecordLog` is the built-in backends' implementation, and
:mod:`.snapfiles` the kill-safe file operations both sides use.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ArtefactWriteError, EvoMemoryError, named
from ..util.atomicfile import write_atomically  # re-exported: adapters' snapshot() uses it (docs/memory.md)
from .base import ResumeRefused, SnapshotCapable, SnapshotDamaged, supports_snapshots
from .keptfiles import SYNCS, KeptFiles
from .recordlog import writes_only_a_record_log
from .snapcheck import SNAPSHOT_SLOTS, SnapshotChecks
from .snapfiles import (
    SHARED,
    LogTracker,
    SharedLogs,
    datasync,
    generations,
    log_name,
    made,
    overwrite,
    read_all,
    read_small,
    state_digests,
    sync_path,
)
from .snaplabel import INVALID_LABEL, LABEL, label_bytes, parse_label

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")

#: A save is made durable (its files, log and label fsynced) at most this often: the
#: first a stream starting from its first task makes this long after it started
#: (:meth:`StreamSnapshots.clear`); any other process's first save (one that restored
#: a snapshot, say: the slot it restored from must not be rotated away before a
#: durable one replaces it) is durable at once. An fsync costs a few
#: milliseconds on a typical disk, as much as the rest of an episode; a kill -9 loses
#: nothing the kernel holds, and after a power cut the slot last made durable (kept
#: out of the rotation until the next one is) is intact: at most this long of
#: episodes is run again.
SYNC_INTERVAL_S = 1.0


@dataclass
class _Progress:
    """What one process knows about its stream's slots (StreamSnapshots is frozen)."""

    #: slot -> episodes its label says, for the slots this process wrote (None: unlabelled)
    labels: dict[int, int | None] = field(default_factory=dict)
    #: slot -> its paths, built once (see StreamSnapshots._slot)
    paths: dict[int, tuple[str, str, Path]] = field(default_factory=dict)
    #: this process's place in the shared record log, if it wrote or restored one
    tracker: LogTracker | None = None
    #: the slot holding the last durable snapshot: kept out of the rotation
    pinned: int | None = None
    synced_at: float = -math.inf
    #: the log directory as a string, built once
    log_folder: str | None = None
    #: the stream's folder and the run's memory folder as strings, built once
    folders: tuple[str, str] | None = None
    #: slot -> the directories a power cut must find its entries in, innermost first
    #: (its state, the slot, the log, the stream's, the run's memory folder), built once
    synced_path: dict[int, tuple[str, str, str, str, str]] = field(default_factory=dict)
    #: directories whose entries this process may have changed (created, removed or
    #: replaced a file or directory in them) since it last synced them, with the
    #: moment of the last change (:data:`~.keptfiles.SYNCS`): a durable save syncs
    #: these, not every directory on the slot's path (an fsync of a directory costs
    #: as much as a file's, and in the steady state no entry changes), and not one
    #: another stream's sync covered since (the run's ``memory/`` folder)
    unsynced: dict[str, int] = field(default_factory=dict)
    #: the slots' labels and manifests kept open between saves
    kept: KeptFiles = field(default_factory=KeptFiles)
    #: the directories every slot's path shares (the log's, the stream's, the
    #: run's memory folder) were noted as possibly changed since :meth:`forget`
    marked: bool = False
    #: file path -> its size as this process last wrote it (the slots' manifests:
    #: :attr:`~.snapfiles.SharedLogs.sizes`), forgotten with the slot's state
    sizes: dict[str, int] = field(default_factory=dict)
    #: slot -> the names of its state's files after this process's last save of it,
    #: for a memory whose snapshot writes only a RecordLog (no listing needed then)
    files: dict[int, frozenset[str]] = field(default_factory=dict)
    #: :meth:`StreamSnapshots.clear` found no stream folder: the first slot makes it
    #: first, not after a ``mkdir`` of the slot that fails
    absent: bool = False

    def forget(self) -> None:
        """Forget every slot: nothing this process wrote is known to be there any more."""
        if self.tracker is not None:
            self.tracker.close()
        self.tracker = None
        self.labels.clear()
        self.pinned, self.synced_at = None, -math.inf
        self.unsynced.clear()
        self.marked = False
        self.sizes.clear()
        self.files.clear()
        self.absent = False
        with contextlib.suppress(OSError):  # what they held is being removed or read anew
            self.kept.close()

    def changed(self, directories: Iterable[str]) -> None:
        """Note that entries of ``directories`` changed (a durable save syncs them)."""
        now = SYNCS.stamp()
        for directory in directories:
            self.unsynced[directory] = now


@dataclass(frozen=True)
class StreamSnapshots(SnapshotChecks):
    """The snapshots of one stream's memory, labelled by completed episodes.

    Layout, under ``<run_dir>/memory/<stream>/``: ``slot-0`` ... ``slot-7``, used in
    turn (episode *k* goes to ``slot-<k mod 8>``), and ``slot-8``, used instead of the
    slot that holds the last durable snapshot while that one is kept; each slot
    holds the memory's ``state/`` directory and a label ``episodes.json`` written
    only after the memory's own snapshot returned; ``log/`` holds the record logs
    the built-in backends' slots share (:class:`~.recordlog.RecordLog`). What is
    read back, and trusted, is :class:`~.snapcheck.SnapshotChecks`' (its base).

    A slot is handed to the memory again (to update incrementally) only if its
    label says it holds the state of SNAPSHOT_SLOTS episodes earlier; otherwise
    it is emptied first. Whichever moment the process is killed at — inside the
    memory's snapshot, between the snapshot and the result journal, or after
    both — the slot labelled with the number of episodes the journal says are
    complete is intact: the one being written has no label (or, for a memory
    that writes only a RecordLog, its old label, whose checksums no longer match:
    see :meth:`_save`), and the other one is the previous episode's. The label
    names a SHA-256 of every state file and of the log prefix the state stands
    on, and one of itself: a slot whose files changed after the label was
    written (a power cut before they reached the disk, an edit) does not verify
    and is never restored.

    The system calls a save makes are few (with many chains in one process each
    one hands the interpreter lock to another chain): the slot's label and
    manifest stay open between saves (:class:`~.keptfiles.KeptFiles`), a new slot
    is made without reading or emptying anything, and a durable save syncs only
    the directories whose entries changed and no other stream's sync covered
    (:data:`~.keptfiles.SYNCS`).

    ``config`` is the run config's fingerprint (``config_fingerprint`` in run.json),
    written into every label: only a slot written under it is this run's
    (:meth:`_own`). The shards of a run, their merge and a resumed run share it;
    another config, or another replicate (its seed), does not.
    """

    _progress: _Progress = field(default_factory=_Progress, compare=False, repr=False)

    @classmethod
    def for_stream(cls, run_dir: Path, stream: str, config: str) -> StreamSnapshots:
        """The snapshots of ``stream`` in ``run_dir`` (:meth:`directory_for`), written and
        restored under the run config fingerprint ``config``."""
        return cls(cls.directory_for(run_dir, stream), stream, config)

    @staticmethod
    def directory_for(run_dir: Path, stream: str) -> Path:
        """``<run_dir>/memory/<stream>/``; a stream name unfit for a file name is
        replaced by a safe one plus a hash, so two streams never share a directory."""
        safe = _UNSAFE_FILENAME.sub("_", stream)
        if safe != stream or not safe.strip("."):
            safe = f"{safe}-{hashlib.sha256(stream.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
        return run_dir / "memory" / safe

    def _log_folder(self) -> str:
        folder = self._progress.log_folder
        if folder is None:
            folder = self._progress.log_folder = os.fspath(self.log_directory)
        return folder

    def clear(self) -> None:
        """Remove every snapshot (a stream starting from its first task): a stale
        slot of an earlier run in the same output directory must never be restored,
        not even after a power cut, so the removal is synced."""
        self._progress.forget()
        present = True  # or cannot tell: remove what can be removed
        try:
            os.lstat(self.directory)
        except FileNotFoundError:
            present = False  # nothing to remove (a new output directory): nothing to sync either
        except OSError:
            pass
        if present:
            shutil.rmtree(self.directory, ignore_errors=True)
            try:
                sync_path(os.fspath(self.directory.parent), directory=True)
            except OSError as error:
                raise ArtefactWriteError.from_os_error(self.directory.parent, error) from None
        self._progress.absent = True  # removed, or never there
        # A stream starting from its first task has nothing earlier to protect: its first
        # durable save comes SYNC_INTERVAL_S in, as every later one (a power cut before
        # it runs that second of episodes again, from the first task). Every chain's
        # first save durable at once was a burst of fsyncs at a grid's start (eight a
        # stream: 128 for 16 chains), each chain waiting its turn in the disk's queue.
        self._progress.synced_at = time.monotonic()

    def release(self) -> None:
        """Close the record log, labels and manifests kept open between saves (the
        stream has ended; a later save opens them again). A delayed write error a
        close reports (EIO, a quota on a network file system) is an
        :class:`ArtefactWriteError` naming the file."""
        progress = self._progress
        try:
            progress.kept.close()
        except OSError as error:
            kept_error: OSError | None = error
        else:
            kept_error = None
        tracker = progress.tracker
        if tracker is not None:
            try:
                tracker.close()
            except OSError as error:
                log = os.path.join(self._log_folder(), log_name(tracker.generation))
                raise ArtefactWriteError.from_os_error(log, error) from None
        if kept_error is not None:
            raise ArtefactWriteError.from_os_error(kept_error.filename or self.directory, kept_error) from None

    def save(self, memory: object, completed: int) -> None:
        """Snapshot ``memory`` as it is after ``completed`` episodes (task + feedback).

        The label is rewritten in place: "no snapshot" before the memory touches
        the slot's state (not for a memory that writes only a RecordLog, see
        :meth:`_save`), the episode count (with the checksums) after. Any OSError
        (disk full, read-only) is an
        :class:`~pytest_evomemory.core.errors.ArtefactWriteError` naming the file.
        """
        if not supports_snapshots(memory):
            return
        index = completed % SNAPSHOT_SLOTS
        if index == self._progress.pinned:
            index = SNAPSHOT_SLOTS
        slot, label, state = self._slot(index)
        try:
            self._save(memory, completed, index, slot, label, state)
        except OSError as error:
            raise ArtefactWriteError.from_os_error(error.filename or slot, error) from None

    def _open_label(self, index: int, slot: str, label: str) -> tuple[int, bool, bool]:
        """The slot's label open for rewriting; whether this process wrote it (and
        knows what it says), and whether the slot was just made (empty: no label
        to read, no state to remove)."""
        progress = self._progress
        kept = progress.kept
        if index in progress.labels:
            if label in kept.files:
                descriptor = kept.reuse(label)
                if descriptor is not None:
                    return descriptor, True, False
                # else removed or replaced behind this process's back: read it anew
            else:
                try:
                    return kept.open(label, os.O_RDWR | os.O_CREAT), True, False
                except FileNotFoundError:
                    pass  # the slot was removed behind this process's back
            progress.sizes.pop(label, None)
        fresh = self._make_slot(slot)
        if fresh:
            try:
                return kept.open(label, os.O_RDWR | os.O_CREAT | os.O_EXCL), False, True
            except FileExistsError:  # made by someone else in between
                pass
        return kept.open(label, os.O_RDWR | os.O_CREAT), False, False

    def _make_slot(self, slot: str) -> bool:
        """Make the slot's directory (and the stream's); whether it is new."""
        if self._progress.absent:  # the stream's folder was not there at clear(): made first
            self._progress.absent = False
            made(self._folders()[0])
        return made(slot)

    def _save(self, memory: SnapshotCapable, completed: int, index: int, slot: str, label: str, state: Path) -> None:
        progress = self._progress
        path = progress.synced_path.get(index)
        if path is None:
            path = progress.synced_path[index] = (os.fspath(state), slot, self._log_folder(), *self._folders())
        state_folder, stream = path[0], path[3]
        record_log_only = writes_only_a_record_log(memory)
        # whether this process saved into the slot since it last forgot every slot: only
        # then may it hold sizes or kept descriptors of files under the slot's state
        written_before = index in progress.labels
        descriptor, known, fresh = self._open_label(index, slot, label)
        if not known:
            # a slot this process has not written yet: its entries and its own in the
            # stream's folder may be new (or another process's, never synced by this
            # one); so may the log's and the stream's folders, the first time
            progress.changed(path if not progress.marked else (path[0], path[1], path[3]))
            progress.marked = True
        saved = False
        try:
            if known:  # and its size, unless a failed save left it unknown
                episodes, size = progress.labels[index], progress.sizes.pop(label, None)
            elif fresh:
                episodes, size = None, 0
            else:
                data = read_all(descriptor)
                previous, _ = parse_label(data)
                size = len(data)
                episodes = previous.episodes if previous is not None and self._own(previous) else None
            if not record_log_only and size != 0:
                # A memory updating its state incrementally must never be handed a
                # state a killed save left half written under the old label. A
                # RecordLog rewrites its manifest whole and appends from the
                # runtime's own place in the log, and the old label's checksums no
                # longer match the new manifest: nothing can restore or build on it.
                size = overwrite(descriptor, INVALID_LABEL, size)
            progress.labels[index] = None
            # the names of the state's files before the memory writes, if this process knows them
            before = progress.files.pop(index, None) if known else None
            empty = fresh or episodes != completed - SNAPSHOT_SLOTS
            if empty:
                # A new slot, or not this run's state SNAPSHOT_SLOTS episodes ago (an
                # interrupted save, or a save a killed run made before the episode was
                # re-run): a memory updating incrementally must not build on it.
                if written_before:
                    progress.kept.drop_under(state_folder)
                    for name in [name for name in progress.sizes if name.startswith(state_folder + os.sep)]:
                        del progress.sizes[name]
                if fresh:
                    os.mkdir(state_folder)
                else:
                    shutil.rmtree(state, ignore_errors=True)
                    state.mkdir(parents=True)
                before = frozenset()
                progress.changed((state_folder, slot))
            durable = time.monotonic() - progress.synced_at >= SYNC_INTERVAL_S
            shared = SharedLogs(
                path[2], state_folder, progress.tracker, sync=durable, sizes=progress.sizes, keep_open=True,
                kept=progress.kept, empty=empty,
            )
            token = SHARED.set(shared)
            try:
                memory.snapshot(state)
            finally:
                SHARED.reset(token)
            progress.tracker = shared.tracker
            if before is not None and before <= shared.reported.keys() and record_log_only:
                # nothing but the RecordLog wrote into the state, whose files this
                # process knows: they are the ones it reported (no listing needed)
                files = dict(shared.reported)
            else:
                files = state_digests(state, shared.reported, sync=durable)
            if record_log_only and files.keys() == shared.reported.keys():
                progress.files[index] = frozenset(files)
            if shared.new_generation:
                progress.changed((shared.directory, stream))
            if shared.recreated:
                progress.changed((state_folder, slot))
            if files.keys() - shared.reported.keys():
                # files the memory wrote itself (not through a RecordLog, which
                # rewrites its manifest in place): they may be new, or renamed over
                progress.changed((state_folder,))
            text = label_bytes(self.stream, self.config, completed, type(memory).__qualname__, files, shared.logs)
            if durable:
                for directory in path:
                    changed = progress.unsynced.pop(directory, None)
                    started = None if changed is None else SYNCS.start(directory, changed)
                    if started is not None:
                        sync_path(directory, directory=True)
                        SYNCS.done(directory, started)
            progress.sizes[label] = overwrite(descriptor, text, size)
            if durable:
                datasync(descriptor)
                progress.pinned, progress.synced_at = index, time.monotonic()
            progress.labels[index] = completed
            saved = True
        finally:
            if saved:
                progress.kept.keep(label, descriptor)
            else:
                progress.kept.discard(label, descriptor)
        if shared.new_generation and shared.tracker is not None and shared.tracker.generation > 1:
            # (a first generation is numbered 1 only when the log folder held no other)
            self._remove_unused_logs()

    def _slot(self, index: int) -> tuple[str, str, Path]:
        """The slot's directory, its label (as strings for ``os``) and its state directory
        (joined as strings: most of a short stream's saves are a slot's first)."""
        paths = self._progress.paths.get(index)
        if paths is None:
            name = f"slot-{index}"
            slot = f"{self._folders()[0]}{os.sep}{name}"
            paths = self._progress.paths[index] = (
                slot, f"{slot}{os.sep}{LABEL}", self.directory.joinpath(name, "state")
            )
        return paths

    def _folders(self) -> tuple[str, str]:
        """The stream's folder and the run's memory folder, as strings, built once."""
        folders = self._progress.folders
        if folders is None:
            folders = self._progress.folders = (os.fspath(self.directory), os.fspath(self.directory.parent))
        return folders

    def _remove_unused_logs(self) -> None:
        """Delete the log generations no slot's label stands on any more (after a
        memory was emptied and its log started anew)."""
        keep: set[int] = set()
        for label, _ in self._labels():
            if label is not None:
                keep.update(label.logs)
        if self._progress.tracker is not None:
            keep.add(self._progress.tracker.generation)
        directory = os.fspath(self.log_directory)
        for generation in generations(directory):
            if generation not in keep:
                try:
                    os.unlink(os.path.join(directory, log_name(generation)))
                except FileNotFoundError:
                    pass
                self._progress.changed((directory,))

    def restore(self, memory: object, completed: int) -> None:
        """Load the state after ``completed`` episodes into a fresh ``memory``, or refuse.

        ``completed == 0`` needs nothing: a stream starts with an empty memory. The
        slot is verified first; a missing, damaged or foreign one raises
        :class:`SnapshotDamaged` and nothing is loaded. Slots labelled after
        ``completed`` belong to episodes that run again from here, and lose their label.
        """
        if completed == 0:
            return
        self.restore_saved(memory, completed)

    def restorable(self, memory: object, completed: int) -> Path:
        """The verified slot ``memory`` would restore after ``completed`` episodes, or
        :class:`ResumeRefused` (a memory without snapshot/restore) or
        :class:`SnapshotDamaged` (a slot missing, damaged, or written by another
        memory system). Nothing is loaded: a session asks this when a resumed
        stream's memory is built, to refuse before its first task."""
        name = type(memory).__qualname__
        if not supports_snapshots(memory):
            raise ResumeRefused(
                f"stream {self.stream!r}: {completed} episode(s) were completed, but memory system "
                f"{name} cannot be resumed: it does not implement snapshot(directory) and "
                "restore(directory) (docs/memory.md, 'What a memory system must offer for resume'); "
                f"add them, or run again without {named('resume')}"
            )
        slot = self.verify(completed)
        label, _ = parse_label(read_small(slot / LABEL))
        if label is not None and label.memory != name:
            problem = f"it was written by memory system {label.memory}, and this run's is {name}"
            raise SnapshotDamaged(self._damage_message(slot, completed, problem), path=os.fspath(slot), problem=problem)
        return slot

    def restore_saved(self, memory: object, completed: int) -> None:
        """Like :meth:`restore`, also for ``completed == 0``: a stream whose memory is
        not empty before its first task (a conversation ingested first) saves that
        state as 0 completed episodes."""
        slot = self.restorable(memory, completed)
        name = type(memory).__qualname__
        assert supports_snapshots(memory)
        try:
            self._forget_later_than(completed)
        except OSError as error:
            raise ArtefactWriteError.from_os_error(error.filename or self.directory, error) from None
        shared = SharedLogs(os.fspath(self.log_directory), os.fspath(slot / "state"), None)
        token = SHARED.set(shared)
        try:
            memory.restore(slot / "state")
        except EvoMemoryError:
            raise
        except Exception as error:
            raise ResumeRefused(
                f"stream {self.stream!r}: memory system {name} failed to restore its snapshot "
                f"{slot / 'state'}: {type(error).__name__}: {error}; the stream cannot continue with the "
                f"memory it had; run it again without {named('resume')}"
            ) from error
        finally:
            SHARED.reset(token)
        progress = self._progress
        progress.forget()  # every slot is unknown again: its first save marks its path
        progress.tracker = shared.tracker

    def _forget_later_than(self, completed: int) -> None:
        """Invalidate the labels of snapshots taken after ``completed`` episodes: the
        episodes after it run again, and their old snapshots must never be restored."""
        for label, slot in self._labels():
            if label is not None and self._own(label) and label.episodes > completed:
                descriptor = os.open(slot / LABEL, os.O_RDWR)
                try:
                    overwrite(descriptor, INVALID_LABEL)
                    datasync(descriptor)
                finally:
                    os.close(descriptor)


__all__ = [
    "SNAPSHOT_SLOTS",
    "SYNC_INTERVAL_S",
    "ResumeRefused",
    "SnapshotCapable",
    "SnapshotDamaged",
    "StreamSnapshots",
    "supports_snapshots",
    "write_atomically",
]
