"""Stash keys shared by the plugin and the session it loads on demand.

They live apart from both so that :mod:`.plugin` can read them without importing
the session (and with it the core) in test runs that never use the benchmark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._heap import StartupHeap
    from ._session import EvoMemorySession

SESSION_KEY: pytest.StashKey[EvoMemorySession] = pytest.StashKey()
#: Records of the running phase of an item, moved onto its report (see plugin.py).
PENDING_RECORDS = pytest.StashKey[list[dict[str, Any]]]()
#: The garbage collector's start-up handling for this run (see _heap.py).
STARTUP_HEAP: pytest.StashKey[StartupHeap] = pytest.StashKey()
