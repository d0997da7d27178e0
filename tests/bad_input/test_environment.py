"""What is known before the first task is refused once: the environment a model
needs (key variable, OPENAI_BASE_URL, proxies), the run directory, and user
factories that cannot work, an output directory that is a file. The reusable
checks are tested directly and through the plugin, as a user runs it."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.factories import call_factory, load_factory
from pytest_evomemory.models.endpoint import check_model_environment
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.util.redaction import redact

from .conftest import KEY_VARIABLE, SECRET, tiny_run_config

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXIES:
        monkeypatch.delenv(name, raising=False)


def _model(**overrides: Any) -> ModelConfig:
    return ModelConfig(**{"api_key_env": KEY_VARIABLE, "base_url": "https://api.example.com/v1", **overrides})


# --------------------------------------------------------------------------- the model environment


def test_a_complete_environment_passes_and_registers_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "plainKeyShape-0042-registered"  # no pattern knows it: only registration can redact it
    monkeypatch.setenv(KEY_VARIABLE, key)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert redact(f"echo {key}") == f"echo {key}"
    check_model_environment(_model())
    assert redact(f"echo {key[:10]}zz {key} cut {key[:-5]}") == f"echo {key[:10]}zz *** cut ***"


def test_nothing_to_check_without_an_http_model(monkeypatch: pytest.MonkeyPatch) -> None:
    check_model_environment(None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    check_model_environment(ModelConfig(provider="local"))  # a local model reads no key (nor may it name one)


def test_a_missing_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    with pytest.raises(ConfigError, match=f"environment variable {KEY_VARIABLE}, which is not set; export") as caught:
        check_model_environment(_model())
    assert caught.value.key == "model.api_key_env"
    # what the terminal shows passes redaction: it must still say what to type (it said `export KEY=***`)
    assert f"export {KEY_VARIABLE}=<your key> (or" in redact(str(caught.value))


def test_a_key_that_cannot_be_a_header_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VARIABLE, "sk-abc\ndef")
    with pytest.raises(ConfigError, match=f"{KEY_VARIABLE} holds a control or non-ASCII character"):
        check_model_environment(_model())


@pytest.mark.parametrize("value", ["ftp://x", "localhost:8000/v1", "http://", "http://host:99999/v1", "https://bad\x01host/v1"])
def test_a_bad_openai_base_url_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", value)
    with pytest.raises(ConfigError, match=r"OPENAI_BASE_URL: .* is not an http:// or https:// URL"):
        check_model_environment(_model(base_url=None))
    check_model_environment(_model())  # a base_url in the config wins over the variable


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY"])
@pytest.mark.parametrize("value", ["garbage", "::::", "ftp://x:1", "http://proxy:99999", "http://[::1", "http://"])
def test_a_garbage_proxy_variable_is_named(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"the environment variable {name}=.* is not a proxy URL; write {name}=http://host:port"):
        check_model_environment(_model())


def test_a_proxy_with_credentials_is_not_quoted_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv("HTTPS_PROXY", "ftp://user:hunter2-password@proxy:1")
    with pytest.raises(ConfigError) as caught:
        check_model_environment(_model())
    assert "hunter2" not in str(caught.value)


def test_a_garbage_proxy_fails_the_model_client_cleanly_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the up-front check, building the client is still one clear error."""
    from pytest_evomemory.models.transport import shared_connection

    monkeypatch.setenv("HTTPS_PROXY", "::::")
    with pytest.raises(ConfigError, match="HTTPS_PROXY"):
        shared_connection("https://api.example.com/v1", 12.345)


def _plugin_run(pytester: pytest.Pytester, server_url: str) -> pytest.RunResult:
    run = tiny_run_config(pytester.path, server_url)
    return pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")


def _assert_refused_once(result: pytest.RunResult, requests: list[object], *expected: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert len(result.stderr.str().strip().splitlines()) == 1
    for piece in expected:
        assert piece in result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output and "collected" not in output
    assert requests == []


def test_plugin_refuses_a_missing_key_variable_once(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_openai_server()
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    _assert_refused_once(_plugin_run(pytester, server.base_url), server.requests, KEY_VARIABLE, "export")


def test_plugin_refuses_a_garbage_proxy_once(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_openai_server()
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv("HTTPS_PROXY", "garbage")
    _assert_refused_once(_plugin_run(pytester, server.base_url), server.requests, "HTTPS_PROXY")


def test_plugin_refuses_a_non_http_base_url_variable_once(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_openai_server()
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://x")
    run = tiny_run_config(pytester.path, server.base_url)
    run.write_text(run.read_text().replace(f'    base_url: "{server.base_url}"\n', ""))
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    _assert_refused_once(result, server.requests, "OPENAI_BASE_URL")


# --------------------------------------------------------------------------- user factories


def test_a_factory_that_raises_is_one_line_with_the_users_frame() -> None:
    def agent_factory(config: object, memory: object) -> object:
        raise RuntimeError("boom\nsecond line")

    with pytest.raises(ConfigError) as caught:
        call_factory(agent_factory, (None, None), "agent")
    message = str(caught.value)
    assert "agent factory" in message and "RuntimeError: boom second line" in message
    assert "test_environment.py:" in message and "in agent_factory" in message
    assert "\n" not in message and "pytest_evomemory" not in message


def test_a_factory_that_returns_none() -> None:
    with pytest.raises(ConfigError, match="returned None; it must return the memory system"):
        call_factory(lambda config, context: None, (None, None), "memory system")


def test_a_factory_with_the_wrong_signature() -> None:
    def factory(config: object) -> object:
        return object()

    with pytest.raises(ConfigError, match=r"cannot be called with 2 argument\(s\).*must accept 2 positional"):
        call_factory(factory, (None, None), "agent")


def test_a_module_that_raises_on_import(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(broken_memory_module="raise ValueError('bad import')\n")
    monkeypatch.syspath_prepend(str(pytester.path))
    with pytest.raises(ConfigError, match=r"importing 'broken_memory_module' raised ValueError: bad import \(at .*broken_memory_module.py:1"):
        load_factory("broken_memory_module:build", "memory")


def test_the_agent_level_check_skips_model_free_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_evomemory.config import AgentConfig
    from pytest_evomemory.models import check_agent_environment

    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    check_agent_environment(AgentConfig(kind="recall_baseline", model=_model()))
    check_agent_environment(AgentConfig(kind="tiny", model=_model(api_key_env=None)))
    with pytest.raises(ConfigError, match=KEY_VARIABLE):
        check_agent_environment(AgentConfig(kind="tiny", model=_model()))
    with pytest.raises(ConfigError, match=KEY_VARIABLE):
        check_agent_environment(AgentConfig(kind="my_agents:build", model=_model()))


# --------------------------------------------------------------------------- wiring the lead adds



_USER_AGENT = '''
class HostileAgent:
    def respond(self, stimulus, turn):
        answer = "lone " + chr(0xD800) + " surrogate and Bearer sk-user-agent-LEAK-123456789"
        turn.call_tool("final_answer", {"answer": answer})

    def reset(self):
        pass


def build(config, memory):
    return HostileAgent()
'''


def test_plugin_refuses_an_output_dir_that_is_a_file(pytester: pytest.Pytester) -> None:
    (pytester.path / "taken").write_text("x")
    run = pytester.path / "run.yaml"
    run.write_text("benchmark: {benchmark: sample, limit: 1}\nagent: {}\noutput_dir: taken\n")
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "taken is a file, not a directory" in result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_artefacts_of_a_user_agent_are_redacted_and_storable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(hostile_agent=_USER_AGENT)
    monkeypatch.syspath_prepend(str(pytester.path))
    run = pytester.path / "run.yaml"
    run.write_text(
        "output_dir: results\nbenchmark: {benchmark: sample, limit: 1}\n"
        "agent: {kind: 'hostile_agent:build', memory_strategy: none}\n"
    )
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    written = [p.read_text(encoding="utf-8") for p in (pytester.path / "results").rglob("*") if p.is_file()]
    assert written and not any("sk-user-agent-LEAK" in text for text in written)
