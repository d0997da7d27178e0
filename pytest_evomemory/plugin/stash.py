"""Stash keys shared by the plugin's hooks and the modules it loads on demand.

They live apart from both so that the hooks can read them without importing the
session (and with it the core) in test runs that never use the benchmark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..runtime.session import Session
    from ..util.heap import StartupHeap

#: The benchmark session, set only when a run config turns the benchmark on.
#: Typed loosely here so this module imports no core.
SESSION_KEY: pytest.StashKey[Any] = pytest.StashKey()
#: The garbage collector's start-up handling for this run (see ..heap).
STARTUP_HEAP: pytest.StashKey[StartupHeap] = pytest.StashKey()


def get_session(config: pytest.Config) -> Session:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        raise pytest.UsageError("evomemory: no run config; pass --evomemory-config=PATH")
    return session  # type: ignore[no-any-return]


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in an xdist worker process: xdist's own test (``xdist.is_xdist_worker``),
    without importing xdist."""
    return hasattr(config, "workerinput")


def distributes(config: pytest.Config) -> bool:
    """Whether this process is an xdist controller handing tasks to workers (it then
    runs none itself)."""
    if is_xdist_worker(config) or config.option.collectonly:
        return False
    dist = getattr(config.option, "dist", "no")
    processes = getattr(config.option, "numprocesses", None)
    return (dist != "no" and bool(processes)) or bool(getattr(config.option, "tx", None))
