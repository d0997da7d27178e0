"""Helpers for bad-input tests that run the plugin as a user does, against the
scripted OpenAI-compatible server (whose request count proves whether a model call
happened)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.testing.fixtures import scripted_openai_server

__all__ = ["scripted_openai_server"]

#: The API key the runs use; no output or artefact may ever contain it.
SECRET = "sk-badinput-LEAK-CANARY-0123456789abcdef"
KEY_VARIABLE = "EVOMEMORY_BADINPUT_KEY"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temperature 0 turns the response cache on; never touch the user's cache."""
    directory = tmp_path / "response-cache"
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(directory))
    return directory


def tasks_file(directory: Path, count: int = 2, name: str = "tasks.jsonl") -> Path:
    """A small generic JSONL stream (the bundled sample schema)."""
    path = directory / name
    path.write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"Say {i}", "target": str(i)}) + "\n" for i in range(count)),
        encoding="utf-8",
    )
    return path


def tiny_run_config(
    directory: Path,
    base_url: str,
    *,
    benchmark: str | None = None,
    model: dict[str, Any] | None = None,
    max_steps: int = 4,
    strategy: str = "none",
) -> Path:
    """A run config for a ``kind: tiny`` agent talking to ``base_url``."""
    tasks_file(directory)
    settings = {
        "model": "scripted-model", "base_url": base_url, "api_key_env": KEY_VARIABLE,
        "timeout_s": 5, "max_retries": 0, "retry_backoff_s": 0, "cache": False, **(model or {}),
    }
    lines = "".join(f"    {key}: {json.dumps(value)}\n" for key, value in settings.items())
    run = directory / "run.yaml"
    run.write_text(
        "name: badinput\n"
        "output_dir: results\n"
        f"benchmark: {benchmark or '{benchmark: files, files: [{name: mine, path: tasks.jsonl}]}'}\n"
        "memory: {backend: inprocess}\n"
        "agent:\n"
        "  kind: tiny\n"
        f"  memory_strategy: {strategy}\n"
        f"  max_steps: {max_steps}\n"
        "  model:\n" + lines,
        encoding="utf-8",
    )
    return run


def everything_written(pytester: pytest.Pytester, result: pytest.RunResult, *extra: Path) -> dict[str, str]:
    """Every output and every file the run left behind, by name."""
    texts = {"stdout": result.stdout.str(), "stderr": result.stderr.str()}
    for root in (pytester.path, *extra):
        for path in root.rglob("*"):
            if path.is_file():
                texts[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return texts


def assert_no_internal_error(result: pytest.RunResult) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    # A frame of the plugin's own code ("pytest_evomemory/episode.py:123: in run") or
    # of a library would mean a traceback from inside the plugin reached the user.
    assert not re.search(r"(pytest_evomemory|site-packages)/\S+\.py:\d+", output), output[-3000:]


Runner = Callable[..., pytest.RunResult]
