"""TinyAgent through StreamRun and the real HTTP model client: every memory strategy,
the feedback turn, reset, and every fault a model or endpoint can produce."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.agents.prompts import ACKNOWLEDGEMENT_TOOL
from pytest_evomemory.agents.tiny import TinyAgent
from pytest_evomemory.config import AgentConfig, validate_mapping
from pytest_evomemory.config.yamlio import read_yaml_mapping
from pytest_evomemory.core.errors import ConfigError, EpisodeError, ProtocolViolation
from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.runtime import StreamRun, run_stream
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    Fault,
    Script,
    final_answer,
    is_feedback,
    make_echo_policy,
    scripted_model_config,
    text,
    tool_call,
    tool_calls,
)

from ..conftest import capture_responses

StreamFactory = Callable[..., StreamRun]

TASK_A = BenchmarkSample("f01", "facts", 0, "In Quillhaven, what colour are the post boxes?", "teal")
TASK_B = BenchmarkSample("f02", "facts", 1, "Quillhaven post boxes: which colour are they painted?", "teal")


def tool_names(request: Mapping[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def user_texts(request: Mapping[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


# --------------------------------------------------------------------------- strategies


def test_none_strategy_offers_only_final_answer(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    run = make_stream(server, "none")
    outcomes = list(run_stream(run, [TASK_A, TASK_B]))
    assert [o.scored.score.correct for o in outcomes] == [True, True]
    assert all(tool_names(body) == ["final_answer"] for body in server.chat_requests)
    assert len(server.chat_requests) == 4  # task + feedback, twice
    second_task = server.chat_requests[2]
    assert "Experiences from earlier tasks" not in second_task["messages"][1]["content"]
    assert outcomes[0].response.memory_recalls == outcomes[0].response.memory_retains == 0


def test_deterministic_recall_is_exprag(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "blue"))
    run = make_stream(server, "deterministic_recall")
    responses = capture_responses(run)
    list(run_stream(run, [TASK_A, TASK_B]))
    requests = server.chat_requests
    assert all(tool_names(body) == ["final_answer"] for body in requests)  # no memory tools
    assert TASK_A.prompt == requests[0]["messages"][1]["content"]  # nothing remembered yet
    second = requests[2]["messages"][1]["content"]
    assert second.startswith("Experiences from earlier tasks, most similar first")
    assert f"Task: {TASK_A.prompt}\nMy answer: blue\nCorrect answer: teal" in second
    assert second.endswith(f"Current task:\n{TASK_B.prompt}")
    task_a, feedback_a, task_b, feedback_b = responses
    assert (task_a.memory_recalls, feedback_a.memory_retains) == (1, 1)
    assert (task_b.memory_recalls, feedback_b.memory_retains) == (1, 1)
    assert feedback_a.final_answer == "Feedback recorded" and feedback_a.protocol_violation is None


def test_deterministic_recall_orders_most_similar_first(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "x"))
    run = make_stream(server, "deterministic_recall", top_k=2)
    unrelated = BenchmarkSample("f00", "facts", 0, "In Quillhaven, who keeps the lighthouse cat fed?", "Ada")
    list(run_stream(run, [unrelated, TASK_A, TASK_B]))
    shown = server.chat_requests[-2]["messages"][1]["content"]
    assert shown.index(TASK_A.prompt) < shown.index(unrelated.prompt)


def test_tool_use_sends_exactly_the_turn_tools(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    run = make_stream(server, "tool_use", max_steps=4)
    responses = capture_responses(run)
    list(run_stream(run, [TASK_A, TASK_B]))
    expected = [spec.to_openai() for spec in _turn_specs(run)]
    # Task turns get the turn's tools verbatim; feedback turns the same tools with
    # final_answer narrowed to the acknowledgement.
    acknowledging = [ACKNOWLEDGEMENT_TOOL.to_openai(), *expected[1:]]
    for body in server.chat_requests:
        assert body["tools"] == (acknowledging if is_feedback(body) else expected)
    assert sum(is_feedback(body) for body in server.chat_requests) >= 2
    assert tool_names(server.chat_requests[0]) == ["final_answer", "retain", "recall"]
    task_a, feedback_a, task_b, _ = responses
    assert [call.name for call in task_a.tool_calls] == ["recall", "final_answer"]
    assert [call.name for call in feedback_a.tool_calls] == ["retain", "final_answer"]
    assert task_a.agent_turns == 2 and feedback_a.memory_retains == 1
    recalled = json.loads(task_b.tool_calls[0].result)
    assert recalled and "teal" in recalled[0]["content"]
    assert "long-term memory" in server.chat_requests[0]["messages"][0]["content"]


def _turn_specs(run: Any) -> list[Any]:
    from pytest_evomemory.core.tools import FINAL_ANSWER_TOOL

    return [FINAL_ANSWER_TOOL, *(tool.spec for tool in run._turn_tools())]


def test_deterministic_recall_without_memory_is_a_config_error(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server()
    config = AgentConfig(kind="tiny", memory_strategy="deterministic_recall", model=scripted_model_config(server))
    with pytest.raises(ConfigError, match="needs a memory system"):
        TinyAgent(config, None)


def test_tiny_needs_a_model_section() -> None:
    with pytest.raises(ConfigError, match="'model' section"):
        TinyAgent(AgentConfig(kind="tiny", memory_strategy="none"), None)


def test_build_agent_builds_tiny(scripted_openai_server: ServerFactory) -> None:
    from pytest_evomemory.agents import Agent, build_agent

    server = scripted_openai_server()
    config = AgentConfig(kind="tiny", memory_strategy="none", model=scripted_model_config(server))
    assert isinstance(build_agent(config, None), Agent)


# --------------------------------------------------------------------------- feedback and reset


def test_feedback_continues_the_task_conversation_and_reset_clears_it(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "green"))
    run = make_stream(server, "none")
    responses = capture_responses(run)
    list(run_stream(run, [TASK_A, TASK_B]))
    task_request, feedback_request, next_task = server.chat_requests[:3]
    feedback_messages = feedback_request["messages"]
    assert feedback_messages[: len(task_request["messages"])] == task_request["messages"]
    assert [m["role"] for m in feedback_messages] == ["system", "user", "assistant", "tool", "user"]
    assert "Your submitted answer: green" in feedback_messages[-1]["content"]
    assert "The correct answer: teal" in feedback_messages[-1]["content"]
    assert [m["role"] for m in next_task["messages"]] == ["system", "user"]  # reset cleared it
    feedback = responses[1]
    assert feedback.kind == "feedback" and feedback.final_answer == "Feedback recorded"
    assert [m["role"] for m in feedback.messages] == ["user", "assistant", "tool"]
    assert feedback.usage.total_tokens > 0 and feedback.agent_turns == 1


def test_transcript_and_usage_are_recorded_per_stimulus(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(
        Script([
            tool_call("final_answer", '{"answer": "teal"', usage={"prompt_tokens": 10, "completion_tokens": 2}),
            final_answer("teal", usage={"prompt_tokens": 20, "completion_tokens": 3}),
        ])
    )
    run = make_stream(server, "none")
    outcome = run.run_task(TASK_A)
    response = outcome.response
    assert response.usage.prompt_tokens == 30 and response.usage.completion_tokens == 5
    assert response.agent_turns == 2
    assert [m["role"] for m in response.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [call.error for call in response.tool_calls] == [True, False]


# --------------------------------------------------------------------------- faults


def test_malformed_tool_json_gets_an_error_and_the_model_recovers(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([tool_call("final_answer", "{answer: teal"), final_answer("teal")]))
    run = make_stream(server, "none")
    outcome = run.run_task(TASK_A)
    assert outcome.scored.score.correct
    tool_message = server.chat_requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "not valid JSON" in tool_message["content"]
    assert tool_message["tool_call_id"] == "call_0"


def test_unknown_tool_gets_an_error_message(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([tool_call("recall", {"query": "x"}), final_answer("teal")]))
    run = make_stream(server, "none")  # no memory tools in a 'none' turn
    outcome = run.run_task(TASK_A)
    assert "unknown tool 'recall'" in server.chat_requests[1]["messages"][-1]["content"]
    assert outcome.response.tool_calls[0].error and outcome.scored.score.correct


def test_never_calling_final_answer_fails_at_the_turn_limit(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(lambda request: tool_call("calculator", {"x": 1}))
    run = make_stream(server, "none", max_steps=3)
    responses = capture_responses(run)
    with pytest.raises(EpisodeError, match="turn limit of 3 model calls"):
        run.run_task(TASK_A)
    assert len(server.requests) == 3
    assert responses[0].agent_turns == 3 and len(responses[0].tool_calls) == 3


def test_bad_json_forever_fails_with_the_reason(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(lambda request: tool_call("final_answer", "not json"))
    run = make_stream(server, "none", max_steps=2)
    with pytest.raises(EpisodeError, match="turn limit"):
        run.run_task(TASK_A)


def test_plain_text_is_nudged_once(scripted_openai_server: ServerFactory, make_stream: StreamFactory) -> None:
    server = scripted_openai_server(Script([text("The answer is teal."), final_answer("teal")]))
    run = make_stream(server, "none")
    outcome = run.run_task(TASK_A)
    assert outcome.scored.score.correct and outcome.response.agent_turns == 2
    assert "Call final_answer" in user_texts(server.chat_requests[1])[-1]


def test_plain_text_twice_fails(scripted_openai_server: ServerFactory, make_stream: StreamFactory) -> None:
    server = scripted_openai_server(lambda request: text("teal"))
    run = make_stream(server, "none", max_steps=5)
    with pytest.raises(EpisodeError, match="plain text again"):
        run.run_task(TASK_A)
    assert len(server.requests) == 2


def test_plain_text_nudge_counts_against_the_limit(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([text("teal"), final_answer("teal")]))
    run = make_stream(server, "none", max_steps=1)
    with pytest.raises(EpisodeError, match="turn limit of 1"):
        run.run_task(TASK_A)


def test_feedback_nudge_and_acknowledgement(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([final_answer("teal"), text("noted"), final_answer("Feedback recorded")]))
    run = make_stream(server, "none")
    outcome = run.run_task(TASK_A)
    feedback = run.give_feedback(TASK_A, outcome.response.final_answer)
    assert feedback.final_answer == "Feedback recorded" and feedback.agent_turns == 2
    assert feedback.protocol_violation is None
    assert user_texts(server.chat_requests[-1])[-1] == 'Call final_answer with exactly "Feedback recorded" now.'


def test_parallel_calls_run_final_answer_last(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(
        Script([
            final_answer("teal"),
            tool_calls([("final_answer", {"answer": "Feedback recorded"}), ("retain", {"content": "teal"})]),
        ])
    )
    run = make_stream(server, "tool_use")
    outcome = run.run_task(TASK_A)
    feedback = run.give_feedback(TASK_A, outcome.response.final_answer)
    assert [call.name for call in feedback.tool_calls] == ["retain", "final_answer"]
    assert not any(call.error for call in feedback.tool_calls) and feedback.memory_retains == 1
    assert [m.get("tool_call_id") for m in feedback.messages if m["role"] == "tool"] == ["call_0", "call_1"]


def test_model_error_fails_the_episode_with_the_reason(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([Fault(500)] * 5))
    run = make_stream(server, "none", max_retries=2)
    with pytest.raises(EpisodeError, match=r"ModelError: .*failed after 3 attempts: HTTP status 500"):
        run.run_task(TASK_A)


def test_429_then_success_inside_an_episode(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(Script([Fault(429, retry_after=0), final_answer("teal")]))
    run = make_stream(server, "deterministic_recall")
    outcome = run.run_task(TASK_A)
    assert outcome.scored.score.correct and outcome.response.agent_turns == 1
    assert len(server.requests) == 2


def test_timeout_inside_an_episode(scripted_openai_server: ServerFactory, make_stream: StreamFactory) -> None:
    server = scripted_openai_server(Script([Fault(200, delay_s=1.0, then=final_answer("late"))] * 2))
    run = make_stream(server, "tool_use", timeout_s=0.2, max_retries=1)
    with pytest.raises(EpisodeError, match="timed out"):
        run.run_task(TASK_A)


def test_feedback_with_wrong_acknowledgement_is_a_recorded_violation(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    server.policy = lambda request: final_answer("ok") if is_feedback(request) else final_answer("teal")
    run = make_stream(server, "none")
    outcome = run.run_task(TASK_A)
    feedback = run.give_feedback(TASK_A, outcome.response.final_answer)
    assert feedback.protocol_violation and "instead of" in feedback.protocol_violation


def test_task_without_final_answer_is_a_protocol_violation_not_a_hang(
    scripted_openai_server: ServerFactory, make_stream: StreamFactory
) -> None:
    server = scripted_openai_server(lambda request: tool_call("final_answer", {"answer": ["a list"]}))
    run = make_stream(server, "none", max_steps=2)
    with pytest.raises((EpisodeError, ProtocolViolation)):
        run.run_task(TASK_A)


CONFIG_DIR = Path(__file__).resolve().parents[2] / "pytest_evomemory" / "configs" / "agents"


@pytest.mark.parametrize(
    "name", ["tiny_openai_exprag", "tiny_openai_tool_use", "tiny_openai_no_memory", "tiny_local_server"]
)
def test_shipped_tiny_configs_validate(name: str) -> None:
    path = CONFIG_DIR / f"{name}.yaml"
    config = validate_mapping(AgentConfig, read_yaml_mapping(path), str(path))
    assert config.kind == "tiny" and config.model is not None and config.model.provider == "openai"
