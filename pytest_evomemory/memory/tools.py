"""The standard ``retain``/``recall`` tools, built on any MemorySystem.

Backends return ``memory_tools(self)`` from ``tools()`` unless they declare their
own; the JSON schemas here are what a ``tool_use`` model is shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..tools import Tool, ToolArgumentError, require_string
from ..types import ToolSpec

if TYPE_CHECKING:
    from .base import MemorySystem

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
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


def memory_tools(memory: MemorySystem) -> list[Tool]:
    """Wrap a memory system's retain/recall as model-callable tools."""

    def retain(arguments: Mapping[str, Any]) -> str:
        content = require_string(arguments, "content", "retain")
        record_id = memory.retain(content)
        return json.dumps({"stored": True, "id": record_id})

    def recall(arguments: Mapping[str, Any]) -> str:
        query = require_string(arguments, "query", "recall")
        top_k = arguments.get("top_k")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ToolArgumentError("recall's 'top_k' must be a positive integer")
        hits = memory.recall(query, top_k)
        return json.dumps(
            [{"content": hit.content, "score": round(hit.score, 4)} for hit in hits],
            ensure_ascii=False,
        )

    return [Tool(RETAIN_SPEC, retain), Tool(RECALL_SPEC, recall)]
