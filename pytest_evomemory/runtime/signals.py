"""SIGTERM, the one way: a CI timeout ends a session as Ctrl-C does.

A CI runner that times out sends SIGTERM; without a handler the process dies with
nothing summarized. With :class:`Termination` installed, SIGTERM raises
``KeyboardInterrupt("SIGTERM")`` (the drivers end the session as interrupted, the
run marked incomplete and resumable), except inside a critical section — while
records are being written, or the session is finishing — where it is deferred to
the section's end (recording) or ignored (finishing: a repeated SIGTERM must not
interrupt the summary being written).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: What a KeyboardInterrupt raised for SIGTERM carries.
SIGTERM_ARGS = ("SIGTERM",)


def is_sigterm(interrupt: BaseException) -> bool:
    return isinstance(interrupt, KeyboardInterrupt) and interrupt.args == SIGTERM_ARGS


class Termination:
    def __init__(self) -> None:
        self.terminated = False
        self.finishing = False
        #: critical sections open now, on any thread (``evomemory run``'s chains write
        #: their records at once, each arm under its own lock): counted under ``_count``
        self._depth = 0
        self._deferred = False
        self._count = threading.Lock()
        self._previous: Any = None
        self._installed = False

    def install(self, *, only_if_default: bool = True) -> None:
        """Handle SIGTERM in this (main) thread; leave a handler someone else set alone."""
        try:
            if only_if_default and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True
        except ValueError:  # not the main thread
            pass

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.terminated = True
        if self.finishing:
            return
        if self._depth:
            self._deferred = True  # raised once the section is over
            return
        raise KeyboardInterrupt(*SIGTERM_ARGS)

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A section SIGTERM must not cut in half (records being written), on any
        thread. A SIGTERM that came during one is raised when the last open section
        ends, on the thread that ends it. The handler (main thread, between any two
        bytecodes) only reads the count and never takes ``_count``, so it cannot wait
        for a lock its own thread holds."""
        with self._count:
            self._depth += 1
        try:
            yield
        finally:
            with self._count:
                self._depth -= 1
                deferred = not self._depth and self._deferred and not self.finishing
                if deferred:
                    self._deferred = False
        if deferred:
            raise KeyboardInterrupt(*SIGTERM_ARGS)


#: The handlers the shield replaced (None: no shield up).
_SHIELDED: dict[signal.Signals, Any] | None = None


def _noted(signum: int, frame: FrameType | None) -> None:
    """A further Ctrl-C or SIGTERM while the session ends: the session is already
    ending as interrupted, so there is nothing more to stop."""


def shield_interrupts() -> None:
    """After the first interrupt, further SIGINT and SIGTERM are ignored until
    :func:`lift_shield`: the session is already ending as interrupted, and a second
    Ctrl-C 50 ms later would otherwise cut the summary in half, or land in pytest's
    own handling of the first and print a Python traceback. Only the main thread can
    set handlers; elsewhere this does nothing (signals reach the main thread only)."""
    global _SHIELDED
    if _SHIELDED is not None:
        return
    try:
        previous = {number: signal.signal(number, _noted) for number in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:
        return
    _SHIELDED = previous


def lift_shield() -> None:
    """Put back the handlers :func:`shield_interrupts` replaced (at the session's very end)."""
    global _SHIELDED
    if _SHIELDED is None:
        return
    try:
        for number, handler in _SHIELDED.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
    except ValueError:
        return
    _SHIELDED = None


__all__ = ["SIGTERM_ARGS", "Termination", "is_sigterm", "lift_shield", "shield_interrupts"]
