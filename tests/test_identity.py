"""What ran, in words and as data: a local model is its file and hash, an API model
its endpoint and the names the server reported; a provider's unused keys are absent."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import DEFAULT_API_MODEL, ModelConfig, RunConfig
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.models import fingerprint, local
from pytest_evomemory.models.cache import CachedChatModel, _read_entry, _write_entry
from pytest_evomemory.models.identity import (
    configured_model,
    describe_model,
    merge_identity,
    ran_model,
    recorded_identity,
    reported_models,
    run_identity,
)
from pytest_evomemory.models.openai_compat import completion_from_json


@pytest.fixture
def gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in GGUF file (its bytes are never loaded) and a private hash cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


def test_a_local_model_is_its_file_and_hash_not_an_api_name(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "default_model_path", lambda: gguf)
    config = ModelConfig(provider="local", temperature=0, seed=0)
    assert config.model is None  # no API model name defaulted for a file
    identity = configured_model(config)
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert identity == {
        "provider": "local", "file": gguf.name, "path": str(gguf), "sha256": digest,
        "n_ctx": 4096, "temperature": 0.0, "max_tokens": 1024, "seed": 0,
    }
    text = describe_model(identity)
    assert text == f"local SmolLM2-135M-Instruct.Q4_1.gguf sha256 {digest[:12]} (temperature 0.0, max_tokens 1024, seed 0)"
    assert "gpt-4o-mini" not in text


def test_a_missing_bundled_model_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise ConfigError("not installed")

    monkeypatch.setattr(local, "default_model_path", missing)
    identity = configured_model(ModelConfig(provider="local"))
    assert identity is not None and "not installed" in identity["file"]


def test_an_api_model_is_its_endpoint_and_the_names_the_server_reported() -> None:
    config = ModelConfig(base_url="http://127.0.0.1:8000/v1", api_key_env=None, max_tokens=None, seed=None)
    identity = configured_model(config)
    assert identity == {"provider": "openai", "model": DEFAULT_API_MODEL, "endpoint": "http://127.0.0.1:8000/v1", "temperature": 0.0}
    assert describe_model(identity) == "openai gpt-4o-mini at http://127.0.0.1:8000/v1 (temperature 0.0)"
    reported = {**identity, "reported": ["gpt-4o-mini-2024-07-18"]}
    assert describe_model(reported) == (
        "openai gpt-4o-mini (the server reported gpt-4o-mini-2024-07-18) at http://127.0.0.1:8000/v1 (temperature 0.0)"
    )
    assert describe_model({**identity, "reported": ["gpt-4o-mini"]}) == describe_model(identity)  # nothing new to say


def test_the_reported_name_travels_from_reply_to_transcript_and_through_the_cache(tmp_path: Path) -> None:
    reply = {"model": "smollm2-135m-q4", "choices": [{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}]}
    completion = completion_from_json(reply)
    assert completion.model == "smollm2-135m-q4"
    assert completion_from_json({**reply, "model": ["not", "text"]}).model is None
    _write_entry(tmp_path / "entry.json", completion)
    replayed = _read_entry(tmp_path / "entry.json")
    assert replayed is not None and replayed.model == "smollm2-135m-q4" and replayed.cached
    transcript = [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "model": "m-1"},
        {"role": "assistant", "content": "b", "model": "m-2"}, {"role": "assistant", "content": "c", "model": "m-1"},
    ]
    assert reported_models(transcript) == ["m-1", "m-2"]


def test_provider_keys_are_absent_for_the_other_provider_and_refused_when_set() -> None:
    local_dump = ModelConfig(provider="local").model_dump(mode="json")
    assert "model" not in local_dump and "base_url" not in local_dump and "api_key_env" not in local_dump
    assert local_dump["n_ctx"] == 4096
    api_dump = ModelConfig().model_dump(mode="json")
    assert api_dump["model"] == DEFAULT_API_MODEL and "model_path" not in api_dump and "n_ctx" not in api_dump
    with pytest.raises(ValueError, match="'model' is read only by provider 'openai'"):
        ModelConfig(provider="local", model="gpt-4o-mini")
    with pytest.raises(ValueError, match="'model_path', 'n_ctx' are read only by provider 'local'"):
        ModelConfig(model_path="x.gguf", n_ctx=2048)
    with pytest.raises(ValueError, match="'model' is null"):
        ModelConfig(model=None)


def test_a_config_setting_the_other_providers_key_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("kind: tiny\nmodel:\n  provider: local\n  model: gpt-4o-mini\n  timeout_s: 5\n")
    (tmp_path / "run.yaml").write_text("benchmark: {benchmark: sample}\nagent: agent.yaml\n")
    with pytest.raises(ConfigError) as raised:
        load_run_config(tmp_path / "run.yaml")
    message = str(raised.value)
    assert "\n" not in message and "agent.yaml" in message
    assert "key 'model': 'model', 'timeout_s' are read only by provider 'openai'" in message


def test_the_hash_of_a_model_file_is_computed_once_per_version_of_the_file(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[Any] = []
    real = hashlib.file_digest

    def counting(handle: Any, name: str) -> Any:
        hashed.append(name)
        return real(handle, name)

    monkeypatch.setattr(fingerprint.hashlib, "file_digest", counting)
    first = fingerprint.file_sha256(gguf)
    assert fingerprint.file_sha256(gguf) == first and len(hashed) == 1  # a second process: from the cache
    gguf.write_bytes(gguf.read_bytes() + b"more")  # another version of the file
    assert fingerprint.file_sha256(gguf) == hashlib.sha256(gguf.read_bytes()).hexdigest() != first
    assert len(hashed) == 2


class _Agent:
    def __init__(self, model: object) -> None:
        self.model = model


class _SaysWhatItIs:
    def identity(self) -> dict[str, Any]:
        return {"provider": "openai", "model": "served-name", "endpoint": "http://127.0.0.1:9/v1"}


def test_the_model_that_ran_is_what_the_agents_model_says_else_the_config_marked_as_such() -> None:
    config = ModelConfig(base_url="http://127.0.0.1:8000/v1", api_key_env=None)
    said = ran_model(_Agent(CachedChatModel(_SaysWhatItIs(), {}, Path("."))), config, None, builtin_agent=False)  # type: ignore[arg-type]
    assert said == {"provider": "openai", "model": "served-name", "endpoint": "http://127.0.0.1:9/v1"}
    unknown = ran_model(_Agent("a name, not a model"), config, None, builtin_agent=False)
    assert unknown is not None and unknown["source"] == "config"
    assert describe_model(unknown).endswith("as configured (the agent does not say which model it ran)")
    assert ran_model(_Agent(None), None, None, builtin_agent=True) is None


def test_what_ran_wins_over_the_config_in_the_run_level_identity() -> None:
    ran = {"s": {
        "agent": {"class": "conftest:MyAgent", "factory": "conftest:build", "kind": "conftest:build", "options": {"k": 1}},
        "memory": {"class": "conftest:MyMemory", "factory": "conftest:mem", "backend": "conftest:mem"},
        "model": {"provider": "local", "file": "x.gguf", "sha256": "ab" * 32},
    }}
    configured = {"agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"},
                  "memory": {"backend": "inprocess", "top_k": 4}, "model": None}
    identity = merge_identity(ran, configured)
    assert identity["agent"]["kind"] == "conftest:build" and identity["agent"]["memory_strategy"] == "deterministic_recall"
    assert identity["memory"] == {"backend": "conftest:mem", "top_k": 4, "class": "conftest:MyMemory", "factory": "conftest:mem"}
    assert identity["model"]["file"] == "x.gguf"
    assert merge_identity({}, configured) == configured  # nothing ran: the config is all there is


def test_an_older_run_json_of_a_local_model_is_not_named_by_its_defaulted_api_name() -> None:
    document = {"run": {"agent": {"kind": "tiny", "memory_strategy": "none", "model": {
        "provider": "local", "model": "gpt-4o-mini", "model_path": "/m/SmolLM2.gguf", "temperature": 0.0}}}}
    identity = recorded_identity({}, document)
    assert describe_model(identity["model"]) == "local SmolLM2.gguf (temperature 0.0)"
    assert identity["memory"] is None


def _run_config(tmp_path: Path, model: dict[str, Any]) -> RunConfig:
    (tmp_path / "run.yaml").write_text(json.dumps({"benchmark": {"benchmark": "sample"}, "agent": {"kind": "tiny", "model": model}}))
    return load_run_config(tmp_path / "run.yaml")


def test_run_json_holds_only_the_providers_keys(tmp_path: Path) -> None:
    dumped = _run_config(tmp_path, {"provider": "local", "n_ctx": 2048}).to_dict()["agent"]["model"]
    assert dumped["provider"] == "local" and dumped["n_ctx"] == 2048
    assert not {"model", "base_url", "api_key_env", "timeout_s", "max_retries", "max_concurrency"} & set(dumped)


def test_the_json_reports_identity_is_what_ran_over_the_run_config(tmp_path: Path) -> None:
    config = _run_config(tmp_path, {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": None})
    configured = run_identity(config)
    assert configured["agent"] == {"kind": "tiny", "memory_strategy": "deterministic_recall", "options": {}}
    assert configured["model"]["model"] == DEFAULT_API_MODEL and configured["overrides"] == []
    ran = {"s": {"agent": {"class": "a:A", "factory": "a:f", "kind": "tiny"}, "memory": None,
                 "model": {"provider": "openai", "model": DEFAULT_API_MODEL, "reported": ["served-1"]}}}
    identity = run_identity(config, ran)
    assert identity["agent"]["class"] == "a:A" and identity["model"]["reported"] == ["served-1"]
    assert identity["memory"] is None and identity["overrides"] == []


def test_a_resumed_collector_keeps_what_ran_before_and_the_names_reported_before() -> None:
    from pytest_evomemory.runtime.records import ResultCollector, stream_started_record

    model = {"provider": "openai", "model": "m", "endpoint": "http://127.0.0.1:1/v1"}
    agent = {"class": "a:A", "factory": "a:f", "kind": "tiny", "memory_strategy": "none", "options": {}}
    before = {
        "s1": {"agent": agent, "memory": None, "model": {**model, "reported": ["m-1"]}},
        "s2": {"agent": agent, "memory": None, "model": {**model, "reported": ["m-1"]}},
    }
    collector = ResultCollector(["s1", "s2"])
    collector.preload([], [], [], before)
    collector.add(stream_started_record("s2", {"agent": agent, "memory": None, "model": model}))
    collector._add_response({
        "stream": "s2", "task_id": "t0", "kind": "task", "agent_turns": 1, "memory_retains": 0, "memory_recalls": 0,
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "seconds": 0.1, "tool_calls": [],
        "messages": [{"role": "assistant", "content": "x", "model": "m-2"}],
    })
    ran = collector.what_ran()
    assert list(ran) == ["s1", "s2"]
    assert ran["s1"].written() == before["s1"]  # not started again: as the interrupted run recorded it
    assert ran["s2"].written()["model"]["reported"] == ["m-1", "m-2"]  # the earlier replies' names and the new ones
