"""The strict YAML reader of every config value: files and ``--evomemory-set`` alike.

One parser, so that a value set on the command line is read by exactly the rules
of a config file (no aliases, no duplicate keys, no YAML 1.1 number surprises, no
unexpanded ``$VARIABLES``, no tags), and a config module, the settings module and
the loader can all use it without importing each other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..core import boundedread
from ..core.boundedread import MAX_INT_DIGITS, MAX_NESTING_DEPTH
from ..core.errors import ConfigError, named
from ..core.validation import not_utf8, path_problem

#: Config files are small; anything bigger is a mistake (or an attack) we refuse early.
MAX_CONFIG_BYTES = boundedread.CONFIG_BYTES


class _ConfigLoader(yaml.SafeLoader):
    """Safe YAML, stricter where a silent choice would change what is measured.

    * no anchors/aliases: configs never need them, and alias expansion is the
      classic way to make a tiny file explode in memory;
    * no duplicate key at any level: YAML says keys are unique, PyYAML keeps the
      last one silently (a ``thresholds`` block written twice would drop a gate);
    * nesting at most ``MAX_NESTING_DEPTH`` deep (the composer recurses per level);
    * integers of at most ``MAX_INT_DIGITS`` digits (Python refuses longer ones).

    Each refusal is a ``ConfigError`` with the line; the caller adds the file.
    """

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ConfigError(
                f"YAML aliases are not allowed in config files (alias at line "
                f"{event.start_mark.line + 1}); write the value out in full"
            )
        self._depth += 1
        try:
            if self._depth > MAX_NESTING_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ConfigError(
                    f"nested more than {MAX_NESTING_DEPTH} levels deep at line {mark.line + 1}; "
                    "a config is never that deep: check the brackets or indentation"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                try:
                    hash(key)
                except TypeError:
                    continue
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise ConfigError(
                        f"duplicate key {key!r} at line {line} (first at line {first_line[key]}); "
                        "YAML would silently keep only the last value: remove one",
                        key=str(key),
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)



def _construct_bounded_int(loader: _ConfigLoader, node: yaml.ScalarNode) -> Any:
    digits = sum(character.isdigit() for character in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise ConfigError(
            f"an integer of {digits:,} digits at line {node.start_mark.line + 1} "
            f"(limit {MAX_INT_DIGITS}); write a sensible number, or quote it as a string"
        )
    if not _DECIMAL_INT.match(str(node.value)):
        # YAML 1.1 reads 010 as 8, 1:30 as 90 and 0x10 as 16: never what a limit meant.
        raise ConfigError(
            f"the number {node.value!r} at line {node.start_mark.line + 1} is not plain decimal, and YAML "
            "would read it as octal, hexadecimal, binary or base 60 (010 is 8, 1:30 is 90); write it as a "
            "decimal number without leading zeros, or quote it as a string"
        )
    return loader.construct_yaml_int(node)


_DECIMAL_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _construct_bounded_int)


#: ``${NAME}`` or a whole value ``$NAME``: shell syntax that configs do not expand.
_UNEXPANDED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|^\$[A-Za-z_][A-Za-z0-9_]*$")


def _construct_plain_str(loader: _ConfigLoader, node: yaml.ScalarNode) -> Any:
    value = loader.construct_yaml_str(node)
    match = _UNEXPANDED.search(value) if isinstance(value, str) else None
    if match:
        # It would be used as written: a model named "${MODEL}", a URL "$BASE_URL".
        raise ConfigError(
            f"{match.group(0)!r} at line {node.start_mark.line + 1}: config files do not expand environment "
            f"variables; write the value, or pass it with {named('set')} KEY=\"$VARIABLE\" from your shell"
        )
    return value


_ConfigLoader.add_constructor("tag:yaml.org,2002:str", _construct_plain_str)

_TAG_HINT = "YAML tags (!!python/..., !name) are not allowed in a config file; write a plain value"
_YAML_HINT = (
    "fix the syntax there (values holding ': ' or ' #' need quotes; indent with spaces, not tabs)"
)


def parse_yaml(text: str) -> Any:
    """``text`` read as YAML by the strict config loader: the one parser of every
    config value, whether it comes from a file or from ``--evomemory-set``.

    Raises ``yaml.YAMLError`` for bad syntax (the caller names the file or the
    setting), and ``ConfigError`` for what the loader refuses or a value a
    constructor cannot build (a timestamp like ``2024-13-45``, bad ``!!binary``).
    """
    try:
        return yaml.load(text, Loader=_ConfigLoader)
    except (ConfigError, yaml.YAMLError):
        raise
    except RecursionError:  # pragma: no cover - the loader's depth limit refuses this first
        raise ConfigError("nested too deeply; simplify the value") from None
    except (ValueError, TypeError, OverflowError) as error:
        raise ConfigError(
            f"a value cannot be read ({type(error).__name__}: {str(error)[:200]}); "
            "quote it to make it a plain string"
        ) from None


def read_yaml_mapping(path: Path, *, empty: str | None = None) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping; every failure names the file.

    An empty file (nothing, or only comments) reads as ``{}`` unless ``empty`` says
    what it should hold: a referenced part that is empty (a truncated copy, a wrong
    file) would otherwise silently run every default, another benchmark included."""
    problem = path_problem(path)
    if problem == "does not exist":
        raise ConfigError(
            f"{path}: file not found; check the path (a relative path is resolved from "
            "the directory pytest runs in, or the referencing file's directory)",
            source=str(path),
        )
    if problem is not None:
        raise ConfigError(f"{path}: {problem}", source=str(path))
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: {size} bytes is too large for a config file (limit 1 MB); "
            "put data in a data file, not in the config",
            source=str(path),
        )
    def refused(message: str) -> ConfigError:
        return ConfigError(message, source=str(path))

    try:
        raw = boundedread.read_bytes(path, limit=MAX_CONFIG_BYTES, what="a config file", error=refused)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found (it was removed while read)", source=str(path)) from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: {not_utf8(raw, error)}", source=str(path)) from None
    try:
        data = parse_yaml(text)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}", source=str(path), key=error.key) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        hint = _TAG_HINT if isinstance(error, yaml.constructor.ConstructorError) else _YAML_HINT
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}; {hint}", source=str(path)) from None
    if data is None and empty is not None:
        raise ConfigError(
            f"{path}: the file is empty; write {empty} in it, or write {{}} to use every default",
            source=str(path),
        )
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of keys to values, got {_yaml_kind(data)}; "
            "write 'key: value' lines at the top level",
            source=str(path),
        )
    return data


def _yaml_kind(value: Any) -> str:
    """What YAML would call ``value`` (a Python type name means nothing to a config author)."""
    kinds = {str: "a string", int: "a number", float: "a number", bool: "true/false", list: "a list"}
    return kinds.get(type(value), type(value).__name__)
