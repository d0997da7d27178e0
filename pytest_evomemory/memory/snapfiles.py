"""The file operations memory snapshots are made of, kill-safe and cheap.

Every snapshot file is rewritten in place (one ``pwrite``, padded over a longer
old content) rather than re-created, read back through the bounded reader (a FIFO
or device put in a file's place is an error, never a read without end), and
hashed once; what must survive a power cut is synced here (``datasync``,
``sync_path``). The record logs a stream's slots share are named and tracked here
too (:class:`LogTracker`, :class:`SharedLogs`), since both the per-stream store
(:mod:`.snapshot`) and the backends' :class:`~.recordlog.RecordLog` use them; the
files kept open between saves are :mod:`.keptfiles`'.
"""

from __future__ import annotations

import contextvars
import errno
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import Any

from ..core import boundedread
from .keptfiles import KeptDescriptor, KeptFiles


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


def made(directory: str) -> bool:
    """Make ``directory`` (and its parent when that is missing too); whether this call
    made it, so that it is empty. One ``mkdir`` when the parent is there: no ``stat``
    first, as ``os.makedirs`` would, and no failing call for a directory that is new."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        try:
            os.mkdir(directory)
        except FileExistsError:  # made by someone else in between
            return False
    return True


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
    writer: KeptDescriptor | None = field(default=None, compare=False, repr=False)

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
