"""A ChatModel over any OpenAI-compatible endpoint, through the official client.

The client's own retries are switched off so that every attempt is ours to count,
back off and report: a benchmark must say how often the endpoint failed, and a
``ModelError`` must name the endpoint, the last status and the number of attempts
(never the API key, which is read from the environment and kept only in the client).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion as OpenAIChatCompletion

from ..config import ModelConfig
from ..errors import ConfigError, ModelError
from ..types import Usage
from .base import ChatCompletion, ModelToolCall

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Sent when ``api_key_env`` is null: local servers ignore it, and the client
#: refuses to start without some key.
NO_KEY_PLACEHOLDER = "no-key"

#: Statuses worth another attempt: rate limits, server trouble, request timeouts.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

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
        self._client = openai.OpenAI(
            api_key=self._api_key,
            base_url=self.endpoint,
            timeout=config.timeout_s,
            max_retries=0,
        )
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
        body = self.request_body(messages, tools)
        attempts_allowed = self.config.max_retries + 1
        last_problem = "no attempt made"
        for attempt in range(1, attempts_allowed + 1):
            self.last_attempts = attempt
            retry_after: float | None = None
            try:
                with self._semaphore:
                    # ``post`` skips the SDK's per-call walk of every message against
                    # its request schema (about a millisecond per call); the body is
                    # already plain JSON, and errors map to the same exceptions.
                    response = self._client.post(
                        "/chat/completions", body={**body, "stream": False}, cast_to=OpenAIChatCompletion
                    )
                return _to_completion(response)
            except openai.APIStatusError as error:
                last_problem = f"HTTP status {error.status_code}: {self._redact(_error_text(error))}"
                if error.status_code not in RETRYABLE_STATUSES:
                    raise ModelError(self._failure(last_problem, attempt, retryable=False)) from None
                retry_after = _retry_after_seconds(error.response.headers)
            except openai.APITimeoutError:
                last_problem = f"timed out after {self.config.timeout_s:g}s (model.timeout_s)"
            except openai.APIConnectionError as error:
                cause = error.__cause__
                detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
                last_problem = f"connection error ({self._redact(detail)})"
            except openai.OpenAIError as error:
                raise ModelError(
                    self._failure(f"{type(error).__name__}: {self._redact(str(error))}", attempt, retryable=False)
                ) from None
            if attempt < attempts_allowed:
                self._sleep(self._backoff(attempt, retry_after))
        raise ModelError(self._failure(last_problem, attempts_allowed, retryable=True))

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            wait = retry_after
        else:
            base = self.config.retry_backoff_s * (2 ** (attempt - 1))
            wait = base * (1.0 + 0.25 * random.random())  # jitter spreads xdist workers
        return max(0.0, min(wait, self.config.retry_backoff_max_s))

    def _failure(self, problem: str, attempts: int, *, retryable: bool) -> str:
        tail = "" if retryable else " (not retried: the status is not transient)"
        return (
            f"model {self.config.model!r} at {self.endpoint} failed after {attempts} "
            f"attempt{'s' if attempts != 1 else ''}: {problem}{tail}"
        )

    def _redact(self, text: str) -> str:
        if self._api_key and self._api_key != NO_KEY_PLACEHOLDER:
            text = text.replace(self._api_key, "***")
        return text[:500]


def _error_text(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str):
            return message
    return str(error.message)


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


def _to_completion(response: Any) -> ChatCompletion:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise ModelError("the model server returned a response without choices")
    choice = choices[0]
    message = choice.message
    calls: list[ModelToolCall] = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        if function is None:  # non-function tool calls (e.g. "custom") are not ours
            continue
        calls.append(
            ModelToolCall(
                id=str(getattr(call, "id", None) or f"call_{index}"),
                name=str(function.name),
                arguments=str(function.arguments or ""),
            )
        )
    usage = getattr(response, "usage", None)
    return ChatCompletion(
        content=message.content,
        tool_calls=tuple(calls),
        usage=Usage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        ),
        finish_reason=getattr(choice, "finish_reason", None),
    )
