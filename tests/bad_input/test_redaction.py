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


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("https://ghp_Token12345@github.com/org/repo", "ghp_Token12345"),  # a token as the user name
        ("GET /v1/models?key=AIzaSyExample123 HTTP/1.1", "AIzaSyExample123"),
        ("http://h/v1?api-version=2024&sig=Zm9vYmFy%3D&se=2030", "Zm9vYmFy"),  # an Azure SAS signature
        ("https://bucket/obj?X-Amz-Signature=deadbeef99&X-Amz-Date=1", "deadbeef99"),
        ("redirected to /cb?client_secret=s3cr3tValue;x=1", "s3cr3tValue"),
        ("?access_token=tok_abcdef&user=me", "tok_abcdef"),
    ],
)
def test_credentials_in_urls_are_removed(text: str, gone: str) -> None:
    assert gone not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "key 'model.api_key': unknown key; the keys here are: provider, model",  # a config error, not a value
        "see https://example.com/?email=someone@example.com",
        "the key=value pair",
        "ssh the host",
    ],
)
def test_prose_around_secret_names_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_half_a_key_is_masked_and_its_last_characters_are_not() -> None:
    """A gateway that stars the middle of the key it echoes still gives its front half
    away; OpenAI's own "sk-...WXYZ" (the last characters alone) identifies the key
    without revealing it, as docs/agents.md says."""
    key = "sk-proj-HalfEcho0Canary0123456789abcdWXYZ"
    register_secret(key)
    assert redact(f"Incorrect API key provided: {key[:21]}****{key[-4:]}.") == f"Incorrect API key provided: {MASK}****WXYZ."
    assert redact(f"Incorrect API key provided: sk-proj-****{key[-4:]}.") == "Incorrect API key provided: sk-proj-****WXYZ."
    assert redact(f"prefix {key[:20]} then {key[:30]}x") == f"prefix {MASK} then {MASK}x"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("localhost:8000/v1?token=Tok3nValue99", "localhost:8000/v1?***"),
        ("htps://Tok3nValue99@host/v1", "htps://***@host/v1"),
        ("http://user:Tok3nValue99@host:99999/v1#frag", "http://***@host:99999/v1#***"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_a_quoted_url_shows_no_credentials_or_query(url: str, shown: str) -> None:
    from pytest_evomemory.util.redaction import url_shown

    assert url_shown(url) == shown


@pytest.mark.parametrize(
    "url", ["localhost:8000/v1?token=Tok3nValue99", "htps://Tok3nValue99@host/v1", "http://h:99999/v1?x=Tok3nValue99"]
)
def test_a_refused_url_is_quoted_without_its_secret(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """model.base_url, OPENAI_BASE_URL and a proxy variable are refused naming what was
    written: never the token pasted into the URL."""
    from pytest_evomemory.config import ModelConfig, http_url_problem
    from pytest_evomemory.core.errors import ConfigError
    from pytest_evomemory.models.endpoint import check_model_environment, proxy_problem

    refused = http_url_problem(url)  # what the config loader says of model.base_url
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ConfigError) as from_environment:
        check_model_environment(ModelConfig(api_key_env=None))
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("HTTPS_PROXY", url.replace("http", "socks", 1))
    problem = proxy_problem() or ""
    for message in (refused or "", str(from_environment.value), problem):
        assert "is not" in message and "Tok3nValue99" not in message, message
