"""The shared backend base (memory/backend.py): the rules every shipped backend
keeps alike, checked once here on the base and on the backends built directly."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.core.types import MemoryHit
from pytest_evomemory.memory.backend import MemoryBase
from pytest_evomemory.memory.base import MemorySystem
from pytest_evomemory.memory.dense import DenseMemory
from pytest_evomemory.memory.embedders import HashingEmbedder
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.sqlite import SqliteMemory
from pytest_evomemory.memory.tools import tool_role


class Jar(MemoryBase):
    """The smallest memory a user could write on the base."""

    KIND = "jar"

    def __init__(self, default_top_k: int) -> None:
        super().__init__(default_top_k)
        self.items: list[str] = []

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        self.items.append(content)
        return str(len(self.items))

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        found = [(str(n), text) for n, text in enumerate(self.items, 1) if query in text]
        return [MemoryHit(rid, text, 1.0, {}) for rid, text in found[: self._checked_limit(top_k)]]

    def reset(self) -> None:
        self._check_open()
        self.items.clear()

    def close(self) -> None:
        self._closed = True


def test_a_memory_on_the_base_is_a_memory_system_with_the_standard_tools() -> None:
    jar = Jar(2)
    assert isinstance(jar, MemorySystem)
    assert [tool_role(tool) for tool in jar.tools()] == ["retain", "recall"]
    for n in range(3):
        jar.retain(f"note {n}")
    assert [hit.record_id for hit in jar.recall("note")] == ["1", "2"]
    with pytest.raises(MemoryBackendError, match=r"^recall: top_k must be at least 1, got 0$"):
        jar.recall("note", top_k=0)
    with pytest.raises(MemoryBackendError, match=r"^recent: limit must be at least 1, got -1$"):
        jar._recent_limit(-1)
    jar.close()
    with pytest.raises(MemoryBackendError, match=r"^jar memory is closed \(stream teardown closed it\); it cannot be used any more$"):
        jar.retain("late")


def test_a_memory_missing_a_protocol_method_cannot_be_built() -> None:
    class Half(MemoryBase):
        def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
            return ""

    with pytest.raises(TypeError, match="recall"):
        Half(1)  # type: ignore[abstract]


def test_backends_built_directly_refuse_a_top_k_below_one(tmp_path: Path) -> None:
    """The config checks top_k >= 1 when it is read; a backend built without a config
    (a user's factory, a test) is checked by the base."""
    builders: list[Callable[[], MemoryBase]] = [
        lambda: InProcessMemory(default_top_k=0),
        lambda: DenseMemory(HashingEmbedder(64), default_top_k=0),
        lambda: SqliteMemory(tmp_path / "m.sqlite3", default_top_k=0),
    ]
    for build in builders:
        with pytest.raises(MemoryBackendError, match=r"^memory top_k must be at least 1$"):
            build()


def test_each_backend_still_names_itself_when_closed(tmp_path: Path) -> None:
    sqlite = SqliteMemory(tmp_path / "m.sqlite3")
    closed = [
        (InProcessMemory(), "this in-process memory was closed at stream teardown"),
        (DenseMemory(HashingEmbedder(64)), "this dense memory was closed at stream teardown"),
        (sqlite, f"sqlite memory {str(tmp_path / 'm.sqlite3')!r} is closed (stream teardown closed it); "
                 "it cannot be used any more"),
    ]
    for memory, message in closed:
        memory.close()
        with pytest.raises(MemoryBackendError) as refused:
            memory.recall("anything")
        assert str(refused.value) == message
