"""Text for the HTML pages: escaping and the formatting of every number they show.

Shared by the report, the per-task drill-down and the chart, so a value reads the
same everywhere (a dash where there is none, 1-based positions, intervals in
percent). Everything from an artefact goes through :func:`_e`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from html import escape
from typing import Any

_NONE = "\u2013"  # en dash: shown where a metric has no value (no tasks, no stimuli)


#: What :func:`_e` escapes (``html.escape`` with ``quote``).
_MARKUP = re.compile("[&<>\"']")


def _e(value: object) -> str:
    """Escape for both element text and quoted attribute values (text that holds
    nothing to escape, most of a page's, is returned as it is: a comparison of 32
    arms escapes some 6,000 values, and ``escape`` makes five passes over each)."""
    text = "" if value is None else str(value)
    return escape(text, quote=True) if _MARKUP.search(text) else text


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _int(value: object) -> str:
    number = _number(value)
    return _NONE if number is None else f"{int(number):,}"


def _percent(value: object) -> str:
    number = _number(value)
    return _NONE if number is None else f"{number:.1%}"


def _decimal(value: object, digits: int = 2) -> str:
    number = _number(value)
    return _NONE if number is None else f"{number:,.{digits}f}"


def _ci(value: object) -> str:
    """``[31.9, 80.7]``: a 95 % interval stored as fractions, shown in percent."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return _NONE
    low, high = _number(value[0]), _number(value[1])
    return _NONE if low is None or high is None else f"[{low * 100:.1f}, {high * 100:.1f}]"


def _position(value: object) -> str:
    """Positions are stored 0-based; people count from 1."""
    number = _number(value)
    return _NONE if number is None else str(int(number) + 1)


def _seconds(value: object) -> str:
    number = _number(value)
    if number is None:
        return _NONE
    return f"{number * 1000:.2f} ms" if number < 1 else f"{number:.2f} s"


def _tokens(metrics: Mapping[str, Any]) -> object:
    total = metrics.get("total_tokens")
    if total is None:
        prompt, completion = _number(metrics.get("prompt_tokens")), _number(metrics.get("completion_tokens"))
        total = None if prompt is None or completion is None else prompt + completion
    return total


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _pre(value: object) -> str:
    return f"<pre>{_e(value)}</pre>" if value not in (None, "") else f"<p>{_NONE}</p>"
