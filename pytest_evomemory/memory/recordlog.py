"""The built-in and library backends' snapshot: an append-only record log and its manifest.

The backends append records, empty the store or delete one (``forget``), so a
snapshot is an append-only log plus a manifest, and saving after each episode
costs only the new records (after an emptying or a delete, which the record count
gives away, a new generation of the log is written). Under
:class:`~.snapshot.StreamSnapshots` all slots of a stream share one log (each
manifest names the prefix that is its state), so the rotating slots take about
one store on disk, not one each.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..core import boundedread
from ..core.errors import ArtefactWriteError, MemoryBackendError
from .base import SnapshotDamaged
from .keptfiles import KeptDescriptor, open_kept
from .snapfiles import (
    READ_CHUNK,
    SHARED,
    LogTracker,
    datasync,
    generations,
    log_name,
    made,
    open_log,
    overwrite,
    padded,
    pwrite_all,
    read_small,
)
from .snaplabel import HEX64

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
_STANDALONE: dict[str, LogTracker] = {}

#: The class attribute by which a memory says that its ``snapshot(directory)``
#: writes into ``directory`` only through one :class:`RecordLog` (its manifest):
#: the runtime then knows the state's files without listing the directory after
#: every episode (:func:`writes_only_a_record_log`).
RECORD_LOG_ONLY = "snapshot_writes_only_a_record_log"

_RECORD_LOG_ONLY_TYPES: dict[type, bool] = {}


def writes_only_a_record_log(memory: object) -> bool:
    """Whether ``memory``'s snapshot writes nothing but one RecordLog: the class
    that defines its ``snapshot`` sets :data:`RECORD_LOG_ONLY` to ``True`` (a
    subclass that overrides ``snapshot`` is not covered by its base's word)."""
    kind = type(memory)
    found = _RECORD_LOG_ONLY_TYPES.get(kind)
    if found is None:
        owner = next((klass for klass in kind.__mro__ if "snapshot" in vars(klass)), None)
        found = _RECORD_LOG_ONLY_TYPES[kind] = owner is not None and vars(owner).get(RECORD_LOG_ONLY) is True
    return found


def _open(path: str, flags: int) -> int:
    return os.open(path, flags, 0o644)


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
        self._shared = SHARED.get()
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
        return os.path.join(self._log_directory, log_name(generation))

    def manifest(self) -> dict[str, Any] | None:
        try:
            data = read_small(self._manifest)
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
            and isinstance(log.get("sha256"), str) and HEX64.match(log["sha256"])
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
        :class:`~pytest_evomemory.core.errors.ArtefactWriteError` naming the file.
        """
        path = self._manifest_path
        try:
            tracker = self._tracker()
            appended = (
                tracker is not None and tracker.count <= count and self._append(tracker, count, records_after) == count
            )
            if tracker is None or not appended:
                # nothing logged yet, or the store was emptied since: a new generation
                if tracker is not None:
                    tracker.close()
                generation = self._next_generation()
                tracker = LogTracker(generation, 0, 0, 0)
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
                for old in generations(self._log_directory):
                    if old != tracker.generation:
                        os.unlink(self._log_path(old))
        except OSError as error:
            raise ArtefactWriteError.from_os_error(error.filename or path, error) from None

    def _next_generation(self) -> int:
        """The number of a new log generation, the log directory made if it is
        missing: one it just made holds no log (generation 1, nothing to list)."""
        folder = self._log_directory
        if made(folder):
            return 1  # made now, so empty
        return max(generations(folder), default=0) + 1

    def _tracker(self) -> LogTracker | None:
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
        tracker = LogTracker(log["generation"], log["bytes"], manifest["count"], manifest["last_id"])
        try:
            with open_log(path) as handle:
                remaining = log["bytes"]
                while remaining > 0 and (chunk := handle.read(min(READ_CHUNK, remaining))):
                    tracker.digest.update(chunk)
                    remaining -= len(chunk)
        except FileNotFoundError:
            return None
        if remaining or tracker.digest.hexdigest() != log["sha256"]:
            return None  # the log is not what the manifest says: write a new one
        return tracker

    def _append(
        self, tracker: LogTracker, count: int, records_after: Callable[[int], Iterable[LoggedRecord]]
    ) -> int:
        """Append the records after the tracker's last id; the number of records the
        log then holds, and the tracker moved on only if that is ``count``."""
        kept, tracker.writer = tracker.writer, None
        shared = self._shared
        if kept is not None:  # this process's last save left it open, exactly tracker.size bytes long
            log = kept.descriptor
        else:
            # a new generation (or one whose snapshots start empty) is emptied as it is
            # opened: whatever a file of that name holds is no part of any snapshot
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if tracker.size == 0 else 0)
            path = self._log_path(tracker.generation)
            log = open_kept(path, flags, shared.kept) if shared is not None and shared.keep_open else _open(path, flags)
        done = False
        try:
            if kept is None and tracker.size and os.fstat(log).st_size != tracker.size:
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
                    pwrite_all(log, chunk, size)
                    digest.update(chunk)
                    size, lines, pending = size + pending, [], 0
            if lines:
                chunk = b"".join(lines)
                pwrite_all(log, chunk, size)
                digest.update(chunk)
                size += pending
            if logged != count:
                return logged  # closed: its size is no longer tracker.size
            if self._shared is not None and self._shared.sync:
                datasync(log)
            done = True
        finally:
            # kept for the stream's next save, within the process's descriptor budget
            keep = done and shared is not None and shared.keep_open
            if kept is None:
                tracker.writer = KeptDescriptor.take(log) if keep else None
                if tracker.writer is None:
                    os.close(log)
            elif keep:
                tracker.writer = kept.kept_again()
            else:
                kept.close()
        tracker.size, tracker.count, tracker.last_id, tracker.digest = size, logged, last_id, digest
        return logged

    def _write_manifest(self, tracker: LogTracker, state: Mapping[str, Any]) -> None:
        text = _MANIFEST.encode({
            "format": self.FORMAT, "kind": self.kind, "count": tracker.count, "last_id": tracker.last_id,
            "log": {"generation": tracker.generation, "bytes": tracker.size, "sha256": tracker.digest.hexdigest()},
            "state": dict(state),
        }).encode("utf-8")
        manifest, known = self._open_manifest()
        done = False
        try:
            old_size = os.fstat(manifest).st_size if known is None else known
            size = overwrite(manifest, text, old_size)
            if self._shared is not None:
                self._shared.sizes[self._manifest_path] = size
                if self._shared.sync:
                    datasync(manifest)
                folder = self._shared.state + os.sep
                if self._manifest_path.startswith(folder):
                    name = self._manifest_path[len(folder):].replace(os.sep, "/")
                    self._shared.reported[name] = hashlib.sha256(padded(text, size)).hexdigest()
                self._shared.logs[tracker.generation] = (tracker.size, tracker.digest.hexdigest())
            done = True
        finally:
            kept = self._shared.kept if self._shared is not None else None
            if kept is None:
                os.close(manifest)
            elif done:
                kept.keep(self._manifest_path, manifest)
            else:
                kept.discard(self._manifest_path, manifest)

    def _open_manifest(self) -> tuple[int, int | None]:
        """The manifest open for rewriting, and its size when this process knows it:
        kept open from the stream's last save (:class:`~.snapfiles.KeptFiles`), or
        created in a state directory the runtime just made empty (no ``fstat``)."""
        path, shared = self._manifest_path, self._shared
        if shared is None:
            return self._open_path(os.O_RDWR | os.O_CREAT), None
        if shared.kept is not None and path in shared.kept.files:
            descriptor = shared.kept.reuse(path)
            if descriptor is not None:
                return descriptor, shared.sizes.get(path)
            shared.sizes.pop(path, None)  # removed or replaced behind the process's back
        known = shared.sizes.get(path)
        if known is None and shared.empty:
            try:
                return self._open_path(os.O_RDWR | os.O_CREAT | os.O_EXCL), 0
            except FileExistsError:
                pass
        return self._open_path(os.O_RDWR | os.O_CREAT), known

    def _open_path(self, flags: int) -> int:
        path, shared = self._manifest_path, self._shared
        opener = shared.kept.open if shared is not None and shared.kept is not None else _open
        try:
            return opener(path, flags)
        except FileNotFoundError:  # the directory was removed behind the process's back
            os.makedirs(self.directory, exist_ok=True)
            if shared is not None:
                shared.recreated = True
            return opener(path, flags)

    # ------------------------------------------------------------------ load

    def load(self) -> tuple[list[LoggedRecord], dict[str, Any]]:
        """The records and backend state of the last completed save, verified
        against the manifest's checksum (:class:`SnapshotDamaged` if they differ)."""
        manifest = self.manifest()
        if manifest is None:
            raise self._damaged("manifest.json is missing")
        log = manifest["log"]
        generation, size = log["generation"], log["bytes"]
        name = log_name(generation)
        try:
            with open_log(self._log_path(generation)) as handle:
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
        tracker = LogTracker(generation, size, manifest["count"], manifest["last_id"], digest)
        if self._shared is not None:
            self._shared.tracker = tracker
        else:
            _STANDALONE[self._log_path(generation)] = tracker
        return records, dict(manifest["state"])


__all__ = ["RECORD_LOG_ONLY", "LoggedRecord", "RecordLog", "writes_only_a_record_log"]
