"""The per-task part of report.html: a table of every task and a drill-down per task.

For each task: the prompt the agent saw, the memories recalled into it, the
answer, the extraction and why, tokens, latency, cached or not and any protocol
violation for both turns, and both turns' transcripts. Read from scores.jsonl,
responses.jsonl and transcripts/<stream>.jsonl; a missing piece shows as a dash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._markup import _NONE, _e, _int, _mapping, _number, _position, _pre, _seconds, _tokens
from .summary import is_cached

_RECALL_TOOLS = ("recall",)


def _message_text(message: Mapping[str, Any]) -> str:
    """A chat message as text: its content, then any tool calls it makes."""
    parts = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif content is not None:
        parts.append(json.dumps(content, ensure_ascii=False, indent=1))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = _mapping(_mapping(call).get("function"))
            parts.append(f"\u2192 {function.get('name')}({function.get('arguments')})")
    return "\n".join(parts)


def _transcript(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return f"<p>{_NONE} (no transcript recorded)</p>"
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        calls = record.get("tool_calls")
        if isinstance(calls, list) and calls:  # an agent of your own that records no messages
            return "<p>no messages recorded (an agent records them with turn.add_message); its tool calls:</p>" + "".join(
                f'<div class="message" data-role="tool-call"><span class="role">tool call</span>{_pre(_call_text(_mapping(call)))}</div>'
                for call in calls
            )
        return f"<p>{_NONE} (empty transcript)</p>"
    items = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        cached = " (cached)" if message.get("cached") else ""
        items.append(
            f'<div class="message" data-role="{_e(message.get("role"))}"><span class="role">'
            f"{_e(message.get('role'))}{cached}</span>{_pre(_message_text(message))}</div>"
        )
    return "".join(items)


def _call_text(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments")
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"\u2192 {call.get('name')}({shown}) = {call.get('result')}"


def _unread_results(response: Mapping[str, Any]) -> bool:
    """Whether a tool call other than final_answer and the memory's writes returned
    something that is no JSON list: a recall tool answering free text, whose records
    the run cannot list (a JSON list, empty or not, was read into ``memory_recalled``)."""
    writes = {_mapping(write).get("tool") for write in response.get("memory_writes") or ()}
    calls = response.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        call_map = _mapping(call)
        if call_map.get("name") == "final_answer" or call_map.get("name") in writes:
            continue
        try:
            result = json.loads(str(call_map.get("result")))
        except (ValueError, RecursionError):
            return True
        if not isinstance(result, list):
            return True
    return False


def _prompt(record: Mapping[str, Any] | None) -> str | None:
    """The task prompt as the agent saw it: the first user message of the task turn."""
    messages = record.get("messages") if record else None
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _message_text(message)
    return None


def _recalled(response: Mapping[str, Any] | None) -> str:
    """What memory gave the agent in the task turn.

    A response may list the hits itself (``memory_recalled``); a ``recall`` tool
    call carries them as its result; otherwise only the count is known (an
    ExpRAG agent puts its experiences into the prompt shown above).
    """
    if response is None:
        return f"<p>{_NONE}</p>"
    hits = response.get("memory_recalled")
    items: list[str] = []
    if isinstance(hits, list):
        for hit in hits:
            hit_map = _mapping(hit)
            content = hit_map.get("content", hit) if hit_map else hit
            score = _number(hit_map.get("score")) if hit_map else None
            items.append(f"<li>{_pre(content)}{'' if score is None else f'<small>score {score:.3f}</small>'}</li>")
    calls = response.get("tool_calls") if not items else None  # recall tools' hits are listed above
    for call in calls if isinstance(calls, list) else []:
        call_map = _mapping(call)
        if call_map.get("name") in _RECALL_TOOLS:
            query = _mapping(call_map.get("arguments")).get("query")
            items.append(f"<li>recall({_e(query)}) returned{_pre(call_map.get('result'))}</li>")
    if items:
        return f'<ol class="recalled">{"".join(items)}</ol>'
    count = _number(response.get("memory_recalls")) or 0
    if count and isinstance(hits, list) and not _unread_results(response):
        return f"<p>{int(count)} recall(s), no record returned</p>"
    if count:
        return (
            f"<p>{int(count)} recall(s); the run did not record what they returned "
            "(an ExpRAG agent shows its recalled experiences in the prompt above)</p>"
        )
    return "<p>none</p>"


def _turn_facts(
    label: str, response: Mapping[str, Any] | None, transcript: Mapping[str, Any] | None = None
) -> str:
    if response is None:
        return f"<dt>{_e(label)}</dt><dd>{_NONE} (no response recorded)</dd>"
    usage = _mapping(response.get("usage"))
    tokens = _number(usage.get("total_tokens"))
    if tokens is None:
        prompt, completion = _number(usage.get("prompt_tokens")), _number(usage.get("completion_tokens"))
        tokens = None if prompt is None or completion is None else prompt + completion
    violation = response.get("protocol_violation")
    return (
        f"<dt>{_e(label)}</dt><dd>"
        f"tokens {_int(tokens)} ({_int(usage.get('prompt_tokens'))} prompt, "
        f"{_int(usage.get('completion_tokens'))} completion) \u00b7 latency {_seconds(response.get('seconds'))} "
        f"\u00b7 {_int(response.get('agent_turns'))} agent turn(s) \u00b7 "
        f'<span class="cached">{"cached" if _cached(response, transcript) else "not cached"}</span> \u00b7 '
        + (
            f'<span class="fail violation">protocol violation: {_e(violation)}</span>'
            if violation
            else '<span class="violation">no protocol violation</span>'
        )
        + "</dd>"
    )


def _cached(response: Mapping[str, Any], transcript: Mapping[str, Any] | None) -> bool:
    messages = transcript.get("messages") if transcript else None
    return is_cached(response, messages if isinstance(messages, list) else None)


def _task_detail(
    scored: Mapping[str, Any],
    responses: Mapping[tuple[str, str], Mapping[str, Any]],
    transcripts: Mapping[tuple[str, str], Mapping[str, Any]],
) -> str:
    task_id, correct = str(scored.get("task_id")), bool(scored.get("correct")) and not scored.get("error")
    task_response, feedback_response = responses.get((task_id, "task")), responses.get((task_id, "feedback"))
    task_record, feedback_record = transcripts.get((task_id, "task")), transcripts.get((task_id, "feedback"))
    verdict = "error" if scored.get("error") else "correct" if correct else "wrong"
    answer = scored.get("raw_answer")
    if answer is None and task_response is not None:
        answer = task_response.get("final_answer")
    group = f"<dt>group</dt><dd>{_e(scored.get('group'))}</dd>" if scored.get("group") is not None else ""
    return (
        f'<details class="task" data-task="{_e(task_id)}" data-position="{_e(_position(scored.get("position")))}">'
        f"<summary>#{_e(_position(scored.get('position')))} <code>{_e(task_id)}</code>"
        f'<span class="verdict {"pass" if correct else "fail"}">{verdict}</span></summary>'
        '<dl class="facts">'
        f"<dt>prompt the agent saw</dt><dd>{_pre(_prompt(task_record))}</dd>"
        f"<dt>memories recalled</dt><dd>{_recalled(task_response)}</dd>"
        f"<dt>answer</dt><dd>{_pre(answer)}</dd>"
        f"<dt>extracted</dt><dd><code>{_e(scored.get('extracted'))}</code></dd>"
        f"<dt>target</dt><dd><code>{_e(scored.get('target'))}</code></dd>"
        f"<dt>why</dt><dd>{_e(scored.get('reason'))} <small>({_e(scored.get('match_mode'))})</small></dd>"
        f"{group}"
        f"{_turn_facts('task turn', task_response, task_record)}"
        f"{_turn_facts('feedback turn', feedback_response, feedback_record)}"
        "</dl>"
        f"<details><summary>task turn transcript</summary>{_transcript(task_record)}</details>"
        f"<details><summary>feedback turn transcript</summary>{_transcript(feedback_record)}</details>"
        "</details>"
    )


def task_tables(
    scores: Sequence[Mapping[str, Any]],
    responses: Sequence[Mapping[str, Any]],
    transcripts: Mapping[str, Sequence[Mapping[str, Any]]],
) -> str:
    """Per stream: a table of every task, then one drill-down per task."""
    if not scores:
        return ""
    by_stream: dict[str, list[Mapping[str, Any]]] = {}
    for scored in scores:
        by_stream.setdefault(str(scored.get("stream")), []).append(scored)
    parts = ["<h2>Tasks</h2>"]
    for stream, scored_items in by_stream.items():
        turns = {
            (str(r.get("task_id")), str(r.get("kind"))): r for r in responses if r.get("stream") == stream
        }
        records = {
            (str(t.get("task_id")), str(t.get("kind"))): t for t in transcripts.get(stream, ())
        }
        correct = sum(bool(s.get("correct")) and not s.get("error") for s in scored_items)
        rows = "".join(
            f'<tr><td class="num">{_e(_position(s.get("position")))}</td><td><code>{_e(s.get("task_id"))}</code></td>'
            f'<td class="{"pass" if s.get("correct") and not s.get("error") else "fail"}">'
            f'{"yes" if s.get("correct") and not s.get("error") else "no"}</td>'
            f"<td><code>{_e(s.get('extracted'))}</code></td><td><code>{_e(s.get('target'))}</code></td>"
            f"<td>{_e(s.get('match_mode'))}</td><td>{_e(s.get('reason'))}</td>"
            f"{_task_flags(turns.get((str(s.get('task_id')), 'task')), records.get((str(s.get('task_id')), 'task')))}</tr>"
            for s in scored_items
        )
        details = "".join(_task_detail(s, turns, records) for s in scored_items)
        parts.append(
            f'<details class="stream-tasks" data-stream="{_e(stream)}"><summary>{_e(stream)}: '
            f"{correct} of {len(scored_items)} correct</summary>"
            '<div class="scroll"><table class="tasks"><thead><tr><th class="num">position</th><th>task</th>'
            "<th>correct</th><th>answer (extracted)</th><th>target</th><th>match</th><th>why</th>"
            '<th class="num">tokens</th><th class="num">latency</th><th>cached</th><th>violation</th>'
            f"</tr></thead><tbody>{rows}</tbody></table></div>"
            f"<h3>{_e(stream)}: each task</h3>{details}</details>"
        )
    return "".join(parts)


def _task_flags(response: Mapping[str, Any] | None, transcript: Mapping[str, Any] | None) -> str:
    if response is None:
        return f'<td class="num">{_NONE}</td><td class="num">{_NONE}</td><td>{_NONE}</td><td>{_NONE}</td>'
    usage = _mapping(response.get("usage"))
    tokens = usage.get("total_tokens")
    if tokens is None:
        tokens = _tokens(usage)
    violation = response.get("protocol_violation")
    return (
        f'<td class="num">{_int(tokens)}</td><td class="num">{_seconds(response.get("seconds"))}</td>'
        f'<td>{"yes" if _cached(response, transcript) else "no"}</td>'
        f'<td class="{"fail" if violation else ""}">{_e(violation) if violation else "no"}</td>'
    )


__all__ = ["task_tables"]
