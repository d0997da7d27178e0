"""A ChatModel over any OpenAI-compatible endpoint: one ``POST /chat/completions``.

The request goes through ``httpx2`` (the HTTP client the ``openai`` SDK itself is
built on) rather than through the SDK: we already did our own retries, backoff and
error reporting, and sent the body as plain JSON, so the SDK's remaining work was
one POST, while importing it cost about 0.35 s of CPU in every process, paid by
every pytest-xdist worker before its first task (docs/performance.md). Every
attempt is ours to count, back off and report: a benchmark must say how often the
endpoint failed, and a ``ModelError`` names the endpoint, the last status and the
number of attempts (never the API key, which is read from the environment and
only ever sent in the ``Authorization`` header).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx2

from ..config import ModelConfig
from ..errors import ConfigError, ModelError
from ..types import Usage
from .base import ChatCompletion, ModelToolCall

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Sent when ``api_key_env`` is null: local servers ignore it, and some proxies
#: refuse a request without any key.
NO_KEY_PLACEHOLDER = "no-key"

#: Statuses worth another attempt: rate limits, server trouble, request timeouts.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

#: A malformed reply is a server or configuration problem; asking again would
#: only repeat it (and spend the model's tokens).
_MALFORMED = "a malformed reply is not transient"

_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def endpoint_semaphore(endpoint: str, limit: int) -> threading.BoundedSemaphore:
    """One semaphore per endpoint for the whole process, so that every agent (one
    per stream) shares the endpoint's concurrency budget. The first limit wins."""
    with _SEMAPHORES_LOCK:
        semaphore = _SEMAPHORES.get(endpoint)
        if semaphore is None:
            semaphore = _SEMAPHORES[endpoint] = threading.BoundedSemaphore(limit)
        return semaphore


_CLIENTS: dict[tuple[str, float], httpx2.Client] = {}
_CLIENTS_LOCK = threading.Lock()
_SSL_CONTEXT: ssl.SSLContext | None = None


def shared_client(endpoint: str, timeout_s: float) -> httpx2.Client:
    """One HTTP client per endpoint and timeout for the whole process.

    Streams run one after another in a process (or one per xdist worker), and each
    builds its own agent: sharing the client keeps its connections alive across
    them, and the TLS context (about 20 ms to load the trust store) is built once.
    Proxies come from the usual environment variables (``HTTPS_PROXY``, ``NO_PROXY``).
    """
    key = (endpoint, timeout_s)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = httpx2.Client(
                base_url=endpoint,
                timeout=httpx2.Timeout(timeout_s),
                verify=_tls_for(endpoint),
                headers={"User-Agent": "pytest-evomemory", "Accept": "application/json"},
            )
        return client


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def _tls_for(endpoint: str) -> ssl.SSLContext | bool:
    """The verifying TLS context, or ``False`` where no TLS can happen.

    Loading the trust store costs 20-60 ms of CPU per process. A plain-HTTP
    endpoint reached without a proxy (a local server, the usual case for
    benchmarks) never negotiates TLS: redirects are not followed. Everything else
    gets the verifying context, built once per process.
    """
    global _SSL_CONTEXT
    plain = endpoint.lower().startswith("http://")
    proxied = any(os.environ.get(name) or os.environ.get(name.upper()) for name in _PROXY_VARIABLES)
    if plain and not proxied:
        return False
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = httpx2.create_ssl_context()
    return _SSL_CONTEXT


@atexit.register
def _close_clients() -> None:
    with _CLIENTS_LOCK:
        for client in _CLIENTS.values():
            client.close()
        _CLIENTS.clear()


def resolve_api_key(config: ModelConfig) -> str:
    """Read the key from the environment, or explain which variable to set."""
    name = config.api_key_env
    if name is None:
        return NO_KEY_PLACEHOLDER
    value = os.environ.get(name, "")
    if not value.strip():
        raise ConfigError(
            f"model {config.model!r}: the API key is read from the environment variable "
            f"{name}, which is not set; export {name}=... (or set 'api_key_env: null' in the "
            "agent config's 'model' section for a local server that needs no key)"
        )
    return value


class OpenAICompatibleModel:
    """Chat completions over HTTP with our own retries, backoff and concurrency limit."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.endpoint = (config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = resolve_api_key(config)
        self._sleep = sleep
        self._semaphore = endpoint_semaphore(self.endpoint, config.max_concurrency)
        self._client = shared_client(self.endpoint, config.timeout_s)
        self._headers = {"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"}
        #: Attempts made by the most recent ``complete`` call (for tests and logs).
        self.last_attempts = 0

    def __repr__(self) -> str:  # the default would be harmless, but be explicit: no key
        return f"OpenAICompatibleModel(model={self.config.model!r}, endpoint={self.endpoint!r})"

    def request_body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The request as sent (and as the cache keys it); holds no credentials."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(message) for message in messages],
            "temperature": self.config.temperature,
        }
        if tools:
            body["tools"] = [dict(tool) for tool in tools]
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        return body

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ChatCompletion:
        content = json.dumps({**self.request_body(messages, tools), "stream": False}).encode("utf-8")
        attempts_allowed = self.config.max_retries + 1
        last_problem = "no attempt made"
        for attempt in range(1, attempts_allowed + 1):
            self.last_attempts = attempt
            retry_after: float | None = None
            try:
                with self._semaphore:
                    response = self._client.post("/chat/completions", content=content, headers=self._headers)
                    raw = response.content
            except httpx2.UnsupportedProtocol as error:
                # Only OPENAI_BASE_URL can get here (model.base_url is validated): asking again cannot help.
                raise ModelError(self._failure(
                    f"the endpoint is not an http(s) URL ({error}); set OPENAI_BASE_URL or "
                    "model.base_url to the API root, e.g. http://127.0.0.1:8000/v1",
                    attempt, not_retried="a wrong URL is not transient",
                )) from None
            except httpx2.TimeoutException:
                last_problem = f"timed out after {self.config.timeout_s:g}s (model.timeout_s)"
            except httpx2.TransportError as error:
                last_problem = f"connection error ({self._redact(f'{type(error).__name__}: {error}')})"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return self._parse(raw, response.headers.get("content-type", ""))
                last_problem = f"HTTP status {status}: {self._redact(_error_text(raw))}"
                if status not in RETRYABLE_STATUSES:
                    raise ModelError(self._failure(last_problem, attempt, not_retried="the status is not transient"))
                retry_after = _retry_after_seconds(response.headers)
            if attempt < attempts_allowed:
                self._sleep(self._backoff(attempt, retry_after))
        raise ModelError(self._failure(last_problem, attempts_allowed))

    def _parse(self, raw: bytes, content_type: str) -> ChatCompletion:
        """The first choice of a chat.completion body; anything else is a clear error."""
        try:
            payload = json.loads(raw)
        except ValueError:
            raise ModelError(self._failure(
                f"the reply is not JSON (content-type {content_type or 'missing'!r}): {_preview(raw)}; "
                "is base_url the API root, usually ending in /v1?",
                self.last_attempts, not_retried=_MALFORMED,
            )) from None
        try:
            return completion_from_json(payload)
        except ModelError as error:
            raise ModelError(self._failure(str(error), self.last_attempts, not_retried=_MALFORMED)) from None

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            wait = retry_after
        else:
            base = self.config.retry_backoff_s * (2 ** (attempt - 1))
            wait = base * (1.0 + 0.25 * random.random())  # jitter spreads xdist workers
        return max(0.0, min(wait, self.config.retry_backoff_max_s))

    def _failure(self, problem: str, attempts: int, *, not_retried: str | None = None) -> str:
        tail = f" (not retried: {not_retried})" if not_retried else ""
        return (
            f"model {self.config.model!r} at {self.endpoint} failed after {attempts} "
            f"attempt{'s' if attempts != 1 else ''}: {problem}{tail}"
        )

    def _redact(self, text: str) -> str:
        if self._api_key and self._api_key != NO_KEY_PLACEHOLDER:
            text = text.replace(self._api_key, "***")
        return text[:500]


def _preview(raw: bytes, limit: int = 200) -> str:
    text = raw[:limit].decode("utf-8", errors="replace").strip()
    return repr(text) + ("..." if len(raw) > limit else "") if text else "an empty body"


def _preview_json(value: Any) -> str:
    """The start of a piece of an already-parsed reply, for an error message."""
    return _preview(json.dumps(value).encode())


def _error_text(raw: bytes) -> str:
    """The server's error message: ``{"error": {"message": ...}}`` as OpenAI sends it,
    ``{"message": ...}`` or ``{"detail": ...}`` as others do, else the body itself."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return _preview(raw)
    if isinstance(payload, Mapping):
        error = payload.get("error")
        for candidate in (error.get("message") if isinstance(error, Mapping) else error,
                          payload.get("message"), payload.get("detail")):
            if isinstance(candidate, str) and candidate:
                return candidate
    return _preview(raw)


def _retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds (HTTP dates are rare from model servers; ignored)."""
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        return value / 1000.0 if name == "retry-after-ms" else value
    return None


def completion_from_json(payload: Any) -> ChatCompletion:
    """Read the first choice of a chat.completion body, checking its shape as we go.

    Servers that call themselves OpenAI-compatible differ in the details; what is
    accepted here is what the API documents, plus ``content`` given as a list of
    text parts and ``arguments`` given as an object (both seen from real servers).
    """
    if not isinstance(payload, Mapping):
        raise ModelError(f"the reply is JSON but not an object: {_preview_json(payload)}")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        error = payload.get("error")
        if error:
            raise ModelError(f"the reply carries an error instead of choices: {_preview_json(error)}")
        raise ModelError("the model server returned a response without choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise ModelError(f"the reply's first choice has no message: {_preview_json(choice)}")
    calls: list[ModelToolCall] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelError(f"'tool_calls' in the reply is not a list: {_preview_json(raw_calls)}")
    for index, call in enumerate(raw_calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):  # non-function tool calls (e.g. "custom") are not ours
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(f"a tool call in the reply has no function name: {_preview_json(call)}")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ModelToolCall(id=str(call.get("id") or f"call_{index}"), name=name, arguments=arguments))
    reported = payload.get("usage")
    usage: Mapping[str, Any] = reported if isinstance(reported, Mapping) else {}
    finish_reason = choice.get("finish_reason")
    return ChatCompletion(
        content=_content_text(message.get("content")),
        tool_calls=tuple(calls),
        usage=Usage(
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
        ),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        parts = [part.get("text") for part in content if isinstance(part, Mapping)]
        return "".join(part for part in parts if isinstance(part, str))
    raise ModelError(f"the reply's message content is neither text nor text parts: {_preview_json(content)}")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
