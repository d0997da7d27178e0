"""The field types of the run documents: what each value may be, said once.

Each type checks a value without converting it (an ``int`` stays an ``int``, a
``float`` a ``float``), so a document read and written again is the same bytes,
and names what it expects in words (``a whole number of at least 0``): a damaged
file is refused in one line naming the key and that expectation
(:func:`.base.problem_line`). The JSON Schema of each type is given beside it, so
the shipped schema is generated from the same declaration.

Larger counts than :data:`MAX_COUNT` are no benchmark's (and would overflow the
statistics' floats).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

#: Larger counts are no benchmark's (and would overflow the statistics' floats).
MAX_COUNT = 10**15

#: The error type of every check below (what :func:`.base.problem_line` words).
CHECK = "evomemory"


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _within(value: object, low: float, high: float) -> bool:
    """A number from ``low`` to ``high``, compared exactly (an integer of 400 digits
    is not converted to a float; NaN is never within)."""
    return _number(value) and low <= value <= high  # type: ignore[operator]


def checked(expected: str, test: Callable[[object], bool]) -> PlainValidator:
    """A validator that passes a value through unchanged when ``test`` holds, else
    refuses it as not ``expected``."""

    def validate(value: object) -> object:
        if not test(value):
            raise PydanticCustomError(CHECK, expected)
        return value

    return PlainValidator(validate)


def _interval(value: object) -> object:
    if not isinstance(value, list) or len(value) != 2 or not all(_within(bound, 0.0, 1.0) for bound in value):
        raise PydanticCustomError(CHECK, "a list of two numbers from 0 to 1 (low, high)")
    if value[0] > value[1]:
        raise PydanticCustomError(CHECK, "a low bound not above the high bound")
    return value


def _scalar(value: object) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return value is None or isinstance(value, str | int | float | bool)


_FRACTION_SCHEMA = {"type": "number", "minimum": 0, "maximum": 1}

Count = Annotated[
    int,
    checked("a whole number of at least 0",
            lambda v: not isinstance(v, bool) and isinstance(v, int) and 0 <= v <= MAX_COUNT),
    WithJsonSchema({"type": "integer", "minimum": 0}),
]
#: A whole number of at least 1 (a 1-based position).
Ordinal = Annotated[
    int,
    checked("a whole number of at least 1",
            lambda v: not isinstance(v, bool) and isinstance(v, int) and 1 <= v <= MAX_COUNT),
    WithJsonSchema({"type": "integer", "minimum": 1}),
]
#: A difference of two shares (this run's minus the baseline's), from -1 to 1.
Difference = Annotated[float, checked("a number from -1 to 1", lambda v: _within(v, -1.0, 1.0)),
                       WithJsonSchema({"type": "number", "minimum": -1, "maximum": 1})]
Fraction = Annotated[float, checked("a number from 0 to 1", lambda v: _within(v, 0.0, 1.0)),
                     WithJsonSchema(_FRACTION_SCHEMA)]
Seconds = Annotated[float, checked("a finite number of seconds, at least 0", lambda v: _within(v, 0.0, MAX_COUNT)),
                    WithJsonSchema({"type": "number", "minimum": 0})]
Amount = Annotated[float, checked("a finite number of at least 0", lambda v: _within(v, 0.0, MAX_COUNT)),
                   WithJsonSchema({"type": "number", "minimum": 0})]
Number = Annotated[float, checked("a finite number", lambda v: _number(v) and math.isfinite(float(v))),
                   WithJsonSchema({"type": "number"})]
Text = Annotated[str, checked("text", lambda v: isinstance(v, str)), WithJsonSchema({"type": "string"})]
Flag = Annotated[bool, checked("true or false", lambda v: isinstance(v, bool)), WithJsonSchema({"type": "boolean"})]
#: Text, a number, true/false or null (shown as text).
Scalar = Annotated[Any, checked("text, a number, true/false or null", _scalar),
                   WithJsonSchema({"type": ["string", "number", "boolean", "null"]})]
#: A 95 % interval ``[low, high]`` of a share.
Interval = Annotated[list[float], PlainValidator(_interval),
                     WithJsonSchema({"type": "array", "items": _FRACTION_SCHEMA, "minItems": 2, "maxItems": 2})]
#: A SHA-256 in hex.
Sha256 = Annotated[str, checked("a SHA-256 in hex", lambda v: isinstance(v, str)),
                   WithJsonSchema({"type": "string", "pattern": "^[0-9a-f]{64}$"})]


__all__ = ["CHECK", "MAX_COUNT", "Amount", "Count", "Difference", "Flag", "Fraction", "Interval", "Number", "Ordinal",
           "Scalar", "Seconds", "Sha256", "Text", "checked"]
