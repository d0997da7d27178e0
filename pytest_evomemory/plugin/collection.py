"""Collection of the benchmark's items, in every process that collects them.

The items module gets the node id ``evomemory`` wherever the package is installed
(ids a user can copy, a JUnit classname that is not empty). A stream is only a
stream if its tasks run in source order, so whatever reorders items (``--ff``,
``--nf``, pytest-randomly) ours go back into the slots they hold; a resumed session
deselects what the interrupted run completed; and each process notes the first
task of each stream it will run (an xdist worker taking over a crashed worker's
stream restores the memory from there). Collection over, the start-up heap settles.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from ..core.types import BenchmarkSample
from ..runtime.plan import SessionPlan
from .items import ITEMS_MODULE, NODE_PREFIX
from .stash import STARTUP_HEAP


def task_of(item: pytest.Item) -> tuple[str, BenchmarkSample] | None:
    """A benchmark item's stream key (``<stream>``, or ``<arm>:<stream>`` with several
    arms) and task; None for any other item."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    key, sample = params.get("evomemory_stream"), params.get("evomemory_sample")
    return (key, sample) if isinstance(key, str) and isinstance(sample, BenchmarkSample) else None


class CollectionHooks:
    def __init__(self, plan: SessionPlan) -> None:
        self.plan = plan
        #: stream key -> position of the first task this process runs
        self.first_positions: dict[str, int] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(self, module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        if module_path != ITEMS_MODULE:
            return None
        module: pytest.Module = pytest.Module.from_parent(parent, path=module_path, nodeid=NODE_PREFIX)
        return module

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
        """Put benchmark items back in arm and stream order after every other plugin's reordering."""
        result = yield
        ours = {index: task for index, item in enumerate(items) if (task := task_of(item)) is not None}
        order = {key: index for index, key in enumerate(self.plan.streams_by_key)}
        placed = iter(sorted(ours, key=lambda index: (order[ours[index][0]], ours[index][1].position)))
        items[:] = [items[next(placed)] if index in ours else item for index, item in enumerate(items)]
        if self.plan.resuming:
            done = [item for item in items if (task := task_of(item)) is not None and self.plan.is_done(*task)]
            if done:
                config.hook.pytest_deselected(items=done)
                finished = set(map(id, done))
                items[:] = [item for item in items if id(item) not in finished]
        return result

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        last: dict[str, int] = {}
        for key, sample in filter(None, map(task_of, session.items)):
            self.first_positions.setdefault(key, sample.position)
            if sample.position <= last.get(key, -1):
                raise pytest.UsageError(
                    f"evomemory: the tasks of stream {key!r} are out of order after "
                    "collection (a plugin reordered them); run without that plugin's reordering"
                )
            last[key] = sample.position
        session.config.stash[STARTUP_HEAP].settle()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        config.stash[STARTUP_HEAP].resume()  # a session that never finished collecting must not leave it paused
