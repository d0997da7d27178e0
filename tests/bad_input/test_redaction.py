"""The one redaction step: what it removes, in every shape, and what it leaves alone."""

from __future__ import annotations

import json

import pytest

from pytest_evomemory.util.redaction import MASK, redact, redact_record, register_secret

KEY = "k3y-Registered-Value-77"


@pytest.fixture(autouse=True, scope="module")
def registered() -> None:
    register_secret(KEY)


@pytest.mark.parametrize(
    "text",
    [
        f'{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}',  # JSON error
        f"<tr><td>Authorization</td><td>Bearer {KEY}</td></tr>",  # HTML debug page
        f"POST /v1/chat/completions\r\nAuthorization: Bearer {KEY}\r\n",  # echoed headers
        f'{{"headers": {{"authorization": "Bearer {KEY}", "x-api-key": "{KEY}"}}}}',  # headers as JSON
        f"upstream said: {KEY[:-4]}",  # a body cut off mid-key
        f"https://proxy.example/v1?api_key={KEY}&x=1",  # query parameter
    ],
    ids=["json_error", "html_page", "echoed_headers", "json_headers", "truncated", "query"],
)
def test_a_registered_key_is_removed_in_every_shape(text: str) -> None:
    cleaned = redact(text)
    assert KEY[:12] not in cleaned and MASK in cleaned


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Authorization: Bearer unregistered0token9", "unregistered0token9"),
        ("api-key: abcdef", "abcdef"),
        ('"OPENAI_API_KEY": "zzz999"', "zzz999"),
        ("leaked sk-proj-AbCdEfGh12345678 here", "sk-proj-AbCdEfGh12345678"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("proxy at http://alice:s3cret@proxy:3128", "s3cret"),
    ],
)
def test_unregistered_secrets_are_removed_by_shape(text: str, gone: str) -> None:
    assert gone not in redact(text)


@pytest.mark.parametrize(
    "text",
    ["a basic understanding of bearer bonds", "The answer is B.", "the api key is required", "task-12345 skipped", ""],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redact_record_walks_every_value_and_makes_text_storable() -> None:
    record = {
        "answer": f"Bearer {KEY}",
        "nested": [{"error": f"x {KEY}"}, 3, None, True],
        "bad\ud800key": "nul\x00and\ud800surrogate",
        "count": 7,
    }
    cleaned = redact_record(record)
    encoded = json.dumps(cleaned, ensure_ascii=False).encode("utf-8")  # writable as UTF-8
    assert KEY.encode() not in encoded
    assert cleaned["count"] == 7 and cleaned["nested"][1:] == [3, None, True]
    assert cleaned["bad\ufffdkey"] == "nul\ufffdand\ufffdsurrogate"
    assert record["answer"] == f"Bearer {KEY}"  # a copy: the input is untouched


def test_short_values_are_not_registered() -> None:
    register_secret("no")
    assert redact("no, not now") == "no, not now"


def test_a_secret_is_masked_inside_a_longer_token_too() -> None:
    """A proxy that URL-encodes the header it echoes puts a digit right before the key
    (``%20<key>``): matching whole tokens only would leak it."""
    secret = "k3y-abcdef0123456789"
    register_secret(secret)
    assert secret not in redact(f"authz%20{secret}%0D%0A")
    assert secret not in redact(f"x{secret}y")
