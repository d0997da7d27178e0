"""run.json, summary.json, the terminal and report.html name what actually ran,
also when a conftest fixture replaces the configured agent and memory."""

from __future__ import annotations

import json

import pytest

from ..conftest import SAMPLE_MEMORY_RUN

CONFTEST = """
import pytest
from pytest_evomemory.agents.baseline import RecallBaselineAgent
from pytest_evomemory.memory.inprocess import InProcessMemory


class MyMemory(InProcessMemory):
    pass


class MyAgent(RecallBaselineAgent):
    pass


def build_my_agent(config, memory):
    return MyAgent(config, memory)


def build_my_memory(config, context):
    return MyMemory(default_top_k=config.top_k)


@pytest.fixture(scope="session")
def evomemory_agent_factory():
    return build_my_agent


@pytest.fixture(scope="session")
def evomemory_memory_factory():
    return build_my_memory
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_conftest_override_is_named_as_what_ran(pytester: pytest.Pytester, workers: list[str]) -> None:
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest_subprocess(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=out", "--evomemory-limit=2", *workers
    )
    assert result.ret == 0, result.stdout.str()
    run = json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))
    summary = json.loads((pytester.path / "out" / "summary.json").read_text(encoding="utf-8"))
    for document in (run, summary):
        ran = document["ran"]
        assert set(ran) == {"sample_facts", "sample_choice"}
        for parts in ran.values():
            assert parts["agent"] == {"class": "conftest:MyAgent", "factory": "conftest:build_my_agent"}
            assert parts["memory"] == {"class": "conftest:MyMemory", "factory": "conftest:build_my_memory"}
    result.stdout.fnmatch_lines(["ran: agent conftest:MyAgent (built by conftest:build_my_agent); memory conftest:MyMemory*"])
    report = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert "conftest:MyAgent" in report and "conftest:MyMemory" in report


def test_the_header_gives_the_model_in_words(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--collect-only")
    result.stdout.fnmatch_lines(["evomemory: model none (model-free agent)"])
    assert "{" not in "\n".join(line for line in result.outlines if line.startswith("evomemory: model"))
