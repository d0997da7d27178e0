"""Which command lines make a side run (docs/artefacts.md, "An earlier run is never
destroyed"): decided from pytest's options alone, no session started."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_evomemory.plugin.activate import _hand_picked


class _Cache:
    def __init__(self, lastfailed: dict[str, bool]) -> None:
        self.lastfailed = lastfailed

    def get(self, key: str, default: Any) -> Any:
        return self.lastfailed if key == "cache/lastfailed" else default


def _config(args: list[str], lastfailed: dict[str, bool] | None = None, **options: Any) -> Any:
    option = SimpleNamespace(**{"keyword": "", "deselect": [], "lf": False, **options})
    return SimpleNamespace(args=args, option=option, cache=None if lastfailed is None else _Cache(lastfailed))


@pytest.mark.parametrize(
    ("config", "picked"),
    [
        (_config([]), None),
        (_config(["evomemory::test_task[sample_facts/f03]"]), "node id"),
        (_config([], keyword="f03"), "-k"),
        (_config([], deselect=["evomemory::test_task[sample_facts/f03]"]), "--deselect"),
        # --lf narrows the benchmark only when the cache records a failed task: with none,
        # pytest runs every task (a full run, not a side run) or none (nothing is written)
        (_config([], {}, lf=True), None),
        (_config(["tests/"], {"tests/test_mine.py::test_x": True}, lf=True), None),
        (_config([], {"evomemory::test_task[sample_facts/f03]": True}, lf=True), "--lf"),
        (_config([], None, lf=True), None),  # -p no:cacheprovider: --lf narrows nothing
    ],
)
def test_lf_is_a_side_run_only_when_it_narrows_the_tasks(config: Any, picked: str | None) -> None:
    assert _hand_picked(config) == picked
