"""TinyAgent's text protocol against ``python -m llama_cpp.server`` as a user starts it.

With no chat format given, the server renders SmolLM2's own chat template, which
knows no tools: every reply is prose. ``protocol: tools`` therefore fails each
task (with an error naming the fix), while ``text`` and ``auto`` run the stream.
The tests check the protocol and the records, never the 135M model's accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .conftest import ModelServer
from .test_tinyagent_server import assistant_messages, model_section, with_transcripts

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]

STREAM = "sample_facts"
TASKS = 2


def run_plugin(
    pytester: pytest.Pytester, server: ModelServer, *, protocol: str, strategy: str, tasks: int = TASKS
) -> tuple[pytest.RunResult, Path, str]:
    run_config = pytester.path / f"text_{protocol}_{strategy}.yaml"
    run_config.write_text(
        yaml.safe_dump({
            "name": f"text_{protocol}_{strategy}",
            "benchmark": {"benchmark": "sample", "streams": [STREAM], "limit": tasks},
            "agent": {
                "kind": "tiny", "memory_strategy": strategy, "max_steps": 4, "protocol": protocol,
                "model": model_section(server),
            },
            "memory": {"backend": "inprocess", "top_k": 2},
        }),
        encoding="utf-8",
    )  # fmt: skip
    out = pytester.path / "out"
    result = pytester.runpytest(
        f"--evomemory-config={run_config}", "-p", "no:randomly", f"--evomemory-output-dir={out}", "-rfE"
    )
    log = "\n".join(result.outlines[-40:]) + "\n--- server log ---\n" + server.log_tail()
    return result, out, log


@pytest.mark.parametrize(
    ("protocol", "strategy"),
    # Two runs, not six: each costs a minute on a busy 2-core runner. Together they
    # cover both protocols, memory operations written as text, and ExpRAG's recall
    # and retain (made by the runtime whatever the protocol) around turns in the text
    # format that auto falls back to.
    [("text", "tool_use"), ("auto", "deterministic_recall")],
)
def test_the_text_protocol_runs_a_stream_on_a_server_without_tool_calling(
    pytester: pytest.Pytester,
    plain_model_server: ModelServer,
    protocol: str,
    strategy: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    result, out, log = run_plugin(pytester, plain_model_server, protocol=protocol, strategy=strategy)
    outcomes = result.parseoutcomes()
    # Every task gets an answer: a wrong one is a pass, never a failure.
    assert result.ret == 0 and outcomes.get("passed", 0) == TASKS, log
    responses = with_transcripts(out)
    tasks = [r for r in responses if r["kind"] == "task"]
    feedback = [r for r in responses if r["kind"] == "feedback"]
    assert len(tasks) == len(feedback) == TASKS, log
    for response in responses:
        assert response["final_answer"], response
        assert response["usage"]["prompt_tokens"] > 0 and response["usage"]["completion_tokens"] > 0
        # The server never calls a tool; the runtime records the parsed final answer
        # (and any RECALL/RETAIN line) as the turn's tool calls.
        assert all("tool_calls" not in m for m in assistant_messages(response)), response
        names = [call["name"] for call in response["tool_calls"]]
        assert names[-1] == "final_answer" and names.count("final_answer") == 1, names
        assert set(names) <= ({"final_answer", "recall", "retain"} if strategy == "tool_use" else {"final_answer"})
        # A feedback turn ends with the acknowledgement or is flagged, never silently.
        if response["kind"] == "feedback" and response["final_answer"] != "Feedback recorded":
            assert response["protocol_violation"], response
    if strategy == "deterministic_recall":
        assert all(r["memory_recalls"] == 1 for r in tasks)
        assert all(r["memory_retains"] == 1 for r in feedback)
    if protocol == "auto":
        # Tools are offered once; the prose reply switches the stream to text.
        first = tasks[0]["messages"][0]["content"]
        assert "final_answer tool" in first, first
        assert "Final Answer: <" in tasks[1]["messages"][0]["content"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["overall"]["tasks"] == TASKS


def test_the_tools_protocol_fails_there_with_an_error_naming_the_fix(
    pytester: pytest.Pytester, plain_model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    result, _, log = run_plugin(pytester, plain_model_server, protocol="tools", strategy="none", tasks=1)
    assert result.ret == 1, log
    assert "set the agent config key 'protocol' to 'text' or 'auto'" in "\n".join(result.outlines), log
