"""A model endpoint misbehaving, through the runtime as ``evomemory run`` drives it.

Every fault of the corpus is played to one turn of one task (``t1``) of a three-task
stream whose other turns the server answers correctly. Whatever the fault, the
session must record it against that task and that turn with a reason naming what
was wrong, never a traceback; the other tasks keep their scores; the summary's
counts (tasks, errors, the accuracy's denominator) stay right; retries are spent only
on what is transient; a failed feedback turn is never scored and leaves its task's
score as it was; the exit status is 1; and the API key is in no output and no file.
(The pytest door runs the same episode driver: tests/plugin/test_faults.py and
tests/bad_input/test_secrets.py run such faults through pytest itself.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.testing.scripted_server import (
    Fault,
    Reply,
    ScriptedServer,
    completion,
    final_answer,
    is_feedback,
    make_echo_policy,
    task_text,
    tool_call,
)

KEY_VARIABLE = "EVOMEMORY_FAULTS_KEY"
SECRET = "sk-proj-FAULTS0CANARY0abcdefghijklmnop0123WXYZ"

#: Answers every task right (its last word) and every feedback turn as the protocol asks.
RIGHT = make_echo_policy(lambda prompt: prompt.strip().split()[-1], use_memory_tools=False)

_ANSWER = json.dumps(final_answer("1")).encode()


def _raw(body: str | bytes, **fault: Any) -> Fault:
    return Fault(200, raw=body if isinstance(body, bytes) else body.encode(), **fault)


def _error(status: int, **fault: Any) -> Fault:
    return Fault(status, {"error": {"message": f"scripted {status}", "type": "server_error"}}, **fault)


def _calls(*calls: dict[str, Any]) -> Fault:
    return _raw(json.dumps({"choices": [{"message": {"role": "assistant", "tool_calls": list(calls)}}]}))


#: name -> (the reply to t1's turn, what its failure says, how many requests that turn makes)
CORPUS: dict[str, tuple[Reply, str, int | None]] = {
    "not_json": (_raw("hello world"), "the reply is not JSON (content-type 'application/json'): 'hello world'", 1),
    "html_page_with_200": (
        _raw("<html><body>Bad gateway</body></html>", content_type="text/html"), "content-type 'text/html'", 1
    ),
    "empty_body": (_raw(b""), "not JSON (content-type 'application/json'): an empty body", 1),
    "json_null": (_raw("null"), "the reply is JSON but not an object", 1),
    "no_choices": (_raw('{"id": "x", "object": "chat.completion"}'), "a response without choices", 1),
    "empty_choices": (_raw('{"choices": []}'), "a response without choices", 1),
    "error_object_with_200": (_raw('{"error": {"message": "overloaded"}}'), "carries an error instead of choices", 1),
    "message_not_an_object": (_raw('{"choices": [{"message": "hi"}]}'), "first choice has no message", 1),
    "null_content": (
        _raw('{"choices": [{"message": {"role": "assistant", "content": null}}]}'),
        "the model gave an empty reply (no text, no tool call) again after being asked to call final_answer", 2,
    ),
    "absent_content": (
        _raw('{"choices": [{"message": {"role": "assistant"}}]}'), "gave an empty reply (no text, no tool call) again", 2
    ),
    "text_instead_of_a_tool_call": (
        completion({"content": "It is 1."}), "the model answered in plain text again after being asked to call", 2
    ),
    "content_a_number": (
        _raw('{"choices": [{"message": {"role": "assistant", "content": 42}}]}'),
        "message content is neither text nor text parts: '42'", 1,
    ),
    "tool_calls_not_a_list": (
        _raw('{"choices": [{"message": {"tool_calls": {"a": 1}}}]}'), "'tool_calls' in the reply is not a list", 1
    ),
    "tool_call_without_a_name": (
        _calls({"id": "c", "function": {"name": 5, "arguments": "{}"}}), "a tool call in the reply has no function name", 1
    ),
    "arguments_not_json": (tool_call("final_answer", "{answer: "), "no final_answer within the turn limit of 3", 3),
    "unknown_tool": (tool_call("no_such_tool", {"x": 1}), "no final_answer within the turn limit of 3", 3),
    "cut_at_max_tokens_mid_call": (
        completion({"tool_calls": [{"id": "a", "type": "function",
                                    "function": {"name": "final_answer", "arguments": '{"answ'}}]},
                   finish_reason="length"),
        "no final_answer within the turn limit of 3 model calls (agent config key 'max_steps'); of the model's "
        "replies in this turn, 3 cut off at model.max_tokens (1,024) (finish_reason 'length'): raise the limit", 3,
    ),
    "cut_at_max_tokens_in_text": (
        completion({"content": "The answer is"}, finish_reason="length"),
        "answered in plain text again after being asked to call final_answer; it must end every turn with a "
        "final_answer tool call (for a server without tool calling, set the agent config key 'protocol' to 'text' "
        "or 'auto'); of the model's replies in this turn, 2 cut off at model.max_tokens (1,024)", 2,
    ),
    "content_filtered": (
        completion({"content": ""}, finish_reason="content_filter"),
        "the model gave an empty reply (no text, no tool call) again after being asked to call final_answer; it "
        "must end every turn with a final_answer tool call (for a server without tool calling, set the agent config "
        "key 'protocol' to 'text' or 'auto'); of the model's replies in this turn, 2 stopped by the server's content "
        "filter (finish_reason 'content_filter')", 2,
    ),
    "over_max_reply_bytes": (
        final_answer("x" * 5000), "the reply is over model.max_reply_bytes (4,096 bytes; it announced", 1
    ),
    "cut_off_mid_body": (
        _raw(_ANSWER, cut_at=20), "connection error (RemoteProtocolError: peer closed connection without sending "
        f"complete message body (received 20 bytes, expected {len(_ANSWER)})", 2,
    ),
    "closed_after_the_headers": (_raw(_ANSWER, cut_at=0), "(received 0 bytes, expected", 2),
    # t0's kept-alive connection carries t1's first request: a connection failing before any reply may
    # have been closed by the server as the request went out, and the request goes once more on a new one
    "reset_before_the_headers": (Fault(drop=True, reset=True), "connection error (ConnectionResetError", 3),
    "reset_after_the_headers": (_raw(_ANSWER, cut_at=0, reset=True), "connection error (ConnectionResetError", 2),
    "closed_without_a_reply": (Fault(drop=True), "Remote end closed connection without response", 3),
    "redirect": (
        Fault(307, raw=b"", headers={"Location": "http://127.0.0.1:9/v1/chat/completions?token=abcdef123456"}),
        "HTTP status 307: an empty body (not retried: the status is not transient); the endpoint redirects to "
        "'http://127.0.0.1:9/v1/chat/completions?***', and redirects are not followed", 1,
    ),
    **{
        f"status_{status}": (_error(status), f"HTTP status {status}: scripted {status} (not retried", 1)
        for status in (400, 401, 403, 404, 413, 422)
    },
    **{
        f"status_{status}": (_error(status), f"failed after 2 attempts: HTTP status {status}: scripted {status}", 2)
        for status in (408, 429, 500, 502, 503, 504)
    },
    "status_429_retry_after_a_date": (
        _error(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), "after 2 attempts: HTTP status 429", 2
    ),
    "status_503_retry_after_garbage": (
        _error(503, headers={"Retry-After": "soon-ish"}), "after 2 attempts: HTTP status 503", 2
    ),
    "key_echoed_in_the_error": (
        Fault(401, {"error": {"message": f"Incorrect API key provided: {SECRET}."}}),
        "HTTP status 401: Incorrect API key provided: ***. (not retried", 1,
    ),
    "key_half_echoed_in_the_error": (
        Fault(401, {"error": {"message": f"Incorrect API key provided: {SECRET[:26]}****{SECRET[-4:]}."}}),
        "Incorrect API key provided: *******WXYZ.", 1,  # the front half masked, the server's stars kept
    ),
    "key_echoed_in_a_header_and_page": (
        Fault(502, raw=f"<pre>Authorization: Bearer {SECRET}</pre>".encode(), content_type="text/html",
              headers={"X-Echo-Authorization": f"Bearer {SECRET}"}),
        "HTTP status 502: '<pre>Authorization: Bearer ***</pre>'", 2,
    ),
    "key_echoed_in_the_content_type": (
        _raw("oops", content_type=f"text/plain; debug-authorization=Bearer {SECRET}"),
        "the reply is not JSON (content-type 'text/plain; debug-authorization=Bearer ***'): 'oops'", 1,
    ),
    "key_echoed_in_a_redirect": (
        Fault(302, raw=b"", headers={"Location": f"https://login.example/{SECRET}/v1?key={SECRET}"}),
        "the endpoint redirects to 'https://login.example/***/v1?***'", 1,
    ),
}

#: Faults replayed to t1's feedback turn too: its task keeps its score.
FEEDBACK_CASES = ["not_json", "status_500", "unknown_tool", "cut_off_mid_body", "key_echoed_in_the_error"]


class FaultOn:
    """Plays ``reply`` to t1's ``turn`` ("task" or "feedback") and answers the rest
    right; counts the requests of that turn."""

    def __init__(self, turn: str, reply: Reply) -> None:
        self.turn, self.reply = turn, reply
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, request: Mapping[str, Any]) -> Reply:
        about_t1 = "Say 1" in task_text(request) or "Say 1" in json.dumps(request.get("messages", [])[:3])
        if about_t1 and is_feedback(request) == (self.turn == "feedback"):
            with self._lock:
                self.requests += 1
            return self.reply
        return RIGHT(request)


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """``session(policy, **model)``: one ``evomemory run`` of the three tasks against
    a scripted server; returns its exit status, its output and its run directory."""
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"Say {i}", "target": str(i)}) + "\n" for i in range(3)),
        encoding="utf-8",
    )
    servers: list[ScriptedServer] = []

    def run(policy: Any, *options: str, **model: Any) -> tuple[int, str, Path]:
        server = ScriptedServer(policy).start()
        servers.append(server)
        settings = {
            "model": "scripted", "base_url": server.base_url, "api_key_env": KEY_VARIABLE, "timeout_s": 5,
            "max_retries": 1, "retry_backoff_s": 0, "retry_backoff_max_s": 0.05, "cache": False,
            "max_reply_bytes": 4096, **model,
        }
        config = tmp_path / "run.yaml"
        config.write_text(json.dumps({
            "name": "faults", "benchmark": {"benchmark": "files", "files": [{"name": "mine", "path": "tasks.jsonl"}]},
            "memory": {"backend": "inprocess"},
            "agent": {"kind": "tiny", "memory_strategy": "none", "max_steps": 3, "model": settings},
        }), encoding="utf-8")
        output = tmp_path / "out"
        status = evomemory(["run", "--config", str(config), "--output-dir", str(output), *options])
        captured = capsys.readouterr()
        return status, captured.out + captured.err, output

    yield run
    for server in servers:
        server.stop()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _assert_clean(output: str, run_dir: Path) -> None:
    """No traceback, and the key in no output and no file (not even its front half)."""
    assert "Traceback" not in output and "pytest_evomemory/" not in output, output[-2000:]
    leaks = [str(path) for path in run_dir.rglob("*") if path.is_file() and SECRET[8:22] in path.read_text("utf-8")]
    assert SECRET[8:22] not in output and leaks == []


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_a_fault_in_a_task_turn_fails_that_task_only(session: Any, case: str) -> None:
    reply, reason, requests = CORPUS[case]
    policy = FaultOn("task", reply)
    status, output, run_dir = session(policy)
    _assert_clean(output, run_dir)
    assert status == 1
    scores = {score["task_id"]: score for score in _lines(run_dir / "scores.jsonl")}
    assert sorted(scores) == ["t0", "t1", "t2"]
    assert scores["t0"]["correct"] and scores["t2"]["correct"] and not scores["t1"]["correct"]
    assert not scores["t0"].get("error") and not scores["t2"].get("error")
    error = scores["t1"]["error"]
    assert error.startswith("task turn of mine/t1 failed: ModelError: model 'scripted' at ") or case in (
        "null_content", "absent_content", "text_instead_of_a_tool_call", "arguments_not_json", "unknown_tool",
        "cut_at_max_tokens_mid_call", "cut_at_max_tokens_in_text", "content_filtered",
    ), error
    assert reason in error and "\n" not in error
    if requests is not None:
        assert policy.requests == requests  # retried only what is transient, as often as configured
    overall = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["overall"]
    assert (overall["tasks"], overall["correct"], overall["errors"]) == (3, 2, 1)
    assert overall["accuracy"] == pytest.approx(2 / 3)
    assert "evomemory: 1 failed episode(s), counted as wrong; the session fails: task turn of mine/t1" in output


@pytest.mark.parametrize("case", FEEDBACK_CASES)
def test_a_fault_in_a_feedback_turn_is_recorded_there_and_never_scored(session: Any, case: str) -> None:
    reply, reason, _ = CORPUS[case]
    status, output, run_dir = session(FaultOn("feedback", reply))
    _assert_clean(output, run_dir)
    assert status == 1
    scores = _lines(run_dir / "scores.jsonl")
    assert [(score["task_id"], score["correct"], score.get("error")) for score in scores] == [
        ("t0", True, None), ("t1", True, None), ("t2", True, None)
    ]
    events = _lines(run_dir / "events.jsonl")
    assert [(event["type"], event["failure"]["task_id"], event["failure"]["phase"]) for event in events] == [
        ("feedback_error", "t1", "feedback")
    ]
    assert reason in events[0]["failure"]["reason"]
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert (summary["overall"]["tasks"], summary["overall"]["correct"], summary["overall"]["errors"]) == (3, 3, 0)
    assert "evomemory: 1 failed episode(s) (1 feedback turn(s), never scored); the session fails: feedback turn of mine/t1" in output


def test_an_episode_failing_in_both_turns_is_one_failed_episode_named_by_its_task(session: Any) -> None:
    """The model loops on an unknown tool in t1's task turn and again in its feedback
    turn: two failures, one episode, each named with its turn and task (the agent's
    own "no final_answer within the turn limit" names none)."""
    def policy(request: Mapping[str, Any]) -> Reply:
        if "Say 1" in json.dumps(request.get("messages", [])[:3]):
            return tool_call("no_such_tool", {"x": 1})
        return RIGHT(request)

    status, output, run_dir = session(policy)
    assert status == 1
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert [(failure["task_id"], failure["phase"]) for failure in summary["failed_episodes"]] == [
        ("t1", "task"), ("t1", "feedback")
    ]
    assert (summary["overall"]["tasks"], summary["overall"]["correct"], summary["overall"]["errors"]) == (3, 2, 1)
    assert (
        "evomemory: 1 failed episode(s) (1 task turn(s), counted as wrong; 1 feedback turn(s), never scored); the "
        "session fails: task turn of mine/t1: no final_answer within the turn limit of 3 model calls (agent config key "
        "'max_steps'); feedback turn of mine/t1: no final_answer"
    ) in output


def test_a_reply_past_the_deadline_says_the_request_was_sent(session: Any) -> None:
    """A model slower than timeout_s, and a server that drips its reply: each attempt
    ends at its deadline, saying where it was."""
    status, output, run_dir = session(FaultOn("task", Fault(200, delay_s=3.0, then=final_answer("1"))),
                                      timeout_s=0.3, max_retries=0)
    assert status == 1
    error = {score["task_id"]: score for score in _lines(run_dir / "scores.jsonl")}["t1"]["error"]
    assert "timed out after 0.3s (model.timeout_s" in error and "while waiting for the reply (the request was sent)" in error
    status, output, run_dir = session(FaultOn("task", _raw(_ANSWER, trickle_s=0.05)), timeout_s=0.3, max_retries=0)
    error = {score["task_id"]: score for score in _lines(run_dir / "scores.jsonl")}["t1"]["error"]
    assert "while reading the reply" in error and "bytes of the reply received" in error
    _assert_clean(output, run_dir)


def test_an_endpoint_refusing_connections_fails_every_task_with_the_reason(session: Any) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, output, run_dir = session(RIGHT, base_url=f"http://127.0.0.1:{port}/v1")
    _assert_clean(output, run_dir)
    assert status == 1
    scores = _lines(run_dir / "scores.jsonl")
    assert [score["task_id"] for score in scores] == ["t0", "t1", "t2"]
    assert all("failed after 2 attempts: connection error (ConnectionRefusedError" in score["error"] for score in scores)
    assert json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["overall"]["errors"] == 3


def test_faults_in_chains_at_once_are_recorded_against_their_own_chain(session: Any) -> None:
    """Four replicates run as four chains at once; each gets a 429 on its first try
    at t1 (the backoff then shared) and a failure at t2's feedback: each replicate's
    records hold exactly its own."""
    tries: dict[str, int] = {}
    lock = threading.Lock()

    def policy(request: Mapping[str, Any]) -> Reply:
        prompt = task_text(request)
        seed = str(request.get("seed"))
        if prompt.endswith("Say 1"):
            with lock:
                tries[seed] = tries.get(seed, 0) + 1
                if tries[seed] == 1:
                    return _error(429, retry_after=0.01)
        if is_feedback(request) and "Say 2" in json.dumps(request.get("messages", [])[:3]):
            return _error(500)
        return RIGHT(request)

    status, output, run_dir = session(policy, "--repeats", "4", "--chains", "4")
    _assert_clean(output, run_dir)
    assert status == 1
    for replicate in ("r1", "r2", "r3", "r4"):
        scores = _lines(run_dir / replicate / "scores.jsonl")
        assert [(score["task_id"], score["correct"], score.get("error")) for score in scores] == [
            ("t0", True, None), ("t1", True, None), ("t2", True, None)
        ], replicate
        events = _lines(run_dir / replicate / "events.jsonl")
        assert [(event["type"], event["failure"]["task_id"]) for event in events] == [("feedback_error", "t2")]
    assert sorted(tries.values()) == [2, 2, 2, 2]  # each chain's t1: the 429, then the answer
    assert output.count("1 failed episode(s) (1 feedback turn(s), never scored); the session fails: feedback turn of") == 4


def test_a_reply_cut_off_at_max_tokens_is_marked_in_the_transcript_and_report(session: Any) -> None:
    """A reply cut off at max_tokens looks whole in a transcript (and with the text
    protocol it is scored as the answer it is): the transcript says that the server
    ended it early, and the report shows it."""
    status, output, run_dir = session(FaultOn("task", completion({"content": "The answer is"}, finish_reason="length")))
    _assert_clean(output, run_dir)
    assert status == 1  # the tools protocol: two replies without a tool call
    transcript = _lines(run_dir / "transcripts" / "mine.jsonl")
    replies = [message for entry in transcript if entry["task_id"] == "t1" and entry["kind"] == "task"
               for message in entry["messages"] if message["role"] == "assistant"]
    assert [message.get("finish_reason") for message in replies] == ["length", "length"]
    others = [message for entry in transcript if entry["task_id"] != "t1"
              for message in entry["messages"] if message["role"] == "assistant"]
    assert others and not any("finish_reason" in message for message in others)  # only a reply ended early is noted
    # the report's drill-down shows it with the reply
    from pytest_evomemory.reporting.drilldown import transcript_entry
    from pytest_evomemory.rundocs import TranscriptEntry

    cut = next(entry for entry in transcript if entry["task_id"] == "t1" and entry["kind"] == "task")
    shown, _ = transcript_entry(TranscriptEntry.model_validate(cut))
    assert ["assistant", "The answer is\n[the server ended this reply early: finish_reason 'length']", 0] in shown["m"]


def test_a_server_closing_its_connections_after_every_reply_costs_no_attempt(session: Any) -> None:
    """Every reply is followed by the server closing the kept-alive connection without
    saying so: each next call opens a new connection, and nothing fails."""

    def policy(request: Mapping[str, Any]) -> Reply:
        reply = RIGHT(request)
        assert not isinstance(reply, Fault)
        return Fault(200, then=reply, close_after=True)

    status, output, run_dir = session(policy, max_retries=0)
    _assert_clean(output, run_dir)
    assert status == 0
    assert [score["correct"] for score in _lines(run_dir / "scores.jsonl")] == [True, True, True]
