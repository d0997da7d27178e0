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

from ..core.tools import Tool, ToolArgumentError, require_string
from ..core.types import ToolSpec
from .base import Forgetting, RecordRejected, checked_hits, checked_id
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


def text_tool_spec(name: str, description: str, argument: str, argument_description: str) -> ToolSpec:
    """A tool that takes one string argument (every memory tool but ``update``): the
    schema a model is shown, with no other argument allowed."""
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {argument: {"type": "string", "description": argument_description}},
            "required": [argument],
            "additionalProperties": False,
        },
    )


RETAIN_SPEC = text_tool_spec(
    "retain",
    "Store a piece of experience in long-term memory so that it can be recalled "
    "in later tasks of this stream (e.g. the task, your answer and the correct answer).",
    "content", "Text to remember.",
)
RECALL_SPEC = text_tool_spec(
    "recall",
    "Search long-term memory for experiences similar to the query; returns the most similar records first.",
    "query", "What to look for.",
)
FORGET_SPEC = text_tool_spec(
    "forget",
    "Delete one record from long-term memory by its id (the id retain or recall "
    "returned), e.g. an experience that is wrong, misleading or superseded.",
    "id", "The id of the record to delete.",
)

UPDATE_SPEC = ToolSpec(
    name="update",
    description=(
        "Rewrite one record of long-term memory: store the new text and delete the old "
        "record (the id retain or recall returned). Returns the new record's id."
    ),
    parameters={
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The id of the record to rewrite."},
            "content": {"type": "string", "description": "The record's new text."},
        },
        "required": ["id", "content"],
        "additionalProperties": False,
    },
)

#: Set on a memory system (the built-in factory does so for ``editing_tools: true``)
#: to have :func:`memory_tools` offer ``forget`` and ``update`` beside retain/recall.
EDITING_TOOLS_ATTRIBUTE = "editing_tools"


def memory_tools(memory: MemorySystem) -> list[Tool]:
    """Wrap a memory system's retain/recall as model-callable tools.

    ``recall`` returns the memory config's ``top_k`` records: that number is part
    of the memory system under test, so the model is not offered a way to change
    it (a ``top_k`` argument it sends anyway is ignored). A record the backend
    cannot store (:class:`RecordRejected`) is a tool error, not a broken stream.

    A memory that can forget (:class:`~.base.Forgetting`) and has
    ``editing_tools`` set also offers ``forget`` and ``update`` (see
    :func:`editing_tools`); by default the list stays retain/recall, so existing
    ``tool_use`` agents are offered exactly what they were.
    """

    def retain(arguments: Mapping[str, Any]) -> str:
        content = require_string(arguments, "content", "retain")
        try:
            record_id = memory.retain(content)
        except RecordRejected as error:
            raise ToolArgumentError(str(error)) from None
        return json.dumps({"stored": True, "id": checked_id(record_id, f"memory {type(memory).__qualname__}: retain")})

    def recall(arguments: Mapping[str, Any]) -> str:
        query = require_string(arguments, "query", "recall")
        hits = checked_hits(memory.recall(query), memory.default_top_k, f"memory {type(memory).__qualname__}: recall")
        return json.dumps(
            [{"id": hit.record_id, "content": hit.content, "score": round(hit.score, 4)} for hit in hits],
            ensure_ascii=False,
        )

    tools: list[Tool] = [MemoryTool(RETAIN_SPEC, retain, "retain"), MemoryTool(RECALL_SPEC, recall, "recall")]
    if getattr(memory, EDITING_TOOLS_ATTRIBUTE, False) and isinstance(memory, Forgetting):
        tools += editing_tools(memory)
    return tools


def editing_tools(memory: MemorySystem) -> list[Tool]:
    """``forget`` (role forget) and ``update`` (no standard role: it stores and deletes).

    ``update`` retains the new text first and forgets the old record only then, so a
    rejected text or an unknown id leaves the memory as it was (a tool error). The
    rewritten record gets a new id; for a recency window it counts as the newest.
    """
    if not isinstance(memory, Forgetting):
        raise TypeError(f"{type(memory).__name__} cannot forget records; it offers no editing tools")

    def forget(arguments: Mapping[str, Any]) -> str:
        record_id = require_string(arguments, "id", "forget")
        if not memory.forget(record_id):
            raise ToolArgumentError(f"forget: no record has id {record_id!r}; use an id that recall returned")
        return json.dumps({"forgotten": True, "id": record_id})

    def update(arguments: Mapping[str, Any]) -> str:
        record_id = require_string(arguments, "id", "update")
        content = require_string(arguments, "content", "update")
        try:
            new_id = str(memory.retain(content))
        except RecordRejected as error:
            raise ToolArgumentError(str(error)) from None
        if not memory.forget(record_id):
            memory.forget(new_id)
            raise ToolArgumentError(f"update: no record has id {record_id!r}; use an id that recall returned")
        return json.dumps({"updated": True, "old_id": record_id, "id": new_id})

    return [MemoryTool(FORGET_SPEC, forget, "forget"), MemoryTool(UPDATE_SPEC, update, None)]


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

