"""Tools an agent may call during a turn: a spec the model sees plus a handler.

The runtime owns tool execution (see :class:`pytest_evomemory.runtime.turn.RuntimeTurn`), so
every call is observed and recorded the same way whichever agent made it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .types import ToolSpec

ToolHandler = Callable[[Mapping[str, Any]], str]

FINAL_ANSWER_TOOL = ToolSpec(
    name="final_answer",
    description=(
        "Submit your final answer and end this turn. Call it exactly once, "
        "with the answer as a string."
    ),
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "The final answer."}},
        "required": ["answer"],
        "additionalProperties": False,
    },
)


@dataclass(frozen=True)
class Tool:
    """A callable tool. ``handler`` returns the text shown to the model."""

    spec: ToolSpec
    handler: ToolHandler

    @property
    def name(self) -> str:
        return self.spec.name


class ToolArgumentError(ValueError):
    """Arguments did not fit the tool's schema; the message goes back to the model."""


def require_string(arguments: Mapping[str, Any], key: str, tool: str) -> str:
    """Fetch a required string argument, or explain to the model what was wrong."""
    value = arguments.get(key)
    if not isinstance(value, str):
        raise ToolArgumentError(
            f"{tool} needs a string argument {key!r}; got {type(value).__name__}"
        )
    return value
