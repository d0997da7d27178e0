"""The OpenAI-compatible client, its retries, concurrency limit and response cache,
exercised over real HTTP against the scripted server."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.core.errors import ConfigError, ModelError
from pytest_evomemory.core.types import Usage
from pytest_evomemory.models import build_chat_model
from pytest_evomemory.models.cache import CachedChatModel, default_cache_dir
from pytest_evomemory.models.endpoint import check_model_environment
from pytest_evomemory.models.openai_compat import (
    OpenAICompatibleModel,
    completion_from_json,
)
from pytest_evomemory.models.transport import Connection, shared_connection
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    Fault,
    Script,
    final_answer,
    scripted_model_config,
    text,
    tool_call,
)

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
TOOLS = [
    {
        "type": "function",
        "function": {"name": "final_answer", "description": "d", "parameters": {"type": "object"}},
    }
]
SECRET = "sk-test-SECRET-value-1234567890"


def test_tool_call_and_usage_come_back(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(
        Script([final_answer("4", usage={"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14})])
    )
    model = build_chat_model(scripted_model_config(server, temperature=0.5, max_tokens=64, seed=7))
    result = model.complete(MESSAGES, TOOLS)
    assert [(call.name, json.loads(call.arguments)) for call in result.tool_calls] == [
        ("final_answer", {"answer": "4"})
    ]
    assert result.usage == Usage(11, 3)
    body = server.chat_requests[0]
    assert body["model"] == "scripted-model"
    assert body["messages"] == MESSAGES and body["tools"] == TOOLS
    assert (body["temperature"], body["max_tokens"], body["seed"], body["stream"]) == (0.5, 64, 7, False)


def test_no_tools_means_no_tools_key(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([text("hello")]))
    result = build_chat_model(scripted_model_config(server)).complete(MESSAGES, [])
    assert result.content == "hello" and result.tool_calls == ()
    assert "tools" not in server.chat_requests[0]


def test_api_key_from_env_is_sent_and_never_in_errors(
    scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRIPTED_KEY", SECRET)
    server = scripted_openai_server(
        Script([Fault(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})], then=None)
    )
    model = build_chat_model(scripted_model_config(server, api_key_env="SCRIPTED_KEY"))
    assert SECRET not in repr(model)
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, TOOLS)
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(caught.value)
    assert "401" in str(caught.value) and "1 attempt" in str(caught.value)
    assert len(server.requests) == 1  # 401 is not transient: no retry



@pytest.mark.parametrize(
    ("status", "advice"),
    [
        (401, "; the endpoint did not accept the key: check that the variable SCRIPTED_KEY (model.api_key_env) holds a key for http://127.0.0.1:"),
        (403, "; the key may not use model "),
        (404, "; no such endpoint or model: check model.base_url (the API root"),
    ],
)
def test_a_status_every_call_would_get_again_says_which_setting_to_check(
    scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, status: int, advice: str
) -> None:
    monkeypatch.setenv("SCRIPTED_KEY", SECRET)
    server = scripted_openai_server(Script([Fault(status, {"error": {"message": "nope"}})], then=None))
    with pytest.raises(ModelError) as caught:
        build_chat_model(scripted_model_config(server, api_key_env="SCRIPTED_KEY")).complete(MESSAGES, TOOLS)
    message = str(caught.value)
    assert f"HTTP status {status}: nope (not retried: the status is not transient)" in message
    assert advice in message and SECRET not in message


def test_missing_api_key_env_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVOMEMORY_TEST_MISSING_KEY", raising=False)
    config = ModelConfig(api_key_env="EVOMEMORY_TEST_MISSING_KEY", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="EVOMEMORY_TEST_MISSING_KEY") as caught:
        build_chat_model(config)
    assert "api_key_env: null" in str(caught.value)


def test_429_with_retry_after_then_success(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(429, retry_after=0.05), final_answer("4")]))
    waits: list[float] = []
    model = OpenAICompatibleModel(scripted_model_config(server, retry_backoff_s=5.0), sleep=waits.append)
    result = model.complete(MESSAGES, TOOLS)
    assert result.tool_calls[0].name == "final_answer"
    assert model.last_attempts == 2 and len(server.requests) == 2
    assert waits == [0.05]  # Retry-After honoured instead of the 5 s backoff


def test_retry_after_is_capped(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(503, retry_after=3600), final_answer("4")]))
    waits: list[float] = []
    model = OpenAICompatibleModel(scripted_model_config(server, retry_backoff_max_s=0.1), sleep=waits.append)
    model.complete(MESSAGES, TOOLS)
    assert waits == [0.1]


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "Fri, 04 Dec 2026 12:00:30 GMT"}, 30.0),  # an HTTP date (RFC 9110), 30 s after the clock
        ({"retry-after": "Friday, 04-Dec-26 12:00:02 GMT"}, 2.0),  # RFC 850's form, which HTTP still allows
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: no wait
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "later", "retry-after": "9"}, 9.0),
        ({"retry-after": "soon-ish"}, None),  # neither: the backoff applies
        ({"retry-after": "NaN"}, None),
        ({"retry-after": ""}, None),
    ],
)
def test_retry_after_is_read_in_seconds_or_as_an_http_date(headers: dict[str, str], seconds: float | None) -> None:
    from pytest_evomemory.models.openai_compat import _retry_after_seconds

    clock = 1796385600.0  # Fri, 04 Dec 2026 12:00:00 GMT
    assert _retry_after_seconds(headers, now=lambda: clock) == seconds


def test_a_retry_after_that_is_no_time_leaves_the_backoff(
    scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_evomemory.models import openai_compat

    monkeypatch.setattr(openai_compat.random, "random", lambda: 0.0)  # no jitter
    server = scripted_openai_server(Script([Fault(503, headers={"Retry-After": "soon-ish"}), final_answer("4")]))
    slept: list[float] = []
    model = OpenAICompatibleModel(scripted_model_config(server, retry_backoff_s=1.0, retry_backoff_max_s=10.0),
                                  sleep=slept.append)
    model.complete(MESSAGES, TOOLS)
    assert slept == [1.0] and model.last_attempts == 2


def test_a_redirect_is_not_followed_and_says_where_it_points(scripted_openai_server: ServerFactory) -> None:
    """The key would go along to wherever a redirect points: the error names the
    target (without its query string) and the setting to change."""
    location = "https://other.example/v1/chat/completions?key=abcdef123456"
    server = scripted_openai_server(Script([Fault(308, raw=b"", headers={"Location": location})], then=None))
    model = OpenAICompatibleModel(scripted_model_config(server))
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, TOOLS)
    message = str(caught.value)
    assert "HTTP status 308" in message and "(not retried: the status is not transient)" in message
    assert "redirects to 'https://other.example/v1/chat/completions?***', and redirects are not followed" in message
    assert "set model.base_url to the API root the redirect leads to" in message
    assert "abcdef123456" not in message and len(server.requests) == 1


def test_exponential_backoff_between_attempts(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(500), Fault(502), final_answer("4")]))
    waits: list[float] = []
    model = OpenAICompatibleModel(
        scripted_model_config(server, retry_backoff_s=1.0, retry_backoff_max_s=100.0), sleep=waits.append
    )
    model.complete(MESSAGES, TOOLS)
    assert len(waits) == 2
    assert 1.0 <= waits[0] <= 1.25 and 2.0 <= waits[1] <= 2.5


def test_500s_past_the_retry_limit_raise_model_error(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(500)] * 10))
    model = build_chat_model(scripted_model_config(server, max_retries=2))
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, TOOLS)
    message = str(caught.value)
    assert server.base_url in message and "500" in message and "3 attempts" in message
    assert len(server.requests) == 3  # ours only: the client's own retries are off


def test_slow_response_past_the_timeout(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(200, delay_s=1.5, then=final_answer("late"))] * 2))
    model = build_chat_model(scripted_model_config(server, timeout_s=0.2, max_retries=1))
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"2 attempts: timed out after 0\.2s"):
        model.complete(MESSAGES, TOOLS)
    assert time.monotonic() - started < 1.4


def test_slow_then_fast_recovers(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(200, delay_s=1.0, then=final_answer("late")), final_answer("4")]))
    model = build_chat_model(scripted_model_config(server, timeout_s=0.2, max_retries=1))
    assert json.loads(model.complete(MESSAGES, TOOLS).tool_calls[0].arguments) == {"answer": "4"}


def test_connection_refused_is_a_model_error() -> None:
    config = ModelConfig(
        base_url="http://127.0.0.1:9/v1", api_key_env=None, max_retries=1,
        retry_backoff_s=0.0, cache=False, timeout_s=1.0,
    )
    with pytest.raises(ModelError, match=r"127\.0\.0\.1:9/v1 failed after 2 attempts: connection error"):
        build_chat_model(config).complete(MESSAGES, TOOLS)


def test_dropped_connection_is_retried(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(drop=True), final_answer("4")]))
    model = build_chat_model(scripted_model_config(server))
    assert model.complete(MESSAGES, TOOLS).tool_calls[0].name == "final_answer"
    assert len(server.requests) == 2


def test_concurrency_is_limited_per_endpoint(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(latency_s=0.1)
    models = [build_chat_model(scripted_model_config(server, max_concurrency=2)) for _ in range(2)]
    threads = [
        threading.Thread(target=models[index % 2].complete, args=(MESSAGES, TOOLS)) for index in range(6)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.requests) == 6
    assert server.in_flight_max <= 2
    assert time.monotonic() - started >= 0.29  # 6 requests, 2 at a time, 0.1 s each


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Fault(200, raw=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
         r"the reply is not JSON \(content-type 'text/html'\): '<html><body>502 Bad Gateway"),
        (Fault(200, raw=b'{"choices": [{"message": {"content": "tru'), r"the reply is not JSON"),
        (Fault(200, raw=b""), r"not JSON .*an empty body"),
        (Fault(200, raw=b"[1, 2]"), r"JSON but not an object"),
        (Fault(200, raw=b'{"object": "chat.completion", "choices": []}'), r"response without choices"),
        (Fault(200, raw=b'{"error": {"message": "model overloaded"}}'), r"carries an error instead of choices.*overloaded"),
        (Fault(200, raw=b'{"choices": [{"index": 0}]}'), r"first choice has no message"),
        (Fault(200, raw=b'{"choices": [{"message": {"tool_calls": {"a": 1}}}]}'), r"'tool_calls' in the reply is not a list"),
        (Fault(200, raw=b'{"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]}'),
         r"tool call in the reply has no function name"),
        (Fault(200, raw=b'{"choices": [{"message": {"content": 42}}]}'), r"content is neither text nor text parts"),
    ],
)
def test_a_garbage_reply_is_one_clear_model_error_without_retries(
    scripted_openai_server: ServerFactory, reply: Fault, expected: str
) -> None:
    server = scripted_openai_server(Script([reply], then=None))
    model = build_chat_model(scripted_model_config(server, max_retries=3))
    with pytest.raises(ModelError, match=expected) as caught:
        model.complete(MESSAGES, TOOLS)
    message = str(caught.value)
    assert server.base_url in message and "1 attempt" in message and "malformed reply" in message
    assert len(server.requests) == 1


def test_lenient_shapes_real_servers_send_are_read() -> None:
    """Text parts for content, an object for arguments, missing usage and ids."""
    completion = completion_from_json({
        "choices": [{
            "message": {
                "content": [{"type": "text", "text": "thinking "}, {"type": "text", "text": "done"}],
                "tool_calls": [
                    {"type": "function", "function": {"name": "final_answer", "arguments": {"answer": "4"}}},
                    {"type": "custom", "custom": {"name": "x", "input": "y"}},
                ],
            },
            "finish_reason": "tool_calls",
        }],
    })
    assert completion.content == "thinking done"
    assert [(call.id, call.name, json.loads(call.arguments)) for call in completion.tool_calls] == [
        ("call_0", "final_answer", {"answer": "4"})
    ]
    assert completion.usage == Usage(0, 0) and completion.finish_reason == "tool_calls"


def test_error_messages_of_other_servers_are_quoted(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([
        Fault(400, {"detail": "max_tokens is too large for this model"}),
    ], then=None))
    with pytest.raises(ModelError, match=r"HTTP status 400: max_tokens is too large.*not transient"):
        build_chat_model(scripted_model_config(server)).complete(MESSAGES, TOOLS)


def test_one_http_client_per_endpoint_and_thread_is_shared_by_models(scripted_openai_server: ServerFactory) -> None:
    """Models of one endpoint share a thread's client (and its kept-alive connection);
    each thread has its own, so that a call past its deadline is aborted by shutting
    down its own thread's connections and no other's."""
    server = scripted_openai_server()
    first = OpenAICompatibleModel(scripted_model_config(server))
    second = OpenAICompatibleModel(scripted_model_config(server))
    other_timeout = OpenAICompatibleModel(scripted_model_config(server, timeout_s=7.0))

    def client_of(model: OpenAICompatibleModel) -> Connection:
        return shared_connection(model.endpoint, model.config.timeout_s)

    assert client_of(first) is client_of(second)
    assert client_of(other_timeout) is not client_of(first)
    elsewhere: list[Connection] = []
    thread = threading.Thread(target=lambda: elsewhere.append(client_of(first)))
    thread.start()
    thread.join()
    assert elsewhere[0] is not client_of(first)
    # the client of a thread that has ended is closed when the next one is made
    OpenAICompatibleModel(scripted_model_config(server, timeout_s=8.0))
    assert elsewhere[0].is_closed and not client_of(first).is_closed
    first.complete(MESSAGES, TOOLS)
    second.complete(MESSAGES, TOOLS)
    assert len(server.requests) == 2


# --------------------------------------------------------------------------- cache


def test_cache_replays_identical_requests(scripted_openai_server: ServerFactory, isolated_cache: Path) -> None:
    server = scripted_openai_server(Script([final_answer("4")], then=None))
    config = scripted_model_config(server, cache=None, temperature=0.0)
    assert config.cache_enabled
    first = build_chat_model(config).complete(MESSAGES, TOOLS)
    again = build_chat_model(config)  # a re-run: a fresh model, same config
    second = again.complete(MESSAGES, TOOLS)
    assert len(server.requests) == 1
    assert second.cached and not first.cached
    assert (second.content, second.tool_calls, second.usage) == (first.content, first.tool_calls, first.usage)
    assert isinstance(again, CachedChatModel) and again.hits == 1
    files = list(isolated_cache.rglob("*"))
    assert [path.suffix for path in files if path.is_file()] == [".json"]  # no temp files left


def test_cache_key_covers_the_request(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server()
    config = scripted_model_config(server, cache=True)
    model = build_chat_model(config)
    model.complete(MESSAGES, TOOLS)
    model.complete([{"role": "user", "content": "other"}], TOOLS)
    model.complete(MESSAGES, [])
    build_chat_model(scripted_model_config(server, cache=True, seed=1)).complete(MESSAGES, TOOLS)
    build_chat_model(scripted_model_config(server, cache=True, max_tokens=5)).complete(MESSAGES, TOOLS)
    assert len(server.requests) == 5


def test_cache_off_for_nonzero_temperature_by_default(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server()
    config = scripted_model_config(server, cache=None, temperature=0.7)
    assert not config.cache_enabled
    model = build_chat_model(config)
    model.complete(MESSAGES, TOOLS)
    model.complete(MESSAGES, TOOLS)
    assert len(server.requests) == 2


def test_cache_never_stores_failures_or_keys(
    scripted_openai_server: ServerFactory, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRIPTED_KEY", SECRET)
    server = scripted_openai_server(Script([Fault(500)] * 3 + [final_answer("4")]))
    model = build_chat_model(scripted_model_config(server, cache=True, api_key_env="SCRIPTED_KEY"))
    with pytest.raises(ModelError):
        model.complete(MESSAGES, TOOLS)
    assert not isolated_cache.exists() or not any(p.is_file() for p in isolated_cache.rglob("*"))
    model.complete(MESSAGES, TOOLS)
    for path in isolated_cache.rglob("*.json"):
        assert SECRET not in path.read_text()


def test_corrupt_cache_entry_is_a_miss(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server()
    model = build_chat_model(scripted_model_config(server, cache=True))
    assert isinstance(model, CachedChatModel)
    model.complete(MESSAGES, TOOLS)
    model.path_for(model.key(MESSAGES, TOOLS)).write_text("{not json")
    assert model.complete(MESSAGES, TOOLS).tool_calls
    assert len(server.requests) == 2


def test_cache_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = ModelConfig(cache_dir=str(tmp_path / "from-config"))
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(tmp_path / "from-env"))
    assert default_cache_dir(config) == tmp_path / "from-env"
    monkeypatch.delenv("EVOMEMORY_CACHE_DIR")
    assert default_cache_dir(config) == tmp_path / "from-config"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir(ModelConfig()) == tmp_path / "xdg" / "pytest-evomemory" / "responses"


def test_concurrent_writers_leave_whole_entries(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server()
    models = [build_chat_model(scripted_model_config(server, cache=True)) for _ in range(8)]
    threads = [threading.Thread(target=model.complete, args=(MESSAGES, TOOLS)) for model in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    replay = build_chat_model(scripted_model_config(server, cache=True))
    before = len(server.requests)
    assert replay.complete(MESSAGES, TOOLS).cached
    assert len(server.requests) == before


def test_local_provider_is_imported_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real_import = importlib.import_module

    def fake_import(name: str, package: str | None = None) -> object:
        if name.endswith("models.local"):
            raise ImportError("No module named 'llama_cpp'")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    with pytest.raises(ConfigError, match="llama-cpp-python"):
        build_chat_model(ModelConfig(provider="local", cache=False))


def test_tool_call_helper_sends_raw_strings() -> None:
    reply = tool_call("final_answer", '{"answer": ')
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"answer": '


def test_tls_is_verified_wherever_it_can_happen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain HTTP without a proxy skips loading the trust store; nothing else does."""
    import ssl

    from pytest_evomemory.models.transport import tls_for

    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert tls_for("http://127.0.0.1:8000/v1") is False
    verifying = tls_for("https://api.openai.com/v1")
    assert isinstance(verifying, ssl.SSLContext) and verifying.verify_mode == ssl.CERT_REQUIRED
    assert verifying.check_hostname
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    assert tls_for("http://127.0.0.1:8000/v1") is verifying


def test_a_non_http_endpoint_from_the_environment_is_refused_before_any_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000/v1")
    config = ModelConfig(api_key_env=None, cache=False, max_retries=3)
    with pytest.raises(ConfigError, match=r"OPENAI_BASE_URL: 'localhost:8000/v1' is not an http") as caught:
        check_model_environment(config)
    assert caught.value.key == "OPENAI_BASE_URL"
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        OpenAICompatibleModel(config)


def test_model_errors_carry_endpoint_status_and_attempts(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(503), Fault(503), Fault(503)], then=None))
    model = OpenAICompatibleModel(scripted_model_config(server), sleep=lambda _: None)
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, TOOLS)
    error = caught.value
    assert (error.endpoint, error.status, error.attempts) == (server.base_url, 503, 3)
    assert "\n" not in str(error) and str(error).startswith("model 'scripted-model' at ")


def test_a_request_over_the_limit_is_not_sent(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server()
    model = OpenAICompatibleModel(scripted_model_config(server, max_request_bytes=2048))
    with pytest.raises(ModelError, match=r"over model.max_request_bytes \(2,048\).*not retried: it was not sent") as caught:
        model.complete([{"role": "user", "content": "z" * 5000}], TOOLS)
    assert server.requests == [] and caught.value.attempts == 0


def test_a_reply_over_the_limit_is_not_read(scripted_openai_server: ServerFactory) -> None:
    body = json.dumps(text("w" * 50_000)).encode()
    reply = Fault(200, raw=body)
    server = scripted_openai_server(Script([reply], then=None))
    model = OpenAICompatibleModel(scripted_model_config(server, max_reply_bytes=4096, max_retries=2))
    with pytest.raises(ModelError, match=r"over model.max_reply_bytes \(4,096 bytes.*not retried") as caught:
        model.complete(MESSAGES, TOOLS)
    assert len(server.requests) == 1 and caught.value.status == 200


def test_a_reply_that_is_not_utf8_is_one_clear_error(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(200, raw=b'{"choices": "\xff"}')], then=None))
    model = OpenAICompatibleModel(scripted_model_config(server))
    with pytest.raises(ModelError, match=r"the reply is not UTF-8 \(byte 13 of 16"):
        model.complete(MESSAGES, TOOLS)


def test_a_key_echoed_in_a_truncated_error_body_is_redacted(
    scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_openai_server(Script([Fault(400, raw=b"you sent Authorization: Bearer " + SECRET[:-9].encode())], then=None))
    monkeypatch.setenv("EVOMEMORY_TEST_KEY", SECRET)
    model = OpenAICompatibleModel(scripted_model_config(server, api_key_env="EVOMEMORY_TEST_KEY"))
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, TOOLS)
    assert SECRET[:10] not in str(caught.value) and "***" in str(caught.value)


def test_an_unannounced_endless_reply_is_cut_at_the_limit() -> None:
    """No Content-Length: the body is counted as it streams in, and reading stops."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    sent: list[int] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            try:
                for _ in range(2000):  # up to ~128 MB, far past the limit
                    connection.sendall(b"x" * 65536)
                    sent.append(1)
            except OSError:
                pass  # the client stopped reading and closed

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    config = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, cache=False, max_retries=0,
                         max_reply_bytes=1024 * 1024, timeout_s=10)
    with pytest.raises(ModelError, match=r"over model.max_reply_bytes \(1,048,576 bytes\)"):
        OpenAICompatibleModel(config).complete(MESSAGES, TOOLS)
    thread.join(timeout=10)
    listener.close()
    assert len(sent) < 2000


def test_the_scripted_server_takes_a_grids_connections_at_once() -> None:
    """Every chain of ``evomemory run --chains`` opens its connection at the same
    moment; with the standard library's listen queue of 5, those past it were
    dropped and retried a second later. Not accepting at all, the server's queue
    still holds 64 connections (a full queue would leave a connect hanging)."""
    import socket

    from pytest_evomemory.testing.scripted_server import ScriptedServer

    server = ScriptedServer()  # listening, never started: nothing is accepted
    connections: list[socket.socket] = []
    try:
        for _ in range(64):
            connections.append(socket.create_connection(("127.0.0.1", server.port), timeout=20))
        assert len(connections) == 64
    finally:
        for connection in connections:
            connection.close()
        server._httpd.server_close()


def test_the_scripted_server_is_quiet_about_a_client_that_resets_its_connection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A client that gives up on a reply resets the connection while the server's
    handler waits for its next request (ConnectionResetError in its readline): no
    traceback of the server's in the output of the run under test, where it would
    read as the plugin's. Any other error of a handler is still printed."""
    from pytest_evomemory.testing.scripted_server import ScriptedServer

    server = ScriptedServer()
    try:
        for error in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
            try:
                raise error
            except ConnectionError:
                server._httpd.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise KeyError("a broken handler")
        except KeyError:
            server._httpd.handle_error(None, ("127.0.0.1", 1))
        assert "KeyError: 'a broken handler'" in capsys.readouterr().err
    finally:
        server.stop()
