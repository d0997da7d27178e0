"""TinyAgent's text protocol: tool calls written as labelled lines of plain text.

Many local servers and small models have no tool calling (``python -m
llama_cpp.server`` with a model whose chat template knows no tools answers every
request in prose). The text protocol needs none: the model writes the paper's
single-turn format and, where the turn offers memory tools, one line per memory
operation::

    RECALL: post box colour in Quillhaven
    RETAIN: In Quillhaven the post boxes are teal.
    Rationale: the experience says teal.
    Final Answer: teal

The rule behind ``RECALL``/``RETAIN`` is general: a line starting with a tool's
name in capitals and a colon calls that tool, with the rest of the line (and any
unlabelled lines after it) as its one required string argument. Only tools the
turn offers and that take exactly one required string argument are recognised, so
the same text means nothing in a turn without memory tools. ``Final Answer:`` is
the ``final_answer`` call: the text after the last such label, up to the next
labelled line; a reply with neither a final answer nor an operation is the answer as
a whole (the paper scores a single-turn response whole, and the evaluators read
the answer at its end), so a model that ignores the format is scored, not
failed. This module only parses; the agent runs the calls through its
:class:`~pytest_evomemory.agents.base.Turn`, so the runtime records them exactly
as it records native tool calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.tools import FINAL_ANSWER_TOOL
from ..core.types import ToolSpec

#: Labels the format uses besides tool names; ``Rationale`` is free text.
_RATIONALE = "RATIONALE"
_FINAL = "FINAL ANSWER"

#: A label at the start of a line: optional markdown emphasis, words, a colon.
_LABEL = re.compile(r"^[ \t]*[*_]{0,2}([A-Za-z][A-Za-z _]*?)[*_]{0,2}[ \t]*[:\uff1a][*_]{0,2}", re.MULTILINE)


@dataclass(frozen=True)
class TextCall:
    """One call written in the text format: a tool name and its JSON-ready arguments."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class TextReply:
    """What a reply says: its memory operations in order, then the final answer (if any)."""

    calls: tuple[TextCall, ...]
    final_answer: str | None


def text_tools(specs: Sequence[ToolSpec]) -> dict[str, tuple[str, str]]:
    """``{LABEL: (tool name, argument name)}`` for the tools writable as a text line."""
    found: dict[str, tuple[str, str]] = {}
    for spec in specs:
        if spec.name == FINAL_ANSWER_TOOL.name:
            continue
        argument = _single_string_argument(spec.parameters)
        if argument is not None:
            found[_label(spec.name)] = (spec.name, argument)
    return found


def _single_string_argument(parameters: Mapping[str, Any]) -> str | None:
    required = list(parameters.get("required") or [])
    properties = parameters.get("properties") or {}
    if len(required) != 1:
        return None
    schema = properties.get(required[0])
    return required[0] if isinstance(schema, Mapping) and schema.get("type") == "string" else None


def _label(name: str) -> str:
    return " ".join(name.replace("_", " ").split()).upper()


def parse_reply(text: str, specs: Sequence[ToolSpec]) -> TextReply:
    """The calls and final answer in ``text``, for the tools in ``specs``.

    A labelled section runs from its label to the next recognised label. Labels
    that name nothing the turn offers are part of the surrounding text.
    """
    tools = text_tools(specs)
    known = {*tools, _RATIONALE, _FINAL}
    labels = [m for m in _LABEL.finditer(text) if _label(m.group(1)) in known]
    calls: list[TextCall] = []
    final: str | None = None
    for index, match in enumerate(labels):
        end = labels[index + 1].start() if index + 1 < len(labels) else len(text)
        body = text[match.end() : end].strip()
        label = _label(match.group(1))
        if label == _FINAL:
            final = body if body else final
        elif label in tools and body:
            name, argument = tools[label]
            calls.append(TextCall(name, {argument: body}))
    return TextReply(tuple(calls), final)


def instructions(specs: Sequence[ToolSpec], *, acknowledgement: str | None) -> str:
    """The format, as the system prompt's text-protocol section states it; the
    feedback line is left out when ``acknowledgement`` is ``None``."""
    tools = text_tools(specs)
    lines = [
        "Answer in plain text, in this format:",
        "Rationale: <one or two sentences of reasoning>",
        "Final Answer: <only the answer itself>",
    ]
    if tools:
        lines.append(
            "You may also write, each on its own line before the Final Answer, "
            + "; ".join(
                f"{label}: <{argument}> to call {name}" for label, (name, argument) in tools.items()
            )
            + ". Write no Final Answer in a reply that recalls: its results come back first."
        )
    if acknowledgement is not None:
        lines.append(f"When you are given feedback, end with: Final Answer: {acknowledgement}")
    return "\n".join(lines)
