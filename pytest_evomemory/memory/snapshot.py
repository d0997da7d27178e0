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

:class:`RecordLog` is the built-in backends' implementation: they only ever
append records (or empty the store), so a snapshot is an append-only log plus a
manifest, and saving after each episode costs only the new records.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard, runtime_checkable

from ..errors import MemoryBackendError

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


def _overwrite(descriptor: int, data: bytes, size: int | None = None) -> int:
    """Write ``data`` at the start of an open file, padded with spaces over a longer
    old content (JSON ignores them), in one ``pwrite``: truncating or re-creating a
    file costs far more than a small write on some file systems, and one small
    ``pwrite`` is never half done when a process is killed. ``size`` is the file's
    current size when the caller knows it; the new size is returned."""
    if size is None:
        size = os.fstat(descriptor).st_size
    _pwrite_all(descriptor, data + b" " * max(0, size - len(data)), 0)
    return max(size, len(data))


def _pwrite_all(descriptor: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        view, offset = view[written:], offset + written


#: A label or manifest is far smaller: one read gets it whole.
_SMALL_READ = 1 << 16


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


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a reader sees the old or the new file, never half."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(text)
    # No fsync: a killed process loses nothing the kernel already holds, and an
    # fsync per episode would cost more than the rest of the harness together.
    os.replace(partial, path)


# --------------------------------------------------------------------------- runtime side


#: Snapshots kept per stream, one slot each, used in turn. More than two, because
#: under xdist the results journal (written by the controller from the workers'
#: reports) can be a few episodes behind the snapshots a worker already saved when
#: a whole run is killed; resume needs the snapshot that matches the journal.
SNAPSHOT_SLOTS = 8


@dataclass(frozen=True)
class StreamSnapshots:
    """The snapshots of one stream's memory, labelled by completed episodes.

    :data:`SNAPSHOT_SLOTS` slots are used in turn (``slot-0``, ``slot-1``, ...), each with a label
    written only after the memory's own snapshot returned. A slot is handed to
    the memory again (to update incrementally) only if its label says it holds
    the state of SNAPSHOT_SLOTS episodes earlier; otherwise it is emptied first. Whichever moment the
    process is killed at — inside the memory's snapshot, between the snapshot
    and the result journal, or after both — the slot labelled with the number of
    episodes the journal says are complete is intact: the one being written has
    no label, and the other one is the previous episode's.
    """

    directory: Path
    stream: str
    #: slot -> episodes its label says, for the slots this process wrote (None: unlabelled)
    _labels: dict[int, int | None] = field(default_factory=dict, compare=False, repr=False)
    #: slot -> its paths, built once (see :meth:`_slot`)
    _paths: dict[int, tuple[str, str, Path]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_stream(cls, run_dir: Path, stream: str) -> StreamSnapshots:
        """``<run_dir>/memory/<stream>/``; a stream name unfit for a file name is
        replaced by a safe one plus a hash, so two streams never share a directory."""
        safe = _UNSAFE_FILENAME.sub("_", stream)
        if safe != stream or not safe.strip("."):
            safe = f"{safe}-{hashlib.sha256(stream.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
        return cls(run_dir / "memory" / safe, stream)

    def clear(self) -> None:
        """Remove every snapshot (a stream starting from its first task): a stale
        slot of an earlier run in the same output directory must never be restored."""
        shutil.rmtree(self.directory, ignore_errors=True)
        self._labels.clear()

    def save(self, memory: object, completed: int) -> None:
        """Snapshot ``memory`` as it is after ``completed`` episodes (task + feedback).

        The label is opened once and rewritten in place twice: "no snapshot"
        before the memory touches the slot's state, the episode count after.
        """
        if not supports_snapshots(memory):
            return
        index = completed % SNAPSHOT_SLOTS
        slot, label, state = self._slot(index)
        known = index in self._labels  # this process wrote the slot's label: no need to read it
        if not known:
            os.makedirs(slot, exist_ok=True)
        try:
            descriptor = os.open(label, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the slot was removed behind this process's back
            os.makedirs(slot, exist_ok=True)
            descriptor, known = os.open(label, os.O_RDWR | os.O_CREAT, 0o644), False
        try:
            if known:
                episodes, size = self._labels[index], None
            else:
                data = _read_all(descriptor)
                previous, size = _parse_label(data), len(data)
                episodes = previous["episodes"] if previous is not None and previous.get("stream") == self.stream else None
            size = _overwrite(descriptor, b"{}", size)
            self._labels[index] = None
            if episodes != completed - SNAPSHOT_SLOTS:
                # Not this run's state SNAPSHOT_SLOTS episodes ago (an interrupted save, or
                # a save a killed run made before the episode was re-run): a memory
                # updating incrementally must not build on it.
                shutil.rmtree(state, ignore_errors=True)
                state.mkdir(parents=True)
            memory.snapshot(state)
            text = json.dumps({"stream": self.stream, "episodes": completed, "memory": type(memory).__qualname__})
            _overwrite(descriptor, text.encode("utf-8"), size)
            self._labels[index] = completed
        finally:
            os.close(descriptor)

    def _slot(self, index: int) -> tuple[str, str, Path]:
        """The slot's directory, its label (as strings for ``os``) and its state directory."""
        paths = self._paths.get(index)
        if paths is None:
            slot = self.directory / f"slot-{index}"
            paths = self._paths[index] = (os.fspath(slot), os.fspath(slot / "episodes.json"), slot / "state")
        return paths

    def completed_prefixes(self) -> list[int]:
        """Episode counts that a saved snapshot is available for."""
        found = []
        for slot in sorted(self.directory.glob("slot-*")):
            label = _read_label(slot / "episodes.json")
            if label is not None and label.get("stream") == self.stream:
                found.append(int(label["episodes"]))
        return sorted(found)

    def restore(self, memory: object, completed: int) -> None:
        """Load the state after ``completed`` episodes into a fresh ``memory``, or refuse.

        ``completed == 0`` needs nothing: a stream starts with an empty memory.
        """
        if completed == 0:
            return
        self.restore_saved(memory, completed)

    def restore_saved(self, memory: object, completed: int) -> None:
        """Like :meth:`restore`, also for ``completed == 0``: a stream whose memory is
        not empty before its first task (a conversation ingested first) saves that
        state as 0 completed episodes."""
        name = type(memory).__qualname__
        if not isinstance(memory, SnapshotCapable):
            raise ResumeRefused(
                f"stream {self.stream!r}: {completed} episode(s) were completed, but memory system "
                f"{name} cannot be resumed: it does not implement snapshot(directory) and "
                "restore(directory) (docs/memory.md, 'What a memory system must offer for resume'); "
                "add them, or run again without --evomemory-resume"
            )
        for slot in sorted(self.directory.glob("slot-*")):
            label = _read_label(slot / "episodes.json")
            if label is not None and label.get("stream") == self.stream and label.get("episodes") == completed:
                memory.restore(slot / "state")
                return
        available = ", ".join(map(str, self.completed_prefixes())) or "none"
        raise ResumeRefused(
            f"stream {self.stream!r}: {completed} episode(s) were completed, but {self.directory} "
            f"holds no memory snapshot taken after episode {completed} (snapshots for: {available}); "
            "the remaining tasks would see the wrong memory, so this stream cannot be resumed; "
            "run again without --evomemory-resume"
        )


def _read_label(path: Path) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _parse_label(data)


def _parse_label(data: bytes) -> dict[str, Any] | None:
    """A slot's label, or None for an invalidated, torn or foreign one (no snapshot)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("episodes"), int) else None


# --------------------------------------------------------------------------- backend side

#: One stored record as the built-in backends snapshot it.
LoggedRecord = dict[str, Any]

#: ``json.dumps(record, ensure_ascii=True, separators=(",", ":"), default=str)``,
#: built once: ``json.dumps`` with options builds a new encoder on every call.
_LOG_LINE = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str)

#: Log bytes gathered before one write (a first save of a large store).
_WRITE_CHUNK = 1 << 20


class RecordLog:
    """An incremental snapshot of an append-only record store.

    ``records.jsonl`` holds one JSON object per record (``id`` an increasing
    integer, ``content``, ``metadata``, optionally ``embedding``), written
    ASCII-escaped so that NUL bytes and lone surrogates survive; ``manifest.json``
    says how many of its bytes and records are valid. A save appends only the
    records after the manifest's last id — unless the store was emptied since,
    which the record count gives away, and then the log is written anew.
    """

    FORMAT = 1

    def __init__(self, directory: Path, kind: str) -> None:
        # A backend builds one per save: plain strings, not pathlib joins.
        self.directory = directory
        self.kind = kind
        folder = os.fspath(directory)
        self._log_path = os.path.join(folder, "records.jsonl")
        self._manifest_path = os.path.join(folder, "manifest.json")

    @property
    def _manifest(self) -> Path:
        return Path(self._manifest_path)

    def manifest(self) -> dict[str, Any] | None:
        try:
            with open(self._manifest_path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise MemoryBackendError(f"memory snapshot {self._manifest} is unreadable: {error}") from None
        return self._parse_manifest(data)

    def _parse_manifest(self, data: bytes) -> dict[str, Any]:
        try:
            value = json.loads(data.decode("utf-8"))
        except ValueError as error:
            raise MemoryBackendError(f"memory snapshot {self._manifest} is unreadable: {error}") from None
        if not isinstance(value, dict) or value.get("format") != self.FORMAT or value.get("kind") != self.kind:
            raise MemoryBackendError(
                f"memory snapshot {self._manifest} was not written by a {self.kind} memory "
                f"(format {self.FORMAT}); it cannot be restored into one"
            )
        return value

    def save(
        self,
        count: int,
        records_after: Callable[[int], Iterable[LoggedRecord]],
        state: Mapping[str, Any],
    ) -> None:
        """Bring the snapshot up to date with a store of ``count`` records.

        ``records_after(last_id)`` yields, in id order, the records whose id is
        greater than ``last_id``; ``state`` is whatever else the backend needs
        (for instance the next id it will hand out).
        """
        if not self._save(count, records_after, state, anew=False):
            # emptied (reset) since the last save: write the log anew
            self._save(count, records_after, state, anew=True)

    def _save(
        self,
        count: int,
        records_after: Callable[[int], Iterable[LoggedRecord]],
        state: Mapping[str, Any],
        *,
        anew: bool,
    ) -> bool:
        """One attempt; False when the store yielded fewer records than ``count``
        after the manifest's last id (it was emptied since), so the log must be
        written anew. The manifest is opened once, read and rewritten in place;
        the log once, cut back to the manifest's length and appended to."""
        manifest_path, log_path = self._manifest_path, self._log_path
        try:
            manifest: int | None = os.open(manifest_path, os.O_RDWR)
        except FileNotFoundError:
            manifest = None
        except OSError as error:
            raise MemoryBackendError(f"memory snapshot {self._manifest} is unreadable: {error}") from None
        try:
            size_of_manifest: int | None = None
            previous = None
            if manifest is not None:
                data = _read_all(manifest)
                previous, size_of_manifest = self._parse_manifest(data), len(data)
            last_id, logged, size = 0, 0, 0
            if previous is not None and previous["count"] <= count and not anew:
                last_id, logged, size = previous["last_id"], previous["count"], previous["bytes"]
            elif manifest is not None:
                # the log is about to be rewritten: never pair it with this manifest
                os.close(manifest)
                manifest = None
                os.unlink(manifest_path)
            if manifest is None:
                os.makedirs(self.directory, exist_ok=True)
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                if os.fstat(log).st_size != size:
                    os.ftruncate(log, size)  # drop a tail a killed save left behind
                lines: list[bytes] = []
                pending = 0
                for record in records_after(last_id):
                    line = (_LOG_LINE.encode(record) + "\n").encode("ascii")
                    lines.append(line)
                    pending += len(line)
                    logged += 1
                    last_id = int(record["id"])
                    if pending >= _WRITE_CHUNK:
                        _pwrite_all(log, b"".join(lines), size)
                        size, lines, pending = size + pending, [], 0
                if lines:
                    _pwrite_all(log, b"".join(lines), size)
                    size += pending
            finally:
                os.close(log)
            if logged != count:
                if anew:
                    raise MemoryBackendError(
                        f"{self.kind} memory snapshot: the store reports {count} records but yielded {logged}"
                    )
                return False
            text = json.dumps({
                "format": self.FORMAT, "kind": self.kind, "count": logged, "last_id": last_id,
                "bytes": size, "state": dict(state),
            })
            if manifest is None:
                manifest, size_of_manifest = os.open(manifest_path, os.O_RDWR | os.O_CREAT, 0o644), None
            _overwrite(manifest, text.encode("utf-8"), size_of_manifest)
            return True
        finally:
            if manifest is not None:
                os.close(manifest)

    def load(self) -> tuple[list[LoggedRecord], dict[str, Any]]:
        """The records and backend state of the last completed save."""
        manifest = self.manifest()
        if manifest is None:
            raise MemoryBackendError(f"no memory snapshot in {self.directory} (manifest.json is missing)")
        with open(self._log_path, "rb") as handle:
            data = handle.read(manifest["bytes"])
        records = [json.loads(line) for line in data.decode("ascii").splitlines()]
        if len(records) != manifest["count"] or len(data) != manifest["bytes"]:
            raise MemoryBackendError(
                f"memory snapshot {self.directory} is damaged: the manifest lists {manifest['count']} "
                f"records, the log holds {len(records)}"
            )
        return records, dict(manifest["state"])


__all__ = [
    "SNAPSHOT_SLOTS",
    "RecordLog",
    "ResumeRefused",
    "SnapshotCapable",
    "StreamSnapshots",
    "supports_snapshots",
    "write_atomically",
]
