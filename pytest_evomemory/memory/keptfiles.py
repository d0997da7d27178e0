"""The descriptors and directory syncs a stream's snapshot saves spare.

With many chains in one process every system call a save makes hands the
interpreter lock to another chain's thread (a futex and a context switch each), so
the small files a save rewrites in place stay open from one save to the next
(:class:`KeptFiles`), as does the record log it appends to (:class:`KeptDescriptor`),
all within one process-wide :data:`BUDGET` of descriptors, and a
directory another stream's durable save already synced is not synced again
(:data:`SYNCS`). Neither may cost a guarantee: a file removed behind the process's
back is noticed before it is written, running out of descriptors is no failure,
and a sync is skipped only when one that started after the change has finished.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import threading


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
    """The process-wide count of descriptors :class:`KeptFiles` and
    :class:`KeptDescriptor` may still keep (streams run on many threads at once,
    hence the lock)."""

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


class KeptDescriptor:
    """One descriptor kept open from one save to the next on its own (a stream's
    record log, appended at every save), counted against :data:`BUDGET` as every
    file :class:`KeptFiles` keeps is, and closed when dropped. :meth:`take` keeps
    it only while the budget lasts; :meth:`close` gives its share back. Unlike a
    kept label or manifest it is not checked to be still linked before each
    write: a log removed behind the process's back leaves labels whose log
    checksum no longer verifies, so no slot standing on it is ever restored."""

    __slots__ = ("descriptor",)

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor

    @classmethod
    def take(cls, descriptor: int) -> KeptDescriptor | None:
        """``descriptor`` kept, or None when the budget is spent (the caller closes it)."""
        return cls(descriptor) if BUDGET.take() else None

    def kept_again(self) -> KeptDescriptor | None:
        """Kept for one more save, or closed (returning None) once the process ran
        out of descriptors (as :meth:`KeptFiles.keep` decides for a lent file)."""
        if BUDGET.exhausted:
            self.close()
            return None
        return self

    def close(self) -> None:
        descriptor, self.descriptor = self.descriptor, -1
        if descriptor >= 0:
            BUDGET.give(1)
            os.close(descriptor)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # a delayed write error; or the interpreter shutting down
            pass


class KeptFiles:
    """The small files one stream rewrites in place at every save (its slots'
    labels and manifests), kept open from one save to the next: an ``open`` and a
    ``close`` per file and save are two system calls that, with many chains in one
    process, each hand the interpreter lock to another chain's thread.

    Bounded by :data:`BUDGET` (a quarter of the open-file limit, shared by every
    stream of the process, and by their record logs' :class:`KeptDescriptor`): past
    it, a file is opened and closed at each save as before. A kept descriptor is
    reused only while its file is still linked (one
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
        return open_kept(path, flags, self)

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


def open_kept(path: str, flags: int, kept: KeptFiles | None) -> int:
    """``os.open(path, flags, 0o644)`` of a file a stream may keep open: when the
    process is out of descriptors (EMFILE), nothing is kept from then on in the
    process, the stream's idle kept files (``kept``) are closed, and the open is
    tried once more."""
    try:
        return os.open(path, flags, 0o644)
    except OSError as error:
        if error.errno not in _OUT_OF_DESCRIPTORS:
            raise
    BUDGET.exhaust()
    if kept is not None:
        with contextlib.suppress(OSError):
            kept.close()
    return os.open(path, flags, 0o644)


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


__all__ = ["BUDGET", "SYNCS", "DirectorySyncs", "KeptDescriptor", "KeptFiles", "open_kept"]
