"""One agent turn as the runtime sees it: the tools offered, every call observed.

The agent drives the conversation, but tool calls go through :class:`RuntimeTurn`,
so the records of a response (tool calls, final answer, step count) are what
actually happened, not what the agent reports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import boundedread
from ..core.errors import EpisodeError, ProtocolViolation
from ..core.tools import FINAL_ANSWER_TOOL, Tool, ToolArgumentError
from ..core.types import MAX_TOKEN_COUNT, ToolCall, ToolSpec, Usage

#: Largest tool-call argument payload accepted from a model, in characters.
MAX_TOOL_ARGUMENT_CHARS = 2_000_000

#: Deepest nesting of a message or of tool arguments an agent may hand the turn (a
#: structure that contains itself would otherwise end the run when it is written).
MAX_NESTING = boundedread.MAX_NESTING_DEPTH


class RuntimeTurn:
    """The runtime's implementation of :class:`~pytest_evomemory.agents.base.Turn`."""

    def __init__(self, tools: Sequence[Tool], max_steps: int, task: str | None = None) -> None:
        #: ``<stream>/<task id>``, for messages that must name the task.
        self.task = task
        self._tools = {FINAL_ANSWER_TOOL.name: None, **{tool.name: tool for tool in tools}}
        self._specs = [FINAL_ANSWER_TOOL, *(tool.spec for tool in tools)]
        self.max_steps = max_steps
        self.steps = 0
        self.usage = Usage()
        self.messages: list[Mapping[str, Any]] = []
        self.tool_calls: list[ToolCall] = []
        self._final_answer: str | None = None
        self._finished = False
        #: The first error this turn raised at the agent (the step limit, a wrong value
        #: handed to it): the turn's failure even when the agent catches it and goes on
        #: (uncounted model calls or tokens would make the run's figures wrong).
        self.refused: EpisodeError | None = None

    @property
    def tools(self) -> Sequence[ToolSpec]:
        return list(self._specs)

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def final_answer(self) -> str | None:
        return self._final_answer

    def begin_step(self) -> None:
        if self.steps >= self.max_steps:
            raise self._refuse(EpisodeError(
                f"no final_answer within the turn limit of {self.max_steps} model calls "
                "(agent config key 'max_steps')"
            ))
        self.steps += 1

    def record_usage(self, usage: Usage) -> None:
        """Add a model call's token counts; counts that are not whole numbers of at
        least 0 (NaN, infinity, negative, a fraction, not a number) are the agent's
        protocol violation, refused here: summed, they would make every total and
        accuracy table of the run meaningless."""
        prompt, completion = _token_count(usage, "prompt_tokens"), _token_count(usage, "completion_tokens")
        if prompt is None or completion is None:
            where = f"{self.task}: " if self.task else ""
            raise self._refuse(ProtocolViolation(
                f"{where}the agent recorded token usage prompt_tokens={getattr(usage, 'prompt_tokens', None)!r}, "
                f"completion_tokens={getattr(usage, 'completion_tokens', None)!r}; token counts must be whole "
                f"numbers of at least 0 and at most {MAX_TOKEN_COUNT:,} (check what your agent passes to "
                "turn.record_usage)"
            ))
        self.usage = Usage(self.usage.prompt_tokens + prompt, self.usage.completion_tokens + completion)

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Keep a copy of ``message`` for the transcript: a mapping of plain values
        (what the agent passes is its own code's, so a wrong one is its protocol
        violation, named here, not a failure inside the plugin or the run's writer)."""
        if not isinstance(message, Mapping):
            where = f"{self.task}: " if self.task else ""
            raise self._refuse(ProtocolViolation(
                f"{where}turn.add_message takes a chat message mapping such as {{'role': 'user', 'content': '...'}}, "
                f"got {type(message).__name__}; pass a dict"
            ))
        copied = _plain(message)
        if copied is _TOO_DEEP:
            where = f"{self.task}: " if self.task else ""
            raise self._refuse(ProtocolViolation(
                f"{where}the message passed to turn.add_message nests more than {MAX_NESTING} levels deep (does it "
                "contain itself?); pass a message of plain values (text, numbers, lists, dicts)"
            ))
        self.messages.append(copied)

    def _refuse(self, error: EpisodeError) -> EpisodeError:
        """``error``, noted as the turn's first refusal (see :attr:`refused`)."""
        if self.refused is None:
            self.refused = error
        return error

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        if not isinstance(name, str):
            name = repr(name)  # an unknown tool, answered as one: the turn goes on
        parsed, problem = _parse_arguments(arguments)
        if problem is not None:
            return self._record(name, {"_raw": str(arguments)[:2000]}, problem, error=True)
        assert parsed is not None
        if self._finished:
            return self._record(
                name, parsed, "error: this turn already ended with final_answer", error=True
            )
        if name not in self._tools:
            available = ", ".join(self._tools)
            return self._record(
                name, parsed, f"error: unknown tool {name!r}; available tools: {available}",
                error=True,
            )
        if name == FINAL_ANSWER_TOOL.name:
            answer = parsed.get("answer")
            if not isinstance(answer, str):
                if isinstance(answer, int | float) and not isinstance(answer, bool):
                    answer = str(answer)
                else:
                    return self._record(
                        name, parsed, "error: final_answer needs a string argument 'answer'",
                        error=True,
                    )
            self._final_answer = answer
            self._finished = True
            return self._record(name, parsed, "answer recorded")
        tool = self._tools[name]
        assert tool is not None
        try:
            result = tool.handler(parsed)
        except ToolArgumentError as error:
            return self._record(name, parsed, f"error: {error}", error=True)
        return self._record(name, parsed, result)

    def _record(self, name: str, arguments: Mapping[str, Any], result: str, *, error: bool = False) -> str:
        self.tool_calls.append(ToolCall(name, dict(arguments), result, error))
        return result


def _token_count(usage: object, name: str) -> int | None:
    """A token count as a whole number, or None when it is not one."""
    value = getattr(usage, name, None)
    if type(value) is int:  # what every model reports: the checks below, in one
        return value if 0 <= value <= MAX_TOKEN_COUNT else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 0 <= value <= MAX_TOKEN_COUNT else None


class _TooDeep:
    """What :func:`_plain` returns for a structure nested past :data:`MAX_NESTING`."""


_TOO_DEEP: Any = _TooDeep()


def _plain(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` made of dicts with text keys, lists and scalars (anything
    else as its text), or :data:`_TOO_DEEP` when it nests past :data:`MAX_NESTING`
    (a structure containing itself does)."""
    if depth > MAX_NESTING:
        return _TOO_DEEP
    kind = type(value)
    # exact types first (a message is dicts of text): a union isinstance check costs
    # more per value than the copy
    if kind is str or value is None or kind is int or kind is float or kind is bool:
        return value
    if kind is not dict and isinstance(value, str | bool | int | float):
        return value
    if kind is dict or isinstance(value, Mapping):
        copied: dict[str, Any] = {}
        shallow = depth < MAX_NESTING  # its values are not past the bound themselves
        for key, item in value.items():
            held = type(item)
            if shallow and (held is str or item is None or held is int or held is float or held is bool):
                plain = item  # what _plain(item) returns, without the call (most of a message)
            else:
                plain = _plain(item, depth + 1)
                if plain is _TOO_DEEP:
                    return _TOO_DEEP
            copied[key if type(key) is str or isinstance(key, str) else str(key)] = plain
        return copied
    if kind is list or kind is tuple or isinstance(value, list | tuple):
        items = [_plain(item, depth + 1) for item in value]
        return _TOO_DEEP if any(item is _TOO_DEEP for item in items) else items
    return str(value)


def _parse_arguments(arguments: Mapping[str, Any] | str) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(arguments, Mapping):
        plain = _plain(arguments)
        if plain is _TOO_DEEP:
            return None, f"error: tool arguments nest more than {MAX_NESTING} levels deep; send a flat JSON object"
        return plain, None
    if not isinstance(arguments, str):
        return None, f"error: tool arguments must be a JSON object, not {type(arguments).__name__}"
    if len(arguments) > MAX_TOOL_ARGUMENT_CHARS:
        return None, "error: tool arguments are too large"
    try:
        value = boundedread.loads(arguments, depth=MAX_NESTING) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        return None, f"error: tool arguments are not valid JSON ({error.msg}); send a JSON object"
    except ValueError as error:  # over a bound: nesting, integer digits
        return None, f"error: tool arguments are {error}; send a small, flat JSON object"
    if not isinstance(value, dict):
        return None, "error: tool arguments must be a JSON object"
    return value, None


