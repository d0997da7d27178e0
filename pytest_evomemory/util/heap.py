"""The garbage collector during a run's start-up: paused while it allocates, then frozen.

Start-up allocates hundreds of thousands of objects that all live until the
process ends: modules, the config, the collected items and, once a stream opens,
its agent, model client and memory. Python's cyclic collector cannot tell, so it
keeps scanning them: collection passes during the imports cost about 5-10 % of
every process's start-up CPU (pytest's controller and each xdist worker, all before
the first model call), and pytest's collections at session end (its
unraisable-exception check) rescanned the whole heap, most of a worker's shutdown.

So both drivers pause the collector while the session starts (pytest: from the
switch until collection is over; ``evomemory run``: while the session opens), and
the session pauses it again while a stream opens (``StreamDriver.start_stream``, with
the heap its driver gave it), then what exists moves out of its sight with
``gc.freeze()``. What the run allocates afterwards is collected as usual. Freezing
never reclaims cyclic garbage that already exists, so it is done only in a process
that exists for the run, never inside a test (pytester's in-process runs, a test
calling ``evomemory run`` in-process).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager


class StartupHeap:
    def __init__(self, *, may_freeze: bool) -> None:
        self.may_freeze = may_freeze
        self._paused = False

    @classmethod
    def for_process(cls, *, fresh: bool = False) -> StartupHeap:
        """Freezing is allowed in a process started for the run (``fresh``: an xdist
        worker) and in any run that is not itself running inside a test."""
        return cls(may_freeze=fresh or "PYTEST_CURRENT_TEST" not in os.environ)

    def pause(self) -> None:
        if not self._paused and gc.isenabled():
            gc.disable()
            self._paused = True

    def settle(self) -> None:
        """Start-up work is done: freeze what exists (where allowed), collect again."""
        if self.may_freeze:
            gc.freeze()
        self.resume()

    def exiting(self) -> None:
        """The run is over and the process ends next: freeze what exists (where
        allowed), so that the interpreter's last collection at exit does not scan the
        whole heap again (15-20 ms of every ``evomemory run``'s exit at 16 chains,
        after its last model reply). What the run wrote is closed already; what the
        freeze keeps from that collection is cyclic garbage, freed with the process."""
        if self.may_freeze:
            gc.freeze()

    def resume(self) -> None:
        if self._paused:
            gc.enable()
            self._paused = False

    @contextmanager
    def paused(self, *, settle_after: bool = True) -> Iterator[None]:
        """Pause for the block. If it fails, resume; if it succeeds, settle, or
        stay paused for a later :meth:`settle` (``settle_after=False``)."""
        self.pause()
        try:
            yield
        except BaseException:
            self.resume()
            raise
        if settle_after:
            self.settle()
