"""Stash keys shared by the plugin's hooks and the session it loads on demand.

They live apart from both so that the hooks can read them without importing the
session (and with it the core) in test runs that never use the benchmark.
"""

from __future__ import annotations

from typing import Any

import pytest

from .heap import StartupHeap

#: The benchmark session (:class:`.session.EvoMemorySession`), set only when a run
#: config turns the benchmark on. Typed loosely here so this module imports no core.
SESSION_KEY: pytest.StashKey[Any] = pytest.StashKey()
#: The garbage collector's start-up handling for this run (see heap.py).
STARTUP_HEAP: pytest.StashKey[StartupHeap] = pytest.StashKey()


class _Holder:
    """What xdist's ``is_xdist_worker`` reads (a request or session's ``config``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in an xdist worker process, by xdist's own test (False without xdist)."""
    try:
        from xdist import is_xdist_worker as xdist_is_worker
    except ImportError:
        return False
    return bool(xdist_is_worker(_Holder(config)))
