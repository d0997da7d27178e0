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
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError

MemoryStrategy = Literal["none", "deterministic_recall", "tool_use"]

#: Config files are small; anything bigger is a mistake (or an attack) we refuse early.
MAX_CONFIG_BYTES = 1_000_000

_FACTORY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


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

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=100)]
    path: str
    match_mode: str = "exact"


class BenchmarkConfig(_Strict):
    """Workload selection and limits: which streams, how many tasks, where data lives."""

    benchmark: str = "evomemory_single_turn"
    streams: list[str] | None = None
    limit: Annotated[int, Field(ge=1)] | None = None
    data_dir: str | None = None
    seed: int = 0
    #: evomemory_single_turn only: MMLU-Pro categories to keep; ``None`` means the
    #: paper's (economics, engineering, philosophy), ``"all"`` turns the filter off.
    mmlu_pro_categories: list[str] | Literal["all"] | None = None
    files: list[StreamFile] = Field(default_factory=list)
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @field_validator("streams")
    @classmethod
    def _no_duplicate_streams(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a stream is listed twice")
        return value


# --------------------------------------------------------------------------- agent


class ModelConfig(_Strict):
    """Chat-completions model settings for TinyAgent (OpenAI-compatible or local)."""

    provider: Literal["openai", "local"] = "openai"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    #: Name of the environment variable holding the API key; the key itself never
    #: appears in a config, artefact or log.
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    max_tokens: Annotated[int, Field(ge=1)] | None = 1024
    seed: int | None = 0
    timeout_s: Annotated[float, Field(gt=0)] = 60.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 3
    #: First retry wait; it doubles per attempt. A server's Retry-After wins, but
    #: no single wait exceeds ``retry_backoff_max_s``.
    retry_backoff_s: Annotated[float, Field(ge=0.0, le=60.0)] = 0.5
    retry_backoff_max_s: Annotated[float, Field(ge=0.0, le=600.0)] = 20.0
    max_concurrency: Annotated[int, Field(ge=1, le=256)] = 4
    #: Replay identical requests from disk; ``None`` means on for temperature 0.
    cache: bool | None = None
    cache_dir: str | None = None
    #: Local GGUF file for ``provider: local``; default: the bundled model.
    model_path: str | None = None
    n_ctx: Annotated[int, Field(ge=256)] = 4096

    @property
    def cache_enabled(self) -> bool:
        return self.temperature == 0.0 if self.cache is None else self.cache

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """``localhost:8000/v1`` is the usual slip; caught here, not after retries."""
        if value is None:
            return value
        parsed = urlsplit(value)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(
                f"{value!r} is not an http:// or https:// URL with a host; "
                "write the API root, e.g. http://127.0.0.1:8000/v1"
            )
        return value


class BaselineOptions(_Strict):
    """Settings of the model-free ``recall_baseline`` agent."""

    #: Lexical similarity (0..1) above which a recalled experience's answer is reused.
    similarity_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    #: The answer given when nothing similar enough is remembered.
    fallback_answer: str = "unknown"


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
    baseline: BaselineOptions = Field(default_factory=BaselineOptions)
    model: ModelConfig | None = None
    #: Free-form settings passed to a ``module:factory`` agent.
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        return _check_kind(value, ("recall_baseline", "tiny"), "agent kind")


# --------------------------------------------------------------------------- memory


class SqliteOptions(_Strict):
    path: str | None = None


class PostgresOptions(_Strict):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 5432
    user: str = "postgres"
    dbname: str = "postgres"
    password_env: str | None = "PGPASSWORD"
    table_prefix: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]{0,30}$")] = "evomemory"
    connect_timeout_s: Annotated[float, Field(gt=0)] = 5.0

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


class MemoryConfig(_Strict):
    """The memory system under test: backend and its settings (it owns ``top_k``)."""

    backend: str = "inprocess"
    top_k: Annotated[int, Field(ge=1, le=1000)] = 4
    embedder: Literal["hashing", "sentence-transformers"] | None = None
    embedder_model: str | None = None
    embedding_dim: Annotated[int, Field(ge=8, le=8192)] = 256
    sqlite: SqliteOptions = Field(default_factory=SqliteOptions)
    postgres: PostgresOptions = Field(default_factory=PostgresOptions)
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return _check_kind(value, ("inprocess", "sqlite", "postgres"), "memory backend")


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
        }


class _RunFile(_Strict):
    name: str | None = None
    benchmark: str | dict[str, Any]
    agent: str | dict[str, Any]
    memory: str | dict[str, Any] = Field(default_factory=dict)
    output_dir: str | None = None


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors/aliases: configs never need them, and alias
    expansion is the classic way to make a tiny file explode in memory."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ConfigError(
                f"YAML aliases are not allowed in config files (alias at line "
                f"{event.start_mark.line + 1}); write the value out in full"
            )
        return super().compose_node(parent, index)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; every failure names the file."""
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    if not path.is_file():
        raise ConfigError(f"{path}: not a regular file")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {size} bytes is too large for a config file (limit 1 MB)")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {error.start}); save the file as UTF-8"
        ) from None
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values, got {type(data).__name__}")
    return data


_Model = TypeVar("_Model", bound=BaseModel)


def validate_mapping(model: type[_Model], data: Mapping[str, Any], source: str) -> _Model:
    """Validate ``data`` against ``model``; errors name ``source`` and each key path."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, source)) from None


def format_validation_error(error: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        kind = problem["type"]
        message = problem["msg"]
        if kind == "extra_forbidden":
            message = "unknown key; check the spelling against docs/configuration.md"
        elif kind == "missing":
            message = "required key is missing"
        lines.append(f"  key '{location}': {message}")
    return "\n".join(lines)


def _resolve_part(
    value: str | Mapping[str, Any], base_dir: Path, key: str, run_path: Path
) -> tuple[dict[str, Any], str]:
    if isinstance(value, Mapping):
        return dict(value), f"{run_path} (inline '{key}')"
    reference = Path(value)
    if reference.suffix not in {".yaml", ".yml"}:
        raise ConfigError(
            f"{run_path}: key '{key}' must name a .yaml/.yml file or be an inline mapping, "
            f"got {value!r}"
        )
    path = reference if reference.is_absolute() else (base_dir / reference)
    path = path.resolve()
    if not path.is_file():
        raise ConfigError(f"{run_path}: key '{key}' names {value!r}, but {path} does not exist")
    return read_yaml_mapping(path), str(path)


def load_run_config(path: str | Path) -> RunConfig:
    """Load a run config and the benchmark, agent and memory configs it names."""
    run_path = Path(path).expanduser().resolve()
    raw = read_yaml_mapping(run_path)
    run = validate_mapping(_RunFile, raw, str(run_path))
    base = run_path.parent
    parts: dict[str, Any] = {}
    sources: dict[str, str] = {"run": str(run_path)}
    for key, model in (
        ("benchmark", BenchmarkConfig),
        ("agent", AgentConfig),
        ("memory", MemoryConfig),
    ):
        data, source = _resolve_part(getattr(run, key), base, key, run_path)
        parts[key] = validate_mapping(model, data, source)
        sources[key] = source
    agent: AgentConfig = parts["agent"]
    if agent.kind == "tiny" and agent.model is None:
        raise ConfigError(f"{sources['agent']}: key 'model': required for kind 'tiny'")
    return RunConfig(
        name=run.name or run_path.stem,
        path=run_path,
        benchmark=parts["benchmark"],
        agent=agent,
        memory=parts["memory"],
        output_dir=run.output_dir,
        sources=sources,
    )
