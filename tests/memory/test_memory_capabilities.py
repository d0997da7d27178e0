"""The optional capabilities the paper's reference agents need, on every built-in backend:
``recent`` (ExpRecent's window) and ``forget`` with the ``forget``/``update`` tools
(ReMem's refine-memory operations), and snapshots that survive both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.core.errors import MemoryBackendError, ProtocolViolation
from pytest_evomemory.core.tools import Tool, ToolArgumentError
from pytest_evomemory.memory import IsolationGuard, MemorySystem, ObservedMemory
from pytest_evomemory.memory.base import Forgetting, RecencyRecall, supports_forgetting, supports_recency
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.snapshot import SnapshotCapable
from pytest_evomemory.memory.tools import tool_role

from .conftest import CONFORMANCE_TOP_K, DOCS_ADAPTER, OpenMemory

BUILTIN = ("inprocess", "sqlite", "postgres", "dense")
#: The memory libraries offer recent and forget too (their own tools stay theirs:
#: no editing tools), and their ids are the library's (UUIDs), not a counter.
LIBRARIES = ("mem0", "langmem")


def builtin(memory: MemorySystem, backend_id: str, *, libraries: bool = True) -> MemorySystem:
    """The backend, or a skip for one that need not offer the capabilities. The
    libraries and the copyable adapter of docs/memory.md offer recent and forget."""
    backend = backend_id.partition("+")[0]
    if backend not in BUILTIN and not (libraries and (backend in LIBRARIES or backend == DOCS_ADAPTER)):
        pytest.skip("a third-party adapter need not offer the optional capabilities")
    return memory


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def test_recent_gives_the_last_retained_records_newest_first(open_memory: OpenMemory, backend_id: str) -> None:
    memory = builtin(open_memory(), backend_id)
    assert isinstance(memory, RecencyRecall) and supports_recency(memory)
    assert memory.recent() == []
    ids = [memory.retain(f"harbour log entry {index}", {"n": index}) for index in range(6)]
    recent = memory.recent()
    assert [hit.record_id for hit in recent] == ids[::-1][:CONFORMANCE_TOP_K]
    assert [hit.content for hit in recent] == [f"harbour log entry {n}" for n in (5, 4, 3)]
    assert recent[0].metadata == {"n": 5}
    assert [hit.record_id for hit in memory.recent(2)] == [ids[5], ids[4]]
    assert [hit.record_id for hit in memory.recent(50)] == ids[::-1]
    with pytest.raises(MemoryBackendError, match="at least 1"):
        memory.recent(0)


def test_forget_removes_a_record_from_recall_and_recent(open_memory: OpenMemory, backend_id: str) -> None:
    memory = builtin(open_memory(), backend_id)
    assert isinstance(memory, Forgetting) and supports_forgetting(memory)
    keep = memory.retain("the lighthouse lamp burns whale oil")
    drop = memory.retain("the lighthouse lamp burns paraffin")
    assert {hit.record_id for hit in memory.recall("lighthouse lamp burns", top_k=5)} == {keep, drop}
    assert memory.forget(drop) is True
    assert [hit.record_id for hit in memory.recall("lighthouse lamp burns paraffin", top_k=5)] == [keep]
    assert [hit.record_id for hit in memory.recent()] == [keep]
    if hasattr(memory, "__len__"):
        assert len(memory) == 1
    # unknown, repeated, malformed and huge ids change nothing
    for unknown in (drop, "424242", "not-an-id", "", "9" * 40, "-3"):
        assert memory.forget(unknown) is False
    newer = memory.retain("the lighthouse lamp was replaced by an electric bulb")
    assert [hit.record_id for hit in memory.recent()] == [newer, keep]


def test_snapshots_capture_forgotten_and_rewritten_records(
    open_memory: OpenMemory, backend_id: str, tmp_path: Path
) -> None:
    """RecordLog appends only new records; a forget shows in the record count, so
    the next save writes the log anew and a restore has exactly the live records."""
    memory = builtin(open_memory("s1"), backend_id)
    assert isinstance(memory, SnapshotCapable) and isinstance(memory, Forgetting)
    ids = [memory.retain(f"falcon sighting number {index}") for index in range(4)]
    memory.snapshot(tmp_path)
    memory.forget(ids[1])
    rewritten = memory.retain("falcon sighting number 2, corrected")
    memory.forget(ids[2])  # a rewrite: new record in, old one out, the count unchanged
    memory.snapshot(tmp_path)
    expected = [(h.record_id, h.content) for h in memory.recall("falcon sighting number", top_k=10)]
    fresh = builtin(open_memory("s2"), backend_id)
    assert isinstance(fresh, SnapshotCapable) and isinstance(fresh, RecencyRecall)
    fresh.restore(tmp_path)
    assert [(h.record_id, h.content) for h in fresh.recall("falcon sighting number", top_k=10)] == expected
    assert {record_id for record_id, _ in expected} == {ids[0], ids[3], rewritten}
    assert [hit.record_id for hit in fresh.recent(10)] == [rewritten, ids[3], ids[0]]
    if backend_id.partition("+")[0] not in LIBRARIES:  # a library's ids are UUIDs
        # the next id continues where the uninterrupted memory would
        assert fresh.retain("next") == memory.retain("next")


def test_editing_tools_are_offered_only_when_the_config_asks(open_memory: OpenMemory, backend_id: str) -> None:
    plain = builtin(open_memory("s1"), backend_id, libraries=False)
    assert sorted(by_name(list(plain.tools()))) == ["recall", "retain"]
    editing = open_memory("s2", editing_tools=True)
    tools = by_name(list(editing.tools()))
    assert sorted(tools) == ["forget", "recall", "retain", "update"]
    assert tool_role(tools["forget"]) == "forget" and tool_role(tools["update"]) is None

    first = json.loads(tools["retain"].handler({"content": "the ferry leaves at nine"}))["id"]
    updated = json.loads(tools["update"].handler({"id": first, "content": "the ferry leaves at ten"}))
    assert updated["updated"] is True and updated["old_id"] == first and updated["id"] != first
    recalled = json.loads(tools["recall"].handler({"query": "when does the ferry leave"}))
    assert [(item["id"], item["content"]) for item in recalled] == [(updated["id"], "the ferry leaves at ten")]
    with pytest.raises(ToolArgumentError, match="no record has id"):
        tools["update"].handler({"id": first, "content": "the ferry leaves at eleven"})
    # a failed update stored nothing
    assert len(json.loads(tools["recall"].handler({"query": "ferry leaves"}))) == 1
    assert json.loads(tools["forget"].handler({"id": updated["id"]})) == {"forgotten": True, "id": updated["id"]}
    with pytest.raises(ToolArgumentError, match="no record has id"):
        tools["forget"].handler({"id": updated["id"]})
    assert json.loads(tools["recall"].handler({"query": "ferry leaves"})) == []


def test_observed_memory_counts_and_checks_recent_and_the_editing_tools(tmp_path: Path) -> None:
    backend = InProcessMemory(default_top_k=2)
    backend.editing_tools = True
    guard = IsolationGuard()
    observed = ObservedMemory(backend, "s1", guard)
    assert observed.recent() == []  # an empty window before anything is written is fine
    tools = by_name(list(observed.tools()))
    record = json.loads(tools["retain"].handler({"content": "gulls nest on the pier"}))["id"]
    tools["update"].handler({"id": record, "content": "gulls nest on the old pier"})
    assert [hit.content for hit in observed.recent()] == ["gulls nest on the old pier"]
    assert observed.counts.recalls == 2 and observed.counts.retains == 1 and observed.counts.other == 1
    assert observed.recalled[-1]["content"] == "gulls nest on the old pier"
    tools["forget"].handler({"id": observed.recalled[-1]["record_id"]})
    assert observed.counts.forgets == 1
    observed.close()

    # a later stream whose recency window returns an earlier stream's record is a leak
    leaky = InProcessMemory(default_top_k=2)
    leaky.retain("terns nest on the dunes")
    leaky.retain("gulls nest on the old pier")  # mem-2 with the same text: what s1 recalled
    later = ObservedMemory(leaky, "s2", guard)
    later.restored()
    with pytest.raises(ProtocolViolation, match="memory leak"):
        later.recent()


def test_a_backend_without_recent_fails_clearly() -> None:
    class Minimal:
        default_top_k = 2

        def retain(self, content: str, metadata: object = None) -> str:
            return "1"

        def recall(self, query: str, top_k: int | None = None) -> list[object]:
            return []

        def reset(self) -> None: ...
        def close(self) -> None: ...
        def tools(self) -> list[Tool]:
            return []

    observed = ObservedMemory(Minimal(), "s1")  # type: ignore[arg-type]
    assert not supports_recency(observed) and not supports_forgetting(observed)
    with pytest.raises(MemoryBackendError, match="offers no recent"):
        observed.recent()


def test_editing_tools_on_a_backend_that_cannot_forget_is_refused() -> None:
    from pytest_evomemory.memory.factory import enable_editing_tools

    with pytest.raises(MemoryBackendError, match="cannot forget records"):
        enable_editing_tools(object(), "mine")  # type: ignore[arg-type]
