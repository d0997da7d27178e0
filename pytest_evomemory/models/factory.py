"""Build the ChatModel an agent config asks for, with the response cache around it.

Providers are imported lazily so that HTTP-endpoint users never import
llama-cpp-python and vice versa. ``models/local.py`` must provide
``LocalChatModel(config: ModelConfig)`` implementing :class:`~.base.ChatModel`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ..config import AgentConfig, ModelConfig
from ..errors import ConfigError
from ..pricing import Pricing, PricingFileError, resolve_pricing
from .base import ChatModel
from .budget import guarded
from .cache import CachedChatModel, cache_identity, default_cache_dir


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
    model: ChatModel
    endpoint: str | None
    file_hash: str | None = None
    if config.provider == "openai":
        from .openai_compat import OpenAICompatibleModel

        remote = OpenAICompatibleModel(config, **provider_options)
        model, endpoint = remote, remote.endpoint
    elif config.provider == "local":
        try:
            local = importlib.import_module(f"{__package__}.local")
        except ImportError as error:
            raise ConfigError(
                f"model provider 'local' needs llama-cpp-python ({error}); "
                "install it with: pip install 'pytest-evomemory[local]'"
            ) from None
        embedded = local.LocalChatModel(config, **provider_options)
        model, endpoint, file_hash = embedded, None, embedded.identity().get("sha256")
    else:  # pragma: no cover - the config validator allows only the two above
        raise ConfigError(f"unknown model provider {config.provider!r}; use 'openai' or 'local'")
    model = guarded(model, model_pricing(config), config.max_tokens, f"model {config.model!r}")
    use_cache = config.cache_enabled if cache is None else cache
    if not use_cache:
        return model
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir(config)
    return CachedChatModel(model, cache_identity(config, endpoint, file_hash), directory)


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
    variable, ``OPENAI_BASE_URL`` and the proxy variables. The model-free
    ``recall_baseline`` never calls a model, so nothing is checked for it.

    Raises :class:`~pytest_evomemory.errors.ConfigError` naming the variable.
    """
    if agent.kind == "recall_baseline" or agent.model is None or agent.model.provider != "openai":
        return
    from .openai_compat import check_model_environment

    check_model_environment(agent.model)
