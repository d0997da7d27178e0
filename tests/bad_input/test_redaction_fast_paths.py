"""The fast paths of redaction give exactly what the plain rules give.

Two shortcuts keep redaction off the per-task profile: a string's pattern rules run
only where their literal occurs (matched on the lower-cased text when it is ASCII),
and a whole record whose JSON text provably holds nothing to redact is written
without walking it. Each is checked here against a reference that has neither: the
string rules of the previous release, every pattern applied to every string, and
``json.dumps`` of the walked record.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evomemory.util import redaction
from pytest_evomemory.util.redaction import (
    _BEARER,
    _KEY_SHAPED,
    _NAMED_VALUE,
    _QUERY_SECRET,
    _URL_CREDENTIALS,
    MASK,
    MIN_SECRET_LENGTH,
    RedactedDumps,
    _mask_cut_secret,
    _mask_front_half,
    _mask_value,
    _redact_walk,
    _secret_values,
    dumps_redacted,
    redact,
    register_secret,
)
from pytest_evomemory.util.spellings import spellings_of

SECRET = "Zq7-fastpath-Secret-91"
LINE = {"ensure_ascii": True, "sort_keys": True, "default": str}  # rundir.dumps
DOCUMENT = {**LINE, "indent": 2}  # rundir's JSON documents


@pytest.fixture(autouse=True, scope="module")
def registered() -> None:
    register_secret(SECRET)


def reference_redact(text: str) -> str:
    """The string rules with no shortcut: every known value, every spelling of them
    (searched whether or not the text holds an escape), then every pattern."""
    if len(text) < MIN_SECRET_LENGTH:
        return text
    values = _secret_values(())
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
        text = _mask_front_half(text, value)
        text = _mask_cut_secret(text, value)
    text = spellings_of(values).masked_without_shortcuts(text, MASK)
    text = _NAMED_VALUE.sub(_mask_value, text)
    text = _BEARER.sub(lambda match: f"{match.group('scheme')} {MASK}", text)
    text = _KEY_SHAPED.sub(MASK, text)
    text = _URL_CREDENTIALS.sub(lambda match: f"{match.group('scheme')}{MASK}@", text)
    return _QUERY_SECRET.sub(lambda match: f"{match.group('name')}{MASK}", text)


def reference_dumps(record: Any, **options: Any) -> str:
    return json.dumps(_redact_walk(record, _secret_values(())), **options)


# Fragments that make the rules fire, fold into them under (?i), or stress the JSON
# text: pattern literals in both cases, the long s / dotless i / Kelvin sign that
# (?i) folds into s, i and k, escapes, quotes, colons, non-ASCII, the secret's parts.
FRAGMENTS = [
    "Bearer ", "BASIC ", "basic", "ba\u017fic ", "ap\u0131_key=", "ApI-KeY: ", "x-api-key", "token", "TOKEN=",
    "access_token", "Authorization: ", "authorization", "sk-", "sk-proj-AbCdEfGh123456", "SK-abcdefgh12",
    "https://", "://", "user:pw@", "@host", "abc123XYZ=", "\u212a", "\\", '"', "\\u0061", "\n", "\t", "\x00",
    "\ud800", "é", "東京", ": ", ",", "}", "{", " ", "0123456789", "=", SECRET, SECRET[:8], SECRET[:-3],
    SECRET.lower(), "Zq7-fa", "\u2028",
    # the secret's other spellings, whole and in part: percent-encoded, escaped, base64, hex
    urllib.parse.quote(SECRET, safe=""), SECRET.replace("-", "%2d"), SECRET.replace("-", "%252D"),
    SECRET.replace("q", "\\u0071"), SECRET.replace("-", "&#45;"), SECRET.replace("-", "&#x2D"), "%", "&#", "&am",
    base64.b64encode(SECRET.encode()).decode(), base64.b64encode(b"u:" + SECRET.encode()).decode()[:-3],
    SECRET.encode().hex(), "\\x5a", "\\/",
    # query parameters named like a secret, and the characters that start one
    SECRET[:11] + "****" + SECRET[-4:], SECRET[:12], "?", "&", ";", "key=", "?KEY=", "&sig=", "x-amz-signature=", "client_secret=", "pwd=", "ke\u212ay=", "tok@",
]
texts = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=8).map("".join)
keys = st.sampled_from(["content", "api_key", "token", "prompt_tokens", "Bearer x", "sk-abcdefgh12", "a:b", "k"]) | texts
records = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


#: Each rule fired alone (so a shortcut that skips it shows), in ASCII and in the
#: characters (?i) folds into ASCII letters.
RULE_CASES = [
    "ApI-KeY: abc123XYZ=", "x-api-key=abcdef1", "OPENAI_API_KEY=zzz999", "ap\u0131_key=abcdef1", "ap\u0131-key: K12345",
    "Access_Token: abcdef1", "proxy-authorization: Basic dXNlcjpwYXNz", "<td>api-key</td><td>abcdef1</td>",
    "say Bearer abc123XYZ= now", "BASIC dXNlcjpwYXNz1", "ba\u017fic dXNlcjpwYXNz1", "bearer \u017fk-abcdefgh12",
    "leaked sk-proj-AbCdEfGh12345678", "SK-abcdefgh12 stays", "at http://alice:s3cret@proxy:3128",
    "HTTPS://bob:pw@host", "\u017fsh://u:p@h", f"cut off {SECRET[:-4]}", f"whole {SECRET} key", "a basic question",
    "the api key is required", "token 12345678", r"\u0061pi_key=abcdef1", "\u212a-api-key=abcdef1", "to\u212aen=abcdef1",
    f"quoted {urllib.parse.quote(SECRET, safe='')} here", f"basic {base64.b64encode(b'me:' + SECRET.encode()).decode()}",
    f"hex {SECRET.encode().hex().upper()}", "".join(f"&#{ord(c)};" for c in SECRET), "50% & \\frac{1}{2}",
    "http://h/v1?key=abc123&x=1", "GET /v1?access_token=abc123 HTTP/1.1", "u?X-Amz-Signature=ab12&X-Amz-Date=1",
    "at https://ghp_token123@github.com/x", "k?ke\u212ay=abc1234", "the key=value pair", "?monkey=banana",
]


@pytest.mark.parametrize("text", RULE_CASES)
def test_each_rule_fires_as_without_the_shortcuts(text: str) -> None:
    assert redact(text) == reference_redact(text)
    record = {"value": text, "list": [text]}
    for options in (LINE, DOCUMENT):
        assert dumps_redacted(record, **options) == reference_dumps(record, **options)


@settings(max_examples=1000, deadline=None)
@given(texts)
def test_string_rules_equal_the_unshortened_rules(text: str) -> None:
    assert redact(text) == reference_redact(text)


@settings(max_examples=400, deadline=None)
@given(records)
def test_a_record_is_written_exactly_as_the_walk_writes_it(record: Any) -> None:
    for options in (LINE, DOCUMENT):
        assert dumps_redacted(record, **options) == reference_dumps(record, **options)
    # the run directory's writer encodes its lines with the options given once
    assert RedactedDumps(**LINE)(record) == reference_dumps(record, **LINE)


#: Literals that stand where their rule may or may not match, and what the rule
#: needs beyond them (an @, eight key characters, a header name's rest).
INERT_FRAGMENTS = [
    "api", "API", "capital", "apikey", "api-key", "api_key", "ApI_KeY: ", "=", ": ", "abcdef12", "authori",
    "authority", "authorization", "AUTHORIZATION", "sk-", "sk-abcdefg", "sk-abcdefgh", "sk-ab\\cdefgh12", "desk-",
    "://", "http://", "host/path", "u:p@", "@", "user", ":", "/", " ", "\n", '"', "\\", "Bearer ", "token",
]
inert_texts = st.lists(st.sampled_from(INERT_FRAGMENTS), max_size=10).map("".join)
inert_records = st.recursive(
    st.none() | st.integers() | inert_texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys | inert_texts, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=600, deadline=None)
@given(inert_records)
def test_a_literal_taken_as_inert_changes_nothing_the_walk_would(record: Any) -> None:
    """A record whose literals stand where their rule cannot match is written
    without the walk: exactly as the walk writes it."""
    for options in (LINE, DOCUMENT):
        assert dumps_redacted(record, **options) == reference_dumps(record, **options)


@pytest.mark.parametrize(
    ("record", "clean"),
    [
        ({"usage": {"prompt_tokens": 3, "completion_tokens": 4}, "content": "Task 1: repeat"}, True),
        ({"content": "use this token please"}, False),  # a literal in a value
        ({"content": "a basic question"}, False),
        ({"content": f"key {SECRET[:MIN_SECRET_LENGTH]}"}, False),  # the start of a secret
        ({"content": "caf\u00e9"}, False),  # non-ASCII: (?i) folding is not lower-casing
        ({"content": ["x", {"nested": "plain words"}]}, True),
        # a literal where its rule cannot match (what the rule needs beyond it is not there)
        ({"content": "the capital of France; rapid growth; an authority"}, True),
        ({"base_url": "http://127.0.0.1:8080/v1", "content": "risk-free, desk-top"}, True),
        ({"base_url": "http://user:pw@127.0.0.1:8080/v1"}, False),
        ({"content": "set the APIKEY here"}, False),
        ({"content": "Authorization header"}, False),
        ({"content": "a desk-organizer"}, False),  # eight key characters after sk-
    ],
)
def test_only_records_that_may_hold_something_are_walked(
    record: dict[str, Any], clean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[Any] = []
    original = redaction._redact_walk

    def spy(value: Any, values: tuple[str, ...]) -> Any:
        walked.append(value)
        return original(value, values)

    monkeypatch.setattr(redaction, "_redact_walk", spy)
    text = dumps_redacted(record, **LINE)
    assert (not walked) is clean
    assert text == reference_dumps(record, **LINE)
    if clean:
        assert text == json.dumps(record, **LINE)


def test_what_default_makes_of_a_value_is_redacted_too() -> None:
    """``default=str`` turns an object JSON cannot encode into text of the artefact;
    that text is redacted like every string value (the encoder had to call
    ``default``, so the record goes through the walk)."""

    class Opaque:
        def __str__(self) -> str:
            return f"Bearer {SECRET}"

    record = {"object": Opaque(), "tuple": ("a", 1), "ok": "fine"}
    text = dumps_redacted(record, **LINE)
    assert SECRET not in text
    assert json.loads(text) == {"object": f"Bearer {MASK}", "tuple": ["a", 1], "ok": "fine"}
    with pytest.raises(TypeError):
        dumps_redacted({"object": Opaque()}, ensure_ascii=True)  # no default: as json.dumps


def test_a_secret_set_in_the_environment_is_seen_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    record = {"content": "the password is pg-Secret-4711 here"}
    assert "pg-Secret-4711" in dumps_redacted(record, **LINE)  # caches the secret list
    monkeypatch.setenv("PGPASSWORD", "pg-Secret-4711")
    assert "pg-Secret-4711" not in dumps_redacted(record, **LINE)
    assert "pg-Secret-4711" not in redact("pg-Secret-4711")
    monkeypatch.setenv("PGPASSWORD", "pg-Other-0815")  # a new value, read from the same variable
    assert "pg-Other-0815" not in dumps_redacted({"content": "pg-Other-0815"}, **LINE)
    assert "pg-Secret-4711" in dumps_redacted(record, **LINE)
    monkeypatch.delenv("PGPASSWORD")
    assert "pg-Other-0815" in dumps_redacted({"content": "pg-Other-0815"}, **LINE)


def test_a_secret_registered_later_is_seen_at_once() -> None:
    late = "late-Registered-Key-5521"
    record = {"content": f"echo {late}"}
    assert late in dumps_redacted(record, **LINE)
    register_secret(late)
    assert late not in dumps_redacted(record, **LINE)


def test_a_secret_that_json_escapes_is_still_found() -> None:
    odd = 'quo"te\\Secret-77'
    register_secret(odd)
    record = {"content": f"said {odd} then"}
    text = dumps_redacted(record, **LINE)
    assert text == reference_dumps(record, **LINE)
    assert re.search("Secret-77", text) is None


class _Text(str):
    pass


class _Number(float):
    pass


@pytest.mark.parametrize(
    "record",
    [
        {"endpoint": "http://127.0.0.1:8000/v1", "tokens": 3},  # a literal in a value; nothing to redact
        {"endpoint": "http://alice:s3cret@proxy:3128", "n": 1},  # something to redact
        {"url": ("http://h/v1", 1), "tokens": [1.5, -0.0]},  # a tuple: the walk makes it a list
        {"url": _Text("http://h/v1"), "value": _Number(0.25), "flag": True},  # subclasses, written as their values
        {"content": "caf\u00e9 http://h", "nested": [{"token": "x"}]},
    ],
)
def test_a_walked_record_the_walk_leaves_as_it_was_is_the_text_already_encoded(
    record: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record that may hold something is walked; when the walk changed nothing, the
    text encoded for the check is written (an indented document is not encoded a
    second time), and it is exactly what the walk's own encoding writes."""
    encoded: list[Any] = []
    original = json.dumps

    def counting(value: Any, **options: Any) -> str:
        encoded.append(value)
        return original(value, **options)

    for options in (LINE, DOCUMENT):
        expected = reference_dumps(record, **options)
        encoded.clear()
        with monkeypatch.context() as patched:
            patched.setattr(redaction.json, "dumps", counting)
            assert dumps_redacted(record, **options) == expected
        unchanged = redaction._redact_walk(record, ()) == record
        assert (not encoded) is unchanged  # encoded again only when the walk changed something
