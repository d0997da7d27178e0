"""``--evomemory-set KEY=VALUE``: change one config key from the command line.

``KEY`` is dotted from the run config down (``agent.model.model``,
``benchmark.limit``, ``memory.top_k``, ``name``); ``VALUE`` is read as YAML, so
``3`` is a number, ``null`` is null and ``[a, b]`` a list. A setting is applied to
the config's raw mapping *before* validation (:func:`~..configs.load.load_run_config`),
so an overridden config is checked exactly like a written one: an unknown key is
the same one-line error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..core.errors import ConfigError, named
from ..util.secretshape import looks_like_a_secret
from ..util.text import did_you_mean, shorten

#: The run config's own keys, and the three parts a setting can reach into.
RUN_KEYS = ("name", "output_dir")
PARTS = ("benchmark", "agent", "memory")
#: The option a setting comes with, in a message (the door spells it).
OPTION = named("set")


@dataclass(frozen=True)
class Setting:
    """One ``--evomemory-set`` value: where it goes and what it holds."""

    text: str
    path: tuple[str, ...]
    value: Any

    @property
    def part(self) -> str:
        return self.path[0]


def parse_setting(text: str) -> Setting:
    key, sep, raw = text.partition("=")
    path = tuple(key.strip().split("."))
    if not sep or not all(path):
        raise ConfigError(
            f"{OPTION} {_shown(text)}: expected KEY=VALUE; write a dotted KEY, '=' and the value, "
            "e.g. agent.model.model=gpt-4o-mini",
            option="set",
        )
    if path[0] not in (*PARTS, *RUN_KEYS) or (path[0] in RUN_KEYS and len(path) > 1):
        raise ConfigError(
            f"{OPTION} {_shown(text)}: unknown key {key.strip()!r}{did_you_mean(path[0], (*PARTS, *RUN_KEYS))}; "
            f"a key starts with one of "
            f"{', '.join(PARTS)} (then the part's keys) or is one of {', '.join(RUN_KEYS)}",
            option="set",
        )
    from .yamlio import parse_yaml  # the same strict YAML rules as a config file

    try:
        value = parse_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not YAML: the plain string, as a shell user would expect
    except ConfigError as error:
        raise ConfigError(f"{OPTION} {_shown(text)}: {error}", key=".".join(path), option="set") from None
    return Setting(text, path, value)


def _shown(text: str) -> str:
    """The setting as quoted in an error: long values cut, so the error stays one line,
    and a value that may hold a key masked (:func:`setting_shown`)."""
    return repr(shorten(setting_shown(text), 120))


def setting_shown(text: str) -> str:
    """A ``set`` option as a refusal quotes it: its value masked when it is a secret, or
    a URL whose query, fragment or user part is where a key is pasted (``?key=...``,
    ``user:KEY@``), which the refusal of the URL itself never quotes either."""
    key, _, value = text.partition("=")
    value = value.strip()
    if looks_like_a_secret(value):
        return f"{key}=***"
    if "://" in value:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value)
            hidden = bool(parts.query or parts.fragment or "@" in parts.netloc)
        except ValueError:
            hidden = True
        if hidden:
            return f"{key}=***"
    return text


def parse_settings(texts: Sequence[str]) -> list[Setting]:
    """Every setting, refusing two that set the same key: which one counted would
    depend on their order on the command line. (A key and a key inside it are applied
    outer first, whatever their order: :func:`apply_settings`.)"""
    settings = [parse_setting(text) for text in texts]
    for index, later in enumerate(settings):
        for earlier in settings[:index]:
            if earlier.path == later.path:
                raise ConfigError(
                    f"{OPTION} {_shown(earlier.text)} and {OPTION} {_shown(later.text)} set the same key; "
                    "keep one of them",
                    key=".".join(later.path), option="set",
                )
    return settings


def apply_settings(data: Mapping[str, Any], settings: Sequence[Setting], part: str) -> dict[str, Any]:
    """``data`` (the raw mapping of ``part``) with every setting for ``part`` applied,
    outer keys first: ``agent.model={...}`` then ``agent.model.seed=1`` in it, in
    either order on the command line (as a part's file is read before its keys are set)."""
    result = _deep_copy(data)
    for setting in sorted(settings, key=lambda setting: len(setting.path)):
        if setting.part != part or len(setting.path) < 2:
            continue
        target = result
        for index, key in enumerate(setting.path[1:-1], start=1):
            child = target.setdefault(key, {})
            if child is None:
                child = target[key] = {}
            if not isinstance(child, dict):
                where = ".".join(setting.path[: index + 1])
                raise ConfigError(
                    f"{OPTION} {_shown(setting.text)}: {where!r} is not a mapping, so it has no keys", option="set"
                )
            target = child
        target[setting.path[-1]] = setting.value
    return result


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deep_copy(value) if isinstance(value, Mapping) else value for key, value in data.items()}
