"""Memory tools: the standard ``retain``/``recall`` pair, roles, and instrumentation.

Backends return ``memory_tools(self)`` from ``tools()`` unless they declare their
own; the JSON schemas here are what a ``tool_use`` model is shown. A memory that
declares its own tools (``remember``/``search``/``forget``, ...) says what each one
is for with :class:`MemoryTool`'s ``role``, so the runtime can count and check
them without knowing their names. The runtime observes memory tools with
:func:`instrument_memory_tools`, which never replaces a declared handler: the
seed requires the memory's tools to be used exactly as declared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..tools import Tool, ToolArgumentError, require_string
from ..types import ToolSpec
from .base import RecordRejected
from .guard import SeenRecord, records_in_tool_result

if TYPE_CHECKING:
    from .base import MemorySystem

#: What a memory tool does: stores, searches or deletes records.
MemoryRole = Literal["retain", "recall", "forget"]

#: Reads a recall tool's text result into the (id, content) records it lists, or
#: None when the text is not readable.
RecordReader = Callable[[str], list[SeenRecord] | None]

#: Tools whose role follows from their name alone (the standard tool names).
STANDARD_ROLES: Mapping[str, MemoryRole] = {"retain": "retain", "recall": "recall", "forget": "forget"}


@dataclass(frozen=True)
class MemoryTool(Tool):
    """A memory system's tool with its declared role (``None``: something else).

    ``read_records`` says how to read a recall tool's result when it is not the
    built-in recall tool's JSON list (a library's own result format, e.g. Mem0's
    ``{"results": [...]}``), so the isolation guard checks those recalls too.
    """

    role: MemoryRole | None = None
    read_records: RecordReader | None = None


def tool_role(tool: Tool) -> MemoryRole | None:
    """The declared role of ``tool``; a plain Tool named retain/recall/forget has that role."""
    if isinstance(tool, MemoryTool) and tool.role is not None:
        return tool.role
    return STANDARD_ROLES.get(tool.name)


RETAIN_SPEC = ToolSpec(
    name="retain",
    description=(
        "Store a piece of experience in long-term memory so that it can be recalled "
        "in later tasks of this stream (e.g. the task, your answer and the correct answer)."
    ),
    parameters={
        "type": "object",
        "properties": {"content": {"type": "string", "description": "Text to remember."}},
        "required": ["content"],
        "additionalProperties": False,
    },
)

RECALL_SPEC = ToolSpec(
    name="recall",
    description=(
        "Search long-term memory for experiences similar to the query; returns "
        "the most similar records first."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
        "additionalProperties": False,
    },
)


def memory_tools(memory: MemorySystem) -> list[Tool]:
    """Wrap a memory system's retain/recall as model-callable tools.

    ``recall`` returns the memory config's ``top_k`` records: that number is part
    of the memory system under test, so the model is not offered a way to change
    it (a ``top_k`` argument it sends anyway is ignored). A record the backend
    cannot store (:class:`RecordRejected`) is a tool error, not a broken stream.
    """

    def retain(arguments: Mapping[str, Any]) -> str:
        content = require_string(arguments, "content", "retain")
        try:
            record_id = memory.retain(content)
        except RecordRejected as error:
            raise ToolArgumentError(str(error)) from None
        return json.dumps({"stored": True, "id": record_id})

    def recall(arguments: Mapping[str, Any]) -> str:
        query = require_string(arguments, "query", "recall")
        hits = memory.recall(query)
        return json.dumps(
            [{"id": hit.record_id, "content": hit.content, "score": round(hit.score, 4)} for hit in hits],
            ensure_ascii=False,
        )

    return [MemoryTool(RETAIN_SPEC, retain, "retain"), MemoryTool(RECALL_SPEC, recall, "recall")]


# --------------------------------------------------------------------------- instrumentation


@dataclass(frozen=True)
class MemoryToolCall:
    """One call of a memory tool as the runtime saw it (for counts and transcripts)."""

    tool: str
    role: MemoryRole | None
    arguments: Mapping[str, Any]
    result: str | None
    error: str | None
    seconds: float
    #: What a recall tool's result lists, read with the tool's ``read_records``
    #: (None: not a recall, failed, or not readable)
    records: list[SeenRecord] | None = None


MemoryToolObserver = Callable[[MemoryToolCall], None]


def instrument_memory_tools(tools: Sequence[Tool], observe: MemoryToolObserver) -> list[Tool]:
    """The same tools, each reporting its calls to ``observe``.

    Spec, role and handler stay the memory's own: the wrapper calls the declared
    handler with the model's arguments and returns its result (or lets its
    exception through) untouched, and only reports what happened.
    """
    return [_observed(tool, observe) for tool in tools]


def _observed(tool: Tool, observe: MemoryToolObserver) -> Tool:
    role = tool_role(tool)
    declared = tool.handler
    reader = (tool.read_records if isinstance(tool, MemoryTool) else None) or records_in_tool_result

    def handler(arguments: Mapping[str, Any]) -> str:
        started = time.perf_counter()
        try:
            result = declared(arguments)
        except Exception as error:
            observe(MemoryToolCall(tool.name, role, dict(arguments), None, str(error), time.perf_counter() - started))
            raise
        seconds = time.perf_counter() - started
        records = reader(result) if role == "recall" else None
        observe(MemoryToolCall(tool.name, role, dict(arguments), result, None, seconds, records))
        return result

    return MemoryTool(tool.spec, handler, role, reader)

