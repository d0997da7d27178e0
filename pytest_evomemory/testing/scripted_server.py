"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

It exercises TinyAgent through the real model client and real HTTP, so that
retries, timeouts and wire formats are tested as they run in production, without
a model. A *policy* maps each request body to a reply: a chat-completion dict (see
:func:`tool_call`, :func:`text`) or a :class:`Fault`. :func:`echo_policy` answers
tasks with ``final_answer`` and feedback with ``final_answer("Feedback recorded")``,
using ``recall``/``retain`` first when the request offers them; :class:`Script`
plays a fixed sequence and then falls back to a policy.

    with ScriptedServer(Script([Fault(429, retry_after=0), tool_call("final_answer", {"answer": "4"})])) as server:
        config = ModelConfig(base_url=server.base_url, api_key_env=None, ...)

For the memory libraries (Mem0, LangMem) it also answers ``/v1/embeddings`` with
deterministic word-hash vectors (:func:`scripted_embedding`), and
:func:`memory_library_policy` plays their own model calls (fact extraction).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import math
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from ..config import ModelConfig
from ..core.types import FEEDBACK_ACKNOWLEDGEMENT

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"


@dataclass(frozen=True)
class Fault:
    """An error reply, a slow reply, or both (``delay_s`` then ``status``).

    ``status=200`` with a ``delay_s`` past the client's timeout simulates a hang;
    ``drop=True`` closes the connection without any reply; ``raw`` is sent as the
    body verbatim (an HTML error page, truncated JSON), with ``content_type``.
    ``trickle_s`` sends the body one byte every ``trickle_s`` seconds after headers
    that announce its whole length: every read is quick, the reply never ends.

    Connection faults: ``cut_at=N`` sends the head announcing the whole body, then
    only its first N bytes, and closes (a reply cut off mid-way; ``0``: right after
    the headers); ``reset=True`` ends the connection with a TCP reset instead of a
    close (with ``drop``: before any reply; with ``cut_at``: where it cuts);
    ``close_after=True`` closes the connection after a whole reply that did not say
    so (no ``Connection: close``), as a server ending kept-alive connections does.
    ``headers`` are sent with the reply as given (a ``Location``, a ``Retry-After``
    that is an HTTP date or garbage, a header echoing the request's key).
    """

    status: int = 500
    body: Mapping[str, Any] | None = None
    retry_after: float | None = None
    delay_s: float = 0.0
    then: Mapping[str, Any] | None = None
    drop: bool = False
    raw: bytes | None = None
    content_type: str = "application/json"
    trickle_s: float | None = None
    cut_at: int | None = None
    reset: bool = False
    close_after: bool = False
    headers: Mapping[str, str] | None = None


Reply = Mapping[str, Any] | Fault
Policy = Callable[[Mapping[str, Any]], Reply]


def completion(
    message: Mapping[str, Any],
    *,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A chat.completion body around one assistant message (ids/usage filled by the server)."""
    reply: dict[str, Any] = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, **message},
                "finish_reason": finish_reason
                or ("tool_calls" if message.get("tool_calls") else "stop"),
            }
        ],
    }
    if usage is not None:
        reply["usage"] = dict(usage)
    return reply


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    call_id: str | None = None,
    content: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A reply calling one tool. A ``str`` ``arguments`` is sent verbatim (bad JSON too)."""
    return tool_calls([(name, arguments)], call_id=call_id, content=content, usage=usage)


def tool_calls(
    calls: Iterable[tuple[str, Mapping[str, Any] | str]],
    *,
    call_id: str | None = None,
    content: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A reply with several (parallel) tool calls."""
    rendered = []
    for index, (name, arguments) in enumerate(calls):
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        rendered.append(
            {
                "id": f"{call_id or 'call'}_{index}",
                "type": "function",
                "function": {"name": name, "arguments": raw},
            }
        )
    return completion({"content": content, "tool_calls": rendered}, usage=usage)


def text(content: str, *, usage: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A plain-text reply with no tool call."""
    return completion({"content": content}, usage=usage)


def final_answer(answer: str, **kwargs: Any) -> dict[str, Any]:
    return tool_call("final_answer", {"answer": answer}, **kwargs)


# --------------------------------------------------------------------------- policies


def _tool_names(request: Mapping[str, Any]) -> set[str]:
    names = set()
    for tool in request.get("tools") or []:
        function = tool.get("function") or {}
        if isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _current_turn(messages: list[Mapping[str, Any]]) -> tuple[str, list[Mapping[str, Any]]]:
    """The last user message's text and every message after it."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            content = messages[index].get("content")
            return (content if isinstance(content, str) else json.dumps(content)), messages[index + 1 :]
    return "", []


def task_text(request: Mapping[str, Any]) -> str:
    """The text of the stimulus this request answers (the last user message)."""
    return _current_turn(list(request.get("messages") or []))[0]


def is_feedback(request: Mapping[str, Any]) -> bool:
    return FEEDBACK_ACKNOWLEDGEMENT in task_text(request)


def make_echo_policy(
    answer: Callable[[str], str] | None = None, *, use_memory_tools: bool = True
) -> Policy:
    """Tasks: ``final_answer(answer(prompt))`` (default: the prompt's last line);
    feedback: ``final_answer("Feedback recorded")``. With ``use_memory_tools``, a
    request that offers ``recall``/``retain`` gets one recall per task and one
    retain per feedback first, as a memory-using model would."""
    choose = answer or (lambda prompt: (prompt.strip().splitlines() or [""])[-1][:200])

    def policy(request: Mapping[str, Any]) -> Reply:
        prompt, since = _current_turn(list(request.get("messages") or []))
        called = {
            call.get("function", {}).get("name")
            for message in since
            for call in (message.get("tool_calls") or [])
        }
        tools = _tool_names(request)
        if FEEDBACK_ACKNOWLEDGEMENT in prompt:
            if use_memory_tools and "retain" in tools and "retain" not in called:
                task = next(
                    (m.get("content") for m in request.get("messages", []) if m.get("role") == "user"), ""
                )
                return tool_call("retain", {"content": f"Task: {task}\n{prompt}"[:4000]})
            return final_answer(FEEDBACK_ACKNOWLEDGEMENT)
        if use_memory_tools and "recall" in tools and "recall" not in called:
            return tool_call("recall", {"query": prompt[:2000]})
        return final_answer(choose(prompt))

    return policy


echo_policy: Policy = make_echo_policy()


class Script:
    """Replies in order, then ``then`` (default: the echo policy). Thread-safe."""

    def __init__(self, replies: Iterable[Reply], then: Policy | None = echo_policy) -> None:
        self._replies = list(replies)
        self._then = then
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def __call__(self, request: Mapping[str, Any]) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.pop(0)
        if self._then is None:
            return Fault(500, {"error": {"message": "script exhausted", "type": "server_error"}})
        return self._then(request)


# --------------------------------------------------------------------------- memory libraries


#: Finds the facts worth keeping in a text (the stand-in for a model's judgement).
FactExtractor = Callable[[str], list[str]]


def mem0_new_messages(request: Mapping[str, Any]) -> str | None:
    """The "New Messages" section of Mem0's fact-extraction request (``infer=True``), or
    None for any other request. Mem0 asks for a JSON object and lays its prompt out
    in "## ..." sections."""
    if (request.get("response_format") or {}).get("type") != "json_object":
        return None
    prompt = task_text(request)
    start = prompt.find("## New Messages")
    if start < 0:
        return None
    section = prompt[start + len("## New Messages"):]
    end = section.find("\n## ")
    return (section if end < 0 else section[:end]).strip()


def langmem_conversation(request: Mapping[str, Any]) -> str | None:
    """The conversation LangMem's memory manager extracts from (a request offering its
    ``Memory`` tool, through trustcall), or None for any other request."""
    if "Memory" not in _tool_names(request):
        return None
    return "\n".join(
        str(message.get("content") or "") for message in request.get("messages") or [] if message.get("role") == "user"
    )


def memory_library_policy(extract: FactExtractor, then: Policy = echo_policy) -> Policy:
    """Canned fact extraction for the memory libraries' own model calls: Mem0's
    ``infer=True`` request gets ``{"memory": [{"text": fact}, ...]}``, LangMem's memory
    manager one ``Memory`` tool call per fact (a plain reply when there is none);
    every other request goes to ``then`` (the agent's turns)."""

    def policy(request: Mapping[str, Any]) -> Reply:
        messages = mem0_new_messages(request)
        if messages is not None:
            return text(json.dumps({"memory": [{"text": fact} for fact in extract(messages)]}))
        conversation = langmem_conversation(request)
        if conversation is not None:
            facts = extract(conversation)
            if not facts:
                return text("Nothing new to remember.")
            return tool_calls([("Memory", {"content": fact}) for fact in facts], call_id="memory")
        return then(request)

    return policy


def scripted_embedding(text: str, dims: int = 64) -> list[float]:
    """A deterministic embedding: signed hashes of the lower-cased words, L2-normalised
    (texts sharing words are similar; no model needed)."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        value = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
        vector[value % dims] += 1.0 if (value >> 63) & 1 else -1.0
    norm = math.sqrt(sum(component * component for component in vector)) or 1.0
    return [component / norm for component in vector]


# --------------------------------------------------------------------------- server


def estimate_usage(request: Mapping[str, Any], reply: Mapping[str, Any]) -> dict[str, int]:
    """Deterministic, roughly-token-sized counts (4 characters a token)."""
    prompt = len(json.dumps(request.get("messages", []))) + len(json.dumps(request.get("tools", [])))
    answer = len(json.dumps(reply.get("choices", [])))
    prompt_tokens, completion_tokens = max(1, prompt // 4), max(1, answer // 4)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@dataclass
class ReceivedRequest:
    """One request as the server saw it (headers included, for auth assertions)."""

    body: dict[str, Any]
    headers: dict[str, str]
    status: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    #: Seconds between the bytes of the reply's body (a :class:`Fault`'s ``trickle_s``).
    trickle_s: float | None = None
    #: The :class:`Fault` that answered it, if one did (how its connection ends).
    fault: Fault | None = None


class _Listening(ThreadingHTTPServer):
    """The standard server with room for a grid's connections in its listen queue.

    socketserver listens with a backlog of 5; when the 16 chains of ``evomemory run
    --chains 16`` each open their connection at once, the connections past the
    queue's room are dropped and their clients retry a second later (TCP's first
    retransmission of a connection request): two chains of the grid started 1.04 s
    after the others. A model server (uvicorn, vLLM) listens with a backlog in the
    thousands.
    """

    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (it reset the connection while the handler waited
        for its next request: a client that gave up on an oversized or slow reply
        closes with the reply unread) is no error of the server's; anything else is
        printed as the standard server prints it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """A threaded HTTP server speaking just enough of the chat-completions API.

    ``latency_s`` is the time from a request's arrival to its reply, the server's
    own parsing and policy included, as a model's latency would be measured
    (benchmarks use 0 and 0.1); a ``Fault``'s ``delay_s`` comes on top. ``requests``
    lists what arrived; ``in_flight_max`` is the peak of concurrent requests.
    """

    def __init__(
        self, policy: Policy = echo_policy, *, latency_s: float = 0.0, host: str = "127.0.0.1", embedding_dims: int = 64
    ) -> None:
        self.policy = policy
        self.latency_s = latency_s
        self.embedding_dims = embedding_dims
        self.requests: list[ReceivedRequest] = []
        #: The bodies of /v1/embeddings requests (chat requests stay in ``requests``).
        self.embedding_requests: list[dict[str, Any]] = []
        self.in_flight_max = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd = _Listening((host, 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    # -- lifecycle

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # ends a trickling reply
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observations

    @property
    def in_flight(self) -> int:
        """Requests being answered right now (a trickling reply counts until it ends)."""
        with self._lock:
            return self._in_flight

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [request.body for request in self.requests]

    def total_usage(self) -> dict[str, int]:
        """Token counts of every successful reply (what a client should have recorded)."""
        with self._lock:
            served = [request.usage for request in self.requests if request.status == 200]
        return {
            "prompt_tokens": sum(usage.get("prompt_tokens", 0) for usage in served),
            "completion_tokens": sum(usage.get("completion_tokens", 0) for usage in served),
        }

    # -- handling

    def _reply(self, request: ReceivedRequest) -> tuple[int, dict[str, str], bytes | None, float]:
        body = request.body
        if body.get("stream"):
            return 400, {}, _error_body("streaming is not supported by the scripted server"), 0.0
        reply = self.policy(body)
        delay = self.latency_s
        headers: dict[str, str] = {}
        if isinstance(reply, Fault):
            delay += reply.delay_s
            request.trickle_s = reply.trickle_s
            request.fault = reply
            if reply.drop:
                return -1, {}, None, delay
            if reply.retry_after is not None:
                headers["Retry-After"] = f"{reply.retry_after:g}"
            headers.update(reply.headers or {})
            if reply.raw is not None:
                headers["Content-Type"] = reply.content_type
                return reply.status, headers, reply.raw, delay
            if reply.status != 200 or reply.then is None:
                payload = reply.body or {"error": {"message": f"scripted fault {reply.status}", "type": "server_error"}}
                return reply.status, headers, json.dumps(payload).encode(), delay
            reply = reply.then
        full = dict(reply)
        full.setdefault("id", f"chatcmpl-{next(self._ids)}")
        full.setdefault("object", "chat.completion")
        full.setdefault("created", int(time.time()))
        full.setdefault("model", body.get("model", "scripted"))
        full.setdefault("usage", estimate_usage(body, full))
        request.usage = dict(full["usage"])
        return 200, headers, json.dumps(full).encode(), delay

    def _embeddings(self, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        """``/v1/embeddings``: :func:`scripted_embedding` of each input, as floats or,
        when the client asks (the OpenAI SDK does by default), as base64 float32."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, {}, _error_body("request body is not JSON")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(item, str) for item in texts):
            return 400, {}, _error_body("input must be a string or a list of strings")
        with self._lock:
            self.embedding_requests.append(body)
        data = []
        for index, item in enumerate(texts):
            vector = scripted_embedding(item, self.embedding_dims)
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(item.split()) for item in texts)
        reply = {
            "object": "list", "data": data, "model": body.get("model", "scripted-embeddings"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return 200, {}, json.dumps(reply).encode()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are written separately; with Nagle's algorithm on,
            # the body waits ~40 ms for the client's delayed ACK on every call.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                arrived = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.split("?")[0] == EMBEDDINGS_PATH:
                    self._send(*server._embeddings(raw))
                    return
                if self.path.split("?")[0] != CHAT_PATH:
                    self._send(404, {}, _error_body(f"no route {self.path}"))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {}, _error_body("request body is not JSON"))
                    return
                received = ReceivedRequest(body=body, headers={k.lower(): v for k, v in self.headers.items()})
                with server._lock:
                    server.requests.append(received)
                    server._in_flight += 1
                    server.in_flight_max = max(server.in_flight_max, server._in_flight)
                settled = False

                def settle() -> None:
                    # The request stops counting before its last byte leaves: once the client
                    # has that byte it may start its next request (a freed connection slot),
                    # which must not meet this one still counted.
                    nonlocal settled
                    if not settled:
                        settled = True
                        with server._lock:
                            server._in_flight -= 1

                try:
                    try:
                        status, headers, payload, delay = server._reply(received)
                    except Exception as error:  # a broken policy is a 500, visibly
                        status, headers, payload, delay = 500, {}, _error_body(f"policy raised {error!r}"), 0.0
                    remaining = arrived + delay - time.monotonic()
                    if remaining > 0:
                        time.sleep(remaining)
                    received.status = status
                    fault = received.fault
                    if payload is None:
                        self._end(fault)
                        return
                    if fault is not None and fault.cut_at is not None:
                        settle()
                        self._send_cut(status, headers, payload, fault)
                        return
                    self._send(status, headers, payload, received.trickle_s, before_last_byte=settle)
                    if fault is not None and fault.close_after:
                        self._end(fault)
                finally:
                    settle()

            def _end(self, fault: Fault | None) -> None:
                """Close the connection now: with a TCP reset if ``fault`` says so."""
                self.close_connection = True
                if fault is not None and fault.reset:
                    with contextlib.suppress(OSError):  # SO_LINGER 0: close() sends RST
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                with contextlib.suppress(OSError):
                    self.wfile.flush()
                with contextlib.suppress(OSError):
                    self.connection.close()

            def _head(self, status: int, headers: Mapping[str, str], length: int) -> None:
                """The status line and headers (not yet ended) of a reply of ``length`` bytes."""
                self.send_response(status)
                self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(length))
                for name, value in headers.items():
                    if name != "Content-Type":
                        self.send_header(name, value)

            def _send_cut(self, status: int, headers: Mapping[str, str], payload: bytes, fault: Fault) -> None:
                """The head announcing all of ``payload``, then its first ``cut_at`` bytes, then the end."""
                try:
                    self._head(status, headers, len(payload))
                    self.end_headers()
                    self.wfile.write(payload[: fault.cut_at])
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self._end(fault)

            def _send(
                self, status: int, headers: Mapping[str, str], payload: bytes, trickle_s: float | None = None,
                before_last_byte: Callable[[], None] = lambda: None,
            ) -> None:
                try:
                    self._head(status, headers, len(payload))
                    if not payload:
                        before_last_byte()
                    self.end_headers()
                    if trickle_s is None:
                        self.wfile.write(payload[:-1])
                        before_last_byte()
                        self.wfile.write(payload[-1:])
                    for index in range(len(payload) if trickle_s is not None else 0):
                        if index == len(payload) - 1:
                            before_last_byte()
                        self.wfile.write(payload[index:index + 1])
                        self.wfile.flush()
                        if server._stopping.wait(trickle_s):
                            break
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    self.close_connection = True

        return Handler


def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()


def scripted_model_config(server: ScriptedServer, **overrides: Any) -> ModelConfig:
    """A ModelConfig pointing at ``server``, tuned for fast tests: no key, no cache,
    a 2 s timeout, two retries without backoff. ``overrides`` replace any field."""
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "scripted-model",
        "api_key_env": None,
        "timeout_s": 2.0,
        "max_retries": 2,
        "retry_backoff_s": 0.0,
        "retry_backoff_max_s": 0.2,
        "cache": False,
    }
    settings.update(overrides)
    return ModelConfig(**settings)
