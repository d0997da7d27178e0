"""Hostile model replies end one turn cleanly (or are recorded as given), never the
session: every task still gets a scored record, the artefacts are valid JSON/UTF-8,
and no traceback or INTERNALERROR reaches the user."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    FEEDBACK_ACKNOWLEDGEMENT,
    Fault,
    Reply,
    final_answer,
    is_feedback,
    tool_call,
    tool_calls,
)

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, tiny_run_config

_BIG = 10 * 1024 * 1024


def _raw_completion(content_json: str) -> Fault:
    """A 200 whose body is written by hand (escapes JSON dumps would not produce)."""
    body = '{"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "final_answer", "arguments": %s}}]}, "finish_reason": "tool_calls"}]}'
    return Fault(200, raw=(body % json.dumps(content_json)).encode())


#: name -> (reply to every task turn, what the task's record must show)
CASES: dict[str, tuple[Reply, str]] = {
    "lone_surrogate_in_answer": (_raw_completion('{"answer": "a\\ud800b"}'), "answer:a\ufffdb"),
    "lone_surrogate_in_content": (
        Fault(200, raw=b'{"choices": [{"message": {"role": "assistant", "content": "x\\udfffy"}}]}'), "error"
    ),
    "nul_in_answer": (final_answer("a\x00b"), "answer:a\ufffdb"),
    "u2028_in_answer": (final_answer("line\u2028sep"), "answer:line\u2028sep"),
    "u2028_in_tool_arguments": (tool_call("final_answer", '{"answer": "p\u2028q"}'), "answer:p\u2028q"),
    "invalid_utf8_reply": (Fault(200, raw=b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'), "error:not UTF-8"),
    "ten_megabyte_reply": (final_answer("x" * _BIG), "error:max_reply_bytes"),
    "ten_megabyte_unannounced": (Fault(200, raw=b" " * _BIG + b"{}"), "error:max_reply_bytes"),
    "arguments_not_json": (tool_call("final_answer", "{answer: 4"), "error:max_steps"),
    "endless_tool_loop": (tool_call("no_such_tool", {"x": 1}), "error:max_steps"),
    "deeply_nested_reply": (Fault(200, raw=b"[" * 100_000 + b"]" * 100_000), "error:nested too deeply"),
    "a_thousand_tool_calls": (
        tool_calls([("final_answer", {"answer": str(i)}) for i in range(1000)]), "error:1,000 tool calls at once"
    ),
    "huge_integer_in_reply": (Fault(200, raw=b'{"choices": ' + b"9" * 5000 + b"}"), "error:not JSON"),
    # the arguments are a string inside the reply: bounded when the turn reads them, and
    # handed back to the model as a tool error (it never answers, so max_steps ends the turn)
    "deeply_nested_tool_arguments": (
        tool_call("final_answer", '{"answer": ' + "[" * 50_000 + "]" * 50_000 + "}"), "error:max_steps"
    ),
    "huge_integer_in_tool_arguments": (tool_call("final_answer", '{"answer": ' + "9" * 6000 + "}"), "error:max_steps"),
}


def _policy(reply: Reply) -> Any:
    def answer(request: Mapping[str, Any]) -> Reply:
        if is_feedback(request):
            return final_answer(FEEDBACK_ACKNOWLEDGEMENT)
        return reply

    return answer


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_reply_ends_that_turn_only(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    reply, expected = CASES[case]
    server = scripted_openai_server(_policy(reply))
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, max_steps=3)
    result = pytester.runpytest(
        f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider",
        f"--junitxml={pytester.path / 'junit.xml'}",
    )
    assert_no_internal_error(result)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    results = pytester.path / "results"
    for path in results.rglob("*"):
        if path.is_file():
            path.read_bytes().decode("utf-8")  # every artefact is valid UTF-8
    scores = [json.loads(line) for line in (results / "scores.jsonl").read_bytes().decode("utf-8").split("\n") if line]
    assert [score["task_id"] for score in scores] == ["t0", "t1"]  # both tasks ran: the session went on
    kind, _, detail = expected.partition(":")
    for score in scores:
        if kind == "answer":
            assert score["raw_answer"] == detail and not score.get("error")
        else:
            assert score["error"] and detail in score["error"], score["error"]
            assert "\n" not in score["error"]
            assert "RecursionError" not in score["error"] and "Exceeds the limit" not in score["error"]
    assert json.loads((results / "summary.json").read_text(encoding="utf-8"))["overall"]["tasks"] == 2


def test_an_oversized_prompt_is_refused_before_it_is_sent(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_openai_server()
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, model={"max_request_bytes": 4096})
    (pytester.path / "tasks.jsonl").write_text(
        json.dumps({"id": "big", "prompt": "y" * 10_000, "target": "y"}) + "\n", encoding="utf-8"
    )
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert_no_internal_error(result)
    result.stdout.fnmatch_lines(["*over model.max_request_bytes (4,096)*"])
    assert not any("y" * 1000 in str(body) for body in server.chat_requests)  # never sent


def test_replies_are_stored_as_given_apart_from_what_cannot_be_stored(tmp_path: Path) -> None:
    from pytest_evomemory.models.openai_compat import completion_from_json

    payload = json.loads('{"choices": [{"message": {"content": "a\\ud800\\u0000\\u2028\\u00e9"}}]}')
    assert completion_from_json(payload).content == "a\ufffd\ufffd\u2028\u00e9"
