"""Load a run config: the run file, the three parts it names, the settings on top.

:mod:`..config` holds the models every layer reads; this module reads files and
decides what a registered component accepts, so it sits above the registries
(benchmarks, agents, memory backends) and below the session. Every problem is one
:class:`~pytest_evomemory.core.errors.ConfigError` naming the file and the key, and all
the problems of a run's files are reported at once: a user who mistyped a key in
the agent config and another in the memory config fixes both after one run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ..agents.factory import AGENTS, agent_kind
from ..config import (
    AgentConfig,
    BackendOptions,
    BenchmarkConfig,
    MemoryConfig,
    PathText,
    RunConfig,
    StrictModel,
    validate_mapping,
)
from ..config.paths import base_for, locate
from ..config.pricing import PricingFileError, resolve_pricing
from ..config.settings import Setting, apply_settings, parse_settings, setting_shown
from ..config.yamlio import read_yaml_mapping
from ..core.errors import ConfigError, named
from ..core.registry import is_reference, key_read_by_others
from ..core.validation import path_problem, resolve_path, run_name_problem
from ..memory.factory import MEMORY_BACKENDS, backend_spec
from ..streams import BENCHMARKS, unread_benchmark_keys
from ..util.redaction import register_secret
from ..util.text import did_you_mean
from . import builtin_part, builtin_part_names


class _RunFile(StrictModel):
    name: str | None = None
    benchmark: str | dict[str, Any]
    agent: str | dict[str, Any]
    memory: str | dict[str, Any] = Field(default_factory=dict)
    output_dir: PathText | None = None


def _resolve_part(
    value: str | Mapping[str, Any], base_dir: Path, key: str, run_path: Path
) -> tuple[dict[str, Any], str, Path]:
    """The part's raw mapping, its source as messages name it, and the directory its
    relative paths are relative to (:mod:`..config.paths`): its file's, or, inline, the
    run config's. ``base_dir``: where a file the part names is relative to."""
    if isinstance(value, Mapping):
        return dict(value), f"{run_path} (inline '{key}')", run_path.parent
    reference = Path(value).expanduser()
    if reference.suffix not in {".yaml", ".yml"}:
        shipped = builtin_part(key, value)
        if shipped is not None:  # a shipped config by name, as --evomemory-config takes one
            return read_yaml_mapping(shipped), str(shipped), shipped.parent
        raise ConfigError(
            f"{run_path}: key '{key}' must name a .yaml/.yml file, a built-in {key} config "
            f"({', '.join(builtin_part_names(key))}) or be an inline mapping, got {value!r}"
            f"{did_you_mean(value, builtin_part_names(key))}; write one of those",
            source=str(run_path), key=key,
        )
    path = resolve_path(reference if reference.is_absolute() else (base_dir / reference))
    problem = path_problem(path)
    if problem is not None:
        where = "the working directory" if base_dir != run_path.parent else "the run config's directory"
        hint = f"; check the path (it is relative to {where})" if problem == "does not exist" else ""
        raise ConfigError(
            f"{run_path}: key '{key}' names {value!r}, but {path} {problem}{hint}",
            source=str(run_path), key=key,
        )
    return read_yaml_mapping(path, empty=f"the {key} config"), str(path), path.parent


def load_run_config(path: str | Path, settings: Sequence[str] = ()) -> RunConfig:
    """Load a run config and the benchmark, agent and memory configs it names;
    ``settings`` are ``KEY=VALUE`` overrides (:mod:`..config.settings`) given with the ``set`` option."""
    parsed = parse_settings(settings)
    shown = [setting_shown(text) for text in settings]
    suffix = f" (with {named('set')} {' '.join(shown)})" if settings else ""
    run_path = resolve_path(Path(path).expanduser())
    raw = read_yaml_mapping(run_path)
    _check_kind(raw, "run", str(run_path))
    raw.update({s.part: s.value for s in parsed if len(s.path) == 1})
    cwd = Path.cwd()
    set_here = [s.path for s in parsed if len(s.path) == 1]
    raw, paths = locate(raw, _RunFile, None, run_path.parent, set_here, cwd)
    problems: list[ConfigError] = []
    run: _RunFile | None = None
    try:
        run = validate_mapping(_RunFile, raw, f"{run_path}{suffix}")
    except ConfigError as error:
        problems.append(error)
    if run is not None and run.name is not None and (problem := run_name_problem(run.name)):
        problems.append(ConfigError(
            f"{run_path}: key 'name': run name {run.name!r} {problem}; the run name becomes one "
            "directory under the output root, so use letters, digits, '-', '_' or '.'",
            source=str(run_path), key="name",
        ))
    base = run_path.parent
    parts: dict[str, Any] = {}
    sources: dict[str, str] = {"run": str(run_path)}
    for key, model in (("benchmark", BenchmarkConfig), ("agent", AgentConfig), ("memory", MemoryConfig)):
        # With a run file that failed validation, its parts are still checked when
        # they are named the way a valid run file names them: every misspelt key of
        # the run is listed at once, not one per attempt.
        reference = getattr(run, key) if run is not None else raw.get(key, {} if key == "memory" else None)
        if not isinstance(reference, str | Mapping):
            continue
        try:
            data, source, part_dir = _resolve_part(reference, base_for((key,), base, set_here, cwd), key, run_path)
            sources[key] = source
            _check_kind(data, key, source)
            data = apply_settings(data, parsed, key)
            _register_named_secrets(data)
            data, found = locate(
                data, model, key, part_dir, [s.path[1:] for s in parsed if s.part == key and len(s.path) > 1], cwd,
            )
            paths.spelled.update(found.spelled)
            paths.located.update(found.located)
            parts[key] = _validate_part(key, model, data, f"{source}{suffix}")
            if key == "agent":
                parts[key] = _with_answers_resolved(_with_pricing_resolved(parts[key], source), source)
        except ConfigError as error:
            problems.append(error)
    if problems:
        raise _together(problems)
    assert run is not None
    return RunConfig(
        name=run.name or run_path.stem,
        path=run_path,
        benchmark=parts["benchmark"],
        agent=parts["agent"],
        memory=parts["memory"],
        output_dir=run.output_dir,
        sources=sources,
        overrides=tuple(settings),
        spelled=paths.spelled,
        located=paths.located,
    )


#: Keys only one kind of config has: what tells a file's kind when it is in the wrong
#: place (a run config named as the agent part, an agent config passed as the run config).
_SIGNATURES: dict[str, frozenset[str]] = {
    "run": frozenset({"agent", "memory", "output_dir"}),
    "benchmark": frozenset({"streams", "files", "limit", "data_dir", "thresholds", "mmlu_pro_categories", "order"}),
    "agent": frozenset({"kind", "memory_strategy", "max_steps", "system_prompt", "model", "retain_policy"}),
    "memory": frozenset({"backend", "top_k", "embedder", "sqlite", "postgres", "mem0", "langmem"}),
}
_WHAT_TO_DO = {
    "run": "pass a run config (it names a benchmark, an agent and a memory config), e.g. {--config}=sample_memory",
    "benchmark": "name a benchmark config here (e.g. benchmark: sample)",
    "agent": "name an agent config here (e.g. agent: recall_baseline)",
    "memory": "name a memory config here (e.g. memory: inprocess)",
}


def _check_kind(data: Mapping[str, Any], expected: str, source: str) -> None:
    """Refuse a file of another kind than the place it is named in, once (instead of
    one unknown key per key): it holds none of the keys only ``expected`` configs have
    and at least two of another kind's."""
    keys = {str(key) for key in data}
    if keys & _SIGNATURES[expected] or (expected == "run" and {"benchmark", "agent"} <= keys):
        return
    for kind, signature in _SIGNATURES.items():
        if kind != expected and len(keys & signature) >= 2:
            shown = ", ".join(sorted(keys & signature))
            raise ConfigError(
                f"{source}: this is {_a(kind)} config (it has {shown}), not {_a(expected)} config; "
                f"{_WHAT_TO_DO[expected].replace('{--config}', named('config'))}",
                source=source,
            )


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _register_named_secrets(data: Any) -> None:
    """Register the value of every environment variable a key ending in ``_env`` names
    (``model.api_key_env``, ``postgres.password_env``, a library's ``api_key_env``) as a
    secret, before the part is validated: a refusal that quotes what the user wrote (a
    key pasted into ``kind:``) then masks it (:class:`~..core.errors.ConfigError`), as
    every later output does once the client has read the key."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(key, str) and key.endswith("_env") and isinstance(value, str) and value in os.environ:
                register_secret(os.environ[value])
            else:
                _register_named_secrets(value)
    elif isinstance(data, list):
        for item in data:
            _register_named_secrets(item)


def _together(problems: list[ConfigError]) -> ConfigError:
    """One error for the problems of several files (each already names its file)."""
    if len(problems) == 1:
        return problems[0]
    first = problems[0]
    return ConfigError(" | ".join(str(problem) for problem in problems), source=first.source, key=first.key)


def _validate_part(key: str, model: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    """The part's model, then what its registered component accepts."""
    if key == "memory":
        return validate_memory(data, source)
    if key == "agent":
        return validate_agent(data, source)
    part = validate_mapping(model, data, source)
    if isinstance(part, BenchmarkConfig):
        _check_benchmark(part, source)
    return part


def validate_agent(data: Mapping[str, Any], source: str) -> AgentConfig:
    """The agent config, with its kind's defaults (:class:`~..agents.base.AgentKind`:
    a preset's memory strategy and other keys, where the config sets none) and what
    the kind accepts."""
    kind = agent_kind(data["kind"]) if isinstance(data.get("kind"), str) and data["kind"] in AGENTS else None
    filled = dict(data)
    if kind is not None:
        if kind.memory_strategy is not None:
            filled.setdefault("memory_strategy", kind.memory_strategy)
        for key, value in kind.defaults.items():
            filled.setdefault(key, value)
    agent = validate_mapping(AgentConfig, filled, source)
    _check_agent(agent, source)
    return agent


def _check_agent(agent: AgentConfig, source: str) -> None:
    if agent.kind not in AGENTS and not is_reference(agent.kind):
        raise ConfigError(f"{source}: key 'kind': {AGENTS.unknown(agent.kind)}", source=source, key="kind")
    kind = agent_kind(agent.kind)
    if kind is not None and kind.needs_model and agent.model is None:
        raise ConfigError(
            f"{source}: key 'model': required for kind {agent.kind!r}; add a 'model:' section "
            "(see docs/configuration.md)",
            source=source, key="model",
        )
    if kind is not None and kind.memory_strategy is not None and agent.memory_strategy != kind.memory_strategy:
        raise ConfigError(
            f"{source}: key 'memory_strategy': kind {agent.kind!r} is memory_strategy {kind.memory_strategy!r}, "
            f"not {agent.memory_strategy!r}; remove 'memory_strategy' (or use kind 'tiny' for another strategy)",
            source=source, key="memory_strategy",
        )
    if agent.retain_policy != "all":
        problem = None
        if agent.kind == "recall_baseline":
            problem = "kind 'recall_baseline' always retains every experience; remove it"
        elif agent.memory_strategy == "none":
            problem = "memory_strategy 'none' retains nothing; remove it"
        if problem:
            raise ConfigError(f"{source}: key 'retain_policy': {problem}", source=source, key="retain_policy")
    if agent.full_context and agent.memory_strategy != "none":
        raise ConfigError(
            f"{source}: key 'full_context': the full-context arm sees the whole conversation instead of a memory; "
            f"set memory_strategy to none (it is {agent.memory_strategy!r}), or remove full_context",
            source=source, key="full_context",
        )
    if kind is not None and (problem := _unread_agent_key(agent, kind.reads)):
        raise ConfigError(f"{source}: {problem}", source=source)


def _unread_agent_key(agent: AgentConfig, reads: frozenset[str]) -> str | None:
    """Why an agent config key only other kinds read was given (``full_context`` to
    ``recall_baseline``), or None; a ``module:factory`` agent may read any key."""
    found = key_read_by_others(AGENTS, reads, agent)
    if found is None:
        return None
    key, readers = found
    return (
        f"key '{key}' is read by kind {' or '.join(map(repr, readers))} (or a module:factory agent), "
        f"not by {agent.kind!r}; remove it, or set kind to {readers[0]}"
    )


def _with_pricing_resolved(agent: AgentConfig, source: str) -> AgentConfig:
    """``model.pricing`` given as a file (already absolute, :mod:`..config.paths`): its
    prices for this model, read now, so the run records the prices it used and a bad
    file stops the run before any task."""
    model = agent.model
    if model is None or not isinstance(model.pricing, str):
        return agent
    try:
        pricing = resolve_pricing(model.pricing, model.model, Path(model.pricing).parent)
    except PricingFileError as error:
        raise ConfigError(f"{source}: key 'model.pricing': {error}", source=source, key="model.pricing") from None
    return agent.model_copy(update={"model": model.model_copy(update={"pricing": pricing})})


def _with_answers_resolved(agent: AgentConfig, source: str) -> AgentConfig:
    """The dry-run model's answers file (``model.mock.answers``, already absolute,
    :mod:`..config.paths`), read now: a missing or malformed file stops the run before
    any task."""
    model = agent.model
    if model is None or model.provider != "mock" or model.mock.answers is None:
        return agent
    from ..models.mock import read_answers

    try:
        read_answers(Path(model.mock.answers))
    except ConfigError as error:
        raise ConfigError(f"{source}: key 'model.mock.answers': {error}", source=source,
                          key="model.mock.answers") from None
    return agent


def _check_benchmark(benchmark: BenchmarkConfig, source: str) -> None:
    if benchmark.benchmark not in BENCHMARKS and not is_reference(benchmark.benchmark):
        raise ConfigError(
            f"{source}: key 'benchmark': {BENCHMARKS.unknown(benchmark.benchmark)}", source=source, key="benchmark"
        )
    problem = unread_benchmark_keys(benchmark) or order_keys_problem(benchmark)
    if problem:
        raise ConfigError(f"{source}: {problem}", source=source)


def order_keys_problem(benchmark: BenchmarkConfig) -> str | None:
    """Why ``order_seed`` / ``order_from`` do not fit ``order``, or None: a seed of
    an order that draws nothing, or difficulties an order does not use, would be
    recorded in run.json as if they shaped the run."""
    if benchmark.order_from is not None and benchmark.order not in ("easy_to_hard", "hard_to_easy"):
        return (
            f"key 'order_from' gives difficulties, which order {benchmark.order!r} does not use; "
            "set 'order' to easy_to_hard or hard_to_easy, or remove 'order_from'"
        )
    if benchmark.order_seed is not None and benchmark.order != "shuffle":
        return (
            f"key 'order_seed' seeds order 'shuffle', not {benchmark.order!r}; remove it, or set 'order: shuffle'"
        )
    return None


def validate_memory(data: Mapping[str, Any], source: str) -> MemoryConfig:
    """The memory config; each backend section validated by its backend's own model.

    A section is a key named after a registered backend (``sqlite:``); a section of a
    backend other than the chosen one is never read, so it is refused like any key a
    component ignores. The chosen backend's section is recorded with its defaults, so
    run.json says every setting the backend used.
    """
    fields = set(MemoryConfig.model_fields)
    sections = _sections_named([key for key in data if key not in fields])
    section_keys = {options.SECTION: name for name, options in sections.items() if options is not None}
    common = {key: value for key, value in data.items() if key in fields}
    unknown = [key for key in data if key not in fields and key not in section_keys]
    if unknown:
        allowed = [*MemoryConfig.model_fields, *section_keys]
        raise ConfigError(
            f"{source}: " + "; ".join(
                f"key '{key}': unknown key{did_you_mean(key, allowed)}"
                + (f"; the keys here are: {', '.join(allowed)}" if index == 0 else "")
                for index, key in enumerate(unknown)
            ),
            source=source, key=unknown[0],
        )
    memory = validate_mapping(MemoryConfig, common, source)
    if memory.backend not in MEMORY_BACKENDS and not is_reference(memory.backend):
        raise ConfigError(f"{source}: key 'backend': {MEMORY_BACKENDS.unknown(memory.backend)}", source=source, key="backend")
    spec = backend_spec(memory.backend)
    if memory.editing_tools and spec is None:
        raise ConfigError(
            f"{source}: key 'editing_tools': read only by the built-in backends ({', '.join(MEMORY_BACKENDS.names())}); "
            f"a module:factory backend ({memory.backend!r}) offers the tools its tools() method returns: remove it",
            source=source, key="editing_tools",
        )
    validated: dict[str, Any] = {}
    for key, value in data.items():
        if key not in section_keys:
            continue
        owner = section_keys[key]
        if owner != memory.backend:
            raise ConfigError(
                f"{source}: key '{key}' is read only by memory backend {owner!r}, not by {memory.backend!r}; "
                f"remove it, or set 'backend: {owner}'",
                source=source, key=key,
            )
        validated[key] = _section(sections[owner], value, source)
    if spec is not None and spec.options is not None and spec.options.SECTION not in validated:
        validated[spec.options.SECTION] = _section(spec.options, {}, source)
    return memory.model_copy(update=validated) if validated else memory


def _sections_named(keys: Sequence[str]) -> dict[str, type[BackendOptions] | None]:
    """Backend -> its section's options model, for what ``keys`` (a memory config's keys
    other than the common ones) may name. A backend's section is named after it, so
    only those backends are loaded (each loads its library's adapter module: all of
    them cost about 0.1 s, before the first model call); a key that names none of them
    is an unknown key, and every backend is loaded to list the sections there are."""
    named = {key: MEMORY_BACKENDS.get(key).options for key in keys if key in MEMORY_BACKENDS}
    if all(options is not None and options.SECTION == key for key, options in named.items()) and len(named) == len(keys):
        return named
    return {name: MEMORY_BACKENDS.get(name).options for name in MEMORY_BACKENDS.names()}


def _section(options: type[BackendOptions] | None, value: Any, source: str) -> dict[str, Any]:
    assert options is not None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{source}: key '{options.SECTION}': expected a mapping of 'key: value' entries", source=source,
            key=options.SECTION,
        )
    nested = validate_mapping(_Wrapped.of(options), {options.SECTION: dict(value)}, source)
    section: BaseModel = getattr(nested, options.SECTION)
    return section.model_dump(mode="json")


class _Wrapped:
    """A model holding one section under its key, so errors say ``key 'sqlite.path'``."""

    _made: ClassVar[dict[type[BackendOptions], type[BaseModel]]] = {}

    @classmethod
    def of(cls, options: type[BackendOptions]) -> type[BaseModel]:
        made = cls._made.get(options)
        if made is None:
            from pydantic import create_model

            made = cls._made[options] = create_model(  # type: ignore[call-overload]
                f"MemorySection_{options.SECTION}", __base__=StrictModel, **{options.SECTION: (options, ...)}
            )
        return made


def unread_agent_options(agent: AgentConfig) -> str | None:
    """Why some of ``agent.options`` would go unread, or None.

    A built-in agent reads only the free-form options its kind declares: a
    ``temperature`` there would be silently ignored while the user believes it
    shapes what is measured. A conftest factory may read any option, so the caller
    asks only when the built-in factory builds the agent.
    """
    kind = agent_kind(agent.kind)
    unread = sorted(set(agent.options) - kind.reads_options) if kind is not None else []
    if not unread:
        return None
    return (
        f"agent.options {unread} are read by no built-in agent (kind {agent.kind!r}); "
        "remove them, or set what they mean with the agent's own keys (agent.system_prompt, "
        "agent.max_steps, agent.model.temperature, ...), or name a module:factory agent that reads them"
    )


def unread_memory_options(memory: MemoryConfig) -> str | None:
    """Why some of ``memory.options`` would go unread by a built-in backend, or None."""
    spec = backend_spec(memory.backend)
    unread = sorted(set(memory.options) - spec.reads_options) if spec is not None else []
    if not unread:
        return None
    assert spec is not None
    return (
        f"memory.options {unread} are read by no built-in backend (backend {memory.backend!r} reads "
        f"{sorted(spec.reads_options) or 'none'}); remove them, or set what they mean with the memory's own keys "
        "(memory.top_k, memory.sqlite, ...), or name a module:factory backend that reads them"
    )


__all__ = [
    "Setting",
    "load_run_config",
    "order_keys_problem",
    "unread_agent_options",
    "unread_memory_options",
    "validate_agent",
    "validate_memory",
]
