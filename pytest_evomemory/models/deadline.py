"""A total deadline for one attempt of a model call, whatever the HTTP client does.

HTTP clients time out each network operation (connect, write, one read), not a
request: a server that sends one byte every half second keeps every read short
and the request alive for ever (a 200 trickling its body was still running when
it was killed at 45 s with ``timeout_s: 2``). Here the attempt runs on a helper
thread and the caller waits for at most the deadline; when it passes, the caller
goes on with :class:`DeadlineExceeded`, and the attempt is told to stop
(:attr:`Attempt.cancelled`, checked between chunks of the reply, and any abort
callback the transport registered, e.g. shutting its socket down).

This module knows nothing of HTTP, so any transport (``httpx2`` today, another
client tomorrow) gets the same deadline by reporting its progress to the
:class:`Attempt` it is given.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

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
        self._cancelled = threading.Event()
        self._on_cancel: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise :class:`AttemptCancelled` once the caller has given up."""
        if self._cancelled.is_set():
            raise AttemptCancelled

    def reading(self, received: int) -> None:
        """Called by the transport for each chunk of the reply body."""
        self.phase = "reading the reply"
        self.received += received
        self.check()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (e.g. shut the socket down) when the caller gives up;
        at once if it already has."""
        with self._lock:
            if not self._cancelled.is_set():
                self._on_cancel.append(callback)
                return
        _quietly(callback)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled.set()
            callbacks, self._on_cancel = self._on_cancel, []
        for callback in callbacks:
            _quietly(callback)


def _quietly(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # aborting an abandoned attempt is best effort
        pass


class _Worker:
    """A helper thread that runs attempts one after another.

    Starting a thread per call cost about 0.1 ms, a fifth of a call to a local
    server; idle workers wait for the next attempt instead. An attempt the caller
    gave up on keeps its worker until it ends; the next call then takes another.
    """

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="evomemory-model-call", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self.jobs.get()()
            with _IDLE_LOCK:
                if len(_IDLE) >= MAX_IDLE_WORKERS:
                    return
                _IDLE.append(self)


#: Idle helper threads kept for the next calls (more are started when all are busy).
MAX_IDLE_WORKERS = 32
_IDLE: list[_Worker] = []
_IDLE_LOCK = threading.Lock()


def _run_on_a_worker(job: Callable[[], None]) -> None:
    with _IDLE_LOCK:
        worker = _IDLE.pop() if _IDLE else None
    (worker or _Worker()).jobs.put(job)


class _Outcome(Generic[T]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None
        #: the driver interrupted the session while this call was waited for
        self.interrupted = False


#: Set while the driver interrupts the session (:func:`interrupt_calls`): a call
#: waited for on any thread ends as Ctrl-C ends the main thread's, and no new one starts.
_INTERRUPTED = threading.Event()
_WAITING: set[_Outcome[object]] = set()
_WAITING_LOCK = threading.Lock()


def interrupt_calls() -> None:
    """Ctrl-C (or SIGTERM) for every thread: each call being waited for raises
    ``KeyboardInterrupt`` in its caller, as Ctrl-C does in the main thread, and so
    does every call started until :func:`allow_calls`. ``evomemory run``'s chains
    run on threads of their own, which a signal never reaches."""
    with _WAITING_LOCK:
        _INTERRUPTED.set()
        waiting = list(_WAITING)
    for outcome in waiting:
        outcome.interrupted = True
        outcome.done.set()


def allow_calls() -> None:
    """The driver's interruption is over (the session ended): calls run again."""
    _INTERRUPTED.clear()


def call_within(seconds: float, attempt: Callable[[Attempt], T]) -> T:
    """``attempt(control)`` with a total deadline of ``seconds``.

    Returns its result or re-raises its exception; raises :class:`DeadlineExceeded`
    when it is not done in time (the attempt is cancelled and left to end on its
    own thread). Ctrl-C in the caller cancels the attempt too.
    """
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt
    control = Attempt()
    outcome: _Outcome[T] = _Outcome()

    def run() -> None:
        try:
            outcome.value = attempt(control)
        except BaseException as error:  # handed to the caller, never raised on this thread
            outcome.error = error
        finally:
            outcome.done.set()

    waited: _Outcome[object] = outcome  # type: ignore[assignment]
    with _WAITING_LOCK:
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt
        _WAITING.add(waited)
    _run_on_a_worker(run)
    try:
        finished = outcome.done.wait(seconds)
    except BaseException:
        control.cancel()
        raise
    finally:
        with _WAITING_LOCK:
            _WAITING.discard(waited)
    if outcome.interrupted:
        control.cancel()
        raise KeyboardInterrupt
    if not finished:
        control.cancel()
        raise DeadlineExceeded(seconds, control.phase, control.received)
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]  # set whenever no error was


__all__ = ["Attempt", "AttemptCancelled", "DeadlineExceeded", "allow_calls", "call_within", "interrupt_calls"]
