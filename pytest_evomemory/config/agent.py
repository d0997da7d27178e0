"""The agent config and its model's: who answers, through which provider and endpoint.

Settings that name a secret name the environment variable that holds it, never the
secret itself; a URL that cannot work is refused here, not after retries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from ..util.redaction import url_shown
from ..util.secretshape import looks_like_a_secret
from .base import PathText, StrictModel, Text
from .pricing import Pricing

MemoryStrategy = Literal["none", "deterministic_recall", "tool_use"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Control characters: no URL may hold them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: Defaults of ``model.max_request_bytes`` / ``model.max_reply_bytes`` (4 MiB each:
#: about a million tokens, past every context window).
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024


#: The model name an ``openai`` model config asks for when it names none.
DEFAULT_API_MODEL = "gpt-4o-mini"
#: The context window assumed for an API model whose config gives no ``context_window``.
DEFAULT_CONTEXT_WINDOW = 4096
#: Keys only one provider reads. A config may not set the other provider's keys (a
#: setting that changes nothing must not look as if it did), and a dump (run.json,
#: the config diff of compare.html) leaves them out instead of showing a default.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": (
        "model", "base_url", "api_key_env", "timeout_s", "max_retries", "retry_backoff_s",
        "retry_backoff_max_s", "max_concurrency", "max_connections", "max_request_bytes", "max_reply_bytes",
        "context_window",
    ),
    "local": ("model_path", "n_ctx"),
    # The dry-run model stands in for an API model: it has a name (for a pricing
    # file and the artefacts), the endpoint's concurrency limits and request bound.
    "mock": ("model", "mock", "max_concurrency", "max_connections", "max_request_bytes", "context_window"),
}
#: The model name a ``mock`` model config has when it names none.
DEFAULT_MOCK_MODEL = "mock"


def foreign_keys(provider: str) -> frozenset[str]:
    """The keys only the other providers read: refused in, and left out of a dump of,
    a model section of ``provider``."""
    others = {key for name, keys in PROVIDER_KEYS.items() if name != provider for key in keys}
    return frozenset(others - set(PROVIDER_KEYS.get(provider, ())))


MockMode = Literal["echo", "fixed", "answers", "memory"]


class MockSettings(StrictModel):
    """``model.mock``: what the dry-run model (``provider: mock``) replies.

    Deterministic and offline, so a pipeline (arms, shards, gates, a memory adapter,
    the cost cap) can be checked end to end before a paid run (docs/agents.md,
    *Dry runs*). ``mode``: ``echo`` answers with the task's own text, ``fixed`` with
    ``answer``, ``answers`` with the file's answer for the task (``answer`` where the
    file has none), ``memory`` with the correct answer of a recalled experience
    similar enough to the task (``answer`` when none is).
    """

    mode: MockMode = "echo"
    #: ``fixed``: the answer; ``answers``/``memory``: the answer when they have none.
    answer: str = "unknown"
    #: ``answers``: a YAML or JSON file mapping task ids (``task`` or ``stream/task``)
    #: to answers, relative to the agent config's directory.
    answers: PathText | None = None
    #: ``memory``: lexical similarity (0..1) a recalled experience's task needs to the
    #: current task for its correct answer to be given.
    similarity_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    #: Seconds every call takes, as a slow endpoint would (0: none).
    latency_s: Annotated[float, Field(ge=0.0, le=600.0)] = 0.0
    #: Token usage every call reports; ``None``: estimated, four characters a token.
    prompt_tokens: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    completion_tokens: Annotated[int, Field(ge=0, le=10_000_000)] | None = None

    @model_validator(mode="after")
    def _keys_of_the_mode(self) -> MockSettings:
        if self.mode == "answers" and self.answers is None:
            raise ValueError("mode 'answers' needs 'answers': the file of answers by task id")
        unread = [
            key for key, modes in (("answers", ("answers",)), ("answer", ("fixed", "answers", "memory")),
                                   ("similarity_threshold", ("memory",)))
            if key in self.model_fields_set and self.mode not in modes
        ]
        if unread:
            raise ValueError(
                f"{', '.join(map(repr, unread))} {'is' if len(unread) == 1 else 'are'} not read in mode "
                f"{self.mode!r}; remove {'it' if len(unread) == 1 else 'them'} or change 'mode'"
            )
        return self


class ModelConfig(StrictModel):
    """Chat-completions model settings for TinyAgent (OpenAI-compatible or local).

    Provider-aware: ``model`` (the API model name, :data:`DEFAULT_API_MODEL` when
    unset) exists only for ``openai``; a local model is its GGUF file. See
    :data:`PROVIDER_KEYS` for the keys each provider alone reads.
    """

    provider: Literal["openai", "local", "mock"] = "openai"
    #: The model name sent to the endpoint (the dry-run model's name for ``mock``);
    #: ``None`` for ``provider: local``.
    model: Text | None = None
    base_url: str | None = None
    #: Name of the environment variable holding the API key; the key itself never
    #: appears in a config, artefact or log.
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    #: Bounded: a value no model can write (or a 40-digit one no server can parse)
    #: would fail every task at the server instead of once here.
    max_tokens: Annotated[int, Field(ge=1, le=10_000_000)] | None = 1024
    seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] | None = 0
    timeout_s: Annotated[float, Field(gt=0)] = 60.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 3
    #: First retry wait; it doubles per attempt. A server's Retry-After wins, but
    #: no single wait exceeds ``retry_backoff_max_s``.
    retry_backoff_s: Annotated[float, Field(ge=0.0, le=60.0)] = 0.5
    retry_backoff_max_s: Annotated[float, Field(ge=0.0, le=600.0)] = 20.0
    #: Concurrent requests to this endpoint from one process; ``None``: no bound of its
    #: own (the chains in flight bound it, one request each: ``evomemory run --chains``).
    max_concurrency: Annotated[int, Field(ge=1, le=256)] | None = None
    #: Concurrent requests to this endpoint across every process of the session
    #: (all pytest-xdist workers and chains together); ``None``: no bound across processes.
    max_connections: Annotated[int, Field(ge=1, le=4096)] | None = None
    #: Replay identical requests from disk; ``None`` means on for temperature 0.
    cache: bool | None = None
    cache_dir: PathText | None = None
    #: Local GGUF file for ``provider: local``; default: the bundled model.
    model_path: PathText | None = None
    n_ctx: Annotated[int, Field(ge=256, le=1_048_576)] = 4096
    #: The API model's context window in tokens, for ``provider: openai`` (a local
    #: model's is ``n_ctx``): how much of the conversation LoCoMo's full-context arm
    #: fits in a prompt (docs/locomo.md). ``None``: 4096.
    context_window: Annotated[int, Field(ge=256, le=100_000_000)] | None = None
    #: llama.cpp threads per process for ``provider: local`` (generation and prompt
    #: evaluation). One: threads that share a core wait for each other at every
    #: layer, so more threads are faster only on cores nothing else uses; the
    #: answers are the same for any count (docs/local-model.md).
    n_threads: Annotated[int, Field(ge=1, le=512)] = 1
    #: A request body (the whole conversation so far) larger than this is refused
    #: before it is sent: a 100 MB prompt is a mistake, and a paid one.
    max_request_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_REQUEST_BYTES
    #: A reply body larger than this ends the turn with a ModelError (no real chat
    #: completion comes near it; a runaway or hostile server can).
    max_reply_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_REPLY_BYTES
    #: US dollars per million input / output tokens, or the path of a pricing file
    #: (relative to the agent config's directory), read when the config is loaded:
    #: every cost in the artefacts and ``--evomemory-max-cost`` come from it.
    pricing: Pricing | PathText | None = None
    #: What the dry-run model replies, for ``provider: mock`` (:class:`MockSettings`).
    mock: MockSettings = Field(default_factory=MockSettings)

    @property
    def context_tokens(self) -> int:
        """The model's context window in tokens: ``n_ctx`` for a local model,
        ``context_window`` (default 4096) for an API model."""
        if self.provider == "local":
            return self.n_ctx
        return self.context_window or DEFAULT_CONTEXT_WINDOW

    @property
    def cache_enabled(self) -> bool:
        return self.temperature == 0.0 if self.cache is None else self.cache

    @model_validator(mode="before")
    @classmethod
    def _default_api_model(cls, data: Any) -> Any:
        """An ``openai`` model without a name asks for :data:`DEFAULT_API_MODEL`; a
        ``mock`` one is called :data:`DEFAULT_MOCK_MODEL`."""
        if isinstance(data, Mapping) and "model" not in data:
            provider = data.get("provider", "openai")
            if provider in ("openai", "mock"):
                return {**data, "model": DEFAULT_API_MODEL if provider == "openai" else DEFAULT_MOCK_MODEL}
        return data

    @model_validator(mode="after")
    def _only_the_providers_keys(self) -> ModelConfig:
        unread = foreign_keys(self.provider)
        foreign = [key for key in type(self).model_fields if key in unread and key in self.model_fields_set]
        if foreign:
            keys = ", ".join(repr(key) for key in foreign)
            readers = [name for name, read in PROVIDER_KEYS.items() if any(key in read for key in foreign)]
            raise ValueError(
                f"{keys} {'is' if len(foreign) == 1 else 'are'} read only by provider "
                f"{' or '.join(map(repr, readers))}, and this model's provider is {self.provider!r}; "
                f"remove {'it' if len(foreign) == 1 else 'them'} (docs/agents.md lists each provider's keys)"
            )
        if self.provider in ("openai", "mock") and not self.model:
            raise ValueError(
                f"'model' is null, but provider {self.provider!r} names its model in every request and artefact; "
                f"name the model (e.g. {DEFAULT_API_MODEL}) or remove the key for the default"
            )
        return self

    @model_serializer(mode="wrap")
    def _dump_the_providers_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The other providers' keys are left out: absent, not shown with a default."""
        dumped: dict[str, Any] = handler(self)
        foreign = foreign_keys(self.provider)
        return {key: value for key, value in dumped.items() if key not in foreign}

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        return env_variable_name(value, "the key", "OPENAI_API_KEY", "a server that needs no key")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """``localhost:8000/v1`` is the usual slip; caught here, not after retries."""
        problem = None if value is None else http_url_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def env_variable_name(value: str | None, holds: str, example: str, without: str) -> str | None:
    """A setting that names an environment variable holding a secret (never the
    secret itself) must be a variable name."""
    if value is not None and looks_like_a_secret(value):
        # Never quoted: this is the secret itself, and the message reaches the terminal and CI logs.
        raise ValueError(
            "holds what looks like the secret itself, not the name of the environment variable that "
            f"holds it; export the secret in a variable and write that variable's name here (e.g. {example})"
        )
    if value is not None and not _ENV_NAME.match(value):
        raise ValueError(
            f"{value!r} is not an environment variable name; name the variable that holds "
            f"{holds} (e.g. {example}), or write null for {without}"
        )
    return value


def http_url_problem(value: str) -> str | None:
    """Why ``value`` is not a usable API root (an http(s) URL with a host), or ``None``.

    Shared by ``model.base_url`` and the ``OPENAI_BASE_URL`` environment check."""
    try:
        parsed = urlsplit(value)
        parsed.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        parsed = None
    if (
        parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname
        or _CONTROL.search(value) or any(character.isspace() for character in value)
    ):
        return (  # quoted without a user name, password or query string: where a key is pasted
            f"{url_shown(value)!r} is not an http:// or https:// URL with a host; "
            "write the API root, e.g. http://127.0.0.1:8000/v1"
        )
    if parsed.username is not None or parsed.password is not None:
        # A password in the URL would be written to run.json and quoted in errors.
        return (
            "the URL holds a user name or password (user:password@host); remove it and put "
            "the key in the variable that model.api_key_env names"
        )
    if parsed.query or parsed.fragment or value.endswith(("?", "#")):
        # Never quoted: a query string is where a key is often pasted. The client appends
        # /chat/completions to the API root, so every request would miss the endpoint.
        return (
            "the URL holds a query string or fragment ('?...' or '#...'), which the client cannot keep when it "
            "appends /chat/completions; remove it (a key belongs in the variable that model.api_key_env names)"
        )
    return None


class BaselineOptions(StrictModel):
    """Settings of the model-free ``recall_baseline`` agent."""

    #: Lexical similarity (0..1) above which a recalled experience's answer is reused.
    similarity_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    #: The answer given when nothing similar enough is remembered.
    fallback_answer: str = "unknown"


class AgentConfig(StrictModel):
    """The agent under test and how it uses memory (it owns ``memory_strategy``)."""

    kind: str = "recall_baseline"
    memory_strategy: MemoryStrategy = "deterministic_recall"
    #: Model calls allowed per stimulus before the episode fails.
    max_steps: Annotated[int, Field(ge=1, le=100)] = 8
    system_prompt: str | None = None
    #: How TinyAgent talks to its model: native tool calls, the paper's text format
    #: ("Rationale: ... / Final Answer: ..."), or tools with a fallback to text when
    #: the server answers without tool calls (docs/agents.md).
    protocol: Literal["tools", "text", "auto"] = "tools"
    #: What TinyAgent's ExpRAG experience holds: the task, its own answer and the
    #: correct one (``full``), or only the task and the correct answer;
    #: ``labelled`` adds the agent's own verdict (correct / incorrect) read from the
    #: feedback, as the paper's experiences carry; the default of exprag and exprecent.
    experience_format: Literal["full", "answer_only", "labelled"] = "full"
    #: Which experiences the agent keeps: every one, or only those of tasks it judged
    #: (from the feedback) that it answered correctly (the paper's experience-quality study).
    retain_policy: Literal["all", "successes_only"] = "all"
    #: LoCoMo's full-context arm: every question turn carries the whole conversation
    #: (TaskView.conversation), which TinyAgent puts in its prompt, the most recent
    #: sessions first to go in when it exceeds the model's context (docs/locomo.md).
    #: Needs ``memory_strategy: none``: the arm sees the conversation, not a memory.
    full_context: bool = False
    baseline: BaselineOptions = Field(default_factory=BaselineOptions)
    model: ModelConfig | None = None
    #: Free-form settings passed to a ``module:factory`` agent.
    options: dict[str, Any] = Field(default_factory=dict)
