"""A ChatModel over any OpenAI-compatible endpoint: one ``POST /chat/completions``.

The request goes out on a kept-alive connection of our own (:mod:`.http11`, plain
sockets; through ``httpx2``, the HTTP client the ``openai`` SDK itself is built
on, where a proxy is set: :mod:`.transport`) rather than through the SDK: we
already did our own retries, backoff and error reporting, and sent the body as
plain JSON, so the SDK's remaining work was one POST, while importing it cost
about 0.35 s of CPU in every process, paid by every pytest-xdist worker before its
first task (docs/performance.md). Every
attempt is ours to count, back off and report: a benchmark must say how often the
endpoint failed, and a ``ModelError`` names the endpoint, the last status and the
number of attempts (never the API key, which is read from the environment and
only ever sent in the ``Authorization`` header).
"""

from __future__ import annotations

import datetime
import json
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import ModelConfig
from ..core import boundedread
from ..core.errors import ModelError
from ..core.types import Usage
from ..util.redaction import redact, url_shown
from ..util.text import storable, storable_json_text
from .base import ChatCompletion, ModelToolCall, Provided, sampling_identity
from .cleaning import clean_completion
from .deadline import Attempt, DeadlineExceeded, call_within
from .endpoint import NO_KEY_PLACEHOLDER, proxy_for, resolve_api_key, resolve_endpoint
from .http11 import BadEndpoint, CertificateRefused, NetworkTimeout, Reply, ReplyTooLarge, TransportError
from .limits import endpoint_limiter, endpoint_semaphore
from .transport import shared_connection

#: Sent with every request, whichever transport carries it (:mod:`.transport`).
USER_AGENT = "pytest-evomemory"

#: Statuses worth another attempt: rate limits, server trouble, request timeouts.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

#: A reported model name longer than this is cut: it is a label, and it goes into every artefact.
MAX_MODEL_NAME_CHARS = 200

#: A malformed reply is a server or configuration problem; asking again would
#: only repeat it (and spend the model's tokens).
_MALFORMED = "a malformed reply is not transient"

class OpenAICompatibleModel:
    """Chat completions over HTTP with our own retries, backoff and concurrency limit."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.endpoint = resolve_endpoint(config)
        self._api_key = resolve_api_key(config)
        self._sleep = sleep
        self._semaphore = endpoint_semaphore(self.endpoint, config.max_concurrency)
        #: Slots (model.max_connections) and 429 backoff shared with the session's other processes.
        self._limiter = endpoint_limiter(self.endpoint, config.max_connections)
        self._waited = threading.local()
        shared_connection(self.endpoint, config.timeout_s)  # a bad proxy variable is refused here, not at a task
        self._headers = {
            "Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json",
            "Accept": "application/json", "User-Agent": USER_AGENT,
        }
        #: Attempts made by the most recent ``complete`` call (for tests and logs).
        self.last_attempts = 0

    def __repr__(self) -> str:  # the default would be harmless, but be explicit: no key
        return f"OpenAICompatibleModel(model={self.config.model!r}, endpoint={self.endpoint!r})"

    def identity(self) -> dict[str, Any]:
        """What answers: the model name asked for at this endpoint (the names the
        server reports are recorded per reply, in the transcript)."""
        return {
            "provider": "openai", "model": self.config.model, "endpoint": self.endpoint,
            **sampling_identity(self.config),
        }

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
        self.last_attempts = 0
        self.last_status: int | None = None
        if len(content) > self.config.max_request_bytes:
            raise self._error(
                f"the request is {len(content):,} bytes, over model.max_request_bytes "
                f"({self.config.max_request_bytes:,}); shorten the prompt or tool results, or raise the limit",
                0, not_retried="it was not sent",
            )
        attempts_allowed = self.config.max_retries + 1
        last_problem = "no attempt made"
        for attempt in range(1, attempts_allowed + 1):
            self.last_attempts = attempt
            retry_after: float | None = None
            rate_limited = False
            self._wait_for_shared_backoff()
            try:
                with self._semaphore, self._limiter.slot():
                    reply = call_within(self.config.timeout_s, lambda control: self._post(content, control))
            except DeadlineExceeded as error:
                last_problem = _deadline_problem(error)
            except ReplyTooLarge as error:
                self.last_status = error.status
                raise self._error(
                    f"the reply is over model.max_reply_bytes ({self.config.max_reply_bytes:,} bytes"
                    f"{error.announced}); the server sent far more than a chat completion",
                    attempt, not_retried=_MALFORMED,
                ) from None
            except BadEndpoint as error:
                # Only OPENAI_BASE_URL can get here (model.base_url is validated): asking again cannot help.
                raise self._error(
                    f"the endpoint is not a usable http(s) URL ({error}); set OPENAI_BASE_URL or "
                    "model.base_url to the API root, e.g. http://127.0.0.1:8000/v1",
                    attempt, not_retried="a wrong URL is not transient",
                ) from None
            except CertificateRefused as error:
                raise self._error(
                    f"connection error ({error})", attempt, not_retried="the certificate would be refused again",
                    advice="if the server's certificate is signed by a CA of your own, set SSL_CERT_FILE (or "
                    "SSL_CERT_DIR) to it; the host name in the URL must be one the certificate names",
                ) from None
            except NetworkTimeout:  # one network operation; the deadline above covers the whole attempt
                last_problem = _deadline_problem(DeadlineExceeded(self.config.timeout_s, "waiting for the server", 0))
            except TransportError as error:
                last_problem = f"connection error ({error})"
            else:
                status, headers, raw = reply.status, reply.headers, reply.body
                self.last_status = status
                if 200 <= status < 300:
                    return self._parse(raw, headers.get("content-type", ""))
                last_problem = f"HTTP status {status}: {_error_text(raw)}"
                if status not in RETRYABLE_STATUSES:
                    raise self._error(last_problem, attempt, not_retried="the status is not transient",
                                      advice=self._status_advice(status, headers))
                retry_after = _retry_after_seconds(headers)
                rate_limited = status == 429 or retry_after is not None
            wait = self._backoff(attempt, retry_after)
            if rate_limited:
                # The endpoint asked to be left alone: every process of the session waits.
                self._waited.until = self._limiter.block_for(wait)
            if attempt < attempts_allowed:
                self._sleep(wait)
        raise self._error(last_problem, attempts_allowed)

    def _wait_for_shared_backoff(self) -> None:
        """Wait out a backoff another process (or thread) published for this
        endpoint; one this thread published itself it has already slept through."""
        until = self._limiter.blocked_until()
        if until <= getattr(self._waited, "until", 0.0):
            return
        remaining = min(until - time.time(), self.config.retry_backoff_max_s)
        if remaining > 0:
            self._sleep(remaining)

    def _post(self, content: bytes, attempt: Attempt) -> Reply:
        """One POST, reading at most ``max_reply_bytes`` of the reply (a runaway
        server must not fill this process's memory).

        The transport seam (:class:`~.transport.Connection`): whatever sends the
        request reports each chunk of the body to ``attempt`` (which stops an
        attempt past its deadline, see :mod:`.deadline`) and registers how to abort
        it wherever it blocks.
        """
        connection = shared_connection(self.endpoint, self.config.timeout_s)
        return connection.post("/chat/completions", content, self._headers, attempt, self.config.max_reply_bytes)

    def _parse(self, raw: bytes, content_type: str) -> ChatCompletion:
        """The first choice of a chat.completion body; anything else is a clear error."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise self._error(
                f"the reply is not UTF-8 (byte {error.start} of {len(raw):,}; content-type "
                f"{content_type or 'missing'!r}): {_preview(raw)}",
                self.last_attempts, not_retried=_MALFORMED,
            ) from None
        try:
            payload = boundedread.loads(text, depth=boundedread.MAX_ARTEFACT_DEPTH)
        except boundedread.BoundExceeded as error:
            if error.bound != "depth":
                raise self._error(
                    f"the reply is not JSON that can be read ({error}); content-type {content_type or 'missing'!r}",
                    self.last_attempts, not_retried=_MALFORMED,
                ) from None
            raise self._error(
                f"the reply is JSON nested too deeply to read ({error})", self.last_attempts, not_retried=_MALFORMED
            ) from None
        except ValueError:
            raise self._error(
                f"the reply is not JSON (content-type {content_type or 'missing'!r}): {_preview(raw)}; "
                "is base_url the API root, usually ending in /v1?",
                self.last_attempts, not_retried=_MALFORMED,
            ) from None
        try:
            return self._scrubbed(completion_from_json(payload))
        except ModelError as error:
            raise self._error(str(error), self.last_attempts, not_retried=_MALFORMED) from None
        except RecursionError:
            raise self._error(
                "the reply is JSON nested too deeply to read", self.last_attempts, not_retried=_MALFORMED
            ) from None

    def _scrubbed(self, completion: ChatCompletion) -> ChatCompletion:
        """The completion with secrets redacted from its text: a proxy that echoes the
        request (headers included) into the answer must not put the key into
        transcripts, memory, the cache or reports. The key is never a right answer.
        The one cleaning a replayed reply gets too (:mod:`.cleaning`)."""
        return clean_completion(completion, (self._api_key,) if self._api_key != NO_KEY_PLACEHOLDER else ())

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            wait = retry_after
        else:
            base = self.config.retry_backoff_s * (2 ** (attempt - 1))
            wait = base * (1.0 + 0.25 * random.random())  # jitter spreads xdist workers
        return max(0.0, min(wait, self.config.retry_backoff_max_s))

    def _error(
        self, problem: str, attempts: int, *, not_retried: str | None = None, advice: str | None = None
    ) -> ModelError:
        """The ModelError for ``problem``: one line, redacted, with its context."""
        return ModelError(
            self._failure(problem, attempts, not_retried=not_retried, advice=advice),
            endpoint=self.endpoint, status=getattr(self, "last_status", None), attempts=attempts,
        )

    def _status_advice(self, status: int, headers: Mapping[str, str]) -> str | None:
        """What to do about a status that every call will get again: the server's own
        words rarely say which setting of ours sends the key, the model or the URL."""
        if 300 <= status < 400:
            # Not followed: a POST redirected may arrive as a GET, and the key would go
            # along to wherever the Location points.
            location = headers.get("location")
            where = f" to {url_shown(location)!r}" if location else ""
            return (
                f"the endpoint redirects{where}, and redirects are not followed (the key would go along); "
                "set model.base_url to the API root the redirect leads to"
            )
        key = (
            f"the variable {self.config.api_key_env} (model.api_key_env)" if self.config.api_key_env
            else "model.api_key_env (no key is sent)"
        )
        if status == 407:
            via = proxy_for(self.endpoint)
            return (
                f"the proxy{f' ({via})' if via else ''} asks for credentials: write them into the proxy "
                "variable as http://user:password@host:port"
            )
        if status == 401:
            return f"the endpoint did not accept the key: check that {key} holds a key for {self.endpoint}"
        if status == 403:
            return f"the key may not use model {self.config.model!r} here: check its permissions, or {key}"
        if status == 404:
            return (
                f"no such endpoint or model: check model.base_url (the API root, e.g. http://127.0.0.1:8000/v1) "
                f"and model.model ({self.config.model!r})"
            )
        return None

    def _failure(
        self, problem: str, attempts: int, *, not_retried: str | None = None, advice: str | None = None
    ) -> str:
        tail = f" (not retried: {not_retried})" if not_retried else ""
        tail += f"; {advice}" if advice else ""
        quoted = _one_line(self._redact(problem), MAX_QUOTE_CHARS)  # redact first: a cut can split a key
        return self._redact(
            f"model {self.config.model!r} at {self.endpoint} failed after {attempts} "
            f"attempt{'s' if attempts != 1 else ''}: {quoted}{tail}"
        )

    def _redact(self, text: str) -> str:
        """The one redaction step (:func:`..util.redaction.redact`), with this model's key."""
        secrets = (self._api_key,) if self._api_key != NO_KEY_PLACEHOLDER else ()
        return redact(text, secrets)


#: Parallel tool calls accepted in one reply: real models send a handful; thousands
#: would each run (and be recorded) within one step that ``max_steps`` cannot bound.
MAX_TOOL_CALLS_PER_REPLY = 64

#: A parsed reply's objects are dicts: checked first, as the ABC check costs more.
_MAPPING = (dict, Mapping)

#: How much of a server's words an error quotes.
MAX_QUOTE_CHARS = 500


def _deadline_problem(error: DeadlineExceeded) -> str:
    """What a missed deadline says: the deadline, what was still going on, what to do."""
    return (
        f"timed out after {error.seconds:g}s (model.timeout_s, the deadline of one attempt: connecting, "
        f"sending and reading the whole reply) while {error.phase}"
        + (f", {error.received:,} bytes of the reply received" if error.received else "")
        + "; check that the server is up and not overloaded, or raise model.timeout_s in the agent config"
    )


def _one_line(text: str, limit: int) -> str:
    """Quoted server text as one line of at most ``limit`` characters."""
    flat = " ".join(storable(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def _preview(raw: bytes, limit: int = 200) -> str:
    """The start of a body for an error message, redacted *before* it is cut (a cut
    could otherwise leave the front half of a key that no pattern recognises)."""
    text = redact(storable(raw.decode("utf-8", errors="replace"))).strip()
    if not text:
        return "an empty body"
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _preview_json(value: Any) -> str:
    """The start of a piece of an already-parsed reply, for an error message."""
    return _preview(json.dumps(value).encode())


def _error_text(raw: bytes) -> str:
    """The server's error message: ``{"error": {"message": ...}}`` as OpenAI sends it,
    ``{"message": ...}`` or ``{"detail": ...}`` as others do, else the body itself."""
    try:
        payload = boundedread.loads(raw)
    except ValueError:  # not JSON, or over a bound (200,000 brackets): shown as text
        return _preview(raw)
    if isinstance(payload, Mapping):
        error = payload.get("error")
        for candidate in (error.get("message") if isinstance(error, Mapping) else error,
                          payload.get("message"), payload.get("detail")):
            if isinstance(candidate, str) and candidate:
                return candidate
    return _preview(raw)


def _retry_after_seconds(headers: Mapping[str, str], now: Callable[[], float] | None = None) -> float | None:
    """The wait a reply asks for: ``retry-after-ms`` (OpenAI's), else ``Retry-After``
    as seconds or as an HTTP date (RFC 9110; a gateway or CDN in front of a model
    server sends dates). A value that is neither (``soon``, ``NaN``) asks for nothing:
    the backoff applies. A date or number in the past asks for no wait."""
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = _http_date_seconds(raw, now or time.time) if name == "retry-after" else math.nan
        if not math.isnan(value):
            return max(0.0, value / 1000.0 if name == "retry-after-ms" else value)
    return None


def _http_date_seconds(raw: str, now: Callable[[], float]) -> float:
    """Seconds from now until the HTTP date ``raw``, or NaN when it is no date."""
    import email.utils  # rare (a Retry-After that is no number): not paid by every process's first call

    try:
        moment = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return math.nan
    if moment.tzinfo is None:  # an HTTP date is GMT, whatever it says
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp() - now()


def completion_from_json(payload: Any) -> ChatCompletion:
    """Read the first choice of a chat.completion body, checking its shape as we go.

    Servers that call themselves OpenAI-compatible differ in the details; what is
    accepted here is what the API documents, plus ``content`` given as a list of
    text parts and ``arguments`` given as an object (both seen from real servers).
    Text is kept as given except NUL and lone surrogates (``"\\ud800"`` is valid
    JSON but no character), which become U+FFFD so that every artefact can hold it.
    """
    if not isinstance(payload, _MAPPING):
        raise ModelError(f"the reply is JSON but not an object: {_preview_json(payload)}")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        error = payload.get("error")
        if error:
            raise ModelError(f"the reply carries an error instead of choices: {_preview_json(error)}")
        raise ModelError("the model server returned a response without choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, _MAPPING) else None
    if not isinstance(message, _MAPPING):
        raise ModelError(f"the reply's first choice has no message: {_preview_json(choice)}")
    calls: list[ModelToolCall] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelError(f"'tool_calls' in the reply is not a list: {_preview_json(raw_calls)}")
    if len(raw_calls) > MAX_TOOL_CALLS_PER_REPLY:
        raise ModelError(
            f"the reply asks for {len(raw_calls):,} tool calls at once; at most "
            f"{MAX_TOOL_CALLS_PER_REPLY} are run per reply"
        )
    for index, call in enumerate(raw_calls):
        function = call.get("function") if isinstance(call, _MAPPING) else None
        if not isinstance(function, _MAPPING):  # non-function tool calls (e.g. "custom") are not ours
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(f"a tool call in the reply has no function name: {_preview_json(call)}")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ModelToolCall(
            id=storable(str(call.get("id") or f"call_{index}")), name=storable(name), arguments=storable_json_text(arguments)
        ))
    reported = payload.get("usage")
    usage: Mapping[str, Any] = reported if isinstance(reported, _MAPPING) else {}
    finish_reason = choice.get("finish_reason")
    content = _content_text(message.get("content"))
    reported_model = payload.get("model")
    return ChatCompletion(
        model=storable(reported_model[:MAX_MODEL_NAME_CHARS]) if isinstance(reported_model, str) and reported_model else None,
        content=None if content is None else storable(content),
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
        parts = [part.get("text") for part in content if isinstance(part, _MAPPING)]
        return "".join(part for part in parts if isinstance(part, str))
    raise ModelError(f"the reply's message content is neither text nor text parts: {_preview_json(content)}")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def provide(config: ModelConfig, **options: Any) -> Provided:
    """The factory's entry (:data:`~.factory.PROVIDERS`): the client, keyed in the
    cache by its endpoint."""
    model = OpenAICompatibleModel(config, **options)
    return Provided(model, model.endpoint)
