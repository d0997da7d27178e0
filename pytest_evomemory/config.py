"""The configuration of a run: the models every layer reads, and how their errors read.

A run config names a benchmark config, an agent config and a memory config (paths
relative to the run config, or inline mappings; :mod:`.configload` reads them). Each
part is validated by a strict pydantic model (unknown keys are errors, nothing is
coerced), and every problem is reported as a
:class:`~pytest_evomemory.errors.ConfigError` naming the file and the key path, so a
run is refused before a single task executes. This module imports no component:
the models are the low layer that agents, memories and streams read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_args
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from .errors import ConfigError
from .options import MAX_LIMIT, MAX_REPEATS
from .pricing import Pricing

MemoryStrategy = Literal["none", "deterministic_recall", "tool_use"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Control characters: no URL may hold them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: Defaults of ``model.max_request_bytes`` / ``model.max_reply_bytes`` (4 MiB each:
#: about a million tokens, past every context window).
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty; write a value, or remove the key to use the default")
    return value


#: A name, path or URL: an empty one is never meant (``model: ""`` would be sent to
#: the server on every task, ``cache_dir: ""`` would cache into the working directory).
Text = Annotated[str, AfterValidator(_not_blank)]


class _ConfigPath:
    """Marks a config field whose value is a filesystem path: the loader makes it
    absolute, by one rule for every such key (:mod:`.configpaths`)."""

    def __repr__(self) -> str:
        return "CONFIG_PATH"


CONFIG_PATH = _ConfigPath()
#: A path: relative to the config file that writes it, or to the working directory
#: when the command line gives it (:mod:`.configpaths`); absolute once loaded.
PathText = Annotated[str, AfterValidator(_not_blank), CONFIG_PATH]


class StrictModel(BaseModel):
    """Unknown keys are errors, and no value is coerced: ``limit: true`` is not 1,
    ``limit: "5"`` is not 5 and ``temperature: yes`` is not 1.0 (pydantic's lax mode
    would take all three). An integer is still accepted where a number is wanted;
    ``.nan`` and ``.inf`` are not numbers any setting can use. Validators are built
    on first use (``defer_build``): a run reads the sections it has, not all of them,
    and building every one at import was start-up time before the first model call."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=False, strict=True, allow_inf_nan=False, defer_build=True
    )


# --------------------------------------------------------------------------- benchmark


class Thresholds(StrictModel):
    """Minimum accuracies; a miss fails the pytest session (the CI gate)."""

    overall: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    streams: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=dict)


#: A stream name a user's data gives (a ``files`` entry, a LoCoMo file's sample_id):
#: starts with a letter or digit, since "..", "." and "-x" would be a path or an option.
STREAM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class StreamFile(StrictModel):
    """A user-defined stream read from a JSONL file of generic task records."""

    name: Annotated[str, Field(pattern=STREAM_NAME, max_length=100)]
    path: PathText
    match_mode: str = "exact"


#: The benchmark keys that set the order of a stream's tasks (:mod:`.runtime.order`)
#: and nothing else: two runs whose resolved configs differ only here ran the same
#: arm in two orders (:func:`.reporting.compare.order_only`), however each was set.
ORDER_KEYS = ("order", "order_seed", "order_from")


class BenchmarkConfig(StrictModel):
    """Workload selection and limits: which streams, how many tasks, where data lives."""

    benchmark: str = "evomemory_single_turn"
    streams: list[str] | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None = None
    data_dir: PathText | None = None
    seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] = 0
    #: evomemory_single_turn only: MMLU-Pro categories to keep; ``None`` means the
    #: paper's (economics, engineering, philosophy), ``"all"`` turns the filter off.
    mmlu_pro_categories: list[str] | Literal["all"] | None = None
    files: list[StreamFile] = Field(default_factory=list)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    #: The order of the tasks within each stream, an experimental factor (docs/
    #: configuration.md, "Task order"): the source's, a seeded shuffle, or by difficulty.
    #: Which keys go together is checked by :mod:`.configload`.
    order: Literal["given", "shuffle", "easy_to_hard", "hard_to_easy"] = "given"
    #: The seed of ``order: shuffle`` (default: ``seed``, which also fixes GPQA's options).
    order_seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] | None = None
    #: Finished run directories whose results give each task's difficulty (the share of
    #: them that solved it) for easy_to_hard / hard_to_easy (paths: :data:`PathText`).
    order_from: PathText | list[PathText] | None = None
    #: locomo and locomo_sample only: who writes each conversation's sessions into
    #: memory before its questions, the memory system's own ingestion (``memory``)
    #: or the agent in unscored ingestion turns (``agent``); docs/locomo.md.
    ingest: Literal["memory", "agent"] = "memory"
    #: locomo only: the user's own file in LoCoMo's format (relative to the benchmark
    #: config), read as it is instead of the pinned upstream file; docs/locomo.md.
    path: PathText | None = None
    #: Independent replicates of the run in one session (docs/configuration.md,
    #: "Repeats"): ``repeats: N`` runs seeds ``seed .. seed + N - 1``; ``seeds`` lists
    #: them. One of the two; ``--evomemory-repeats`` replaces both.
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS)] | None = None
    seeds: list[Annotated[int, Field(ge=-(2**63), lt=2**63)]] | None = None

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and not value:
            raise ValueError("an empty list runs no replicate; list at least one seed, or remove the key")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a seed is listed twice (two replicates would be one run twice); list each seed once")
        if value is not None and len(value) > 100:
            raise ValueError("more than 100 replicates; list at most 100 seeds")
        return value

    @model_validator(mode="after")
    def _one_way_to_repeat(self) -> BenchmarkConfig:
        if self.repeats is not None and self.seeds is not None:
            raise ValueError(
                "key 'seeds': 'repeats' and 'seeds' both say how many replicates run; give 'repeats: N' "
                "(seeds seed .. seed + N - 1) or 'seeds: [...]', not both"
            )
        if self.seeds is not None and "seed" in self.model_fields_set:
            raise ValueError(
                "key 'seeds': 'seed' and 'seeds' both give the seed; with 'seeds' each replicate's seed is listed, "
                "remove 'seed'"
            )
        return self

    @field_validator("order_from")
    @classmethod
    def _some_reference_run(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not value:
            raise ValueError("an empty list names no run; list at least one run directory, or remove the key")
        return value

    @field_validator("streams")
    @classmethod
    def _no_duplicate_streams(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty list would run nothing; list at least one stream, or remove the key to run them all")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a stream is listed twice; list each stream once")
        return value

    @field_validator("files")
    @classmethod
    def _unique_file_names(cls, value: list[StreamFile]) -> list[StreamFile]:
        seen: set[str] = set()
        for entry in value:
            if entry.name in seen:
                raise ValueError(f"two entries are named {entry.name!r}; give each stream its own name")
            seen.add(entry.name)
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds_name_file_streams(cls, value: Thresholds, info: ValidationInfo) -> Thresholds:
        """For ``benchmark: files`` the stream names are known here; other benchmarks
        are checked by :func:`check_threshold_streams` once their source is known."""
        files: list[StreamFile] = info.data.get("files") or []
        if info.data.get("benchmark") == "files" and files:
            unknown = sorted(set(value.streams) - {entry.name for entry in files})
            if unknown:
                raise ValueError(
                    f"unknown stream(s) {', '.join(map(repr, unknown))} in 'streams'; "
                    f"the streams under 'files' are: {', '.join(entry.name for entry in files)}; use one of those names"
                )
        return value


def check_threshold_streams(config: BenchmarkConfig, available: Sequence[str], source: str) -> None:
    """Refuse a per-stream threshold for a stream the benchmark does not have.

    Called when the benchmark's stream names are known (at load, before any model
    call): a typo in ``thresholds.streams`` would otherwise only show after the
    whole paid run, as a missed threshold with no accuracy.
    """
    unknown = [name for name in config.thresholds.streams if name not in available]
    if unknown:
        raise ConfigError(
            f"{source}: key 'thresholds.streams': unknown stream(s) {', '.join(map(repr, unknown))} "
            f"for benchmark {config.benchmark!r}; available: {', '.join(available)}; use one of those names",
            source=source, key="thresholds.streams",
        )


# --------------------------------------------------------------------------- agent


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


def looks_like_a_secret(value: str) -> bool:
    """An API key pasted where a variable *name* belongs: a provider's key prefix, or a
    long mixed-case string with digits (variable names are short, and upper case)."""
    if value.startswith(("sk-", "sk_", "sk-proj", "Bearer ")):
        return True
    return (
        len(value) >= 32 and any(c.isdigit() for c in value)
        and any(c.islower() for c in value) and any(c.isupper() for c in value)
    )


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
        return (
            f"{value!r} is not an http:// or https:// URL with a host; "
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


# --------------------------------------------------------------------------- memory


class MemoryConfig(StrictModel):
    """The memory system under test: backend and its settings (it owns ``top_k``).

    A backend's own settings sit under a key of its own (``sqlite: {path: ...}``),
    validated by the options model the backend declares beside its code (its
    ``BACKEND`` spec, registered in :data:`pytest_evomemory.memory.factory.MEMORY_BACKENDS`,
    e.g. :mod:`pytest_evomemory.memory.sqlite`); the loader checks those keys, so this
    model admits them as extra keys and :meth:`section` hands each backend its own.
    """

    model_config = ConfigDict(extra="allow")

    backend: str = "inprocess"
    top_k: Annotated[int, Field(ge=1, le=1000)] = 4
    embedder: Literal["hashing", "sentence-transformers"] | None = None
    embedder_model: Text | None = None
    embedding_dim: Annotated[int, Field(ge=8, le=8192)] = 256
    #: Seconds a stream's memory may take to open before the stream fails, naming
    #: the factory (a server that accepts and never answers must not hang a run).
    open_timeout_s: Annotated[float, Field(gt=0, le=86_400)] = 120.0
    #: Built-in backends: offer ``forget`` and ``update`` tools beside retain/recall to
    #: a ``tool_use`` agent (ReMem's refine-memory operations; docs/reference-agents.md).
    editing_tools: bool = False
    options: dict[str, Any] = Field(default_factory=dict)

    def section(self, model: type[_Section]) -> _Section:
        """The backend settings under ``model.SECTION`` (its defaults when absent)."""
        extra = self.model_extra or {}
        return model.model_validate(extra.get(model.SECTION, {}))

    def sections(self) -> dict[str, Any]:
        """The backend sections given (already validated by the loader)."""
        return dict(self.model_extra or {})


class BackendOptions(StrictModel):
    """Base of a backend's own settings model; ``SECTION`` is its key under ``memory:``."""

    SECTION: ClassVar[str] = ""


_Section = TypeVar("_Section", bound=BackendOptions)


# --------------------------------------------------------------------------- run


#: What joins an arm's name and its replicate in the arm's label (``memory@r2``): a
#: character no run name may hold, so a replicate's label is never another arm's name.
REPLICATE_SEPARATOR = "@"


def replicate_tag(index: int) -> str:
    """Replicate ``index``'s tag (``r2``): its directory under its arm's, its label's end."""
    return f"r{index}"


def arm_label(name: str, replicate: int | None = None) -> str:
    """An arm's label: its run name, with its replicate's tag (``memory@r2``) when repeated."""
    return name if replicate is None else f"{name}{REPLICATE_SEPARATOR}{replicate_tag(replicate)}"


#: A replicate's tag at the end of an arm's label, exactly as :func:`arm_label` forms
#: it: ``@r`` and the replicate's number (1 to 999999, no leading zero).
_REPLICATE_LABEL = re.compile(rf"{re.escape(REPLICATE_SEPARATOR)}r([1-9][0-9]{{0,5}})$")


def split_label(label: str) -> tuple[str, int | None]:
    """``(run name, replicate)`` of an arm's label (``memory@r2``: ``("memory", 2)``;
    ``memory``: ``("memory", None)``). The one parser of a label: strict, so a label
    read back from an artefact (``memory@r01``, ``memory@r``, ``memory@rx``,
    ``memory@r1234567``) is no replicate's, and names itself whole."""
    match = _REPLICATE_LABEL.search(label)
    return (label[: match.start()], int(match.group(1))) if match else (label, None)


def arm_name(label: str) -> str:
    """The run name in an arm's label (``memory@r2``: ``memory``)."""
    return split_label(label)[0]


def replicate_of(label: str) -> int | None:
    """The replicate an arm's label names (``memory@r2``: 2; ``memory``: None)."""
    return split_label(label)[1]


@dataclass(frozen=True)
class Replicate:
    """Which replicate of a repeated run a run config is (:mod:`.runtime.replicates`):
    ``index`` from 1 of ``count``, and the seed it runs with."""

    index: int
    count: int
    seed: int

    @property
    def tag(self) -> str:
        """The replicate's directory name under its arm's (``r2``)."""
        return replicate_tag(self.index)

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count, "seed": self.seed}


@dataclass(frozen=True)
class RunConfig:
    """A fully resolved run: the three parts, and where each came from."""

    name: str
    path: Path
    benchmark: BenchmarkConfig
    agent: AgentConfig
    memory: MemoryConfig
    output_dir: str | None
    sources: Mapping[str, str]
    #: The ``--evomemory-set KEY=VALUE`` settings applied on top of the files.
    overrides: tuple[str, ...] = ()
    #: The command line's ``limit`` and ``streams`` (only those it gave): a resume
    #: applies them again, and never a limit the config file itself set.
    selection: Mapping[str, Any] = field(default_factory=dict)
    #: Set when the session runs this config as one of several replicates.
    replicate: Replicate | None = None
    #: Each path-valued key the loader made absolute (dotted, ``benchmark.order_from``,
    #: ``benchmark.files.0.path``): its value as written, and where it resolved
    #: (:mod:`.configpaths`). run.json records the first in the config (a moved checkout
    #: or another machine's shard is the same run) and the second under ``paths``.
    spelled: Mapping[str, Any] = field(default_factory=dict)
    located: Mapping[str, str] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def label(self) -> str:
        """The arm's label: the run name, with its replicate (``memory@r2``) when repeated."""
        return arm_label(self.name, None if self.replicate is None else self.replicate.index)

    def with_overrides(
        self, *, limit: int | None = None, streams: Sequence[str] | None = None
    ) -> RunConfig:
        """Apply the command line's limit and stream selection (checked by the options)."""
        update: dict[str, Any] = {}
        if limit is not None:
            update["limit"] = limit
        if streams:
            update["streams"] = list(dict.fromkeys(streams))
        if not update:
            return self
        return replace(self, benchmark=self.benchmark.model_copy(update=update), selection=update)

    def to_dict(self) -> dict[str, Any]:
        """The resolved configuration for ``run.json``. Holds no secret values:
        configs only ever name the environment variables that hold them."""
        document = {
            "name": self.name,
            "path": str(self.path),
            "sources": dict(self.sources),
            "benchmark": _benchmark_dump(self.benchmark),
            "agent": self.agent.model_dump(mode="json"),
            "memory": self.memory.model_dump(mode="json"),
            "overrides": list(self.overrides),
            "selection": dict(self.selection),
        }
        for key, value in self.spelled.items():
            _put(document, key.split("."), value)
        if self.located:
            document["paths"] = dict(self.located)
        return document


def base_configs(run_configs: Sequence[RunConfig]) -> list[RunConfig]:
    """One config per arm (its first replicate when repeated): what names the arms."""
    return [config for config in run_configs if config.replicate is None or config.replicate.index == 1]


def _put(document: dict[str, Any], key: Sequence[str], value: Any) -> None:
    """Set the dotted ``key`` (a digit indexes a list) of ``document`` back to ``value``
    where it still holds a path (a pricing file is recorded as the prices it gave)."""
    target: Any = document
    for part in key[:-1]:
        if isinstance(target, list):
            target = target[int(part)] if part.isdigit() and int(part) < len(target) else None
        else:
            target = target.get(part)
        if not isinstance(target, dict | list):
            return
    if isinstance(target, dict) and isinstance(target.get(key[-1]), str | list):
        target[key[-1]] = value


def _benchmark_dump(benchmark: BenchmarkConfig) -> dict[str, Any]:
    """The benchmark config as run.json records it: ``repeats`` and ``seeds`` only when
    set (a replicate's own config has neither), so the config fingerprint of a run
    that repeats nothing is the one it had before repeats existed (a resume goes on)."""
    dumped = benchmark.model_dump(mode="json")
    for key in ("repeats", "seeds"):
        if dumped.get(key) is None:
            dumped.pop(key, None)
    return dumped


_Model = TypeVar("_Model", bound=BaseModel)


def validate_mapping(model: type[_Model], data: Mapping[str, Any], source: str) -> _Model:
    """Validate ``data`` against ``model``; errors name ``source`` and each key path."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = error.errors()
        key = ".".join(str(part) for part in problems[0]["loc"]) if problems else None
        raise ConfigError(format_validation_error(error, source, model), source=source, key=key or None) from None


def _keys_at(model: type[BaseModel] | None, location: Sequence[Any]) -> list[str]:
    """The keys the config model accepts at ``location`` (its parent's fields), or []."""
    for part in location:
        field = model.model_fields.get(str(part)) if model is not None else None
        nested = [] if field is None else [
            arg for arg in (field.annotation, *get_args(field.annotation))
            if isinstance(arg, type) and issubclass(arg, BaseModel)
        ]
        model = nested[0] if nested else None
    return list(model.model_fields) if model is not None else []


_NUMBER_HINT = "write a whole number, e.g. 5"
_RANGE_HINT = "write a value within that range"
_MAPPING_HINT = "write a mapping of 'key: value' entries"
#: What to do, by pydantic error type: every refusal says how to fix it.
_HINTS = {
    "int_type": _NUMBER_HINT, "int_parsing": _NUMBER_HINT, "int_from_float": _NUMBER_HINT,
    "float_type": "write a number, e.g. 0.5", "float_parsing": "write a number, e.g. 0.5",
    "finite_number": "write a finite number (.nan and .inf are no setting's value)",
    "string_type": "write text (quote it if YAML would read a number, date or true/false)",
    "bool_type": "write true or false", "bool_parsing": "write true or false",
    "dict_type": _MAPPING_HINT, "model_type": _MAPPING_HINT, "model_attributes_type": _MAPPING_HINT,
    "list_type": "write a list, e.g. [a, b]",
    "literal_error": "use one of those values",
    "greater_than": _RANGE_HINT, "greater_than_equal": _RANGE_HINT,
    "less_than": _RANGE_HINT, "less_than_equal": _RANGE_HINT,
    "string_pattern_mismatch": "use only the characters the pattern allows",
    "string_too_long": "shorten it", "string_too_short": "lengthen it",
    "too_long": "shorten it", "too_short": "add entries",
}
_UNION_PREFIX = "\0union:"
#: Union branches pydantic adds to a location (``benchmark.str``): not keys.
_UNION_BRANCH = re.compile(r"^(str|int|float|bool|none|(list|dict|function-\w+|literal)\[.*\])$")


def format_validation_error(error: ValidationError, source: str, model: type[BaseModel] | None = None) -> str:
    """One line: the source, then each bad key, what is wrong with it and what to
    write instead (a key that may take several shapes is named once; for an unknown
    key, the keys allowed there: a user with only the wheel has no docs/)."""
    by_location: dict[str, list[str]] = {}
    problems = error.errors()
    for problem in problems[:_MAX_PROBLEMS_SHOWN]:
        parts = [str(part) for part in problem["loc"]]
        union = bool(parts) and _UNION_BRANCH.match(parts[-1]) is not None
        bad_key = parts[-1:] == ["[key]"] or problem["msg"] == "Keys should be strings"
        if bad_key:
            parts = parts[:-2] if parts[-1:] == ["[key]"] else parts[:-1]  # name the mapping, not the bad key
        location = ".".join(part for part in parts if not _UNION_BRANCH.match(part)) or "(top level)"
        kind = problem["type"]
        message = problem["msg"]
        if bad_key:
            message = (
                f"the key {problem.get('input')!r} is not text (YAML reads yes/no/on/off as true/false, "
                "~ as null and digits as a number); quote it"
            )
        elif kind == "extra_forbidden":
            allowed = _keys_at(model, problem["loc"][:-1])
            message = "unknown key; " + (
                f"the keys here are: {', '.join(allowed)}" if allowed else "check the spelling against docs/configuration.md"
            )
        elif kind == "missing":
            message = "required key is missing; add it (see docs/configuration.md)"
        elif kind == "value_error":
            message = message.removeprefix("Value error, ")
        elif union:
            message = _UNION_PREFIX + message.removeprefix("Input should be ")
        else:
            message = re.sub(r" or instance of \w+$", "", message)
            if kind in ("int_type", "float_type") and isinstance(problem.get("input"), bool):
                message = f"{message} (true/false is not a number here; write the number)"
            elif kind in _HINTS:
                message = f"{message}; {_HINTS[kind]}"
            elif ";" not in message:
                message = f"{message}; see docs/configuration.md for this key"
        by_location.setdefault(location, []).append(message)
    lines: list[str] = []
    for location, messages in by_location.items():
        shapes = [m.removeprefix(_UNION_PREFIX) for m in messages if m.startswith(_UNION_PREFIX)]
        if shapes and (len(shapes) < len(messages) or any(other.startswith(f"{location}.") for other in by_location)):
            shapes = []  # a shape matched and failed deeper down: that error is the one to fix
            messages = [m for m in messages if not m.startswith(_UNION_PREFIX)]
        if shapes:
            hint = (
                "name a config file or write an inline mapping"
                if shapes == ["a valid string", "a valid dictionary"] else "see docs/configuration.md for this key"
            )
            messages = [m for m in messages if not m.startswith(_UNION_PREFIX)]
            messages.append(f"expected {' or '.join(shapes)}; {hint}")
        lines.extend(
            message if location == "(top level)" and message.startswith("key '") else f"key '{location}': {message}"
            for message in messages
        )
    if len(problems) > _MAX_PROBLEMS_SHOWN:
        lines.append(f"and {len(problems) - _MAX_PROBLEMS_SHOWN:,} more problem(s): fix these first")
    return f"{source}: " + "; ".join(lines)


#: A config with 30,000 unknown keys gets a readable line, not a 2 MB one.
_MAX_PROBLEMS_SHOWN = 10
