"""TinyAgent's text protocol (``protocol: text | auto``) and the feedback-turn schema,
through StreamRun and the real HTTP client against the scripted server: what is
parsed, what the runtime records, and when ``auto`` falls back."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from pytest_evomemory.agents import prompts
from pytest_evomemory.agents.textproto import TextCall, parse_reply, text_tools
from pytest_evomemory.config import AgentConfig
from pytest_evomemory.core.errors import EpisodeError
from pytest_evomemory.core.tools import FINAL_ANSWER_TOOL
from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample
from pytest_evomemory.memory.tools import RECALL_SPEC, RETAIN_SPEC
from pytest_evomemory.runtime import StreamRun, run_stream
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    Reply,
    Script,
    is_feedback,
    make_echo_policy,
    task_text,
    text,
)

from ..conftest import capture_responses

StreamFactory = Callable[..., StreamRun]

TASK_A = BenchmarkSample("f01", "facts", 0, "In Quillhaven, what colour are the post boxes?", "teal")
TASK_B = BenchmarkSample("f02", "facts", 1, "Quillhaven post boxes: which colour are they painted?", "teal")
MEMORY_TOOLS = [FINAL_ANSWER_TOOL, RETAIN_SPEC, RECALL_SPEC]


def text_policy(answer: str = "teal", *, ack: str = "Final Answer: Feedback recorded.") -> Callable[
    [Mapping[str, Any]], Reply
]:
    """A server without tool calling: prose in the paper's format, whatever is offered."""

    def policy(request: Mapping[str, Any]) -> Reply:
        if is_feedback(request):
            return text(f"Rationale: noted.\n{ack}")
        return text(f"Rationale: the post boxes are {answer}.\nFinal Answer: {answer}")

    return policy


# --------------------------------------------------------------------------- parsing


def test_the_papers_single_turn_format_is_parsed_into_the_final_answer() -> None:
    reply = parse_reply("Rationale: B is the only prime.\nFinal Answer: B", [FINAL_ANSWER_TOOL])
    assert reply == parse_reply("rationale: B is the only prime.\n**Final Answer:** B\n", [FINAL_ANSWER_TOOL])
    assert reply.final_answer == "B" and reply.calls == ()


def test_the_last_final_answer_wins_and_runs_to_the_next_label() -> None:
    reply = parse_reply("Final Answer: A\nRationale: no, wait.\nFinal Answer:\n12\n", [FINAL_ANSWER_TOOL])
    assert reply.final_answer == "12"
    assert parse_reply("Final Answer:   \n", [FINAL_ANSWER_TOOL]).final_answer is None
    assert parse_reply("The answer is teal.", [FINAL_ANSWER_TOOL]).final_answer is None


def test_memory_operations_are_lines_named_after_the_offered_tools() -> None:
    text_reply = (
        "RECALL: post box colour\n"
        "RETAIN: Task: In Quillhaven, what colour are the post boxes?\n"
        "Correct answer: teal\n"
        "Final Answer: Feedback recorded"
    )
    reply = parse_reply(text_reply, MEMORY_TOOLS)
    assert reply.calls == (
        TextCall("recall", {"query": "post box colour"}),
        # Unlabelled lines continue the section: a retained experience keeps its lines.
        TextCall("retain", {"content": "Task: In Quillhaven, what colour are the post boxes?\nCorrect answer: teal"}),
    )
    assert reply.final_answer == "Feedback recorded"
    # Without memory tools in the turn the same lines are plain text.
    assert parse_reply(text_reply, [FINAL_ANSWER_TOOL]).calls == ()
    assert set(text_tools(MEMORY_TOOLS)) == {"RECALL", "RETAIN"}


def test_labels_inside_a_line_are_not_operations() -> None:
    reply = parse_reply("I will not RECALL: anything.\nFinal Answer: teal", MEMORY_TOOLS)
    assert reply.calls == () and reply.final_answer == "teal"


# --------------------------------------------------------------------------- text protocol


def test_text_protocol_sends_no_tools_and_states_the_format(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(text_policy())
    run = make_stream(server, "none", protocol="text")
    responses = capture_responses(run)
    outcomes = list(run_stream(run, [TASK_A, TASK_B]))
    assert [o.scored.score.correct for o in outcomes] == [True, True]
    assert all("tools" not in body for body in server.chat_requests)
    system = server.chat_requests[0]["messages"][0]["content"]
    assert "Rationale: <" in system and "Final Answer: <" in system and "RECALL" not in system
    task_a, feedback_a, _, _ = responses
    # The runtime records the parsed answer as a final_answer call, as for native calls.
    assert [(c.name, dict(c.arguments)) for c in task_a.tool_calls] == [("final_answer", {"answer": "teal"})]
    assert task_a.final_answer == "teal" and task_a.agent_turns == 1
    # "Feedback recorded." is the acknowledgement; no violation.
    assert feedback_a.final_answer == FEEDBACK_ACKNOWLEDGEMENT and feedback_a.protocol_violation is None
    assert "Final Answer: Feedback recorded" in task_text(server.chat_requests[1])


def test_text_feedback_with_another_answer_is_a_protocol_violation(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(text_policy(ack="Final Answer: teal"))
    run = make_stream(server, "none", protocol="text")
    responses = capture_responses(run)
    list(run_stream(run, [TASK_A]))
    assert responses[1].final_answer == "teal" and responses[1].protocol_violation


def test_text_tool_use_runs_recall_and_retain_through_the_turn(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    def policy(request: Mapping[str, Any]) -> Reply:
        last = task_text(request)
        if is_feedback(request):
            return text("RETAIN: Quillhaven post boxes are teal.\nFinal Answer: Feedback recorded")
        if last.startswith("Result of recall:"):
            return text("Rationale: memory says teal.\nFinal Answer: teal")
        return text("RECALL: Quillhaven post boxes")

    server = scripted_openai_server(policy)
    run = make_stream(server, "tool_use", protocol="text")
    responses = capture_responses(run)
    outcomes = list(run_stream(run, [TASK_A, TASK_B]))
    assert [o.scored.score.correct for o in outcomes] == [True, True]
    task_a, feedback_a, task_b, _ = responses
    assert [c.name for c in task_a.tool_calls] == ["recall", "final_answer"]
    assert task_a.memory_recalls == 1 and task_a.agent_turns == 2
    assert [c.name for c in feedback_a.tool_calls] == ["retain", "final_answer"]
    assert feedback_a.memory_retains == 1 and feedback_a.protocol_violation is None
    recalled = json.loads(task_b.tool_calls[0].result)
    assert recalled[0]["content"] == "Quillhaven post boxes are teal."
    # The recall's result went back to the model as the next user message.
    assert task_text(server.chat_requests[4]) == f"Result of recall: {task_b.tool_calls[0].result}"
    system = server.chat_requests[0]["messages"][0]["content"]
    assert "RECALL: <query> to call recall" in system and "RETAIN: <content> to call retain" in system


def test_a_reply_without_the_label_is_the_answer_as_a_whole(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([text("  teal\n")], then=text_policy()))
    run = make_stream(server, "none", protocol="text")
    outcome = run.run_task(TASK_A)
    assert outcome.scored.score.correct and outcome.response.final_answer == "teal"
    assert outcome.response.agent_turns == 1


def test_an_empty_reply_is_nudged_once_then_fails(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([text(""), text(" \n")], then=None))
    run = make_stream(server, "none", protocol="text")
    with pytest.raises(EpisodeError, match="reply was empty again"):
        run.run_task(TASK_A)
    assert task_text(server.chat_requests[1]) == prompts.TEXT_NUDGE


# --------------------------------------------------------------------------- auto


def test_auto_falls_back_to_text_when_the_server_returns_no_tool_calls(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(text_policy())
    run = make_stream(server, "none", protocol="auto")
    responses = capture_responses(run)
    outcomes = list(run_stream(run, [TASK_A, TASK_B]))
    assert [o.scored.score.correct for o in outcomes] == [True, True]
    requests = server.chat_requests
    assert "tools" in requests[0]  # tools first ...
    assert all("tools" not in body for body in requests[1:])  # ... text for good after
    assert "Final Answer: <" in requests[2]["messages"][0]["content"]  # the next task's system prompt
    assert all(r.protocol_violation is None for r in responses)
    assert len(requests) == 4  # the first reply already had a Final Answer: no nudge


def test_auto_teaches_the_format_when_the_fallback_reply_has_none(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([text("")], then=text_policy()))
    run = make_stream(server, "none", protocol="auto")
    outcomes = list(run_stream(run, [TASK_A]))
    assert outcomes[0].scored.score.correct
    assert "Final Answer: <only the answer itself>" in task_text(server.chat_requests[1])


def test_auto_keeps_native_tool_calls_when_the_server_makes_them(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    run = make_stream(server, "tool_use", protocol="auto")
    list(run_stream(run, [TASK_A, TASK_B]))
    assert all(body.get("tools") for body in server.chat_requests)


def test_tools_protocol_error_names_the_protocol_key(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(text_policy())
    run = make_stream(server, "none")
    with pytest.raises(EpisodeError, match="'protocol' to 'text' or 'auto'"):
        run.run_task(TASK_A)


# --------------------------------------------------------------------------- feedback schema, experiences


def test_feedback_turns_offer_final_answer_admitting_only_the_acknowledgement(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    run = make_stream(server, "deterministic_recall")
    list(run_stream(run, [TASK_A]))
    task, feedback = server.chat_requests
    assert task["tools"] == [FINAL_ANSWER_TOOL.to_openai()]
    answer = feedback["tools"][0]["function"]["parameters"]["properties"]["answer"]
    assert answer["enum"] == [FEEDBACK_ACKNOWLEDGEMENT]


@pytest.mark.parametrize(("form", "shown"), [("full", "My answer: blue\n"), ("answer_only", "")])
def test_experience_format_decides_whether_the_own_answer_is_shown(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory, form: str, shown: str
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "blue"))
    run = make_stream(server, "deterministic_recall", experience_format=form)
    list(run_stream(run, [TASK_A, TASK_B]))
    second = server.chat_requests[2]["messages"][1]["content"]
    assert f"Task: {TASK_A.prompt}\n{shown}Correct answer: teal" in second
    assert ("My answer" in second) == (form == "full")


def test_config_refuses_an_unknown_protocol() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="protocol"):
        AgentConfig(kind="tiny", protocol="json")  # type: ignore[arg-type]
