"""util/jsonindent.py: its indented text is ``json.dumps``'s, byte for byte, for every
document (plain ones written in one pass, the rest left to ``json``, errors included)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evomemory.util.jsonindent import IndentedEncoder
from pytest_evomemory.util.redaction import dumps_redacted

_SCALARS = (
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | st.sampled_from(["", "\u00e9", "\ud800", "\"\\/\n\t", "\U0001f600"])
)
_DOCUMENTS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=6), inner, max_size=5),
    max_leaves=40,
)
_OPTIONS = [
    {"indent": 2}, {"indent": 2, "sort_keys": True}, {"indent": 0}, {"indent": "\t", "sort_keys": True},
    {"indent": 4, "ensure_ascii": False}, {"indent": 2, "allow_nan": True},
]


def _both(document: Any, **options: Any) -> tuple[str, str]:
    return IndentedEncoder(**options).encode(document), json.dumps(document, **options)


@settings(max_examples=300, deadline=None)
@given(_DOCUMENTS, st.sampled_from(_OPTIONS))
def test_plain_documents_are_json_dumps_text(document: Any, options: dict[str, Any]) -> None:
    ours, theirs = _both(document, **options)
    assert ours == theirs


@pytest.mark.parametrize("document", [
    {"a": float("nan")}, [math.inf], {1: "int key"}, {"b": 1, 2: "mixed keys"}, {"x": {1, 2}},
    OrderedDict(b=1, a=2), {"a": True.__class__(1)}, [10**5000],
])
@pytest.mark.parametrize("options", [{"indent": 2, "allow_nan": False}, {"indent": 2, "sort_keys": True, "default": repr}])
def test_other_documents_are_json_s_own_text_or_error(document: Any, options: dict[str, Any]) -> None:
    """A value for ``default``, a key that is no string, NaN, an integer over the digit
    limit: json's text, or json's error (its type and message)."""
    try:
        expected: str | BaseException = json.dumps(document, **options)
    except (TypeError, ValueError) as error:
        expected = error
    if isinstance(expected, str):
        assert IndentedEncoder(**options).encode(document) == expected
    else:
        with pytest.raises(type(expected), match="^" + __import__("re").escape(str(expected)) + "$"):
            IndentedEncoder(**options).encode(document)


def test_a_cycle_is_json_s_error() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference detected"):
        IndentedEncoder(indent=2).encode(cycle)


def test_an_artefact_document_is_written_as_before() -> None:
    """dumps_redacted with a run document's options (summary.json, run.json):
    json.dumps's text for a nested document with every kind of value."""
    document = {"z": [1, 2.5, None, True], "a": {"nested": {"empty": {}, "list": [], "s": "x\u00e9"}}, "n": -0.0}
    options: dict[str, Any] = {"ensure_ascii": True, "indent": 2, "sort_keys": True, "default": str}
    assert dumps_redacted(document, **options) == json.dumps(document, allow_nan=False, **options)
