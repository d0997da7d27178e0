"""The isolation guard and the instrumentation of a memory's declared tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_evomemory.core.errors import ProtocolViolation
from pytest_evomemory.core.tools import Tool, ToolArgumentError
from pytest_evomemory.core.types import ToolSpec
from pytest_evomemory.memory.guard import IsolationGuard, records_in_tool_result
from pytest_evomemory.memory.tools import (
    RECALL_SPEC,
    MemoryRole,
    MemoryTool,
    MemoryToolCall,
    instrument_memory_tools,
    memory_tools,
    tool_role,
)
from tests.memory.consolidating_adapter import FactMemory

from .conftest import OpenMemory


@dataclass
class MemoryToolLog:
    """A ready-made observer: counts calls by role and keeps them in order."""

    calls: list[MemoryToolCall] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def __call__(self, call: MemoryToolCall) -> None:
        self.calls.append(call)
        key = call.role or "other"
        self.counts[key] = self.counts.get(key, 0) + 1

    def count(self, role: MemoryRole) -> int:
        return self.counts.get(role, 0)

# --------------------------------------------------------------------------- isolation guard


def consolidated_memory() -> tuple[FactMemory, str, str]:
    memory = FactMemory(default_top_k=3)
    first = memory.retain("The Sark ferry is at 7:15.")
    second = memory.retain("The Sark ferry is at 8:00.")
    return memory, first, second


def test_a_consolidating_memory_passes_the_guard_though_recall_returns_new_ids() -> None:
    memory, first, second = consolidated_memory()
    hits = memory.recall("Sark ferry")
    assert [hit.content for hit in hits] == ["The Sark ferry is at 8:00 (earlier: at 7:15)"]
    assert hits[0].record_id not in {first, second}  # derived: an id retain never returned
    guard = IsolationGuard()
    guard.start_stream("s1")
    guard.note_write()
    assert guard.check_recall((hit.record_id, hit.content) for hit in hits) is None


def test_a_recall_before_anything_was_stored_must_be_empty() -> None:
    guard = IsolationGuard()
    guard.start_stream("s2")
    assert guard.check_recall([]) is None
    message = guard.check_recall([("7", "left over from an earlier run")])
    assert message is not None
    assert message.startswith("memory leak: recall in stream 's2' returned 1 record(s) before anything was stored")


def test_a_record_from_an_earlier_stream_is_caught_even_after_writes() -> None:
    guard = IsolationGuard()
    guard.start_stream("s1")
    guard.note_write(("1", "alpha secret"))  # retained, never recalled in s1
    assert guard.check_recall([("2", "alpha note")]) is None
    guard.end_stream()
    guard.start_stream("s2")
    guard.note_write()
    # same ids, other content: a fresh per-stream store numbering from 1 again is fine
    assert guard.check_recall([("1", "beta secret"), ("2", "beta note")]) is None
    for leaked in (("1", "alpha secret"), ("2", "alpha note")):
        message = guard.check_recall([leaked])
        assert message is not None and "which stream 's1' stored or recalled earlier" in message


def test_a_restored_memory_counts_as_written() -> None:
    guard = IsolationGuard()
    guard.start_stream("s1")
    guard.note_write()  # what the runtime calls after restore() on resume
    assert guard.check_recall([("4", "from the snapshot")]) is None


def test_tool_results_are_read_when_they_list_records() -> None:
    assert records_in_tool_result('[{"id": "fact-3", "content": "x"}, {"content": "y"}]') == [
        ("fact-3", "x"), (None, "y"),
    ]
    assert records_in_tool_result("[]") == []
    for unreadable in ("You remember: x", '{"content": "x"}', '[{"text": "x"}]', "[1]"):
        assert records_in_tool_result(unreadable) is None


@pytest.mark.embedder_meaning
def test_guard_over_real_backends_across_streams(open_memory: OpenMemory) -> None:
    """Every conformance backend passes; reopening a stream's store does not leak.
    A recall tool's result is read as the tool declares (a library's own format,
    e.g. Mem0's ``{"results": [...]}``), else as the built-in JSON list."""
    guard = IsolationGuard()
    for stream in ("stream_a", "stream_b"):
        memory = open_memory(stream)
        guard.start_stream(stream)
        recall = next(tool for tool in memory.tools() if tool_role(tool) == "recall")
        (argument,) = recall.spec.parameters["required"]
        read = (recall.read_records if isinstance(recall, MemoryTool) else None) or records_in_tool_result
        records = read(recall.handler({argument: "glacier melt"}))
        assert records is not None and guard.check_recall(records) is None
        for index in range(4):
            record_id = memory.retain(f"{stream} fact {index}: glacier melt rate")
            guard.note_write((record_id, f"{stream} fact {index}: glacier melt rate"))
        records = read(recall.handler({argument: "glacier melt rate"}))
        assert records and guard.check_recall(records) is None
        assert guard.check_recall((h.record_id, h.content) for h in memory.recall("glacier", top_k=10)) is None
        guard.end_stream()


# --------------------------------------------------------------------------- declared tools


def test_instrumentation_calls_the_declared_handlers_and_counts_by_role() -> None:
    memory, _, _ = consolidated_memory()
    log = MemoryToolLog()
    tools = {tool.name: tool for tool in instrument_memory_tools(memory.tools(), log)}
    assert list(tools) == ["remember", "search", "forget"]
    assert [tool.spec for tool in tools.values()] == [tool.spec for tool in memory.tools()]
    stored = json.loads(tools["remember"].handler({"text": "Pier 4 is closed."}))
    found = json.loads(tools["search"].handler({"question": "pier closed"}))
    assert found == [{"id": stored["remembered"], "content": "Pier 4 is closed."}]  # the declared handler ran
    assert json.loads(tools["forget"].handler({"id": stored["remembered"]})) == {"forgotten": stored["remembered"]}
    assert memory.recall("pier closed") == []
    with pytest.raises(ToolArgumentError, match="no memory"):  # errors pass through unchanged
        tools["forget"].handler({"id": "fact-999"})
    assert (log.count("retain"), log.count("recall"), log.count("forget")) == (1, 1, 2)
    assert [(c.tool, c.role, c.error is None) for c in log.calls] == [
        ("remember", "retain", True), ("search", "recall", True), ("forget", "forget", True),
        ("forget", "forget", False),
    ]
    assert log.calls[1].result == json.dumps(found)
    assert all(isinstance(tool, MemoryTool) for tool in tools.values())


def test_roles_come_from_the_declaration_or_the_standard_name() -> None:
    def handler(arguments: Mapping[str, Any]) -> str:
        return "ok"

    spec = ToolSpec("note", "", {"type": "object"})
    assert tool_role(Tool(spec, handler)) is None
    assert tool_role(MemoryTool(spec, handler, "retain")) == "retain"
    assert tool_role(Tool(RECALL_SPEC, handler)) == "recall"
    log = MemoryToolLog()
    (wrapped,) = instrument_memory_tools([Tool(spec, handler)], log)
    assert wrapped.handler({}) == "ok" and log.counts == {"other": 1}


@pytest.mark.embedder_meaning
def test_the_builtin_recall_tool_takes_top_k_from_the_memory_config(open_memory: OpenMemory) -> None:
    memory = open_memory()
    if type(memory).__name__ not in {"InProcessMemory", "SqliteMemory", "PostgresMemory"}:
        pytest.skip("the built-in tools only")
    for index in range(10):
        memory.retain(f"lighthouse lamp log {index}")
    recall = {tool.name: tool for tool in memory.tools()}["recall"]
    assert "top_k" not in recall.spec.parameters["properties"]
    for arguments in ({"query": "lighthouse lamp"}, {"query": "lighthouse lamp", "top_k": 50}):
        hits = json.loads(recall.handler(arguments))
        assert len(hits) == memory.default_top_k  # the model cannot raise it
        assert all(set(hit) == {"id", "content", "score"} for hit in hits)


def test_the_builtin_retain_tool_answers_an_unstorable_record_with_a_tool_error(open_memory: OpenMemory) -> None:
    memory = open_memory()
    if type(memory).__name__ not in {"InProcessMemory", "SqliteMemory", "PostgresMemory"}:
        pytest.skip("the built-in tools only")
    retain = memory_tools(memory)[0]
    try:
        stored = json.loads(retain.handler({"content": "a lone surrogate \ud800 here"}))
    except ToolArgumentError as error:
        assert "this record was not stored" in str(error) and "surrogate" in str(error)
    else:
        assert memory.recall("lone surrogate")[0].record_id == stored["id"]  # stored losslessly
        assert memory.recall("lone surrogate")[0].content == "a lone surrogate \ud800 here"
    after = json.loads(retain.handler({"content": "the stream goes on: harbor pilot"}))
    assert memory.recall("harbor pilot")[0].record_id == after["id"]


# --------------------------------------------------------------------------- ObservedMemory


def test_observed_memory_counts_declared_tools_by_role_and_guards_recalls() -> None:
    from pytest_evomemory.memory.observed import ObservedMemory

    guard = IsolationGuard()
    memory = ObservedMemory(FactMemory(default_top_k=3), "s1", guard)
    tools = {tool.name: tool for tool in memory.tools()}
    assert list(tools) == ["remember", "search", "forget"]
    assert json.loads(tools["search"].handler({"question": "ferry"})) == []  # empty at start: fine
    tools["remember"].handler({"text": "The Sark ferry is at 7:15."})
    stored = json.loads(tools["remember"].handler({"text": "The Sark ferry is at 8:00."}))
    found = json.loads(tools["search"].handler({"question": "Sark ferry"}))
    assert found[0]["content"] == "The Sark ferry is at 8:00 (earlier: at 7:15)"
    assert found[0]["id"] != stored["remembered"]  # consolidated, and the guard let it through
    tools["forget"].handler({"id": found[0]["id"]})
    assert memory.recall("Sark ferry") == []
    assert (memory.counts.retains, memory.counts.recalls, memory.counts.forgets) == (2, 3, 1)
    assert [write["tool"] for write in memory.writes] == ["remember", "remember", "forget"]
    memory.close()

    second = ObservedMemory(FactMemory(default_top_k=3), "s2", guard)
    second.backend.retain("The Sark ferry is at 8:00 (earlier: at 7:15)")  # behind the runtime's back
    with pytest.raises(ProtocolViolation, match="before anything was stored in this stream"):
        second.recall("Sark ferry")


def test_observed_memory_catches_a_leak_through_the_recall_tool(tmp_path: Any) -> None:
    from pytest_evomemory.memory.inprocess import InProcessMemory
    from pytest_evomemory.memory.observed import ObservedMemory

    shared = InProcessMemory(default_top_k=3)  # a backend that wrongly survives the stream
    guard = IsolationGuard()
    first = ObservedMemory(shared, "s1", guard)
    first.retain("alpha secret vault code")
    first.guard.end_stream()
    second = ObservedMemory(shared, "s2", guard)
    second.retain("beta note")
    recall = {tool.name: tool for tool in second.tools()}["recall"]
    with pytest.raises(ProtocolViolation, match="which stream 's1' stored or recalled earlier"):
        recall.handler({"query": "alpha secret vault"})


def test_observed_memory_names_the_tool_when_a_declared_handler_crashes() -> None:
    from pytest_evomemory.core.errors import MemoryBackendError
    from pytest_evomemory.memory.observed import ObservedMemory

    class Crashing(FactMemory):
        def tools(self) -> list[Tool]:
            def boom(arguments: Mapping[str, Any]) -> str:
                raise OSError("disk gone")

            return [MemoryTool(ToolSpec("remember", "", {"type": "object"}), boom, "retain")]

    memory = ObservedMemory(Crashing(), "s1")
    (tool,) = memory.tools()
    with pytest.raises(MemoryBackendError, match="failed during tool 'remember' in stream 's1': OSError: disk gone"):
        tool.handler({})
    assert memory.writes[0]["error"] is True
