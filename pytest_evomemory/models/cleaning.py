"""The cleaning every model reply gets before the agent sees it, live or replayed.

A reply's text goes to the agent, the transcripts, memory, the reports and the
terminal, so it must be text every one of them can hold, and must not carry a
secret. :func:`clean_completion` is that one step: the HTTP client applies it to a
reply it parsed (:mod:`.openai_compat`), and the response cache to a reply it
replays (:mod:`.cache`): a cache entry written by an older version, edited by hand
or damaged on disk must not reach the run in a shape a live reply never could (a
lone surrogate that makes report.html unwritable, an echoed key, a negative token
count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..core.types import MAX_TOKEN_COUNT, Usage
from ..util.redaction import redact
from ..util.text import storable, storable_json_text
from .base import ChatCompletion, ModelToolCall

#: Parallel tool calls a reply may carry (openai_compat.py refuses more, with its own
#: copy of this number; the cache replays no entry with more).
MAX_TOOL_CALLS_PER_REPLY = 64


def clean_completion(completion: ChatCompletion, secrets: Sequence[str] = ()) -> ChatCompletion:
    """``completion`` with storable text (NUL and lone surrogates become U+FFFD, also
    inside tool-call arguments' JSON strings), secrets redacted (``secrets`` and every
    registered one) and token counts that are whole numbers of at least 0. The same
    object when nothing changes (each part too: a clean reply, nearly every one, costs
    no new objects)."""
    content = None if completion.content is None else redact(storable(completion.content), secrets)
    calls = tuple(_clean_call(call, secrets) for call in completion.tool_calls)
    finish_reason = None if completion.finish_reason is None else storable(completion.finish_reason)
    usage = completion.usage
    prompt, generated = _count(usage.prompt_tokens), _count(usage.completion_tokens)
    if (prompt, generated) != (usage.prompt_tokens, usage.completion_tokens):
        usage = Usage(prompt, generated)
    if (content, calls, finish_reason, usage) == (
        completion.content, completion.tool_calls, completion.finish_reason, completion.usage
    ):
        return completion
    return replace(completion, content=content, tool_calls=calls, finish_reason=finish_reason, usage=usage)


def _clean_call(call: ModelToolCall, secrets: Sequence[str]) -> ModelToolCall:
    """One tool call cleaned as :func:`clean_completion` says; the same object when clean."""
    cleaned = (storable(call.id), storable(call.name), redact(storable_json_text(call.arguments), secrets))
    if cleaned == (call.id, call.name, call.arguments):
        return call
    return replace(call, id=cleaned[0], name=cleaned[1], arguments=cleaned[2])


def _count(value: object) -> int:
    """A token count as a server should report it; anything else counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value if 0 <= value <= MAX_TOKEN_COUNT else 0


__all__ = ["MAX_TOOL_CALLS_PER_REPLY", "clean_completion"]
