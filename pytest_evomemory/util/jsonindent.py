"""Indented JSON as ``json`` writes it, without ``json``'s pure-Python encoder.

``json.dumps(..., indent=2)`` does not use the C encoder: an indented document is
made by a chain of Python generators, one resumed per value and per level. The
documents the run writes indented are summary.json and run.json (each arm, at its
start and its end) and compare.json (a comparison of 32 arms: 300 KB, some 13 ms
of a session's end). :class:`IndentedEncoder` writes the same text by one
recursive function that appends each value's text, with the C helpers for strings
(``encode_basestring_ascii``) and ``float.__repr__`` / ``int.__repr__`` for
numbers, as ``json`` does: several times faster on plain JSON.

It is ``json.JSONEncoder`` in every respect: only plain values are written here
(``dict`` with ``str`` keys, ``list``, ``tuple``, ``str``, ``int``, ``float``,
``bool``, ``None``, each of exactly that type, and finite floats when NaN is not
allowed); a document holding anything else (a value for ``default``, a subclass,
a key that is no string, a non-finite float, a cycle) is encoded by
``json.JSONEncoder.encode`` itself, with its results and its errors.
``tests/test_jsonindent.py`` checks the text is ``json.dumps``'s.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any


class _NotPlain(Exception):
    """A value this module leaves to ``json`` (see the module docstring)."""


class IndentedEncoder(json.JSONEncoder):
    """``json.JSONEncoder`` whose indented output of plain JSON is made in one pass."""

    def encode(self, o: Any) -> str:
        indent = self.indent
        if indent is None or self.item_separator != "," or self.key_separator != ": ":
            return super().encode(o)
        pad = " " * indent if isinstance(indent, int) else str(indent)
        try:
            return _indented(o, pad, self.sort_keys, self.ensure_ascii, self.allow_nan)
        except (_NotPlain, RecursionError, TypeError, ValueError):
            return super().encode(o)  # json's own text, or its own error


def _indented(document: Any, pad: str, sort_keys: bool, ascii_only: bool, allow_nan: bool) -> str:
    parts: list[str] = []
    append = parts.append
    string = encode_basestring_ascii if ascii_only else encode_basestring
    float_text = float.__repr__
    int_text = int.__repr__
    finite = math.isfinite
    constants = {None: "null", True: "true", False: "false"}

    def scalar(item: Any) -> str | None:
        """The text of a value that is no container (None: a container)."""
        kind = type(item)
        if kind is str:
            return string(item)
        if kind is float:
            if finite(item):
                return float_text(item)
            if not allow_nan:
                raise _NotPlain
            return "NaN" if item != item else "Infinity" if item > 0 else "-Infinity"
        if kind is int:
            return int_text(item)
        if item is None or kind is bool:
            return constants[item]
        if kind is dict or kind is list or kind is tuple:
            return None
        raise _NotPlain

    def value(item: Any, newline: str) -> None:
        kind = type(item)
        if kind is dict:
            mapping(item, newline)
        elif kind is list or kind is tuple:
            sequence(item, newline)
        else:
            text = scalar(item)
            if text is None:  # a container: not here, they went above
                raise _NotPlain
            append(text)

    def mapping(item: dict[Any, Any], newline: str) -> None:
        if not item:
            append("{}")
            return
        inner = newline + pad
        opening = "{" + inner
        for key, entry in (sorted(item.items()) if sort_keys else item.items()):
            if type(key) is not str:
                raise _NotPlain
            text = scalar(entry)
            if text is None:
                append(opening + string(key) + ": ")
                value(entry, inner)
            else:
                append(opening + string(key) + ": " + text)
            opening = "," + inner
        append(newline + "}")

    def sequence(item: list[Any] | tuple[Any, ...], newline: str) -> None:
        if not item:
            append("[]")
            return
        inner = newline + pad
        opening = "[" + inner
        for entry in item:
            text = scalar(entry)
            if text is None:
                append(opening)
                value(entry, inner)
            else:
                append(opening + text)
            opening = "," + inner
        append(newline + "]")

    value(document, "\n")
    return "".join(parts)


__all__ = ["IndentedEncoder"]
