"""What every config model shares: strictness, the text and path types, and how a
validation error reads.

Every problem is reported as a :class:`~pytest_evomemory.core.errors.ConfigError` naming
the file and the key path, so a run is refused before a single task executes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from ..core.errors import ConfigError
from ..util.text import did_you_mean


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty; write a value, or remove the key to use the default")
    return value


#: A name, path or URL: an empty one is never meant (``model: ""`` would be sent to
#: the server on every task, ``cache_dir: ""`` would cache into the working directory).
Text = Annotated[str, AfterValidator(_not_blank)]


class _ConfigPath:
    """Marks a config field whose value is a filesystem path: the loader makes it
    absolute, by one rule for every such key (:mod:`.paths`)."""

    def __repr__(self) -> str:
        return "CONFIG_PATH"


CONFIG_PATH = _ConfigPath()
#: A path: relative to the config file that writes it, or to the working directory
#: when the command line gives it (:mod:`.paths`); absolute once loaded.
PathText = Annotated[str, AfterValidator(_not_blank), CONFIG_PATH]


class StrictModel(BaseModel):
    """Unknown keys are errors, and no value is coerced: ``limit: true`` is not 1,
    ``limit: "5"`` is not 5 and ``temperature: yes`` is not 1.0 (pydantic's lax mode
    would take all three). An integer is still accepted where a number is wanted;
    ``.nan`` and ``.inf`` are not numbers any setting can use. Validators are built
    on first use (``defer_build``): a run reads the sections it has, not all of them,
    and building every one at import was start-up time before the first model call."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=False, strict=True, allow_inf_nan=False, defer_build=True
    )


_Model = TypeVar("_Model", bound=BaseModel)


def validate_mapping(model: type[_Model], data: Mapping[str, Any], source: str) -> _Model:
    """Validate ``data`` against ``model``; errors name ``source`` and each key path."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = error.errors()
        key = _location(problems[0]["loc"]) if problems else None
        raise ConfigError(format_validation_error(error, source, model), source=source, key=key or None) from None


def _keys_at(model: type[BaseModel] | None, location: Sequence[Any]) -> list[str]:
    """The keys the config model accepts at ``location`` (its parent's fields), or []:
    through nested models and the entries of a list of them (``files.0``)."""
    for part in location:
        if model is None:
            return []
        if isinstance(part, int):
            continue  # an entry of the list the previous key holds: its model is already chosen
        field = model.model_fields.get(str(part))
        nested = [] if field is None else _models_in(field.annotation)
        model = nested[0] if nested else None
    return list(model.model_fields) if model is not None else []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds, however nested (``list[StreamFile] | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in get_args(annotation) for model in _models_in(argument)]


def _location(parts: Sequence[Any]) -> str:
    """A dotted key path without the union branches pydantic adds (``agent.str``)."""
    return ".".join(str(part) for part in parts if not _UNION_BRANCH.match(str(part)))


_NUMBER_HINT = "write a whole number, e.g. 5"
_RANGE_HINT = "write a value within that range"
_MAPPING_HINT = "write a mapping of 'key: value' entries"
#: What to do, by pydantic error type: every refusal says how to fix it.
_HINTS = {
    "int_type": _NUMBER_HINT, "int_parsing": _NUMBER_HINT, "int_from_float": _NUMBER_HINT,
    "float_type": "write a number, e.g. 0.5", "float_parsing": "write a number, e.g. 0.5",
    "finite_number": "write a finite number (.nan and .inf are no setting's value)",
    "string_type": "write text (quote it if YAML would read a number, date or true/false)",
    "bool_type": "write true or false", "bool_parsing": "write true or false",
    "dict_type": _MAPPING_HINT, "model_type": _MAPPING_HINT, "model_attributes_type": _MAPPING_HINT,
    "list_type": "write a list, e.g. [a, b]",
    "literal_error": "use one of those values",
    "greater_than": _RANGE_HINT, "greater_than_equal": _RANGE_HINT,
    "less_than": _RANGE_HINT, "less_than_equal": _RANGE_HINT,
    "string_pattern_mismatch": "use only the characters the pattern allows",
    "string_too_long": "shorten it", "string_too_short": "lengthen it",
    "too_long": "shorten it", "too_short": "add entries",
}
_UNION_PREFIX = "\0union:"
#: Union branches pydantic adds to a location (``benchmark.str``): not keys.
_UNION_BRANCH = re.compile(r"^(str|int|float|bool|none|(list|dict|function-\w+|literal)\[.*\])$")


def format_validation_error(error: ValidationError, source: str, model: type[BaseModel] | None = None) -> str:
    """One line: the source, then each bad key, what is wrong with it and what to
    write instead (a key that may take several shapes is named once; for an unknown
    key, the keys allowed there: a user with only the wheel has no docs/)."""
    by_location: dict[str, list[str]] = {}
    listed: set[str] = set()
    problems = error.errors()
    for problem in problems[:_MAX_PROBLEMS_SHOWN]:
        parts = [str(part) for part in problem["loc"]]
        union = bool(parts) and _UNION_BRANCH.match(parts[-1]) is not None
        bad_key = parts[-1:] == ["[key]"] or problem["msg"] == "Keys should be strings"
        if bad_key:
            parts = parts[:-2] if parts[-1:] == ["[key]"] else parts[:-1]  # name the mapping, not the bad key
        location = _location(parts) or "(top level)"
        kind = problem["type"]
        message = problem["msg"]
        if bad_key:
            message = (
                f"the key {problem.get('input')!r} is not text (YAML reads yes/no/on/off as true/false, "
                "~ as null and digits as a number); quote it"
            )
        elif kind == "extra_forbidden":
            allowed = _keys_at(model, problem["loc"][:-1])
            parent = _location(parts[:-1])
            message = "unknown key" + did_you_mean(parts[-1], allowed)
            if parent not in listed:  # the keys of a mapping are listed once, at its first unknown key
                listed.add(parent)
                message += "; " + (
                    f"the keys here are: {', '.join(allowed)}" if allowed
                    else "check the spelling against docs/configuration.md"
                )
        elif kind == "missing":
            message = "required key is missing; add it (see docs/configuration.md)"
        elif kind == "value_error":
            message = message.removeprefix("Value error, ")
        elif kind == "literal_error" and not union:
            choices = re.findall(r"'([^']*)'", str((problem.get("ctx") or {}).get("expected", "")))
            message = f"{message}; {_HINTS[kind]}{did_you_mean(problem.get('input'), choices)}"
        elif union:
            message = _UNION_PREFIX + message.removeprefix("Input should be ")
        else:
            message = re.sub(r" or instance of \w+$", "", message)
            if kind in ("int_type", "float_type") and isinstance(problem.get("input"), bool):
                message = f"{message} (true/false is not a number here; write the number)"
            elif kind in _HINTS:
                message = f"{message}; {_HINTS[kind]}"
            elif ";" not in message:
                message = f"{message}; see docs/configuration.md for this key"
        by_location.setdefault(location, []).append(message)
    lines: list[str] = []
    for location, messages in by_location.items():
        shapes = [m.removeprefix(_UNION_PREFIX) for m in messages if m.startswith(_UNION_PREFIX)]
        if shapes and (len(shapes) < len(messages) or any(other.startswith(f"{location}.") for other in by_location)):
            shapes = []  # a shape matched and failed deeper down: that error is the one to fix
            messages = [m for m in messages if not m.startswith(_UNION_PREFIX)]
        if shapes:
            hint = (
                "name a config file or write an inline mapping"
                if shapes == ["a valid string", "a valid dictionary"] else "see docs/configuration.md for this key"
            )
            messages = [m for m in messages if not m.startswith(_UNION_PREFIX)]
            messages.append(f"expected {' or '.join(shapes)}; {hint}")
        lines.extend(
            message if location == "(top level)" and message.startswith("key '") else f"key '{location}': {message}"
            for message in messages
        )
    if len(problems) > _MAX_PROBLEMS_SHOWN:
        lines.append(f"and {len(problems) - _MAX_PROBLEMS_SHOWN:,} more problem(s): fix these first")
    return f"{source}: " + "; ".join(lines)


#: A config with 30,000 unknown keys gets a readable line, not a 2 MB one.
_MAX_PROBLEMS_SHOWN = 10
