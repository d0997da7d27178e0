"""Resolve ``package.module:factory`` references from configs, with useful errors."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import ConfigError


def load_factory(reference: str, what: str) -> Callable[..., Any]:
    """Import the callable named by ``reference`` (``module:attribute``)."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"{what} factory {reference!r}: cannot import module {module_name!r} ({error}); "
            "is it installed or on sys.path (e.g. in your repository's root)?"
        ) from None
    factory = getattr(module, attribute, None)
    if factory is None or not callable(factory):
        raise ConfigError(
            f"{what} factory {reference!r}: module {module_name!r} has no callable {attribute!r}"
        )
    return factory  # type: ignore[no-any-return]
