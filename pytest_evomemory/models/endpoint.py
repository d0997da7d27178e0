"""What the environment gives an OpenAI-compatible endpoint: its URL, its API key, the proxy.

Read from the model config and the environment variables alone, and checked once
before any task (:func:`check_model_environment`, where the session opens: in
pytest-xdist's controller too, before it starts the workers). A module of its own,
apart from the client (:mod:`.openai_compat`) and its transports (:mod:`.transport`),
which use these: the check costs a process that never calls a model none of the
HTTP stack (``ssl``, the transports, ``httpx2`` behind a proxy).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from ..config import ModelConfig, http_url_problem
from ..core.errors import ConfigError
from ..util.redaction import register_secret, url_shown

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Sent when ``api_key_env`` is null: local servers ignore it, and some proxies
#: refuse a request without any key.
NO_KEY_PLACEHOLDER = "no-key"

#: The proxy variables (each read in upper and lower case).
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def proxied() -> bool:
    """Whether a proxy variable is set: then ``httpx2`` reads them all (``NO_PROXY``
    too) and sends the request its way, as the ``openai`` SDK would."""
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


def proxy_for(endpoint: str) -> str | None:
    """The proxy variable a request to ``endpoint`` goes through, as an error may name
    it (``HTTP_PROXY=http://***@proxy:3128``), or None when it goes straight there:
    an error then names the proxy, or "connection refused" would blame a server that
    is up. The variable of the endpoint's scheme, else ``ALL_PROXY``; ``NO_PROXY``
    honoured, as ``httpx2`` reads them."""
    import urllib.request  # only where a proxy is set: it imports http.client and email (module docstring)

    parts = urlsplit(endpoint)
    if urllib.request.proxy_bypass(parts.hostname or ""):  # NO_PROXY (on Linux: the environment alone)
        return None
    for lower in (f"{parts.scheme.lower()}_proxy", "all_proxy"):
        for name in (lower.upper(), lower):
            value = os.environ.get(name)
            if value:
                return f"{name}={url_shown(value)}"
    return None


def proxy_problem() -> str | None:
    """The first proxy variable httpx would refuse or could never connect through,
    in words naming it and what to write, or ``None``.

    httpx reads every proxy variable when a client is built; a bare host name or a
    bad port there would otherwise fail every task of every stream with a
    traceback from inside the HTTP library.
    """
    for lower in PROXY_VARIABLES:
        for name in (lower.upper(), lower):
            value = os.environ.get(name)
            if not value:
                continue
            try:
                parsed = urlsplit(value)
                parsed.port  # noqa: B018 - raises ValueError for a bad port
                valid = parsed.scheme in _PROXY_SCHEMES and bool(parsed.hostname)
            except ValueError:
                valid = False
            if not valid:
                return (
                    f"the environment variable {name}={url_shown(value)!r} is not a proxy URL; "
                    f"write {name}=http://host:port (or unset it)"
                )
    return None


def resolve_api_key(config: ModelConfig) -> str:
    """Read the key from the environment, or explain which variable to set."""
    name = config.api_key_env
    if name is None:
        return NO_KEY_PLACEHOLDER
    value = os.environ.get(name, "")
    if not value.strip():
        raise ConfigError(
            f"model {config.model!r}: the API key is read from the environment variable "
            f"{name}, which is not set; export {name}=<your key> (or set 'api_key_env: null' in the "
            "agent config's 'model' section for a local server that needs no key)",
            key="model.api_key_env",
        )
    if not value.isascii() or any(ord(character) < 32 or ord(character) == 127 for character in value):
        raise ConfigError(
            f"model {config.model!r}: the environment variable {name} holds a control or non-ASCII "
            f"character, which cannot go into an HTTP header; export {name} again without it",
            key="model.api_key_env",
        )
    register_secret(value)
    return value


def resolve_endpoint(config: ModelConfig) -> str:
    """The API root: ``model.base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's.

    ``model.base_url`` is checked when the config is read; the environment variable
    is checked here, with the same rule, naming the variable."""
    if config.base_url:
        return config.base_url.rstrip("/")
    from_env = os.environ.get("OPENAI_BASE_URL")
    if from_env:
        problem = http_url_problem(from_env)
        if problem:
            raise ConfigError(f"the environment variable OPENAI_BASE_URL: {problem}", key="OPENAI_BASE_URL")
        return from_env.rstrip("/")
    return DEFAULT_BASE_URL


def check_model_environment(config: ModelConfig | None) -> None:
    """Everything the environment must provide for ``config``, checked once.

    The API-key variable, ``OPENAI_BASE_URL`` and the proxy variables are known
    before the first task; checking them here (at plugin activation, before
    collection) refuses the run once with a ``ConfigError`` naming the variable,
    instead of failing every task of every stream. It also registers the key with
    :mod:`..util.redaction`, so this process redacts it from everything it writes.
    """
    if config is None or config.provider != "openai":
        return
    resolve_endpoint(config)
    resolve_api_key(config)
    problem = proxy_problem()
    if problem:
        raise ConfigError(problem)


__all__ = [
    "DEFAULT_BASE_URL", "NO_KEY_PLACEHOLDER", "PROXY_VARIABLES", "check_model_environment", "proxied",
    "proxy_for", "proxy_problem", "resolve_api_key", "resolve_endpoint",
]
