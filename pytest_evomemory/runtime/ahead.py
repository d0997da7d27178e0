"""Loading ahead: what a process will need later, loaded on one thread of its own
while its chains wait on the network.

A process first meets much of what it needs in its chains' first episodes, not
at start-up: the in-process memory's numpy (imported where its arrays are first
filled, some 50-100 ms), the record documents' validators (built at their first
use, ``defer_build``), and at the session's end the summary's and the pages'.
Met by every chain at once, each is a pause of every chain between two model
calls (they queue on the import lock and the interpreter lock): with 16 chains
``benchmarks/bench_grid.py`` measured a mean gap of 130 ms after a chain's first
reply and 115 ms after its second, against 3 ms after the others. Loaded here
while the chains' first calls are in flight, it costs no chain any time, and
start-up (the time to the first call) does not grow either.

Loads run in the order they were added, one at a time, each once. A load that
fails is left to its point of use, which loads it again and says what failed
where that belongs.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable


class LoadAhead:
    """The loads a process queues for later (:meth:`add`), run on a thread of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Callable[[], None]] = deque()
        self._added: set[Hashable] = set()
        self._thread: threading.Thread | None = None

    def add(self, key: Hashable, load: Callable[[], None]) -> None:
        """Queue ``load`` (once per ``key``) and start the thread if it is not running."""
        with self._lock:
            if key in self._added:
                return
            self._added.add(key)
            self._queue.append(load)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="evomemory-load-ahead", daemon=True)
                self._thread.start()

    def join(self) -> None:
        """Wait for the loads queued so far: a process must not end while a thread imports."""
        while True:
            with self._lock:
                thread = self._thread
            if thread is None:
                return
            thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                load = self._queue.popleft()
            try:
                load()
            except Exception:
                pass  # loaded again where it is used, which says what failed


__all__ = ["LoadAhead"]
