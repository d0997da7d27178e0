"""The file operations memory snapshots are made of, kill-safe and cheap.

Every snapshot file is rewritten in place (one ``pwrite``, padded over a longer
old content) rather than re-created, read back through the bounded reader (a FIFO
or device put in a file's place is an error, never a read without end), and
hashed once; what must survive a power cut is synced here (``datasync``,
``sync_path``). The record logs a stream's slots share are named and tracked here
too (:class:`LogTracker`, :class:`SharedLogs`), since both the per-stream store
(:mod:`.snapshot`) and the backends' :class:`~.recordlog.RecordLog` use them.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import itertools
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import Any

from ..core import boundedread


def overwrite(descriptor: int, data: bytes, size: int | None = None) -> int:
    """Write ``data`` at the start of an open file, padded with spaces over a longer
    old content (JSON ignores them), in one ``pwrite``: truncating or re-creating a
    file costs far more than a small write on some file systems, and one small
    ``pwrite`` is never half done when a process is killed. ``size`` is the file's
    current size when the caller knows it; the new size is returned."""
    if size is None:
        size = os.fstat(descriptor).st_size
    pwrite_all(descriptor, padded(data, size), 0)
    return max(size, len(data))


def padded(data: bytes, size: int) -> bytes:
    """What :func:`overwrite` leaves in a file of ``size`` bytes."""
    return data + b" " * max(0, size - len(data))


def pwrite_all(descriptor: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        view, offset = view[written:], offset + written


#: A label or manifest is far smaller: one read gets it whole.
SMALL_READ = 1 << 16

#: Bytes read at a time when hashing or loading a log.
READ_CHUNK = 1 << 20


def read_all(descriptor: int) -> bytes:
    """The whole content of an open regular file (read from offset 0): a read that
    returns less than it asked for has reached the end of the file."""
    chunks, offset, wanted = [], 0, SMALL_READ
    while True:
        chunk = os.pread(descriptor, wanted, offset)
        chunks.append(chunk)
        offset += len(chunk)
        if len(chunk) < wanted:
            return b"".join(chunks)
        wanted = max(SMALL_READ, os.fstat(descriptor).st_size - offset + 1)


datasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


def sync_path(path: str, *, directory: bool = False) -> None:
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
        (os.fsync if directory else datasync)(descriptor)
    except OSError as error:
        if not directory or error.errno not in (22, 95):  # EINVAL, EOPNOTSUPP
            raise
    finally:
        os.close(descriptor)


def read_small(path: Path | str) -> bytes:
    """A label or manifest through the bounded reader: a device or FIFO put in its
    place is an ``OSError`` (the slot reads as damaged), never a read without end."""

    def refused(message: str) -> OSError:
        return OSError(errno.EINVAL, message)

    return boundedread.read_bytes(Path(path), limit=boundedread.CACHE_BYTES, what="a snapshot label", error=refused)


def open_log(path: Path | str) -> BufferedReader:
    """A snapshot's file opened to be read whole: a FIFO or device in its place is an
    ``OSError`` (the snapshot reads as damaged), never an open that waits for ever."""

    def refused(message: str) -> OSError:
        return OSError(errno.EINVAL, message)

    return boundedread.open_regular(Path(path), what="a snapshot file", error=refused)


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open_log(path) as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def prefix_digests(path: str, offsets: Iterable[int]) -> dict[int, str | None]:
    """SHA-256 of the first ``n`` bytes of a file for each ``n`` in ``offsets``, in
    one pass (``None`` where the file is shorter)."""
    wanted = sorted(set(offsets))
    found: dict[int, str | None] = dict.fromkeys(wanted)
    digest = hashlib.sha256()
    position = 0
    with open_log(path) as handle:
        for offset in wanted:
            while position < offset:
                chunk = handle.read(min(READ_CHUNK, offset - position))
                if not chunk:
                    return found
                digest.update(chunk)
                position += len(chunk)
            found[offset] = digest.hexdigest()
    return found


# --------------------------------------------------------------------------- shared record logs


#: ``records-<generation>.jsonl``: the only names a log has; a manifest or label
#: gives the generation as a number, never a path.
LOG_NAME = re.compile(r"^records-([1-9][0-9]{0,17})\.jsonl$")


def log_name(generation: int) -> str:
    return f"records-{generation}.jsonl"


def generations(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(match.group(1)) for name in names if (match := LOG_NAME.match(name)))


class OpenFile:
    """A descriptor kept open from one save to the next (closed when dropped):
    opening, ``fstat`` and closing a file are system calls that, with many chains
    in one process, each hand the interpreter lock to another chain's thread."""

    __slots__ = ("descriptor",)

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor

    def close(self) -> None:
        descriptor, self.descriptor = self.descriptor, -1
        if descriptor >= 0:
            os.close(descriptor)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


def _descriptor_budget() -> int:
    """How many descriptors the process's streams may keep open between saves: a
    quarter of the open-file limit (1,024 by default on many systems: 256), so
    that sockets, the run's own files and the memory libraries keep the rest."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY or soft < 0:
        soft = 1 << 16
    return int(soft) // 4


class _Budget:
    """The process-wide count of descriptors :class:`KeptFiles` may still keep
    (streams run on many threads at once, hence the lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.remaining = _descriptor_budget()

    def take(self) -> bool:
        with self.lock:
            if self.remaining <= 0:
                return False
            self.remaining -= 1
            return True

    def give(self, count: int) -> None:
        with self.lock:
            self.remaining += count

    def exhaust(self) -> None:
        """The process ran out of descriptors (EMFILE): keep no more from here on."""
        with self.lock:
            self.remaining = -(1 << 30)

    @property
    def exhausted(self) -> bool:
        return self.remaining < 0


BUDGET = _Budget()

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class KeptFiles:
    """The small files one stream rewrites in place at every save (its slots'
    labels and manifests), kept open from one save to the next: an ``open`` and a
    ``close`` per file and save are two system calls that, with many chains in one
    process, each hand the interpreter lock to another chain's thread.

    Bounded by :data:`BUDGET` (a quarter of the open-file limit, shared by every
    stream of the process): past it, a file is opened and closed at each save as
    before. A kept descriptor is reused only while its file is still linked (one
    ``fstat``): a slot removed behind the process's back is noticed, never written
    into a file nobody can find. An open that fails for want of descriptors
    (EMFILE) closes this stream's idle kept files (never one a save is using: it
    is lent, :meth:`reuse`, until :meth:`keep` or :meth:`discard`), keeps none
    from then on in the process, and is tried once more. Used by one stream's
    thread at a time."""

    __slots__ = ("files", "lent")

    def __init__(self) -> None:
        #: path -> descriptor, idle between saves
        self.files: dict[str, int] = {}
        #: path -> descriptor, in use by the current save
        self.lent: dict[str, int] = {}

    def reuse(self, path: str) -> int | None:
        """The kept descriptor of ``path``, lent to the caller until it hands it to
        :meth:`keep` or :meth:`discard`; or ``None``: not kept, or its file was
        removed or replaced since (then it is closed, and the caller opens the path)."""
        descriptor = self.files.pop(path, None)
        if descriptor is None:
            return None
        self.lent[path] = descriptor
        try:
            linked = os.fstat(descriptor).st_nlink > 0
        except OSError:
            linked = False
        if linked:
            return descriptor
        self.discard(path, descriptor)
        return None

    def open(self, path: str, flags: int) -> int:
        """``os.open(path, flags, 0o644)``, tried once more after closing this
        stream's idle kept files when the process is out of descriptors."""
        try:
            return os.open(path, flags, 0o644)
        except OSError as error:
            if error.errno not in _OUT_OF_DESCRIPTORS:
                raise
        BUDGET.exhaust()
        with contextlib.suppress(OSError):
            self.close()
        return os.open(path, flags, 0o644)

    def keep(self, path: str, descriptor: int) -> None:
        """Keep ``descriptor`` (open on ``path``) for the next save, or close it
        when the budget is spent."""
        if self.lent.get(path) == descriptor:
            del self.lent[path]
            if not BUDGET.exhausted:
                self.files[path] = descriptor
                return
            BUDGET.give(1)
        elif BUDGET.take():
            self.files[path] = descriptor
            return
        os.close(descriptor)

    def discard(self, path: str, descriptor: int) -> None:
        """Close ``descriptor`` (open on ``path``), kept or not (a failed save, a
        file removed behind the process's back); an error closing it is not this
        save's news."""
        if self.lent.get(path) == descriptor:
            del self.lent[path]
            BUDGET.give(1)
        with contextlib.suppress(OSError):
            os.close(descriptor)

    def drop_under(self, folder: str) -> None:
        """Close the idle kept files under ``folder`` (it is being emptied)."""
        prefix = folder + os.sep
        for path in [path for path in self.files if path.startswith(prefix)]:
            BUDGET.give(1)
            with contextlib.suppress(OSError):
                os.close(self.files.pop(path))

    def close(self) -> None:
        """Close every idle kept file (the stream ended, was restored or started
        anew). A delayed write error a close reports (EIO, a quota on a network
        file system) is raised, naming the file, once all are closed."""
        files, self.files = self.files, {}
        failed: OSError | None = None
        for path, descriptor in files.items():
            BUDGET.give(1)
            try:
                os.close(descriptor)
            except OSError as error:
                failed = failed or OSError(error.errno, error.strerror, path)
        if failed is not None:
            raise failed

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # the interpreter may be shutting down
            pass


class DirectorySyncs:
    """Which directories' entries this process has made durable, and when.

    A durable save syncs the directories on its slot's path that changed; every
    stream of a run shares the run's ``memory/`` folder, and 64 chains each syncing
    it after creating their own folder is 64 fsyncs where one does: an fsync of a
    directory makes durable every entry it holds when it starts, whoever made it.
    So a change is stamped (:meth:`stamp`, taken after the change), and a sync is
    skipped when a sync of the same directory started after that stamp has
    finished (in any stream's thread)."""

    #: directories remembered at most (a long-lived process running many runs)
    LIMIT = 4096

    def __init__(self) -> None:
        self._clock = itertools.count(1)
        self._lock = threading.Lock()
        self._synced: dict[str, int] = {}

    def stamp(self) -> int:
        """A moment after every change made so far (``itertools.count`` is atomic)."""
        return next(self._clock)

    def start(self, directory: str, changed: int) -> int | None:
        """``None`` when a sync of ``directory`` that started after the change
        stamped ``changed`` has finished (nothing left to sync); else the stamp of
        the sync the caller starts now (:func:`sync_path`, then :meth:`done`)."""
        if self._synced.get(directory, 0) > changed:
            return None
        return next(self._clock)

    def done(self, directory: str, started: int) -> None:
        """The sync of ``directory`` stamped ``started`` has finished."""
        with self._lock:
            if len(self._synced) >= self.LIMIT:
                self._synced.clear()
            if self._synced.get(directory, 0) < started:
                self._synced[directory] = started


SYNCS = DirectorySyncs()


@dataclass
class LogTracker:
    """Where this process stands in a record log: its valid prefix and that
    prefix's running SHA-256, so a save hashes only the bytes it appends."""

    generation: int
    size: int
    count: int
    last_id: int
    digest: Any = field(default_factory=hashlib.sha256)
    #: the log, open for writing since this process's last save appended to it
    #: and left it exactly ``size`` bytes long (``None``: open it and check its size)
    writer: OpenFile | None = field(default=None, compare=False, repr=False)

    def close(self) -> None:
        """Close the log if it is kept open (the tracker is being dropped)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()


@dataclass
class SharedLogs:
    """What :class:`StreamSnapshots` lends a :class:`RecordLog` during one save or
    restore: the stream's log directory and what the log says back."""

    directory: str
    #: the state directory the memory is given (reported names are relative to it)
    state: str
    tracker: LogTracker | None
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
    #: file path -> its size as this process last wrote it (the manifests of the
    #: stream's slots), so that rewriting one in place needs no ``fstat``
    sizes: dict[str, int] = field(default_factory=dict)
    #: keep the log open after the save (the stream's next save appends to it)
    keep_open: bool = False
    #: the stream's files kept open between saves (the manifests among them), if any
    kept: KeptFiles | None = None
    #: the state directory was created empty for this save: a file in it whose size
    #: is not in :attr:`sizes` does not exist yet (created exclusively, no ``fstat``)
    empty: bool = False
    #: the state directory had been removed, and the RecordLog made it again
    recreated: bool = False


SHARED: contextvars.ContextVar[SharedLogs | None] = contextvars.ContextVar("evomemory_shared_logs", default=None)


def state_files(state: Path | str) -> dict[str, str]:
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


def state_digests(state: Path, reported: Mapping[str, str], *, sync: bool) -> dict[str, str]:
    """sha256 of every file of a snapshot's state: what the memory's RecordLog
    reported it wrote, else read back (and synced, for a durable save)."""
    digests = {}
    for name, path in state_files(state).items():
        known = reported.get(name)
        if known is None:
            known = sha256_file(path)
            if sync:
                sync_path(path)
        digests[name] = known
    return digests
