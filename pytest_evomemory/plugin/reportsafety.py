"""What pytest reports for the benchmark's items is redacted and inert, like the run directory.

A task's failure text leaves through pytest (the terminal's failure section and
``FAILED ... -`` line, JUnit XML's ``<failure>``, pytest-json-report's ``longrepr``
and traceback entries, captured output), and its words come from a model server's
error or from the user's code raising with whatever it holds (an API key, an escape
sequence a server sent). So every report of a benchmark item passes
:func:`..util.redaction.shown` (secrets masked in every spelling, control characters
written out) before any reporter or xdist's serialization sees it.

The representation is rewritten in place, whatever its form: a string, a skip's
``(path, line, message)`` tuple, or pytest's representation objects, walked
generically so a field pytest adds later is covered too. ``user_properties`` and
pytest-json-report's capture are redacted but not made inert: XML and JSON escape
them, and they are data.
"""

from __future__ import annotations

from typing import Any

import pytest
from _pytest._code.code import TerminalRepr

from ..util.redaction import redact_strings, shown


def clean_report(report: pytest.TestReport) -> None:
    """Redact and neutralize ``report``'s failure text, sections and properties."""
    seen: set[int] = set()
    report.longrepr = _clean(report.longrepr, seen)
    if report.sections:  # an empty list stays (pytest keeps every report: a new one per report adds up)
        report.sections = [(str(title), shown(str(content))) for title, content in report.sections]
    if report.user_properties:
        report.user_properties = [(name, redact_strings(value)) for name, value in report.user_properties]
    # pytest-json-report's own capture of this phase (stdout, stderr, log records,
    # metadata), attached by its makereport wrapper, which runs inside this one: the
    # dict is the item's, shared by its phases, so it is cleaned in place.
    extra = getattr(report, "_json_report_extra", None)
    if isinstance(extra, dict):
        cleaned = redact_strings(extra)
        extra.clear()
        extra.update(cleaned)


def _clean(value: Any, seen: set[int]) -> Any:
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, TerminalRepr):
        _clean_in_place(value, seen)
        return value
    if isinstance(value, list):
        return [_clean(item, seen) for item in value]
    if isinstance(value, tuple):
        return tuple(_clean(item, seen) for item in value)
    return value


def _clean_in_place(representation: TerminalRepr, seen: set[int]) -> None:
    """Every text field of a pytest representation object, at any depth (an
    exception chain holds the same traceback objects twice: each is cleaned once)."""
    if id(representation) in seen:
        return
    seen.add(id(representation))
    for name, value in list(vars(representation).items()):
        cleaned = _clean(value, seen)
        if cleaned is not value:
            object.__setattr__(representation, name, cleaned)


__all__ = ["clean_report"]
