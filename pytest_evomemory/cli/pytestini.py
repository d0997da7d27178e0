"""The repository's pytest settings, read without pytest, for ``evomemory run``.

A user's ``module:factory`` that pytest imports thanks to the ``pythonpath`` ini
setting must import from ``evomemory run`` in the same repository too, and the
``evomemory_config`` ini setting names the run config for both. pytest finds its
ini file from the directory it starts in upward: the first of ``pytest.ini``,
``.pytest.ini``, ``pyproject.toml`` with ``[tool.pytest.ini_options]``,
``tox.ini`` with ``[pytest]`` or ``setup.cfg`` with ``[tool:pytest]``; so do we.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import iniconfig

from ..core import boundedread
from ..core.errors import ConfigError


@dataclass(frozen=True)
class PytestSettings:
    """The ini file found (None: none) and the settings this package reads from it."""

    path: Path | None = None
    pythonpath: tuple[Path, ...] = ()
    evomemory_config: str | None = None
    values: dict[str, object] = field(default_factory=dict)

    @property
    def rootdir(self) -> Path | None:
        return self.path.parent if self.path is not None else None


def _section(path: Path) -> dict[str, object] | None:
    """The pytest section of ``path``, or None when the file holds none.

    A file pytest cannot parse is refused as pytest refuses it (it names the file and
    stops): skipping it would run without its ``pythonpath`` and ``evomemory_config``,
    and say something else is wrong."""
    try:
        text = boundedread.read_text(path, limit=boundedread.CONFIG_BYTES * 10, what="a pytest settings file")
        if path.name == "pyproject.toml":
            table = tomllib.loads(text).get("tool", {}).get("pytest", {})
            options = table.get("ini_options") if isinstance(table, dict) else None
            return dict(options) if isinstance(options, dict) else None
        parsed = iniconfig.IniConfig(str(path), data=text)
    except (OSError, boundedread.UnreadableFile):
        return None  # unreadable: pytest would not read it either
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start}); save it as UTF-8", source=str(path)) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML ({error}); fix it (pytest refuses it too)", source=str(path)) from None
    except iniconfig.ParseError as error:
        raise ConfigError(
            f"{path}:{error.lineno + 1}: {error.msg}; fix it (pytest refuses it too)", source=str(path)
        ) from None
    name = {"setup.cfg": "tool:pytest", "tox.ini": "pytest"}.get(path.name, "pytest")
    if name not in parsed:
        # pytest.ini counts even when empty; the others only with their section
        return {} if path.name in ("pytest.ini", ".pytest.ini") else None
    return dict(parsed[name].items())


def find_settings(start: Path) -> PytestSettings:
    """The settings pytest would read when started in ``start``; a :class:`ConfigError`
    for a settings file pytest could not parse."""
    for directory in (start.resolve(), *start.resolve().parents):
        for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
            path = directory / name
            if not path.is_file():
                continue
            values = _section(path)
            if values is None:
                continue
            raw = values.get("pythonpath", [])
            entries = raw.split() if isinstance(raw, str) else [str(item) for item in raw] if isinstance(raw, list) else []
            config = values.get("evomemory_config")
            return PytestSettings(
                path,
                tuple((directory / entry).resolve() for entry in entries),
                str(config) if isinstance(config, str) and config.strip() else None,
                values,
            )
    return PytestSettings()


def add_pythonpath(settings: PytestSettings) -> None:
    """Put the ``pythonpath`` entries first on ``sys.path``, as pytest does."""
    for entry in reversed(settings.pythonpath):
        text = str(entry)
        if text not in sys.path:
            sys.path.insert(0, text)


__all__ = ["PytestSettings", "add_pythonpath", "find_settings"]
