"""Fixtures for TinyAgent tests: a scripted server, isolated caches, a stream runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.agents.tiny import TinyAgent
from pytest_evomemory.config import AgentConfig
from pytest_evomemory.evaluation.evomemory import EvoMemoryEvaluator
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.runtime import ObservedMemory, StreamRun
from pytest_evomemory.testing.fixtures import scripted_openai_server
from pytest_evomemory.testing.scripted_server import ScriptedServer, scripted_model_config

__all__ = ["scripted_openai_server"]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temperature 0 turns the response cache on; never touch the user's cache."""
    directory = tmp_path / "response-cache"
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(directory))
    return directory


StreamFactory = Callable[..., StreamRun]


@pytest.fixture
def make_stream() -> Iterator[StreamFactory]:
    """Build a StreamRun around a TinyAgent the way BenchmarkRun.open_stream does."""
    opened: list[StreamRun] = []

    def build(
        server: ScriptedServer,
        strategy: str = "none",
        *,
        max_steps: int = 4,
        top_k: int = 4,
        protocol: str = "tools",
        experience_format: str = "full",
        **model_overrides: Any,
    ) -> StreamRun:
        config = AgentConfig(
            kind="tiny",
            memory_strategy=strategy,  # type: ignore[arg-type]
            max_steps=max_steps,
            protocol=protocol,  # type: ignore[arg-type]
            experience_format=experience_format,  # type: ignore[arg-type]
            model=scripted_model_config(server, **model_overrides),
        )
        memory = (
            None if strategy == "none" else ObservedMemory(InProcessMemory(default_top_k=top_k), "facts")
        )
        agent = TinyAgent(config, memory if strategy == "deterministic_recall" else None)  # type: ignore[arg-type]
        run = StreamRun(
            stream="facts",
            agent=agent,
            memory=memory,
            evaluator=EvoMemoryEvaluator(),
            memory_strategy=strategy,
            max_steps=max_steps,
        )
        opened.append(run)
        return run

    yield build
    for run in opened:
        run.close()
