"""A total deadline for one attempt of a model call, whatever the HTTP client does.

HTTP clients time out each network operation (connect, write, one read), not a
request: a server that sends one byte every half second keeps every read short
and the request alive for ever (a 200 trickling its body was still running when
it was killed at 45 s with ``timeout_s: 2``). Here the attempt runs on the caller's
thread while one watchdog thread per process keeps the deadlines of every attempt
under way; when one passes, the watchdog tells the attempt to stop
(:attr:`Attempt.cancelled`, checked between chunks of the reply, and the abort
callbacks the transport registered, e.g. shutting its sockets down, which ends a
blocked read at once), and the caller gets :class:`DeadlineExceeded`.

The attempt used to run on a helper thread that the caller waited for. That cost
two thread wake-ups per call: about 0.25 ms of CPU, and on a loaded machine each
wake-up waits for a core (1.5-3 ms a call at load 5, measured), and with many
chains in one process each is one more turn for the interpreter lock. The watchdog
costs nothing per call: every deadline is later than the ones before it, so
registering one never wakes it.

This module knows nothing of HTTP, so any transport (plain sockets or ``httpx2``
today, :mod:`.transport`) gets the same deadline by reporting its progress to the
:class:`Attempt` it is given and registering how to abort it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class AttemptCancelled(Exception):
    """Raised inside an abandoned attempt, so that it stops reading."""


class DeadlineExceeded(Exception):
    """The attempt did not finish within its deadline.

    ``phase`` says what it was doing when the deadline passed and ``received`` how
    many reply bytes had arrived, so the error can tell a server that never
    answered from one that answers too slowly.
    """

    def __init__(self, seconds: float, phase: str, received: int) -> None:
        super().__init__(f"no complete reply within {seconds:g}s ({phase}, {received:,} bytes received)")
        self.seconds = seconds
        self.phase = phase
        self.received = received


class Attempt:
    """What a running attempt reports and is told: its phase, the bytes received,
    and whether the caller gave up on it."""

    def __init__(self) -> None:
        self.phase = "connecting and sending the request"
        self.received = 0
        #: the deadline passed while it ran (set by the watchdog)
        self.expired = False
        #: the driver interrupted the session while it ran (:func:`interrupt_calls`)
        self.interrupted = False
        #: it has returned or raised: the watchdog forgets it
        self.finished = False
        self._cancelled = False
        self._on_cancel: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def check(self) -> None:
        """Raise :class:`AttemptCancelled` once the caller has given up."""
        if self._cancelled:
            raise AttemptCancelled

    def sent(self) -> None:
        """Called by the transport once the whole request is sent: from now on the
        server is working on it (a model generating its reply takes most of the time)."""
        if self.phase == "connecting and sending the request":
            self.phase = "waiting for the reply (the request was sent)"

    def reading(self, received: int) -> None:
        """Called by the transport for each chunk of the reply body."""
        self.phase = "reading the reply"
        self.received += received
        self.check()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (e.g. shut the socket down) when the caller gives up;
        at once if it already has."""
        with self._lock:
            if not self._cancelled:
                self._on_cancel.append(callback)
                return
        _quietly(callback)

    def cancel(self) -> None:
        # Under the lock, so that nothing is aborted once the attempt has finished:
        # its connection may already serve the caller's next call.
        with self._lock:
            if self.finished:
                return
            self._cancelled = True
            callbacks, self._on_cancel = self._on_cancel, []
            for callback in callbacks:
                _quietly(callback)

    def finish(self) -> None:
        """It has returned or raised: nothing is aborted any more."""
        with self._lock:
            self.finished = True
            self._on_cancel = []


def _quietly(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # aborting an abandoned attempt is best effort
        pass


class _Watchdog:
    """One thread per process that cancels each attempt whose deadline passed.

    It sleeps until the earliest deadline it knows of. Registering an attempt drops
    the finished ones at the front of the queue and wakes the watchdog only when the
    new deadline comes before the one it sleeps until: attempts with the same
    timeout come in deadline order, so a process calling one model wakes it about
    once per ``timeout_s``, never per call.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Attempt]] = []
        self._numbers = itertools.count()
        #: taken directly where nothing waits on it (a Condition's own ``with`` is a Python call more)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake_at = math.inf  # when the thread looks next (inf: when told)
        self._pid = -1

    def watch(self, attempt: Attempt, deadline: float) -> None:
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked child: it has no thread yet
                self._pid, self._wake_at = os.getpid(), math.inf
                self._heap.clear()
                threading.Thread(target=self._serve, name="evomemory-deadlines", daemon=True).start()
            while self._heap and self._heap[0][2].finished:
                heapq.heappop(self._heap)
            heapq.heappush(self._heap, (deadline, next(self._numbers), attempt))
            if deadline < self._wake_at:
                self._wake_at = deadline
                self._changed.notify()

    def _serve(self) -> None:
        while True:
            with self._changed:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake_at = math.inf
                    self._changed.wait()
                    continue
                deadline, _, attempt = self._heap[0]
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._wake_at = deadline
                    self._changed.wait(remaining)
                    continue
                heapq.heappop(self._heap)
            attempt.expired = True
            attempt.cancel()


_WATCHDOG = _Watchdog()

#: Set while the driver interrupts the session (:func:`interrupt_calls`): a call
#: under way on any thread ends as Ctrl-C ends the main thread's, and no new one starts.
_INTERRUPTED = threading.Event()
_WAITING: set[Attempt] = set()
_WAITING_LOCK = threading.Lock()


def interrupt_calls() -> None:
    """Ctrl-C (or SIGTERM) for every thread: each call under way is aborted and
    raises ``KeyboardInterrupt`` in its caller, as Ctrl-C does in the main thread,
    and so does every call started until :func:`allow_calls`. ``evomemory run``'s
    chains run on threads of their own, which a signal never reaches."""
    with _WAITING_LOCK:
        _INTERRUPTED.set()
        waiting = list(_WAITING)
    for attempt in waiting:
        attempt.interrupted = True
        attempt.cancel()


def allow_calls() -> None:
    """The driver's interruption is over (the session ended): calls run again."""
    _INTERRUPTED.clear()


def call_within(seconds: float, attempt: Callable[[Attempt], T]) -> T:
    """``attempt(control)`` on this thread, with a total deadline of ``seconds``.

    Returns its result or re-raises its exception; raises :class:`DeadlineExceeded`
    when the deadline passed before it ended (the watchdog cancelled it, and its
    transport's abort ended whatever it was waiting for), ``KeyboardInterrupt``
    when the driver interrupted the session meanwhile (:func:`interrupt_calls`).
    Ctrl-C on the main thread ends the attempt where it is, as any blocking call.
    """
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt
    control = Attempt()
    with _WAITING_LOCK:
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt
        _WAITING.add(control)
    try:
        _WATCHDOG.watch(control, time.monotonic() + seconds)
        try:
            value = attempt(control)
        except BaseException:
            if control.interrupted:
                raise KeyboardInterrupt from None
            if control.expired:  # whatever the abort made the transport raise
                raise DeadlineExceeded(seconds, control.phase, control.received) from None
            raise
    finally:
        control.finish()
        with _WAITING_LOCK:
            _WAITING.discard(control)
    if control.interrupted:
        raise KeyboardInterrupt
    return value  # done in time, or done as the deadline passed: the reply is whole


__all__ = ["Attempt", "AttemptCancelled", "DeadlineExceeded", "allow_calls", "call_within", "interrupt_calls"]
