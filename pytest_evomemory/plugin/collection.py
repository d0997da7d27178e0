"""Collection of the benchmark's items, in every process that collects them.

A stream is only a stream if its tasks run in source order, so whatever reorders
items (``--ff``, ``--nf``, pytest-randomly) ours go back into the slots they hold;
a resumed session deselects what the interrupted run completed; and each process
notes the first task of each stream it will run (an xdist worker taking over a
crashed worker's stream restores the memory from there).
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from ..runtime.session import Session
from ..types import BenchmarkSample
from .stash import STARTUP_HEAP


def key_of(item: pytest.Item) -> str | None:
    """The item's stream key (``<stream>``, or ``<arm>:<stream>`` with several arms)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or sample_of(item) is None:
        return None
    key = callspec.params.get("evomemory_stream")
    return key if isinstance(key, str) else None


def sample_of(item: pytest.Item) -> BenchmarkSample | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    sample = callspec.params.get("evomemory_sample")
    return sample if isinstance(sample, BenchmarkSample) else None


class CollectionHooks:
    def __init__(self, session: Session) -> None:
        self.session = session
        #: stream key -> position of the first task this process runs
        self.first_positions: dict[str, int] = {}

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
        """Put benchmark items back in arm and stream order after every other plugin's reordering."""
        result = yield
        slots = [index for index, item in enumerate(items) if key_of(item) is not None]
        order = {key: index for index, key in enumerate(self.session.streams_by_key)}

        def place(item: pytest.Item) -> tuple[int, int]:
            sample = sample_of(item)
            return order[key_of(item) or ""], sample.position if sample is not None else 0

        ours = sorted((items[index] for index in slots), key=place)
        for index, item in zip(slots, ours, strict=True):
            items[index] = item
        if self.session.resuming:
            done = [item for item in items if self._done(item)]
            if done:
                config.hook.pytest_deselected(items=done)
                finished = set(map(id, done))
                items[:] = [item for item in items if id(item) not in finished]
        return result

    def _done(self, item: pytest.Item) -> bool:
        key, sample = key_of(item), sample_of(item)
        return key is not None and sample is not None and self.session.is_done(key, sample)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        last: dict[str, int] = {}
        for item in session.items:
            key, sample = key_of(item), sample_of(item)
            if key is None or sample is None:
                continue
            self.first_positions.setdefault(key, sample.position)
            if sample.position <= last.get(key, -1):
                raise pytest.UsageError(
                    f"evomemory: the tasks of stream {key!r} are out of order after "
                    "collection (a plugin reordered them); run without that plugin's reordering"
                )
            last[key] = sample.position
        session.config.stash[STARTUP_HEAP].settle()
