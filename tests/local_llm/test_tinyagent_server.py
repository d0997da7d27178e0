"""TinyAgent against a real OpenAI-compatible server (llama-cpp-python + SmolLM2).

The agent goes through the normal ``provider: openai`` path, so these tests cover
what mocks cannot: the request the client sends, the tool calls and usage a real
server returns, and the whole plugin run around them. They check the protocol,
never the 135M model's accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.core.tools import FINAL_ANSWER_TOOL
from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT

from .conftest import ModelServer

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]

STREAM = "sample_facts"
#: Tasks per run: two show ExpRAG's recall of the first task's experience before the
#: second; one suffices for the tool protocol (each tool step costs a model call).
TASKS = {"deterministic_recall": 2, "tool_use": 1}
#: The protocol of each run: ``tools`` (the default) for the tool protocol's strategy;
#: ``auto`` for ExpRAG, which on this tool-calling server must keep native tool calls
#: (it never falls back to the text format; on a server without tool calling it does:
#: test_text_protocol_server.py's auto-deterministic_recall).
PROTOCOL = {"deterministic_recall": "auto", "tool_use": "tools"}
MAX_STEPS = 4
TURN_LIMIT = "turn limit"


def model_section(server: ModelServer) -> dict[str, Any]:
    return {
        "provider": "openai",
        "base_url": server.base_url,
        "model": server.model,
        "api_key_env": None,
        "cache": False,
        "temperature": 0,
        "max_tokens": 48,
        "timeout_s": 300,
        "max_retries": 0,
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def with_transcripts(out: Path, stream: str = STREAM) -> list[dict[str, Any]]:
    """responses.jsonl, each response with its transcript's messages."""
    transcripts = {
        (t["task_id"], t["kind"]): t["messages"] for t in read_jsonl(out / "transcripts" / f"{stream}.jsonl")
    }
    return [
        {**r, "messages": transcripts[(r["task_id"], r["kind"])]} for r in read_jsonl(out / "responses.jsonl")
    ]


def assistant_messages(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in response["messages"] if m["role"] == "assistant"]


def test_the_server_answers_the_openai_client_with_a_tool_call_and_usage(model_server: ModelServer) -> None:
    from pytest_evomemory.models.factory import build_chat_model

    model = build_chat_model(ModelConfig(**model_section(model_server)))
    completion = model.complete(
        [{"role": "user", "content": "What is 2 + 2? Reply by calling final_answer."}],
        [FINAL_ANSWER_TOOL.to_openai()],
    )
    assert [call.name for call in completion.tool_calls] == ["final_answer"]
    assert isinstance(json.loads(completion.tool_calls[0].arguments), dict)
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0


# "none" against a real server: test_text_protocol_server.py's tools protocol on a
# server without tool calling; its records at the runtime level: tests/agents/test_tiny_agent.py
@pytest.mark.parametrize("strategy", ["deterministic_recall", "tool_use"])
def test_tinyagent_runs_a_short_stream_through_the_server(
    pytester: pytest.Pytester, model_server: ModelServer, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # failure reasons in the summary, untruncated
    run_config = pytester.path / f"tiny_{strategy}.yaml"
    run_config.write_text(
        yaml.safe_dump({
            "name": f"tiny_server_{strategy}",
            "benchmark": {"benchmark": "sample", "streams": [STREAM], "limit": TASKS[strategy]},
            "agent": {
                "kind": "tiny", "memory_strategy": strategy, "max_steps": MAX_STEPS,
                "protocol": PROTOCOL[strategy], "model": model_section(model_server),
            },
            "memory": {"backend": "inprocess", "top_k": 2},
        }),
        encoding="utf-8",
    )  # fmt: skip
    out = pytester.path / "out"
    result = pytester.runpytest(
        f"--evomemory-config={run_config}", "-p", "no:randomly", f"--evomemory-output-dir={out}", "-rfE"
    )
    log = "\n".join(result.outlines[-60:]) + "\n--- server log ---\n" + model_server.log_tail()
    assert result.ret in (0, 1), log  # 1: a task hit the turn limit, which is allowed
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == TASKS[strategy], log
    # A task (or, at teardown, its feedback turn) fails only for the reason the
    # protocol allows a tiny model: it kept calling tools until the turn limit.
    problems = [line for line in result.outlines if line.startswith(("FAILED ", "ERROR "))]
    assert len(problems) == outcomes.get("failed", 0) + outcomes.get("errors", 0), log
    assert all(TURN_LIMIT in line for line in problems), log

    scores = read_jsonl(out / "scores.jsonl")
    assert [s["task_id"] for s in scores] == ["f01", "f02"][: TASKS[strategy]]
    for score in scores:
        assert score["raw_answer"] is not None or TURN_LIMIT in score["reason"], score

    responses = with_transcripts(out)
    tasks = [r for r in responses if r["kind"] == "task"]
    feedback = [r for r in responses if r["kind"] == "feedback"]
    reasons = {s["task_id"]: s["reason"] for s in scores}
    for response in tasks:
        assert response["final_answer"] is not None or TURN_LIMIT in reasons[response["task_id"]], response
    # Feedback follows only a completed task turn; it is acknowledged or flagged.
    answered = [r["task_id"] for r in tasks if r["final_answer"] is not None]
    assert [r["task_id"] for r in feedback] == answered, log
    for response in feedback:
        acknowledged = response["final_answer"] == FEEDBACK_ACKNOWLEDGEMENT
        out_of_steps = response["final_answer"] is None and response["agent_turns"] == MAX_STEPS
        assert acknowledged or response["protocol_violation"] or out_of_steps, response
    for response in responses:
        # Usage comes from the server's responses, one or more calls per turn.
        assert response["usage"]["prompt_tokens"] > 0, response
        assert response["usage"]["completion_tokens"] > 0, response
        assert 1 <= response["agent_turns"] <= MAX_STEPS
        names = {call["name"] for call in response["tool_calls"]}
        if strategy == "tool_use":
            assert names <= {"final_answer", "recall", "retain"}, names
        else:
            assert names == {"final_answer"}, names

    if PROTOCOL[strategy] == "auto":
        # Native tool calls are kept: the text format is never asked for.
        assert any("tool_calls" in m for m in assistant_messages(responses[0])), responses[0]
        assert all("Final Answer: <" not in str(m.get("content")) for r in responses for m in r["messages"])
    if strategy == "deterministic_recall":
        # ExpRAG: one recall before every task, one retain in every feedback turn.
        assert all(r["memory_recalls"] == 1 and r["memory_retains"] == 0 for r in tasks)
        assert all(r["memory_retains"] == 1 and r["memory_recalls"] == 0 for r in feedback)

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    overall = summary["overall"]
    assert overall["tasks"] == TASKS[strategy]
    assert overall["prompt_tokens"] > 0 and overall["completion_tokens"] > 0
    assert overall["stimuli"] == len(responses)
