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

Every snapshot is verified before anything is loaded from it: its label carries
a SHA-256 of each file of the state and of the shared record log prefix it
stands on, and a checksum of itself, written last. A slot cut short by a power
cut, edited by hand or copied from another stream is :class:`SnapshotDamaged`,
never loaded (:meth:`StreamSnapshots.newest_intact` finds the newest one that
verifies). The label also names the run config that wrote it (its
``config_fingerprint``): a stream's snapshots copied in from another run of another
config (another ``top_k``, another replicate's seed) verify byte for byte, but hold
a memory the run's recorded episodes never built, and are refused
(:meth:`StreamSnapshots.refuse_foreign`).

:class:`RecordLog` is the built-in backends' implementation: they append records,
empty the store or delete one (``forget``), so a snapshot is an append-only log plus
a manifest, and saving after each episode costs only the new records (after an
emptying or a delete, which the record count gives away, a new generation of the
log is written). Under :class:`StreamSnapshots` all slots of a stream share one
log (each manifest names the prefix that is its state), so the rotating slots take
about one store on disk, not one each.
"""

from __future__ import annotations

import contextvars
import errno
import hashlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import Any, Protocol, TypeGuard, runtime_checkable

from .. import boundedread
from ..atomicfile import write_atomically  # re-exported: adapters' snapshot() uses it (docs/memory.md)
from ..errors import ArtefactWriteError, EvoMemoryError, MemoryBackendError, named

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


@runtime_checkable
class SnapshotCapable(Protocol):
    """Optional MemorySystem capability: save and load the whole memory state.

    ``snapshot(directory)`` makes ``directory`` hold this memory's current state;
    the same directory is passed again later, so an implementation may update it
    incrementally, but it must stay loadable if the process is killed at any
    instant (write new files, then atomically replace a manifest). ``restore``
    is called once, on a freshly opened memory of the same stream and config,
    before the agent touches it, and must leave it exactly as it was when the
    snapshot was taken: same records, same ids, same next recalls.
    """

    def snapshot(self, directory: Path) -> None: ...

    def restore(self, directory: Path) -> None: ...


class ResumeRefused(MemoryBackendError):
    """A partly run stream cannot be resumed with the memory it had."""


class SnapshotDamaged(ResumeRefused):
    """A snapshot is missing, damaged or not this stream's: nothing was loaded from it.

    ``path`` is the slot (or snapshot directory), ``problem`` what is wrong with it.
    """

    def __init__(self, message: str = "", *, path: str | None = None, problem: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.problem = problem


#: Classes already known to implement :class:`SnapshotCapable`: a runtime protocol
#: check walks the class's attributes each time (tens of microseconds), and the
#: runtime asks once per episode. Only classes that offer both methods themselves
#: are remembered, for which the protocol check is a check of the class alone.
_CAPABLE_TYPES: set[type] = set()


def supports_snapshots(memory: object) -> TypeGuard[SnapshotCapable]:
    """Whether ``memory`` (a MemorySystem) implements :class:`SnapshotCapable`."""
    kind = type(memory)
    if kind in _CAPABLE_TYPES:
        return True
    if not isinstance(memory, SnapshotCapable):
        return False
    if all(callable(getattr(kind, name, None)) for name in ("snapshot", "restore")):
        _CAPABLE_TYPES.add(kind)
    return True


# --------------------------------------------------------------------------- file helpers


def _overwrite(descriptor: int, data: bytes, size: int | None = None) -> int:
    """Write ``data`` at the start of an open file, padded with spaces over a longer
    old content (JSON ignores them), in one ``pwrite``: truncating or re-creating a
    file costs far more than a small write on some file systems, and one small
    ``pwrite`` is never half done when a process is killed. ``size`` is the file's
    current size when the caller knows it; the new size is returned."""
    if size is None:
        size = os.fstat(descriptor).st_size
    _pwrite_all(descriptor, _padded(data, size), 0)
    return max(size, len(data))


def _padded(data: bytes, size: int) -> bytes:
    """What :func:`_overwrite` leaves in a file of ``size`` bytes."""
    return data + b" " * max(0, size - len(data))


def _pwrite_all(descriptor: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        view, offset = view[written:], offset + written


#: A label or manifest is far smaller: one read gets it whole.
_SMALL_READ = 1 << 16

#: Bytes read at a time when hashing or loading a log.
_READ_CHUNK = 1 << 20


def _read_all(descriptor: int) -> bytes:
    """The whole content of an open regular file (read from offset 0): a read that
    returns less than it asked for has reached the end of the file."""
    chunks, offset, wanted = [], 0, _SMALL_READ
    while True:
        chunk = os.pread(descriptor, wanted, offset)
        chunks.append(chunk)
        offset += len(chunk)
        if len(chunk) < wanted:
            return b"".join(chunks)
        wanted = max(_SMALL_READ, os.fstat(descriptor).st_size - offset + 1)


_datasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


def _sync_path(path: str, *, directory: bool = False) -> None:
    """Flush a file's data (or a directory's entries) to the disk.

    A file system that cannot sync a directory (some network and FUSE ones say
    EINVAL) is let be: there is nothing more this process can do about it.
    """
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        return
    try:
        (os.fsync if directory else _datasync)(descriptor)
    except OSError as error:
        if not directory or error.errno not in (22, 95):  # EINVAL, EOPNOTSUPP
            raise
    finally:
        os.close(descriptor)


def _read_small(path: Path | str) -> bytes:
    """A label or manifest through the bounded reader: a device or FIFO put in its
    place is an ``OSError`` (the slot reads as damaged), never a read without end."""

    def refused(message: str) -> OSError:
        return OSError(errno.EINVAL, message)

    return boundedread.read_bytes(Path(path), limit=boundedread.CACHE_BYTES, what="a snapshot label", error=refused)


def _open_log(path: Path | str) -> BufferedReader:
    """A snapshot's file opened to be read whole: a FIFO or device in its place is an
    ``OSError`` (the snapshot reads as damaged), never an open that waits for ever."""

    def refused(message: str) -> OSError:
        return OSError(errno.EINVAL, message)

    return boundedread.open_regular(Path(path), what="a snapshot file", error=refused)


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with _open_log(path) as handle:
        while chunk := handle.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _prefix_digests(path: str, offsets: Iterable[int]) -> dict[int, str | None]:
    """SHA-256 of the first ``n`` bytes of a file for each ``n`` in ``offsets``, in
    one pass (``None`` where the file is shorter)."""
    wanted = sorted(set(offsets))
    found: dict[int, str | None] = dict.fromkeys(wanted)
    digest = hashlib.sha256()
    position = 0
    with _open_log(path) as handle:
        for offset in wanted:
            while position < offset:
                chunk = handle.read(min(_READ_CHUNK, offset - position))
                if not chunk:
                    return found
                digest.update(chunk)
                position += len(chunk)
            found[offset] = digest.hexdigest()
    return found


# --------------------------------------------------------------------------- shared record logs


#: ``records-<generation>.jsonl``: the only names a log has; a manifest or label
#: gives the generation as a number, never a path.
_LOG_NAME = re.compile(r"^records-([1-9][0-9]{0,17})\.jsonl$")


def _log_name(generation: int) -> str:
    return f"records-{generation}.jsonl"


def _generations(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(match.group(1)) for name in names if (match := _LOG_NAME.match(name)))


@dataclass
class _LogTracker:
    """Where this process stands in a record log: its valid prefix and that
    prefix's running SHA-256, so a save hashes only the bytes it appends."""

    generation: int
    size: int
    count: int
    last_id: int
    digest: Any = field(default_factory=hashlib.sha256)


@dataclass
class _SharedLogs:
    """What :class:`StreamSnapshots` lends a :class:`RecordLog` during one save or
    restore: the stream's log directory and what the log says back."""

    directory: str
    #: the state directory the memory is given (reported names are relative to it)
    state: str
    tracker: _LogTracker | None
    #: make what is written durable (fdatasync) before returning
    sync: bool = False
    #: generation -> (bytes, sha256) of the log prefixes the snapshot stands on
    logs: dict[int, tuple[int, str]] = field(default_factory=dict)
    #: state file (relative name) -> sha256 of what the memory wrote into it
    reported: dict[str, str] = field(default_factory=dict)
    #: a new log generation was started (older ones may be unreferenced now)
    new_generation: bool = False
    #: RecordLog saves or loads made with it: one per snapshot (they share the tracker)
    uses: int = 0


_SHARED: contextvars.ContextVar[_SharedLogs | None] = contextvars.ContextVar("evomemory_shared_logs", default=None)


# --------------------------------------------------------------------------- runtime side


#: Snapshots kept per stream, one slot each, used in turn. More than two, because
#: under xdist the results journal (written by the controller from the workers' reports)
#: can be a few episodes behind the snapshots a worker already saved when a whole run is
#: killed; resume needs the snapshot that matches the journal. One more slot
#: (``slot-<SNAPSHOT_SLOTS>``) stands in for the one holding the last durable snapshot.
SNAPSHOT_SLOTS = 8

#: A save is made durable (its files, log and label fsynced) at most this often, and
#: always the first save of a process. An fsync costs a few milliseconds on a
#: typical disk, as much as the rest of an episode; a kill -9 loses nothing the
#: kernel holds, and after a power cut the slot last made durable (kept out of the
#: rotation until the next one is) is intact: at most this long of episodes is run again.
SYNC_INTERVAL_S = 1.0

_LABEL = "episodes.json"
#: 3: the label names the run config that wrote it (``config``). A label of
#: another format is not read (it is passed over, as a damaged one is).
_LABEL_FORMAT = 3
_INVALID_LABEL = b"{}"


@dataclass(frozen=True)
class _Label:
    stream: str
    #: the config fingerprint of the run that wrote it
    config: str
    episodes: int
    memory: str
    #: state file (relative, "/"-separated) -> sha256
    files: dict[str, str]
    #: log generation -> (bytes, sha256)
    logs: dict[int, tuple[int, str]]


#: The label's body, serialized one way only (its checksum is over these bytes).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _label_bytes(stream: str, config: str, episodes: int, memory: str, files: Mapping[str, str],
                 logs: Mapping[int, tuple[int, str]]) -> bytes:
    """The label: its canonical body, then ``"sha256"`` of that body, written last."""
    body = _CANONICAL.encode({
        "format": _LABEL_FORMAT, "stream": stream, "config": config, "episodes": episodes, "memory": memory,
        "files": files,
        "logs": {str(generation): [size, digest] for generation, (size, digest) in logs.items()},
    }).encode("ascii")
    return body[:-1] + b',"sha256":"' + hashlib.sha256(body).hexdigest().encode("ascii") + b'"}'


def _label_digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(_CANONICAL.encode(body).encode("ascii")).hexdigest()


_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _parse_label(data: bytes) -> tuple[_Label | None, str]:
    """A slot's label, or None and what is wrong with it."""
    if not data.strip():
        return None, f"its label {_LABEL} is empty (its save never finished)"
    try:
        value = boundedread.loads(data, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except ValueError:
        return None, f"its label {_LABEL} is cut short or not JSON (a save cut off, e.g. by a power cut)"
    if not isinstance(value, dict):
        return None, f"its label {_LABEL} is not a JSON object"
    if not value:
        return None, f"it holds no finished snapshot (its label {_LABEL} was invalidated: a save was interrupted)"
    if value.get("format") != _LABEL_FORMAT:
        return None, (
            f"its label {_LABEL} is in another format ({value.get('format', 1)!r}, this version writes "
            f"{_LABEL_FORMAT}): it was written by another version of pytest-evomemory"
        )
    body = {key: item for key, item in value.items() if key != "sha256"}
    if value.get("sha256") != _label_digest(body):
        return None, f"its label {_LABEL} does not match its checksum (it was changed after it was written)"
    try:
        files = {str(name): str(digest) for name, digest in value["files"].items()}
        logs = {int(generation): (int(pair[0]), str(pair[1])) for generation, pair in value["logs"].items()}
        label = _Label(
            str(value["stream"]), str(value["config"]), int(value["episodes"]), str(value["memory"]), files, logs
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None, f"its label {_LABEL} lacks a field this version needs"
    return label, ""


@dataclass
class _Progress:
    """What one process knows about its stream's slots (StreamSnapshots is frozen)."""

    #: slot -> episodes its label says, for the slots this process wrote (None: unlabelled)
    labels: dict[int, int | None] = field(default_factory=dict)
    #: slot -> its paths, built once (see StreamSnapshots._slot)
    paths: dict[int, tuple[str, str, Path]] = field(default_factory=dict)
    #: this process's place in the shared record log, if it wrote or restored one
    tracker: _LogTracker | None = None
    #: the slot holding the last durable snapshot: kept out of the rotation
    pinned: int | None = None
    synced_at: float = -math.inf
    #: the log directory as a string, built once
    log_folder: str | None = None


@dataclass(frozen=True)
class StreamSnapshots:
    """The snapshots of one stream's memory, labelled by completed episodes.

    Layout, under ``<run_dir>/memory/<stream>/``: ``slot-0`` ... ``slot-7``, used in
    turn (episode *k* goes to ``slot-<k mod 8>``), and ``slot-8``, used instead of the
    slot that holds the last durable snapshot while that one is kept; each slot
    holds the memory's ``state/`` directory and a label ``episodes.json`` written
    only after the memory's own snapshot returned; ``log/`` holds the record logs
    the built-in backends' slots share (:class:`RecordLog`).

    A slot is handed to the memory again (to update incrementally) only if its
    label says it holds the state of SNAPSHOT_SLOTS episodes earlier; otherwise
    it is emptied first. Whichever moment the process is killed at — inside the
    memory's snapshot, between the snapshot and the result journal, or after
    both — the slot labelled with the number of episodes the journal says are
    complete is intact: the one being written has no label, and the other one is
    the previous episode's. The label names a SHA-256 of every state file and of
    the log prefix the state stands on, and one of itself: a slot whose files
    changed after the label was written (a power cut before they reached the
    disk, an edit) does not verify and is never restored.

    ``config`` is the run config's fingerprint (``config_fingerprint`` in run.json),
    written into every label: only a slot written under it is this run's
    (:meth:`_own`). The shards of a run, their merge and a resumed run share it;
    another config, or another replicate (its seed), does not.
    """

    directory: Path
    stream: str
    config: str
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

    def _own(self, label: _Label) -> bool:
        """Whether a slot's label says this stream of this run config wrote it: the
        one test every reader and the saver apply (a slot of another stream or of
        another run's config is never restored, nor built on)."""
        return label.stream == self.stream and label.config == self.config

    @property
    def log_directory(self) -> Path:
        return self.directory / "log"

    def _log_folder(self) -> str:
        folder = self._progress.log_folder
        if folder is None:
            folder = self._progress.log_folder = os.fspath(self.log_directory)
        return folder

    def clear(self) -> None:
        """Remove every snapshot (a stream starting from its first task): a stale
        slot of an earlier run in the same output directory must never be restored,
        not even after a power cut, so the removal is synced."""
        shutil.rmtree(self.directory, ignore_errors=True)
        try:
            _sync_path(os.fspath(self.directory.parent), directory=True)
        except OSError as error:
            raise ArtefactWriteError.from_os_error(self.directory.parent, error) from None
        self._progress.labels.clear()
        self._progress.tracker = None
        self._progress.pinned = None
        self._progress.synced_at = -math.inf

    # ------------------------------------------------------------------ save

    def save(self, memory: object, completed: int) -> None:
        """Snapshot ``memory`` as it is after ``completed`` episodes (task + feedback).

        The label is opened once and rewritten in place twice: "no snapshot"
        before the memory touches the slot's state, the episode count (with the
        checksums) after. Any OSError (disk full, read-only) is an
        :class:`~pytest_evomemory.errors.ArtefactWriteError` naming the file.
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

    def _save(self, memory: SnapshotCapable, completed: int, index: int, slot: str, label: str, state: Path) -> None:
        progress = self._progress
        known = index in progress.labels  # this process wrote the slot's label: no need to read it
        if not known:
            os.makedirs(slot, exist_ok=True)
        try:
            descriptor = os.open(label, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the slot was removed behind this process's back
            os.makedirs(slot, exist_ok=True)
            descriptor, known = os.open(label, os.O_RDWR | os.O_CREAT, 0o644), False
        try:
            if known:
                episodes, size = progress.labels[index], None
            else:
                data = _read_all(descriptor)
                previous, _ = _parse_label(data)
                size = len(data)
                episodes = previous.episodes if previous is not None and self._own(previous) else None
            size = _overwrite(descriptor, _INVALID_LABEL, size)
            progress.labels[index] = None
            if episodes != completed - SNAPSHOT_SLOTS:
                # Not this run's state SNAPSHOT_SLOTS episodes ago (an interrupted save, or
                # a save a killed run made before the episode was re-run): a memory
                # updating incrementally must not build on it.
                shutil.rmtree(state, ignore_errors=True)
                state.mkdir(parents=True)
            durable = time.monotonic() - progress.synced_at >= SYNC_INTERVAL_S
            shared = _SharedLogs(self._log_folder(), os.fspath(state), progress.tracker, sync=durable)
            token = _SHARED.set(shared)
            try:
                memory.snapshot(state)
            finally:
                _SHARED.reset(token)
            progress.tracker = shared.tracker
            files = _state_digests(state, shared.reported, sync=durable)
            text = _label_bytes(self.stream, self.config, completed, type(memory).__qualname__, files, shared.logs)
            if durable:
                for directory in (os.fspath(state), slot, shared.directory, os.fspath(self.directory)):
                    _sync_path(directory, directory=True)
                _sync_path(os.fspath(self.directory.parent), directory=True)
            _overwrite(descriptor, text, size)
            if durable:
                _datasync(descriptor)
                progress.pinned, progress.synced_at = index, time.monotonic()
            progress.labels[index] = completed
        finally:
            os.close(descriptor)
        if shared.new_generation:
            self._remove_unused_logs()

    def _slot(self, index: int) -> tuple[str, str, Path]:
        """The slot's directory, its label (as strings for ``os``) and its state directory."""
        paths = self._progress.paths.get(index)
        if paths is None:
            slot = self.directory / f"slot-{index}"
            paths = self._progress.paths[index] = (os.fspath(slot), os.fspath(slot / _LABEL), slot / "state")
        return paths

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
        for generation in _generations(directory):
            if generation not in keep:
                try:
                    os.unlink(os.path.join(directory, _log_name(generation)))
                except FileNotFoundError:
                    pass

    # ------------------------------------------------------------------ read side

    def _slot_directories(self) -> list[tuple[int, Path]]:
        found = []
        try:
            entries = os.listdir(self.directory)
        except OSError:
            return []
        for name in entries:
            number = name.removeprefix("slot-")
            if name.startswith("slot-") and number.isdigit() and int(number) <= SNAPSHOT_SLOTS:
                found.append((int(number), self.directory / name))
        return sorted(found)

    def _labels(self) -> list[tuple[_Label | None, Path]]:
        """Every slot's parsed label (None when missing or invalid) and its directory."""
        labels: list[tuple[_Label | None, Path]] = []
        for _, slot in self._slot_directories():
            try:
                data = _read_small(slot / _LABEL)
            except OSError:
                labels.append((None, slot))
                continue
            labels.append((_parse_label(data)[0], slot))
        return labels

    def completed_prefixes(self) -> list[int]:
        """Episode counts that a labelled snapshot of this stream exists for (labels
        only; :meth:`newest_intact` verifies the files too)."""
        return sorted(label.episodes for label, _ in self._labels() if label is not None and self._own(label))

    def newest_intact(self, at_most: int) -> int:
        """The largest episode count <= ``at_most`` whose snapshot verifies (label,
        state files and the log prefix it stands on), or 0 if none does."""
        candidates = sorted(
            ((label, slot) for label, slot in self._labels()
             if label is not None and self._own(label) and 0 < label.episodes <= at_most),
            key=lambda item: -item[0].episodes,
        )
        digests = self._log_digests(label for label, _ in candidates)
        for label, slot in candidates:
            if not self._problem(label, slot, digests):
                return label.episodes
        return 0

    def verify(self, completed: int) -> Path:
        """The slot holding the verified snapshot after ``completed`` episodes, or
        :class:`SnapshotDamaged` saying which slot and what is wrong."""
        slot, problem = self._find(completed)
        if problem:
            raise SnapshotDamaged(self._damage_message(slot, completed, problem), path=os.fspath(slot), problem=problem)
        return slot

    def intact(self, completed: int) -> bool:
        """Whether the snapshot after ``completed`` episodes exists and verifies."""
        return not self._find(completed)[1]

    def distrusted(self, completed: int) -> str:
        """Why the snapshot after ``completed`` episodes cannot be restored ("<slot>:
        <problem>"), or "" when it verifies."""
        slot, problem = self._find(completed)
        return f"{slot.name}: {problem}" if problem else ""

    def refuse_foreign(self) -> None:
        """Refuse (:class:`SnapshotDamaged`, one line) a resume whose stream would
        restore from this directory while it holds a slot of this stream written
        under another run config: copied in from another run (another config, another
        replicate's seed), it verifies but is not the memory the recorded episodes
        built, and which of the slots are this run's nobody can tell any more."""
        for label, slot in self._labels():
            if label is not None and label.stream == self.stream and not self._own(label):
                problem = self._foreign_problem(label)
                raise SnapshotDamaged(
                    f"{named('resume')}: stream {self.stream!r}: the memory snapshots in {self.directory} were written by "
                    f"another run's config, not by this run ({slot.name}/{_LABEL} names config {label.config[:12]}, "
                    f"this run's is {self.config[:12]}); nothing was restored, since "
                    "the rest of the stream would continue from a memory its recorded episodes never built; put "
                    f"back this run's own {self.directory.parent.name}/{self.directory.name}/ directory, or run "
                    f"again without {named('resume')}",
                    path=os.fspath(slot), problem=problem,
                )

    def _foreign_problem(self, label: _Label) -> str:
        return f"it was written by another run's config (config {label.config[:12]}, this run's {self.config[:12]})"

    def _find(self, completed: int) -> tuple[Path, str]:
        """The slot labelled ``completed`` that verifies and "", or the slot that
        should hold it and what is wrong with it."""
        found: list[tuple[_Label, Path]] = []
        others: dict[Path, str] = {}
        for _, slot in self._slot_directories():
            path = slot / _LABEL
            try:
                data = _read_small(path)
            except FileNotFoundError:
                others[slot] = f"its label {_LABEL} is missing"
                continue
            except OSError as error:
                others[slot] = f"its label {_LABEL} cannot be read ({error.strerror or error})"
                continue
            label, problem = _parse_label(data)
            if label is None:
                others[slot] = problem
            elif label.stream != self.stream:
                others[slot] = f"it belongs to stream {label.stream!r}, not {self.stream!r}"
            elif not self._own(label):
                others[slot] = self._foreign_problem(label)
            elif label.episodes == completed:
                found.append((label, slot))
        problems = []
        for label, slot in found:
            problem = self._problem(label, slot, self._log_digests([label]))
            if not problem:
                return slot, ""
            problems.append((slot, problem))
        if not problems:
            # No label says `completed`: the slot that should hold it tells why.
            expected = [self.directory / f"slot-{completed % SNAPSHOT_SLOTS}", self.directory / f"slot-{SNAPSHOT_SLOTS}"]
            for slot in expected:
                if slot in others:
                    problems.append((slot, others[slot]))
            if not problems:
                problems.append((expected[0], "it does not exist" if not expected[0].exists() else
                                 "it holds another episode's snapshot"))
        return problems[0]

    def _damage_message(self, slot: Path, completed: int, problem: str) -> str:
        intact = self.newest_intact(completed - 1) if completed > 1 else 0
        available = ", ".join(map(str, self.completed_prefixes())) or "none"
        fallback = (
            f"the newest intact snapshot is after episode {intact} (the episodes after it would have to run again)"
            if intact else "no earlier snapshot of this stream is intact"
        )
        return (
            f"stream {self.stream!r}: {completed} episode(s) were completed, but {self.directory} holds no "
            f"memory snapshot taken after episode {completed} that is intact (snapshots for: {available}): "
            f"{slot.name}: {problem}; nothing was loaded from it, since the remaining tasks would see another "
            f"memory than the one their scores came from; {fallback}; run the stream again without "
            f"{named('resume')}"
        )

    def _log_digests(self, labels: Iterable[_Label]) -> dict[tuple[int, int], str | None]:
        """sha256 of every log prefix the labels stand on, one pass per log."""
        wanted: dict[int, set[int]] = {}
        for label in labels:
            for generation, (size, _) in label.logs.items():
                wanted.setdefault(generation, set()).add(size)
        digests: dict[tuple[int, int], str | None] = {}
        for generation, sizes in wanted.items():
            path = os.path.join(os.fspath(self.log_directory), _log_name(generation))
            try:
                found = _prefix_digests(path, sizes)
            except OSError:
                found = dict.fromkeys(sizes)
            digests.update({(generation, size): digest for size, digest in found.items()})
        return digests

    def _problem(self, label: _Label, slot: Path, log_digests: Mapping[tuple[int, int], str | None]) -> str:
        """What is wrong with a labelled slot, or "" when every byte it names verifies."""
        state = slot / "state"
        try:
            present = _state_files(state)
        except OSError as error:
            return f"its state directory cannot be read ({error.strerror or error})"
        for name in sorted(set(label.files) - set(present)):
            return f"state/{name} is missing"
        for name in sorted(set(present) - set(label.files)):
            return f"state/{name} is not part of the snapshot its label describes"
        for name, path in sorted(present.items()):
            try:
                digest = _sha256_file(path)
            except OSError as error:
                return f"state/{name} cannot be read ({error.strerror or error})"
            if digest != label.files[name]:
                return f"state/{name} does not match its checksum (changed or cut short after it was written)"
        for generation, (size, expected) in sorted(label.logs.items()):
            name = f"log/{_log_name(generation)}"
            path = os.path.join(os.fspath(self.log_directory), _log_name(generation))
            if not os.path.exists(path):
                return f"{name} is missing"
            prefix = log_digests.get((generation, size))
            if prefix is None:
                return f"{name} is shorter than the {size} bytes the snapshot stands on (cut short)"
            if prefix != expected:
                return f"{name} does not match its checksum (changed or cut short after it was written)"
        return ""

    # ------------------------------------------------------------------ restore

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
        label, _ = _parse_label(_read_small(slot / _LABEL))
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
        shared = _SharedLogs(os.fspath(self.log_directory), os.fspath(slot / "state"), None)
        token = _SHARED.set(shared)
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
            _SHARED.reset(token)
        progress = self._progress
        progress.tracker = shared.tracker
        progress.labels.clear()
        progress.pinned, progress.synced_at = None, -math.inf

    def _forget_later_than(self, completed: int) -> None:
        """Invalidate the labels of snapshots taken after ``completed`` episodes: the
        episodes after it run again, and their old snapshots must never be restored."""
        for label, slot in self._labels():
            if label is not None and self._own(label) and label.episodes > completed:
                descriptor = os.open(slot / _LABEL, os.O_RDWR)
                try:
                    _overwrite(descriptor, _INVALID_LABEL)
                    _datasync(descriptor)
                finally:
                    os.close(descriptor)


def _state_files(state: Path | str) -> dict[str, str]:
    """Relative ("/"-separated) name -> path of every file under a state directory
    (symbolic links are not followed: a snapshot is what is inside it)."""
    found: dict[str, str] = {}
    pending = [(os.fspath(state), "")]
    while pending:
        folder, prefix = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                else:
                    found[prefix + entry.name] = entry.path
    return found


def _state_digests(state: Path, reported: Mapping[str, str], *, sync: bool) -> dict[str, str]:
    """sha256 of every file of a snapshot's state: what the memory's RecordLog
    reported it wrote, else read back (and synced, for a durable save)."""
    digests = {}
    for name, path in _state_files(state).items():
        known = reported.get(name)
        if known is None:
            known = _sha256_file(path)
            if sync:
                _sync_path(path)
        digests[name] = known
    return digests


# --------------------------------------------------------------------------- backend side

#: One stored record as the built-in backends snapshot it.
LoggedRecord = dict[str, Any]

#: ``json.dumps(record, ensure_ascii=True, separators=(",", ":"), default=str)``,
#: built once: ``json.dumps`` with options builds a new encoder on every call.
_LOG_LINE = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str)

#: The manifest's encoder, built once.
_MANIFEST = json.JSONEncoder()

#: Log bytes gathered before one write (a first save of a large store).
_WRITE_CHUNK = 1 << 20

#: Standalone logs (a RecordLog used outside StreamSnapshots): log path -> tracker,
#: so a save hashes only what it appends.
_STANDALONE: dict[str, _LogTracker] = {}


class RecordLog:
    """An incremental snapshot of an append-only record store.

    A log ``records-<generation>.jsonl`` holds one JSON object per record (``id``
    an increasing integer, ``content``, ``metadata``, optionally ``embedding``),
    written ASCII-escaped so that NUL bytes and lone surrogates survive;
    ``manifest.json`` in the snapshot directory says which generation, how many
    of its bytes and records are the snapshot, and their SHA-256. A save appends
    only the records after the last id logged — unless the store was emptied or a
    record deleted since (the record count gives it away: the store holds fewer
    records than the log plus the new ones): then a new generation is written.

    Used by :class:`StreamSnapshots`, the log lives in the stream's ``log/``
    directory and is shared by every slot (each manifest names its prefix);
    used on its own, it lives in the snapshot directory itself.
    """

    FORMAT = 2

    def __init__(self, directory: Path, kind: str) -> None:
        # A backend builds one per save: plain strings, not pathlib joins.
        self.directory = directory
        self.kind = kind
        folder = os.fspath(directory)
        self._manifest_path = os.path.join(folder, "manifest.json")
        self._shared = _SHARED.get()
        self._log_directory = self._shared.directory if self._shared is not None else folder
        if self._shared is not None:
            self._shared.uses += 1
            if self._shared.uses > 1:
                raise MemoryBackendError(
                    "a memory snapshot may use one RecordLog: two in one snapshot would share one record log"
                )

    @property
    def _manifest(self) -> Path:
        return Path(self._manifest_path)

    def _log_path(self, generation: int) -> str:
        return os.path.join(self._log_directory, _log_name(generation))

    def manifest(self) -> dict[str, Any] | None:
        try:
            data = _read_small(self._manifest)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise self._damaged(f"manifest.json is unreadable: {error.strerror or error}") from None
        return self._parse_manifest(data)

    def _damaged(self, problem: str) -> SnapshotDamaged:
        return SnapshotDamaged(
            f"memory snapshot {self.directory}: {problem}; it cannot be restored",
            path=os.fspath(self.directory), problem=problem,
        )

    def _parse_manifest(self, data: bytes) -> dict[str, Any]:
        try:
            value = boundedread.loads(data, depth=boundedread.MAX_ARTEFACT_DEPTH)
        except ValueError as error:
            raise self._damaged(f"{self._manifest.name} is unreadable: {boundedread.json_problem(error)}") from None
        if not isinstance(value, dict) or value.get("kind") != self.kind:
            raise self._damaged(
                f"{self._manifest.name} was not written by a {self.kind} memory; it cannot be restored into one"
            )
        if value.get("format") != self.FORMAT:
            raise self._damaged(
                f"{self._manifest.name} is in snapshot format {value.get('format')!r}, this version reads "
                f"{self.FORMAT}: it was written by another version of pytest-evomemory"
            )
        log = value.get("log")
        fields_ok = (
            isinstance(log, dict)
            and isinstance(log.get("generation"), int) and log["generation"] >= 1
            and isinstance(log.get("bytes"), int) and log["bytes"] >= 0
            and isinstance(log.get("sha256"), str) and _HEX64.match(log["sha256"])
            and isinstance(value.get("count"), int) and isinstance(value.get("last_id"), int)
            and isinstance(value.get("state"), dict)
        )
        if not fields_ok:
            raise self._damaged(f"{self._manifest.name} lacks a field this version needs")
        return value

    # ------------------------------------------------------------------ save

    def save(
        self,
        count: int,
        records_after: Callable[[int], Iterable[LoggedRecord]],
        state: Mapping[str, Any],
    ) -> None:
        """Bring the snapshot up to date with a store of ``count`` records.

        ``records_after(last_id)`` yields, in id order, the records whose id is
        greater than ``last_id``; ``state`` is whatever else the backend needs
        (for instance the next id it will hand out). An OSError (disk full) is an
        :class:`~pytest_evomemory.errors.ArtefactWriteError` naming the file.
        """
        path = self._manifest_path
        try:
            tracker = self._tracker()
            appended = (
                tracker is not None and tracker.count <= count and self._append(tracker, count, records_after) == count
            )
            if tracker is None or not appended:
                # nothing logged yet, or the store was emptied since: a new generation
                os.makedirs(self._log_directory, exist_ok=True)
                generation = max(_generations(self._log_directory), default=0) + 1
                tracker = _LogTracker(generation, 0, 0, 0)
                path = self._log_path(generation)
                logged = self._append(tracker, count, records_after)
                if logged != count:
                    raise MemoryBackendError(
                        f"{self.kind} memory snapshot: the store reports {count} records but yielded {logged}"
                    )
                if self._shared is not None:
                    self._shared.new_generation = True
            path = self._manifest_path
            self._write_manifest(tracker, state)
            if self._shared is not None:
                self._shared.tracker = tracker
            else:
                _STANDALONE[self._log_path(tracker.generation)] = tracker
                for old in _generations(self._log_directory):
                    if old != tracker.generation:
                        os.unlink(self._log_path(old))
        except OSError as error:
            raise ArtefactWriteError.from_os_error(error.filename or path, error) from None

    def _tracker(self) -> _LogTracker | None:
        """Where the log stands: the runtime's record of it, or (on its own) the manifest's."""
        if self._shared is not None:
            return self._shared.tracker
        manifest = self.manifest()
        if manifest is None:
            return None
        log = manifest["log"]
        path = self._log_path(log["generation"])
        known = _STANDALONE.get(path)
        if known is not None and known.size == log["bytes"] and known.count == manifest["count"]:
            return known
        tracker = _LogTracker(log["generation"], log["bytes"], manifest["count"], manifest["last_id"])
        try:
            with _open_log(path) as handle:
                remaining = log["bytes"]
                while remaining > 0 and (chunk := handle.read(min(_READ_CHUNK, remaining))):
                    tracker.digest.update(chunk)
                    remaining -= len(chunk)
        except FileNotFoundError:
            return None
        if remaining or tracker.digest.hexdigest() != log["sha256"]:
            return None  # the log is not what the manifest says: write a new one
        return tracker

    def _append(
        self, tracker: _LogTracker, count: int, records_after: Callable[[int], Iterable[LoggedRecord]]
    ) -> int:
        """Append the records after the tracker's last id; the number of records the
        log then holds, and the tracker moved on only if that is ``count``."""
        path = self._log_path(tracker.generation)
        log = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if os.fstat(log).st_size != tracker.size:
                # a tail a killed save left behind, or snapshots of episodes that
                # run again after a resume: never part of a snapshot from here on
                os.ftruncate(log, tracker.size)
            digest = tracker.digest.copy()
            size, logged, last_id = tracker.size, tracker.count, tracker.last_id
            lines: list[bytes] = []
            pending = 0
            for record in records_after(tracker.last_id):
                line = (_LOG_LINE.encode(record) + "\n").encode("ascii")
                lines.append(line)
                pending += len(line)
                logged += 1
                last_id = int(record["id"])
                if pending >= _WRITE_CHUNK:
                    chunk = b"".join(lines)
                    _pwrite_all(log, chunk, size)
                    digest.update(chunk)
                    size, lines, pending = size + pending, [], 0
            if lines:
                chunk = b"".join(lines)
                _pwrite_all(log, chunk, size)
                digest.update(chunk)
                size += pending
            if logged != count:
                return logged
            if self._shared is not None and self._shared.sync:
                _datasync(log)
        finally:
            os.close(log)
        tracker.size, tracker.count, tracker.last_id, tracker.digest = size, logged, last_id, digest
        return logged

    def _write_manifest(self, tracker: _LogTracker, state: Mapping[str, Any]) -> None:
        text = _MANIFEST.encode({
            "format": self.FORMAT, "kind": self.kind, "count": tracker.count, "last_id": tracker.last_id,
            "log": {"generation": tracker.generation, "bytes": tracker.size, "sha256": tracker.digest.hexdigest()},
            "state": dict(state),
        }).encode("utf-8")
        try:
            manifest = os.open(self._manifest_path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            os.makedirs(self.directory, exist_ok=True)
            manifest = os.open(self._manifest_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            old_size = os.fstat(manifest).st_size
            size = _overwrite(manifest, text, old_size)
            if self._shared is not None:
                if self._shared.sync:
                    _datasync(manifest)
                folder = self._shared.state + os.sep
                if self._manifest_path.startswith(folder):
                    name = self._manifest_path[len(folder):].replace(os.sep, "/")
                    self._shared.reported[name] = hashlib.sha256(_padded(text, size)).hexdigest()
                self._shared.logs[tracker.generation] = (tracker.size, tracker.digest.hexdigest())
        finally:
            os.close(manifest)

    # ------------------------------------------------------------------ load

    def load(self) -> tuple[list[LoggedRecord], dict[str, Any]]:
        """The records and backend state of the last completed save, verified
        against the manifest's checksum (:class:`SnapshotDamaged` if they differ)."""
        manifest = self.manifest()
        if manifest is None:
            raise self._damaged("manifest.json is missing")
        log = manifest["log"]
        generation, size = log["generation"], log["bytes"]
        name = _log_name(generation)
        try:
            with _open_log(self._log_path(generation)) as handle:
                data = handle.read(size)
        except FileNotFoundError:
            raise self._damaged(f"its record log {name} is missing") from None
        except OSError as error:
            raise self._damaged(f"its record log {name} cannot be read ({error.strerror or error})") from None
        if len(data) != size:
            raise self._damaged(f"its record log {name} holds {len(data)} bytes, the manifest {size} (cut short)")
        digest = hashlib.sha256(data)
        if digest.hexdigest() != log["sha256"]:
            raise self._damaged(f"its record log {name} does not match its checksum (changed after it was written)")
        try:
            records = [
                boundedread.loads(line, depth=boundedread.MAX_ARTEFACT_DEPTH) for line in data.decode("ascii").splitlines()
            ]
        except ValueError as error:
            raise self._damaged(f"its record log {name} is not valid JSON lines: {error}") from None
        if len(records) != manifest["count"]:
            raise self._damaged(
                f"the manifest lists {manifest['count']} records, its record log {name} holds {len(records)}"
            )
        tracker = _LogTracker(generation, size, manifest["count"], manifest["last_id"], digest)
        if self._shared is not None:
            self._shared.tracker = tracker
        else:
            _STANDALONE[self._log_path(generation)] = tracker
        return records, dict(manifest["state"])


__all__ = [
    "SNAPSHOT_SLOTS",
    "SYNC_INTERVAL_S",
    "RecordLog",
    "ResumeRefused",
    "SnapshotCapable",
    "SnapshotDamaged",
    "StreamSnapshots",
    "supports_snapshots",
    "write_atomically",
]
