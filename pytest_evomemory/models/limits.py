"""Limits on one model endpoint shared by every process of a session.

``model.max_concurrency`` bounds the requests of one process; under pytest-xdist
each worker is a process, so ``-n 8`` against a rate-limited API sent eight times
as many. :class:`EndpointLimiter` shares two things through files in a
session-wide directory, one subdirectory per endpoint URL:

* **connection slots** (``model.max_connections``): ``slot-<i>.lock`` files, a
  request holds one under ``flock`` while it is sent and read. The kernel frees a
  slot when its holder dies, so a crashed worker never leaks one.
* **backoff** (429 and ``Retry-After``): a worker told to wait writes "blocked
  until T" (``blocked-until.64``); every worker waits for T before its next request
  to that endpoint, instead of each finding out with a 429 of its own. The file
  is a fixed-size record rewritten in place and mapped into memory, so the look
  before every request is a read of shared memory, not a system call (with many
  chains in one process each system call hands the interpreter lock to another
  chain's thread).

The directory is the session's (:func:`session_directory`): the session's model
side (:class:`~pytest_evomemory.runtime.modelside.ModelSide`) opens it
(:func:`open_session_directory`) in the process that drives the session
(``evomemory run``, or the pytest controller before xdist starts its workers),
names it in :data:`SESSION_DIR_ENV`, and pytest-xdist workers inherit the
variable. Without one, a private directory serves this process alone.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import fcntl
import hashlib
import mmap
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: The environment variable naming the session's shared directory.
SESSION_DIR_ENV = "EVOMEMORY_SESSION_DIR"

#: How long a request waiting for a free slot sleeps between looks, at first and
#: at most: short enough that a slot freed by a 100 ms call is taken within a few
#: per cent of its time, long enough that eight waiting workers cost no CPU to speak of.
FIRST_POLL_S = 0.0005
MAX_POLL_S = 0.01

#: How many times in a row a slot goes from one thread of a process to the next
#: waiting one before it is unlocked, so that other processes get their turn.
MAX_HANDOFFS = 8

#: Named for its format (a fixed-size record, mapped), not the text file of earlier
#: versions, which truncated it before each write: a version of the plugin sharing a
#: session directory (a user-set ``EVOMEMORY_SESSION_DIR``) with an older one must not
#: map a file the other truncates (a read of a mapped page past the end of a file
#: kills the process with SIGBUS, no Python error). Such sessions share no backoff.
_BLOCKED_UNTIL = "blocked-until.64"

#: The size of the blocked-until record: ``"T T"`` (the time twice, so that a look
#: that races a writer's in-place rewrite sees two different halves, and looks
#: again), padded with spaces. Never truncated: the file is mapped.
_RECORD_BYTES = 64

#: Looks at a record caught mid-rewrite before the look gives up (no block then).
_TORN_LOOKS = 3


class EndpointLimiter:
    """Connection slots and shared backoff for requests to ``url``, across every
    process that uses the same ``directory``.

    ``max_connections=None`` leaves concurrency alone (only the backoff is shared).
    Each slot file is opened once per limiter; a slot is held under ``flock`` (which
    excludes other processes, and other limiters of this process: ``flock`` belongs
    to the open file) and handed to one thread of this process at a time.

    Threads of one process wait in line, first come first served: a thread done with
    its slot hands it, still locked, to the first thread waiting (no file is touched,
    and the waiter is woken at once rather than at its next look). Slots held by other
    processes are looked for by the first thread in line only, every
    :data:`FIRST_POLL_S` to :data:`MAX_POLL_S`. So the chains of one ``evomemory run``
    take turns in order, all of them finishing together, instead of winning slots by
    chance. So that other processes are not shut out by one whose line never empties,
    a slot is handed on within the process at most :data:`MAX_HANDOFFS` times in a
    row; then it is unlocked and taken again like any free slot. Limiters of one
    process for the same endpoint are one object (:func:`endpoint_limiter`).
    """

    def __init__(
        self,
        directory: Path,
        url: str,
        max_connections: int | None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.url = url
        self.max_connections = max_connections
        self.directory = Path(directory) / f"endpoint-{hashlib.sha256(url.encode()).hexdigest()[:16]}"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._sleep = sleep
        count = max_connections or 0
        #: every slot's file, opened when first needed (``None``: not open)
        self._slots: list[int | None] = [None] * count
        #: the slots this process holds (locked, and in a thread's hands)
        self._held = [False] * count
        #: how many times in a row each held slot was handed on within this process
        self._handoffs = [0] * count
        #: threads of this process waiting for a slot, in the order they asked
        self._line: collections.deque[_Waiter] = collections.deque()
        self._lock = threading.Lock()
        # Read before every request: kept open and mapped, so a look is no system call.
        self._blocked: int | None = None
        self._blocked_map: mmap.mmap | None = None
        self._blocked_lock = threading.RLock()  # block_for opens the file under it
        #: closed (:meth:`close`): files are opened for each use and closed after it
        self._retired = False

    def _blocked_file(self) -> int:
        descriptor = self._blocked
        if descriptor is None:
            with self._blocked_lock:
                descriptor = self._blocked
                if descriptor is None:
                    descriptor, self._blocked_map = _open_record(self.directory / _BLOCKED_UNTIL)
                    self._blocked = descriptor
        return descriptor

    def close(self) -> None:
        """Close the files no request holds now. The limiter stays usable by the
        models that hold it, but from now on opens each file only for the moment it
        needs it (a slot's while it is held): nothing closes a retired limiter's files
        again, so none may stay open (:func:`endpoint_limiter` retires the oldest)."""
        self._retired = True
        with self._lock:
            for index, descriptor in enumerate(self._slots):
                if descriptor is not None and not self._held[index]:
                    self._slots[index] = None
                    os.close(descriptor)
        with self._blocked_lock:
            descriptor, self._blocked = self._blocked, None
            mapped, self._blocked_map = self._blocked_map, None
            if mapped is not None:
                mapped.close()
            if descriptor is not None:
                os.close(descriptor)

    # ------------------------------------------------------------------ slots

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the endpoint's ``max_connections`` slots for the ``with`` body."""
        if self.max_connections is None:
            yield
            return
        index = self._acquire()
        try:
            yield
        finally:
            self._release(index)

    def _acquire(self) -> int:
        with self._lock:
            if not self._line:
                index = self._take_free()
                if index is not None:
                    return index
            waiter = _Waiter()
            self._line.append(waiter)
            first = self._line[0] is waiter
        poll = FIRST_POLL_S
        try:
            while True:
                # The first in line looks at the files; the others wait to be handed a slot.
                waiter.ready.wait(poll * (0.5 + random.random()) if first else None)
                with self._lock:
                    if waiter.slot is None and self._line[0] is waiter:
                        waiter.slot = self._take_free()
                        if waiter.slot is not None:
                            self._line.popleft()
                            self._wake_first()
                    if waiter.slot is not None:
                        return waiter.slot
                    waiter.ready.clear()
                    poll = min(poll * 2, MAX_POLL_S) if first else FIRST_POLL_S
                    first = self._line[0] is waiter
        except BaseException:
            with self._lock:
                if waiter.slot is None:
                    first = self._line[0] is waiter
                    self._line.remove(waiter)
                    if first:
                        self._wake_first()
            if waiter.slot is not None:  # handed one while giving up: pass it on
                self._release(waiter.slot)
            raise

    def _release(self, index: int) -> None:
        with self._lock:
            if self._line and self._handoffs[index] < MAX_HANDOFFS:
                self._handoffs[index] += 1
                waiter = self._line.popleft()
                waiter.slot = index
                waiter.ready.set()
                self._wake_first()
                return
            self._handoffs[index] = 0
            self._held[index] = False
            descriptor = self._slots[index]
            if descriptor is not None:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
                if self._retired:
                    self._slots[index] = None
                    os.close(descriptor)

    def _wake_first(self) -> None:
        """The new first in line starts looking at the files (under ``_lock``)."""
        if self._line:
            self._line[0].ready.set()

    def _take_free(self) -> int | None:
        """A slot no thread of this process and no other process holds, now held (under ``_lock``)."""
        count = len(self._slots)
        start = random.randrange(count)  # processes spread over the slots
        for offset in range(count):
            index = (start + offset) % count
            if not self._held[index] and self._try_slot(index):
                return index
        return None

    def _try_slot(self, index: int) -> bool:
        """Lock slot ``index``'s file if no other process (or limiter) holds it."""
        descriptor = self._slots[index]
        if descriptor is None:
            descriptor = self._slots[index] = os.open(
                self.directory / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o600
            )
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self._retired:
                self._slots[index] = None
                os.close(descriptor)
            return False
        self._held[index] = True
        self._handoffs[index] = 0
        return True

    # ------------------------------------------------------------------ backoff

    def blocked_until(self) -> float:
        """The wall-clock time (``time.time()``) before which no request should go out."""
        if self._retired:
            return self._blocked_until_once()
        try:
            descriptor = self._blocked_file()

            def look() -> bytes:
                mapped = self._blocked_map
                # a file system that cannot map the file is read (one pread a look)
                return mapped[:_RECORD_BYTES] if mapped is not None else os.pread(descriptor, _RECORD_BYTES, 0)

            return _untorn(look)
        except (OSError, ValueError):  # the file cannot be opened, or was closed meanwhile
            return 0.0

    def block_for(self, seconds: float) -> float:
        """Tell every process to wait ``seconds`` from now (a later block already
        published stays); returns the end of this block."""
        until = round(time.time() + seconds, 6)  # as written, so that a reader compares equal
        if seconds <= 0:
            return until
        try:
            with self._blocked_lock:
                retired = self._retired
                descriptor = _open_record_file(self.directory / _BLOCKED_UNTIL) if retired else self._blocked_file()
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX)
                    try:
                        if until > (self._blocked_until_once() if retired else self.blocked_until()):
                            os.pwrite(descriptor, _record(until), 0)
                    finally:
                        fcntl.flock(descriptor, fcntl.LOCK_UN)
                finally:
                    if retired:
                        os.close(descriptor)
        except OSError:
            pass  # the backoff is then this process's own, as before
        return until

    def _blocked_until_once(self) -> float:
        """:meth:`blocked_until` for a retired limiter: the file is opened, read and closed."""
        try:
            descriptor = os.open(self.directory / _BLOCKED_UNTIL, os.O_RDONLY)
        except OSError:
            return 0.0
        try:
            return _untorn(lambda: os.pread(descriptor, _RECORD_BYTES, 0))
        except OSError:
            return 0.0
        finally:
            os.close(descriptor)

    def wait_if_blocked(self, longest_s: float) -> float:
        """Sleep until the published block ends (at most ``longest_s``); the seconds slept."""
        remaining = min(self.blocked_until() - time.time(), longest_s)
        if remaining <= 0:
            return 0.0
        self._sleep(remaining)
        return remaining


def _record(until: float) -> bytes:
    """The blocked-until record for ``until``: the time twice, padded to its fixed size."""
    return f"{until:.6f} {until:.6f}".encode("ascii").ljust(_RECORD_BYTES)


def _untorn(look: Callable[[], bytes]) -> float:
    """The time the record ``look`` reads holds, looked at again while a look is
    caught mid-rewrite (at most :data:`_TORN_LOOKS` times; then no block)."""
    for _ in range(_TORN_LOOKS):
        found = _parse_record(look())
        if found is not None:
            return found
    return 0.0


def _parse_record(data: bytes) -> float | None:
    """The time a record holds (0.0: none yet), or ``None`` for one caught mid-rewrite."""
    halves = data.split()
    if not halves:
        return 0.0
    if len(halves) != 2 or halves[0] != halves[1]:
        return None
    try:
        return float(halves[0])
    except ValueError:
        return None


def _open_record(path: Path) -> tuple[int, mmap.mmap | None]:
    """The blocked-until file (:func:`_open_record_file`), mapped to be read
    (``None`` where the file system cannot map it)."""
    descriptor = _open_record_file(path)
    try:
        return descriptor, mmap.mmap(descriptor, _RECORD_BYTES, mmap.MAP_SHARED, mmap.PROT_READ)
    except (OSError, ValueError):
        return descriptor, None


def _open_record_file(path: Path) -> int:
    """The blocked-until file, open to write, grown to its fixed size under
    ``flock`` if it is new (each process may be the first; another may map it)."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(descriptor).st_size < _RECORD_BYTES:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            try:
                if os.fstat(descriptor).st_size < _RECORD_BYTES:
                    os.pwrite(descriptor, b" " * _RECORD_BYTES, 0)
            finally:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


# --------------------------------------------------------------------------- the session directory

_PRIVATE: Path | None = None
_PRIVATE_LOCK = threading.Lock()


def session_directory() -> Path:
    """The directory the processes of this session share (:data:`SESSION_DIR_ENV`),
    else one private to this process, removed when it exits."""
    named = os.environ.get(SESSION_DIR_ENV)
    if named:
        path = Path(named)
        with contextlib.suppress(OSError):
            path.mkdir(parents=True, exist_ok=True)
            return path
    global _PRIVATE
    with _PRIVATE_LOCK:
        if _PRIVATE is None:
            _PRIVATE = Path(tempfile.mkdtemp(prefix="evomemory-process-"))
            atexit.register(shutil.rmtree, _PRIVATE, True)
        return _PRIVATE


def open_session_directory() -> tuple[Path, bool]:
    """For a driver starting a session: the directory its processes will share,
    named in :data:`SESSION_DIR_ENV` for the processes it starts (xdist workers
    inherit it), and whether it was created here (then :func:`close_session_directory`
    removes it). An inherited one (a driver above this one set it) is reused."""
    named = os.environ.get(SESSION_DIR_ENV)
    if named and Path(named).is_dir():
        return Path(named), False
    path = Path(tempfile.mkdtemp(prefix="evomemory-session-"))
    os.environ[SESSION_DIR_ENV] = str(path)
    return path, True


def close_session_directory(path: Path, created: bool) -> None:
    if not created:
        return
    if os.environ.get(SESSION_DIR_ENV) == str(path):
        del os.environ[SESSION_DIR_ENV]
    shutil.rmtree(path, ignore_errors=True)


_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def endpoint_semaphore(endpoint: str, limit: int | None) -> threading.BoundedSemaphore | contextlib.nullcontext[None]:
    """One semaphore per endpoint for the whole process, so that every agent (one
    per stream) shares the endpoint's concurrency budget. The first limit wins;
    ``None`` (``model.max_concurrency`` unset): no bound of this process's own (each
    chain sends one request at a time, so the chains in flight bound it)."""
    if limit is None:
        return contextlib.nullcontext()
    with _SEMAPHORES_LOCK:
        semaphore = _SEMAPHORES.get(endpoint)
        if semaphore is None:
            semaphore = _SEMAPHORES[endpoint] = threading.BoundedSemaphore(limit)
        return semaphore


class _Waiter:
    """A thread waiting in a limiter's line: woken with a slot handed to it, or to
    look at the files (the first in line)."""

    __slots__ = ("ready", "slot")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.slot: int | None = None


_LIMITERS: dict[tuple[Path, str, int | None], EndpointLimiter] = {}
_LIMITERS_LOCK = threading.Lock()

#: Limiters whose files stay open; past this many endpoints in one process (a test
#: suite's scripted servers) the least recently built is retired
#: (:meth:`EndpointLimiter.close`): its models still use it, opening each file only while they need it.
MAX_OPEN_LIMITERS = 64


def endpoint_limiter(url: str, max_connections: int | None) -> EndpointLimiter:
    """The limiter of ``url`` in this session's directory (one object per process)."""
    directory = session_directory()
    key = (directory, url, max_connections)
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.pop(key, None) or EndpointLimiter(directory, url, max_connections)
        _LIMITERS[key] = limiter  # the most recent last
        if len(_LIMITERS) > MAX_OPEN_LIMITERS:
            _LIMITERS.pop(next(iter(_LIMITERS))).close()
        return limiter


__all__ = [
    "SESSION_DIR_ENV",
    "EndpointLimiter",
    "close_session_directory",
    "endpoint_limiter",
    "endpoint_semaphore",
    "open_session_directory",
    "session_directory",
]
