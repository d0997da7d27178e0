"""Load and validate the four configuration files of a run.

A run config names a benchmark config, an agent config and a memory config (paths
relative to the run config, or inline mappings). Each part is validated by a strict
pydantic model (unknown keys are errors), and every problem is reported as a
:class:`~pytest_evomemory.errors.ConfigError` naming the file and the key path, so
pytest can refuse the run before a single test executes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .errors import ConfigError
from .validation import MAX_INT_DIGITS, MAX_NESTING_DEPTH, not_utf8, path_problem, resolve_path

MemoryStrategy = Literal["none", "deterministic_recall", "tool_use"]

#: Config files are small; anything bigger is a mistake (or an attack) we refuse early.
MAX_CONFIG_BYTES = 1_000_000

_FACTORY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
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


class _Strict(BaseModel):
    """Unknown keys are errors, and no value is coerced: ``limit: true`` is not 1,
    ``limit: "5"`` is not 5 and ``temperature: yes`` is not 1.0 (pydantic's lax mode
    would take all three). An integer is still accepted where a number is wanted;
    ``.nan`` and ``.inf`` are not numbers any setting can use."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=False, strict=True, allow_inf_nan=False
    )


def _check_kind(value: str, builtin: Sequence[str], what: str) -> str:
    if value in builtin or _FACTORY_REF.match(value):
        return value
    raise ValueError(
        f"unknown {what} {value!r}; use one of {', '.join(builtin)} "
        "or a 'package.module:factory' reference"
    )


# --------------------------------------------------------------------------- benchmark


class Thresholds(_Strict):
    """Minimum accuracies; a miss fails the pytest session (the CI gate)."""

    overall: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    streams: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=dict)


class StreamFile(_Strict):
    """A user-defined stream read from a JSONL file of generic task records."""

    #: Starts with a letter or digit: "..", "." and "-x" would be a path or an option.
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100)]
    path: Text
    match_mode: str = "exact"


class BenchmarkConfig(_Strict):
    """Workload selection and limits: which streams, how many tasks, where data lives."""

    benchmark: str = "evomemory_single_turn"
    streams: list[str] | None = None
    limit: Annotated[int, Field(ge=1)] | None = None
    data_dir: Text | None = None
    seed: int = 0
    #: evomemory_single_turn only: MMLU-Pro categories to keep; ``None`` means the
    #: paper's (economics, engineering, philosophy), ``"all"`` turns the filter off.
    mmlu_pro_categories: list[str] | Literal["all"] | None = None
    files: list[StreamFile] = Field(default_factory=list)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    #: locomo and locomo_sample only: who writes each conversation's sessions into
    #: memory before its questions, the memory system's own ingestion (``memory``)
    #: or the agent in unscored ingestion turns (``agent``); docs/locomo.md.
    ingest: Literal["memory", "agent"] = "memory"

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


    @model_validator(mode="after")
    def _keys_the_benchmark_reads(self) -> BenchmarkConfig:
        """A key the chosen built-in benchmark never reads is refused, not ignored:
        ``files`` under ``benchmark: sample`` would run the sample, not the user's file.
        (A ``module:factory`` benchmark may read any key.)"""
        readers = {
            "files": {"files"}, "data_dir": _HUB_BENCHMARKS | {"locomo"},
            "mmlu_pro_categories": _HUB_BENCHMARKS, "ingest": _CONVERSATION_BENCHMARKS,
        }
        if ":" in self.benchmark:
            return self
        for key, benchmarks in readers.items():
            given = key == "ingest" or bool(getattr(self, key))  # ingest has no "unset" value
            if key in self.model_fields_set and given and self.benchmark not in benchmarks:
                raise ValueError(
                    f"key '{key}' is read only by benchmark {' or '.join(sorted(benchmarks))}, not by "
                    f"{self.benchmark!r}; remove it, or set 'benchmark' to the one that reads it"
                )
        return self


#: Benchmarks that read upstream data (``data_dir``, ``mmlu_pro_categories``).
_HUB_BENCHMARKS = frozenset({"evomemory_single_turn"})
#: Benchmarks whose streams are conversations with an ingestion phase (``ingest``).
_CONVERSATION_BENCHMARKS = frozenset({"locomo", "locomo_sample"})


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


class ModelConfig(_Strict):
    """Chat-completions model settings for TinyAgent (OpenAI-compatible or local)."""

    provider: Literal["openai", "local"] = "openai"
    model: Text = "gpt-4o-mini"
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
    max_concurrency: Annotated[int, Field(ge=1, le=256)] = 4
    #: Replay identical requests from disk; ``None`` means on for temperature 0.
    cache: bool | None = None
    cache_dir: Text | None = None
    #: Local GGUF file for ``provider: local``; default: the bundled model.
    model_path: Text | None = None
    n_ctx: Annotated[int, Field(ge=256, le=1_048_576)] = 4096
    #: A request body (the whole conversation so far) larger than this is refused
    #: before it is sent: a 100 MB prompt is a mistake, and a paid one.
    max_request_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_REQUEST_BYTES
    #: A reply body larger than this ends the turn with a ModelError (no real chat
    #: completion comes near it; a runaway or hostile server can).
    max_reply_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_REPLY_BYTES

    @property
    def cache_enabled(self) -> bool:
        return self.temperature == 0.0 if self.cache is None else self.cache

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        return _variable_name(value, "the key", "OPENAI_API_KEY", "a server that needs no key")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """``localhost:8000/v1`` is the usual slip; caught here, not after retries."""
        problem = None if value is None else http_url_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def _variable_name(value: str | None, holds: str, example: str, without: str) -> str | None:
    """A setting that names an environment variable holding a secret (never the
    secret itself) must be a variable name."""
    if value is not None and _looks_like_a_secret(value):
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


def _looks_like_a_secret(value: str) -> bool:
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
    return None


class BaselineOptions(_Strict):
    """Settings of the model-free ``recall_baseline`` agent."""

    #: Lexical similarity (0..1) above which a recalled experience's answer is reused.
    similarity_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    #: The answer given when nothing similar enough is remembered.
    fallback_answer: str = "unknown"


#: The agents this package builds itself; any other kind is a ``module:factory``.
BUILTIN_AGENT_KINDS = ("recall_baseline", "tiny")


class AgentConfig(_Strict):
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
    #: correct one (``full``), or only the task and the correct answer.
    experience_format: Literal["full", "answer_only"] = "full"
    #: LoCoMo's full-context arm: every question turn carries the whole conversation
    #: (TaskView.conversation), which TinyAgent puts in its prompt, the most recent
    #: sessions first to go in when it exceeds the model's context (docs/locomo.md).
    #: Needs ``memory_strategy: none``: the arm sees the conversation, not a memory.
    full_context: bool = False
    baseline: BaselineOptions = Field(default_factory=BaselineOptions)
    model: ModelConfig | None = None
    #: Free-form settings passed to a ``module:factory`` agent.
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        return _check_kind(value, BUILTIN_AGENT_KINDS, "agent kind")

    @model_validator(mode="after")
    def _full_context_without_memory(self) -> AgentConfig:
        if self.full_context and self.memory_strategy != "none":
            raise ValueError(
                "key 'full_context': the full-context arm sees the whole conversation instead of a memory; "
                f"set memory_strategy to none (it is {self.memory_strategy!r}), or remove full_context"
            )
        if self.full_context and self.kind == "recall_baseline":
            raise ValueError(
                "key 'full_context' is read by kind 'tiny' (or a module:factory agent), not by "
                "'recall_baseline'; remove it, or set kind to tiny"
            )
        return self


# --------------------------------------------------------------------------- memory


class SqliteOptions(_Strict):
    path: Text | None = None

    @field_validator("path")
    @classmethod
    def _one_file_per_stream(cls, value: str | None) -> str | None:
        problem = None if value is None else sqlite_path_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def sqlite_path_problem(template: str) -> str | None:
    """Why ``sqlite.path`` cannot name one database per stream, or ``None``.

    Checked when the config is read (so the run is refused once, up front) and
    again by the backend when it fills the template in."""
    if "{stream}" not in template:
        return (
            f"{template!r} must contain '{{stream}}': every stream needs its own file, or one "
            "stream's records would be recalled in another; write e.g. memory/{stream}.sqlite3"
        )
    try:
        template.format(stream="s", run_name="r")
    except (KeyError, IndexError, ValueError, AttributeError) as error:
        return f"{template!r}: only {{stream}} and {{run_name}} may be used ({error}); remove the others"
    return None


class PostgresOptions(_Strict):
    host: Text = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 5432
    user: Text = "postgres"
    dbname: Text = "postgres"
    password_env: str | None = "PGPASSWORD"
    table_prefix: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]{0,30}$")] = "evomemory"
    connect_timeout_s: Annotated[float, Field(gt=0)] = 5.0

    @field_validator("password_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        return _variable_name(value, "the password", "PGPASSWORD", "a server that needs no password")

    @classmethod
    def from_environment(cls) -> PostgresOptions:
        """Settings from libpq's own variables (PGHOST, PGPORT, PGUSER, PGDATABASE),
        so that tests and benchmarks reach whatever server ``.ci/start-postgres.sh``
        (or the user's shell) points at; the password stays in PGPASSWORD."""
        defaults = cls()
        return cls(
            host=os.environ.get("PGHOST", defaults.host),
            port=int(os.environ.get("PGPORT", defaults.port)),
            user=os.environ.get("PGUSER", defaults.user),
            dbname=os.environ.get("PGDATABASE", defaults.dbname),
        )


#: The memory backends this package opens itself, each with the ``options`` keys it
#: reads; any other backend is a ``module:factory``.
BUILTIN_MEMORY_OPTIONS: dict[str, frozenset[str]] = {
    "inprocess": frozenset(),
    "sqlite": frozenset(),
    "postgres": frozenset({"text_search_config"}),
}


class MemoryConfig(_Strict):
    """The memory system under test: backend and its settings (it owns ``top_k``)."""

    backend: str = "inprocess"
    top_k: Annotated[int, Field(ge=1, le=1000)] = 4
    embedder: Literal["hashing", "sentence-transformers"] | None = None
    embedder_model: Text | None = None
    embedding_dim: Annotated[int, Field(ge=8, le=8192)] = 256
    #: Seconds a stream's memory may take to open before the stream fails, naming
    #: the factory (a server that accepts and never answers must not hang a run).
    open_timeout_s: Annotated[float, Field(gt=0, le=86_400)] = 120.0
    sqlite: SqliteOptions = Field(default_factory=SqliteOptions)
    postgres: PostgresOptions = Field(default_factory=PostgresOptions)
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return _check_kind(value, tuple(BUILTIN_MEMORY_OPTIONS), "memory backend")


# --------------------------------------------------------------------------- run


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

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def with_overrides(
        self, *, limit: int | None = None, streams: Sequence[str] | None = None
    ) -> RunConfig:
        """Apply command-line overrides (``--evomemory-limit``, ``--evomemory-stream``)."""
        update: dict[str, Any] = {}
        if limit is not None:
            if limit < 1:
                raise ConfigError(f"--evomemory-limit must be at least 1, got {limit}")
            update["limit"] = limit
        if streams:
            update["streams"] = list(dict.fromkeys(streams))
        if not update:
            return self
        return replace(self, benchmark=self.benchmark.model_copy(update=update))

    def to_dict(self) -> dict[str, Any]:
        """The resolved configuration for ``run.json``. Holds no secret values:
        configs only ever name the environment variables that hold them."""
        return {
            "name": self.name,
            "path": str(self.path),
            "sources": dict(self.sources),
            "benchmark": self.benchmark.model_dump(mode="json"),
            "agent": self.agent.model_dump(mode="json"),
            "memory": self.memory.model_dump(mode="json"),
            "overrides": list(self.overrides),
        }


class _RunFile(_Strict):
    name: str | None = None
    benchmark: str | dict[str, Any]
    agent: str | dict[str, Any]
    memory: str | dict[str, Any] = Field(default_factory=dict)
    output_dir: Text | None = None


class _ConfigLoader(yaml.SafeLoader):
    """Safe YAML, stricter where a silent choice would change what is measured.

    * no anchors/aliases: configs never need them, and alias expansion is the
      classic way to make a tiny file explode in memory;
    * no duplicate key at any level: YAML says keys are unique, PyYAML keeps the
      last one silently (a ``thresholds`` block written twice would drop a gate);
    * nesting at most ``MAX_NESTING_DEPTH`` deep (the composer recurses per level);
    * integers of at most ``MAX_INT_DIGITS`` digits (Python refuses longer ones).

    Each refusal is a ``ConfigError`` with the line; the caller adds the file.
    """

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ConfigError(
                f"YAML aliases are not allowed in config files (alias at line "
                f"{event.start_mark.line + 1}); write the value out in full"
            )
        self._depth += 1
        try:
            if self._depth > MAX_NESTING_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ConfigError(
                    f"nested more than {MAX_NESTING_DEPTH} levels deep at line {mark.line + 1}; "
                    "a config is never that deep: check the brackets or indentation"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                try:
                    hash(key)
                except TypeError:
                    continue
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise ConfigError(
                        f"duplicate key {key!r} at line {line} (first at line {first_line[key]}); "
                        "YAML would silently keep only the last value: remove one",
                        key=str(key),
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)



def _construct_bounded_int(loader: _ConfigLoader, node: yaml.ScalarNode) -> Any:
    digits = sum(character.isdigit() for character in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise ConfigError(
            f"an integer of {digits:,} digits at line {node.start_mark.line + 1} "
            f"(limit {MAX_INT_DIGITS}); write a sensible number, or quote it as a string"
        )
    if not _DECIMAL_INT.match(str(node.value)):
        # YAML 1.1 reads 010 as 8, 1:30 as 90 and 0x10 as 16: never what a limit meant.
        raise ConfigError(
            f"the number {node.value!r} at line {node.start_mark.line + 1} is not plain decimal, and YAML "
            "would read it as octal, hexadecimal, binary or base 60 (010 is 8, 1:30 is 90); write it as a "
            "decimal number without leading zeros, or quote it as a string"
        )
    return loader.construct_yaml_int(node)


_DECIMAL_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _construct_bounded_int)


#: ``${NAME}`` or a whole value ``$NAME``: shell syntax that configs do not expand.
_UNEXPANDED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|^\$[A-Za-z_][A-Za-z0-9_]*$")


def _construct_plain_str(loader: _ConfigLoader, node: yaml.ScalarNode) -> Any:
    value = loader.construct_yaml_str(node)
    match = _UNEXPANDED.search(value) if isinstance(value, str) else None
    if match:
        # It would be used as written: a model named "${MODEL}", a URL "$BASE_URL".
        raise ConfigError(
            f"{match.group(0)!r} at line {node.start_mark.line + 1}: config files do not expand environment "
            "variables; write the value, or pass it with --evomemory-set KEY=\"$VARIABLE\" from your shell"
        )
    return value


_ConfigLoader.add_constructor("tag:yaml.org,2002:str", _construct_plain_str)

_TAG_HINT = "YAML tags (!!python/..., !name) are not allowed in a config file; write a plain value"
_YAML_HINT = (
    "fix the syntax there (values holding ': ' or ' #' need quotes; indent with spaces, not tabs)"
)


def parse_yaml(text: str) -> Any:
    """``text`` read as YAML by the strict config loader: the one parser of every
    config value, whether it comes from a file or from ``--evomemory-set``.

    Raises ``yaml.YAMLError`` for bad syntax (the caller names the file or the
    setting), and ``ConfigError`` for what the loader refuses or a value a
    constructor cannot build (a timestamp like ``2024-13-45``, bad ``!!binary``).
    """
    try:
        return yaml.load(text, Loader=_ConfigLoader)
    except (ConfigError, yaml.YAMLError):
        raise
    except RecursionError:  # pragma: no cover - the loader's depth limit refuses this first
        raise ConfigError("nested too deeply; simplify the value") from None
    except (ValueError, TypeError, OverflowError) as error:
        raise ConfigError(
            f"a value cannot be read ({type(error).__name__}: {str(error)[:200]}); "
            "quote it to make it a plain string"
        ) from None


def read_yaml_mapping(path: Path, *, empty: str | None = None) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; every failure names the file.

    An empty file (nothing, or only comments) reads as ``{}`` unless ``empty`` says
    what it should hold: a referenced part that is empty (a truncated copy, a wrong
    file) would otherwise silently run every default, another benchmark included."""
    problem = path_problem(path)
    if problem == "does not exist":
        raise ConfigError(
            f"{path}: file not found; check the path (a relative path is resolved from "
            "the directory pytest runs in, or the referencing file's directory)",
            source=str(path),
        )
    if problem is not None:
        raise ConfigError(f"{path}: {problem}", source=str(path))
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: {size} bytes is too large for a config file (limit 1 MB); "
            "put data in a data file, not in the config",
            source=str(path),
        )
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror or error})", source=str(path)) from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: {not_utf8(raw, error)}", source=str(path)) from None
    try:
        data = parse_yaml(text)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}", source=str(path), key=error.key) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        hint = _TAG_HINT if isinstance(error, yaml.constructor.ConstructorError) else _YAML_HINT
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}; {hint}", source=str(path)) from None
    if data is None and empty is not None:
        raise ConfigError(
            f"{path}: the file is empty; write {empty} in it, or write {{}} to use every default",
            source=str(path),
        )
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of keys to values, got {_yaml_kind(data)}; "
            "write 'key: value' lines at the top level",
            source=str(path),
        )
    return data


def _yaml_kind(value: Any) -> str:
    """What YAML would call ``value`` (a Python type name means nothing to a config author)."""
    kinds = {str: "a string", int: "a number", float: "a number", bool: "true/false", list: "a list"}
    return kinds.get(type(value), type(value).__name__)


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


def _resolve_part(
    value: str | Mapping[str, Any], base_dir: Path, key: str, run_path: Path
) -> tuple[dict[str, Any], str]:
    if isinstance(value, Mapping):
        return dict(value), f"{run_path} (inline '{key}')"
    reference = Path(value)
    if reference.suffix not in {".yaml", ".yml"}:
        from .configs import builtin_part, builtin_part_names

        shipped = builtin_part(key, value)
        if shipped is not None:  # a shipped config by name, as --evomemory-config takes one
            return read_yaml_mapping(shipped), str(shipped)
        raise ConfigError(
            f"{run_path}: key '{key}' must name a .yaml/.yml file, a built-in {key} config "
            f"({', '.join(builtin_part_names(key))}) or be an inline mapping, got {value!r}; write one of those",
            source=str(run_path), key=key,
        )
    path = resolve_path(reference if reference.is_absolute() else (base_dir / reference))
    problem = path_problem(path)
    if problem is not None:
        hint = "; check the path (it is relative to the run config's directory)" if problem == "does not exist" else ""
        raise ConfigError(
            f"{run_path}: key '{key}' names {value!r}, but {path} {problem}{hint}",
            source=str(run_path), key=key,
        )
    return read_yaml_mapping(path, empty=f"the {key} config"), str(path)


def load_run_config(path: str | Path, settings: Sequence[str] = ()) -> RunConfig:
    """Load a run config and the benchmark, agent and memory configs it names;
    ``settings`` are ``--evomemory-set KEY=VALUE`` overrides (:mod:`.settings`)."""
    from .settings import apply_settings, parse_settings

    parsed = parse_settings(settings)
    shown = [
        f"{text.partition('=')[0]}=***" if _looks_like_a_secret(text.partition("=")[2].strip()) else text
        for text in settings
    ]
    suffix = f" (with --evomemory-set {' '.join(shown)})" if settings else ""
    run_path = resolve_path(Path(path).expanduser())
    raw = read_yaml_mapping(run_path)
    raw.update({s.part: s.value for s in parsed if len(s.path) == 1})
    run = validate_mapping(_RunFile, raw, f"{run_path}{suffix}")
    if run.name is not None:
        from .rundir import check_run_name  # the one rule for run names; here it can name the file

        try:
            check_run_name(run.name)
        except ConfigError as error:
            raise ConfigError(f"{run_path}: {error}", source=str(run_path), key="name") from None
    base = run_path.parent
    parts: dict[str, Any] = {}
    sources: dict[str, str] = {"run": str(run_path)}
    for key, model in (
        ("benchmark", BenchmarkConfig),
        ("agent", AgentConfig),
        ("memory", MemoryConfig),
    ):
        data, source = _resolve_part(getattr(run, key), base, key, run_path)
        parts[key] = validate_mapping(model, apply_settings(data, parsed, key), f"{source}{suffix}")
        sources[key] = source
    agent: AgentConfig = parts["agent"]
    if agent.kind == "tiny" and agent.model is None:
        raise ConfigError(
            f"{sources['agent']}: key 'model': required for kind 'tiny'; add a 'model:' section "
            "(see docs/configuration.md)",
            source=sources["agent"], key="model",
        )
    return RunConfig(
        name=run.name or run_path.stem,
        path=run_path,
        benchmark=parts["benchmark"],
        agent=agent,
        memory=parts["memory"],
        output_dir=run.output_dir,
        sources=sources,
        overrides=tuple(settings),
    )


def unread_agent_options(agent: AgentConfig) -> str | None:
    """Why ``agent.options`` would go unread, or None.

    A built-in agent reads no free-form option: a ``temperature`` there would be
    silently ignored while the user believes it shapes what is measured. Only the
    built-in factory decides this; a conftest factory may read any option.
    """
    if agent.kind not in BUILTIN_AGENT_KINDS or not agent.options:
        return None
    return (
        f"agent.options {sorted(agent.options)} are read by no built-in agent (kind {agent.kind!r}); "
        "remove them, or set what they mean with the agent's own keys (agent.system_prompt, "
        "agent.max_steps, agent.model.temperature, ...), or name a module:factory agent that reads them"
    )


def unread_memory_options(memory: MemoryConfig) -> str | None:
    """Why some of ``memory.options`` would go unread by a built-in backend, or None."""
    read = BUILTIN_MEMORY_OPTIONS.get(memory.backend)
    unread = sorted(set(memory.options) - read) if read is not None else []
    if not unread:
        return None
    return (
        f"memory.options {unread} are read by no built-in backend (backend {memory.backend!r} reads "
        f"{sorted(read or ()) or 'none'}); remove them, or set what they mean with the memory's own keys "
        "(memory.top_k, memory.sqlite, ...), or name a module:factory backend that reads them"
    )
