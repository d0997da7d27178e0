"""Every field the reports read from a run directory, checked for type and range.

``evomemory report`` and ``evomemory compare`` read artefacts long after a run,
possibly copied between machines, edited by hand, or damaged: ``streams.<s>`` a
string, ``tasks: -1e308``, a count of 10**400, an interval with one bound. The
renderers and the statistics assume the shapes the writer writes; so, before
either sees a run, :func:`check_run_data` checks each field they read and turns
the first one that is wrong into one line naming the file, the key and what to
do (exit 2 from the commands), instead of an ``AttributeError`` or
``ValueError`` traceback, or a page built on a negative count.

A field that is missing is not an error (the page shows a dash, as for a run
that never had it); keys the reports do not read are not looked at, so a newer
writer's additions pass. The specs below are the one description of what the
reports read; tests/bad_input/test_damaged_artefacts.py mutates each of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..rundir import DAMAGED_ADVICE
from ..text import inert, shorten

#: Larger counts are no benchmark's (and would overflow the statistics' floats).
MAX_COUNT = 10**15

#: What to do about a damaged file: the run directory's readers say the same.
ADVICE = DAMAGED_ADVICE


class Problem(Exception):
    """A field that is not what the reports read."""

    def __init__(self, key: str, expected: str, value: object) -> None:
        super().__init__(key)
        self.key, self.expected, self.value = key, expected, value


Check = Callable[[object, str], None]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def count(value: object, key: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise Problem(key, "a whole number of at least 0", value)


def _within(value: object, low: float, high: float) -> bool:
    """A number from ``low`` to ``high`` (compared exactly: no float conversion, which
    an integer of 400 digits would overflow; NaN is never within)."""
    return _number(value) and low <= value <= high  # type: ignore[operator]


def fraction(value: object, key: str) -> None:
    if not _within(value, 0.0, 1.0):
        raise Problem(key, "a number from 0 to 1", value)


def seconds(value: object, key: str) -> None:
    if not _within(value, 0.0, MAX_COUNT):
        raise Problem(key, "a finite number of seconds, at least 0", value)


def amount(value: object, key: str) -> None:
    if not _within(value, 0.0, MAX_COUNT):
        raise Problem(key, "a finite number of at least 0", value)


def text(value: object, key: str) -> None:
    if not isinstance(value, str):
        raise Problem(key, "text", value)


def flag(value: object, key: str) -> None:
    if not isinstance(value, bool):
        raise Problem(key, "true or false", value)


def scalar(value: object, key: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise Problem(key, "a finite number", value)
    if value is not None and not isinstance(value, str | int | float | bool):
        raise Problem(key, "text, a number, true/false or null", value)


def anything(value: object, key: str) -> None:
    """Read only as text (``str`` of it), so any JSON value renders."""


def optional(check: Check) -> Check:
    def checked(value: object, key: str) -> None:
        if value is not None:
            check(value, key)

    return checked


def interval(value: object, key: str) -> None:
    if not isinstance(value, list) or len(value) != 2:
        raise Problem(key, "a list of two numbers from 0 to 1 (low, high)", value)
    fraction(value[0], f"{key}[0]")
    fraction(value[1], f"{key}[1]")
    if value[0] > value[1]:
        raise Problem(key, "a low bound not above the high bound", value)


def list_of(check: Check) -> Check:
    def checked(value: object, key: str) -> None:
        if not isinstance(value, list):
            raise Problem(key, "a list", value)
        for index, item in enumerate(value):
            check(item, f"{key}[{index}]")

    return checked


def mapping_of(check: Check) -> Check:
    def checked(value: object, key: str) -> None:
        if not isinstance(value, Mapping):
            raise Problem(key, "an object", value)
        for name, item in value.items():
            check(item, f"{key}.{name}" if key else str(name))

    return checked


def fields(spec: Mapping[str, Check], *, at_most: Sequence[tuple[str, str]] = ()) -> Check:
    """An object whose listed keys, where present, pass their checks; ``at_most``
    pairs ``(part, whole)`` (``correct`` at most ``tasks``)."""

    def checked(value: object, key: str) -> None:
        if not isinstance(value, Mapping):
            raise Problem(key, "an object", value)
        for name, check in spec.items():
            if name in value:
                check(value[name], f"{key}.{name}" if key else name)
        for part, whole in at_most:
            if _number(value.get(part)) and _number(value.get(whole)) and value[part] > value[whole]:
                where = f"{key}.{part}" if key else part
                raise Problem(where, f"at most {whole} ({value[whole]})", value[part])

    return checked


# --------------------------------------------------------------------------- what the reports read

_GROUP = fields(
    {"tasks": count, "correct": count, "accuracy": optional(fraction), "accuracy_ci": optional(interval)},
    at_most=[("correct", "tasks")],
)

def _figures(value: object, key: str) -> None:
    """Each figure a stream carries beyond accuracy (``figures``: name -> label, see
    :func:`.columns.figures_of`; a summary from before figures carries ``api_matches``
    alone): ``<name>_matches`` at most ``tasks``, ``<name>_accuracy`` and its interval;
    a mean figure (LoCoMo's F1) ``<name>_sum`` and ``<name>_mean`` instead."""
    if not isinstance(value, Mapping):
        return  # the metrics' own check says so
    declared = value.get("figures")
    names = [str(name) for name in declared] if isinstance(declared, Mapping) else []
    if not names and "api_matches" in value:
        names = ["api"]
    for name in names:
        fields(
            {
                f"{name}_matches": optional(count),
                f"{name}_accuracy": optional(fraction),
                f"{name}_accuracy_ci": optional(interval),
                f"{name}_sum": optional(amount),
                f"{name}_mean": optional(fraction),
            },
            at_most=[(f"{name}_matches", "tasks")],
        )(value, key)


def every(*checks: Check) -> Check:
    def checked(value: object, key: str) -> None:
        for check in checks:
            check(value, key)

    return checked


METRICS = every(fields(
    {
        "stream": text,
        "tasks": count, "correct": count, "errors": count,
        "accuracy": optional(fraction), "accuracy_ci": optional(interval),
        "figures": mapping_of(text),
        "groups": mapping_of(_GROUP),
        "stimuli": count, "feedback_turns": count, "agent_turns": count, "tool_calls": count,
        "memory_retains": count, "memory_recalls": count, "protocol_violations": count, "cached_responses": count,
        "prompt_tokens": count, "completion_tokens": count, "total_tokens": count,
        "seconds": seconds,
        "cost_usd": optional(amount),
        "per_stimulus": fields({"tokens": optional(amount), "agent_turns": optional(amount), "seconds": optional(seconds)}),
        "learning_curve": list_of(fraction),
    },
    at_most=[("correct", "tasks"), ("errors", "tasks")],
), _figures)

_COMPONENT = optional(fields({"class": scalar, "factory": scalar}))
#: A row of summary.json's ``categories`` (LoCoMo's mean F1 per category).
_CATEGORY_ROW = fields({
    "category": text, "tasks": count, "mean": optional(fraction), "ci_low": optional(fraction), "ci_high": optional(fraction),
    "correct": count, "accuracy": optional(fraction), "evidence_recall": optional(fraction),
    "evidence_questions": count,
})
def _model_value(value: object, key: str) -> None:
    """A model's settings are scalars; ``reported`` lists the names the server gave,
    ``pricing`` holds the prices (the reports show them as text)."""
    if isinstance(value, list):
        list_of(text)(value, key)
    elif isinstance(value, Mapping):
        mapping_of(scalar)(value, key)
    else:
        scalar(value, key)


_MODEL = optional(mapping_of(_model_value))

SUMMARY = fields(
    {
        "schema_version": count,
        "run": optional(scalar),
        "started": optional(text), "finished": optional(text),
        "streams": mapping_of(METRICS),
        "overall": METRICS,
        "passed": flag, "thresholds_met": flag,
        "thresholds": list_of(fields({
            "scope": text, "label": optional(text), "minimum": fraction, "value": optional(fraction),
            "accuracy": optional(fraction), "met": flag,
        })),
        "categories": optional(fields({
            "label": optional(text), "by_category": list_of(_CATEGORY_ROW), "overall": _CATEGORY_ROW,
        })),
        "failed_episodes": list_of(fields({
            "stream": text, "task_id": optional(scalar), "position": optional(count), "phase": text,
            "reason": anything, "traceback": optional(text),
        })),
        "ran": mapping_of(fields({"agent": _COMPONENT, "memory": _COMPONENT, "model": _MODEL})),
    }
)

RUN_DOCUMENT = fields(
    {
        "run": fields({
            "name": scalar,
            "agent": fields({"kind": scalar, "memory_strategy": scalar, "model": _MODEL}),
            "memory": fields({"backend": scalar}),
        }),
        "streams": list_of(fields({"name": text})),
    }
)

SCORE = fields(
    {
        "stream": text, "task_id": text, "position": count, "correct": flag, "error": optional(anything),
        "raw_answer": optional(anything), "details": mapping_of(anything), "group": optional(scalar),
        "recall_similarity": optional(fraction), "match_mode": optional(text), "value": optional(fraction),
    }
)

_USAGE = fields({"prompt_tokens": count, "completion_tokens": count, "total_tokens": count})

#: A tool call as a response records it: its name is looked up, the rest shown as text.
_TOOL_CALL = fields({"name": scalar})

RESPONSE = fields(
    {
        "stream": text, "task_id": text, "kind": text, "usage": _USAGE, "seconds": seconds, "agent_turns": count,
        "tool_calls": list_of(_TOOL_CALL), "memory_recalls": count, "memory_retains": count,
        "memory_recalled": list_of(anything), "memory_writes": list_of(fields({"tool": scalar})), "cached": flag,
    }
)

TRANSCRIPT = fields(
    {"task_id": text, "kind": text, "messages": list_of(mapping_of(anything)), "tool_calls": list_of(_TOOL_CALL)}
)


def damaged(path: Path, document: object, spec: Check, record: int | None = None) -> str | None:
    """The one-line error for the first field of ``document`` that is not what the
    reports read, else None. ``record``: the 1-based number of a JSONL record."""
    try:
        spec(document, "")
    except Problem as problem:
        where = f"{path}" + (f", record {record}" if record is not None else "")
        got = inert(shorten(repr(problem.value), 60), one_line=True)
        return f"{where}: key {problem.key!r}: expected {problem.expected}, got {got}; {ADVICE}"
    return None


def damaged_record(path: Path, records: Sequence[Mapping[str, Any]], spec: Check) -> str | None:
    """:func:`damaged` for the records of a JSONL file, the first bad one."""
    for number, record in enumerate(records, 1):
        message = damaged(path, record, spec, number)
        if message is not None:
            return message
    return None


__all__ = [
    "ADVICE", "MAX_COUNT", "METRICS", "RESPONSE", "RUN_DOCUMENT", "SCORE", "SUMMARY", "TRANSCRIPT",
    "damaged", "damaged_record",
]
