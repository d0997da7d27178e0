"""What the dry-run model (:mod:`.mock`) replies to one request: pure functions of
the conversation, the offered tools and the stimulus.

It reads the conversation the way a model would, by its text: the kind of turn
from the runtime (or, without one, from ``final_answer``'s schema, which in a
feedback turn admits only the acknowledgement), the current task from the first
user message (after ``Current task:`` where experiences precede it), the
correct answer from the feedback's ``The correct answer:`` line, and experiences
from any ``Task: ... Correct answer: ...`` text it is shown: in the prompt
(``deterministic_recall``) or in what the memory's recall tool returned (``tool_use``,
ReMem: the tools are called by the role the memory declares, whatever their names).
That is TinyAgent's experience format (and the recall baseline's); an agent of
your own that writes experiences otherwise gets the fallback ``answer``. With no
experience shown, a remembered conversation turn (LoCoMo's ``[D1:3] Name: text``
records, most similar first) answers with what was said in it, as the recall
baseline does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import MockSettings
from ..core import boundedread
from ..core.types import FEEDBACK_ACKNOWLEDGEMENT, INGESTION_ACKNOWLEDGEMENT
from ..memory.ingestion import dialogue_text
from ..util.text import similarity
from .context import StimulusRef

_CURRENT_TASK = "Current task:\n"
_CORRECT = re.compile(r"^The correct answer: (?P<answer>.*?)(?: \(the option letter in this task's ordering\))?$",
                      re.MULTILINE)
#: One experience: its task (any lines) and its correct answer (to the next labelled
#: line, a blank line or the end); ``My answer:`` between them is skipped.
_EXPERIENCE = re.compile(
    r"Task: (?P<task>.*?)\n(?:My answer: [^\n]*\n)?Correct answer: (?P<answer>.*?)(?=\nOutcome: |\n\n|\Z)",
    re.DOTALL,
)


#: The script's revision, in the mock's response-cache key: raised whenever the reply
#: to the same request changes (2: memory tools called by their declared role), so a
#: dry run after an upgrade does not replay the old script's replies from the cache.
SCRIPT_REVISION = 2


@dataclass(frozen=True)
class Reply:
    """A scripted reply: tool calls (name, arguments), or text when no tools are offered."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    text: str | None = None


def script_reply(
    settings: MockSettings,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    stimulus: StimulusRef | None,
    answers: Mapping[str, str],
) -> Reply:
    """The reply to one request (see the module docstring)."""
    called = _called_this_turn(messages)
    kind = stimulus.kind if stimulus is not None else _kind_from_tools(tools)
    memory = settings.mode == "memory"
    if kind in ("feedback", "ingestion"):
        acknowledgement = FEEDBACK_ACKNOWLEDGEMENT if kind == "feedback" else INGESTION_ACKNOWLEDGEMENT
        retain = _memory_tool("retain", tools, stimulus) if memory else None
        if retain is not None and retain[0] not in called:
            content = _experience(messages) if kind == "feedback" else _last_user_text(messages)
            if content:
                return Reply(calls=((retain[0], {retain[1]: content}),))
        return _final(acknowledgement, tools)
    task = current_task(messages)
    recall = _memory_tool("recall", tools, stimulus) if memory else None
    if recall is not None and recall[0] not in called:
        return Reply(calls=((recall[0], {recall[1]: task}),))
    return _final(_answer(settings, task, messages, stimulus, answers), tools)


def _memory_tool(role: str, tools: Sequence[Mapping[str, Any]], stimulus: StimulusRef | None) -> tuple[str, str] | None:
    """The offered tool with ``role`` and the argument that takes its text: the tool
    the runtime names with that role (any name: Mem0's ``add``, an adapter's ``jot``),
    or the tool named after the role (a plain ``recall`` tool has that role). Its text argument is
    the first free-text parameter of its schema, required ones first (``content``,
    ``query``, Mem0's ``messages``, LangMem's ``content`` beside its ``action``)."""
    declared = stimulus.memory_tools if stimulus is not None else ()
    names = {role, *(name for name, named in declared if named == role)}
    for tool in tools:
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or function.get("name") not in names:
            continue
        parameters = function.get("parameters")
        if not isinstance(parameters, Mapping) or not isinstance(properties := parameters.get("properties"), Mapping):
            return None
        required = [name for name in parameters.get("required") or () if name in properties]
        for name in [*required, *(name for name in properties if name not in required)]:
            if _free_text(properties[name]):
                return str(function["name"]), str(name)
        return None
    return None


def _free_text(schema: Any) -> bool:
    """A parameter that takes any string (not an enum, not a formatted id)."""
    if not isinstance(schema, Mapping) or "enum" in schema or "format" in schema:
        return False
    if schema.get("type") == "string":
        return True
    return any(_free_text(option) for option in schema.get("anyOf") or ())


def _answer(
    settings: MockSettings,
    task: str,
    messages: Sequence[Mapping[str, Any]],
    stimulus: StimulusRef | None,
    answers: Mapping[str, str],
) -> str:
    if settings.mode == "echo":
        return task
    if settings.mode == "answers" and stimulus is not None:
        found = answers.get(f"{stimulus.stream}/{stimulus.task_id}", answers.get(stimulus.task_id))
        return settings.answer if found is None else found
    if settings.mode == "memory":
        shown = _shown_text(messages)
        recalled = remembered_answer(task, shown, settings.similarity_threshold)
        if recalled is None:  # no experience: what the first remembered conversation turn says (LoCoMo)
            recalled = next((said for text in shown for line in text.splitlines()
                             if (said := dialogue_text(line)) is not None), None)
        return settings.answer if recalled is None else recalled
    return settings.answer


def remembered_answer(task: str, texts: Sequence[str], threshold: float) -> str | None:
    """The correct answer of the experience in ``texts`` whose task is most similar to
    ``task``, if that similarity reaches ``threshold``; the first of equals wins."""
    best: str | None = None
    best_similarity = threshold
    for text in texts:
        for match in _EXPERIENCE.finditer(text):
            closeness = similarity(task, match.group("task"))
            if closeness >= best_similarity and (best is None or closeness > best_similarity):
                best, best_similarity = match.group("answer").strip(), closeness
    return best


def current_task(messages: Sequence[Mapping[str, Any]]) -> str:
    """The task of the conversation: its first user message, after the experiences
    that may precede it."""
    first = next((_text(m) for m in messages if m.get("role") == "user"), "")
    _, marker, after = first.rpartition(_CURRENT_TASK)
    return (after if marker else first).strip()


def _experience(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """What a memory-using model retains after feedback: the task and its correct answer."""
    match = _CORRECT.search(_last_user_text(messages))
    if match is None:
        return None
    return f"Task: {current_task(messages)}\nCorrect answer: {match.group('answer').strip()}"


def _shown_text(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every text the model has been shown where experiences may be: user messages
    and tool results (a ``recall`` result's records, JSON or not)."""
    texts: list[str] = []
    for message in messages:
        if message.get("role") not in ("user", "tool"):
            continue
        text = _text(message)
        texts.append(text)
        try:
            records = boundedread.loads(text, depth=boundedread.MAX_ARTEFACT_DEPTH)
        except ValueError:  # not JSON, or over a bound
            continue
        texts.extend(_strings(records))
    return texts


def _strings(value: Any) -> list[str]:
    """Every string in a recall tool's JSON result, whatever its shape (the built-in
    ``[{"id", "content"}]``, Mem0's ``{"results": [{"memory", ...}]}``, LangMem's
    items with a ``value``), so the experiences in it read as text."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _final(answer: str, tools: Sequence[Mapping[str, Any]]) -> Reply:
    """``final_answer(answer)``, or the text protocol's ``Final Answer:`` line without tools."""
    if tools:
        return Reply(calls=(("final_answer", {"answer": answer}),))
    return Reply(text=f"Rationale: scripted reply of the mock model.\nFinal Answer: {answer}")


def _kind_from_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """``feedback``/``ingestion`` when ``final_answer`` admits only that turn's acknowledgement."""
    for tool in tools:
        function = tool.get("function", tool)
        if isinstance(function, Mapping) and function.get("name") == "final_answer":
            answer = ((function.get("parameters") or {}).get("properties") or {}).get("answer") or {}
            allowed = answer.get("enum") if isinstance(answer, Mapping) else None
            if allowed == [FEEDBACK_ACKNOWLEDGEMENT]:
                return "feedback"
            if allowed == [INGESTION_ACKNOWLEDGEMENT]:
                return "ingestion"
    return "task"


def _called_this_turn(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The tools called since the last user message (this turn's calls)."""
    called: set[str] = set()
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        for call in message.get("tool_calls") or []:
            name = (call.get("function") or {}).get("name")
            if isinstance(name, str):
                called.add(name)
    return called


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return next((_text(m) for m in reversed(messages) if m.get("role") == "user"), "")


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


__all__ = ["SCRIPT_REVISION", "Reply", "current_task", "remembered_answer", "script_reply"]
