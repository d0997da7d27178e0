"""Every artefact names what actually ran: the terminal, run.json, summary.json,
report.html, compare.html and compare.json, the JSON report and JUnit XML, for an
embedded model (its file and hash, never an API model name it does not use) and
when a conftest fixture replaces the configured agent and memory."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.reporting.drilldown import read_task_pages

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN
from ..schema import assert_json_report_valid, assert_run_dir_valid, assert_valid

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


def _junit_properties(path: Path) -> dict[str, list[str]]:
    properties: dict[str, list[str]] = {}
    for prop in ET.parse(path).getroot().iter("property"):
        properties.setdefault(prop.attrib["name"], []).append(prop.attrib["value"])
    return properties


@pytest.mark.parametrize(
    "workers", [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)]
)
def test_a_conftest_override_is_named_as_what_ran(pytester: pytest.Pytester, workers: list[str]) -> None:
    """Everywhere the user's own classes, not the config's recall_baseline / inprocess."""
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest(  # in process: under -n 2 the workers are processes anyway
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=out", "--evomemory-limit=2", *workers,
        "--json-report", "--json-report-file=report.json", "--junitxml=junit.xml",
    )
    assert result.ret == 0, result.stdout.str()
    run = json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))
    summary = json.loads((pytester.path / "out" / "summary.json").read_text(encoding="utf-8"))
    for document in (run, summary):
        ran = document["ran"]
        assert set(ran) == {"sample_facts", "sample_choice"}
        for parts in ran.values():
            assert parts["agent"] == {
                "class": "conftest:MyAgent", "factory": "conftest:build_my_agent", "kind": "conftest:build_my_agent",
                "memory_strategy": "deterministic_recall", "options": {},
            }
            assert parts["memory"] == {
                "class": "conftest:MyMemory", "factory": "conftest:build_my_memory", "backend": "conftest:build_my_memory",
            }
    result.stdout.fnmatch_lines(["ran: agent conftest:MyAgent (built by conftest:build_my_agent); memory conftest:MyMemory*"])
    report = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert "conftest:MyAgent" in report and "conftest:MyMemory" in report
    (arm,) = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))["evomemory"]["arms"]
    identity = arm["identity"]
    assert identity["agent"]["kind"] == "conftest:build_my_agent" and identity["agent"]["class"] == "conftest:MyAgent"
    assert identity["agent"]["options"] == {} and identity["agent"]["memory_strategy"] == "deterministic_recall"
    assert identity["memory"]["backend"] == "conftest:build_my_memory" and identity["memory"]["class"] == "conftest:MyMemory"
    assert identity["model"] is None
    assert "recall_baseline" not in json.dumps(identity["agent"]) and "inprocess" not in json.dumps(identity["memory"])
    assert_run_dir_valid(pytester.path / "out")  # a conftest's agent and memory, as the schema says
    assert_json_report_valid(json.loads((pytester.path / "report.json").read_text(encoding="utf-8")))
    properties = _junit_properties(pytester.path / "junit.xml")
    assert properties["evomemory_agent"] == ["conftest:MyAgent (built by conftest:build_my_agent)"]
    assert properties["evomemory_memory"] == ["conftest:MyMemory (built by conftest:build_my_memory)"]
    assert properties["evomemory_model"] == ["none (model-free agent)"]
    from pytest_evomemory.reporting.html import write_comparison

    files = write_comparison([pytester.path / "out", pytester.path / "out"], pytester.path / "c.html", ["a", "b"])
    assert files.document["runs"][0]["agent"]["class"] == "conftest:MyAgent"
    assert "conftest:MyAgent" in files.html.read_text(encoding="utf-8")


#: A stand-in for llama.cpp with the real provider's config shape and code path
#: (LocalChatModel, its file identity and hash): the 135M model is only slow here.
EMBEDDED_CONFTEST = """
import json
import threading

from pytest_evomemory.models import local
from pytest_evomemory.core.types import Usage


def load_model(path, n_ctx, n_threads=1):
    return local._LoadedModel(object(), threading.Lock(), path, n_ctx)


def generate(llama, messages, tools, **settings):
    feedback = any("Feedback on the task" in str(message.get("content")) for message in messages)
    answer = "Feedback recorded" if feedback else "A"
    text = json.dumps({"name": "final_answer", "arguments": {"answer": answer}})
    return local.Generation(text, ("final_answer", json.dumps({"answer": answer})), "tool_calls", Usage(20, 5))


local.load_model = load_model
local.generate = generate
"""

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _embedded_arm(pytester: pytest.Pytester) -> tuple[Path, str]:
    """A run config whose agent runs an embedded model file; its path and the file's SHA-256."""
    model = pytester.path / "models" / GGUF_NAME
    model.parent.mkdir()
    model.write_bytes(b"GGUF" + bytes(range(256)) * 16)
    agent = {"kind": "tiny", "memory_strategy": "deterministic_recall", "max_steps": 3, "model": {
        "provider": "local", "model_path": str(model), "n_ctx": 512, "max_tokens": 16, "temperature": 0, "cache": False,
    }}
    run = pytester.path / "embedded.yaml"
    run.write_text(json.dumps({
        "name": "embedded", "benchmark": {"benchmark": "sample", "limit": 2}, "agent": agent,
        "memory": {"backend": "inprocess"},
    }), encoding="utf-8")
    return run, hashlib.sha256(model.read_bytes()).hexdigest()


@pytest.mark.slow
def test_an_embedded_model_is_named_by_its_file_and_hash_in_every_artefact(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "cache"))
    pytester.makeconftest(EMBEDDED_CONFTEST)
    run, digest = _embedded_arm(pytester)
    result = pytester.runpytest_subprocess(
        f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", f"--evomemory-config={run}", "--evomemory-output-dir=out",
        "--evomemory-limit=2", "--json-report", "--json-report-file=report.json", "--junitxml=junit.xml",
    )
    assert result.ret == 0, result.stdout.str()
    short = f"{GGUF_NAME} sha256 {digest[:12]}"
    out = pytester.path / "out"
    # the terminal: the header before the run, the summary after it
    result.stdout.fnmatch_lines([f"evomemory: [[]embedded[]] model local {short} (temperature 0.0, max_tokens 16, seed 0)"])
    result.stdout.fnmatch_lines([f"ran: agent *TinyAgent*; model local {short}*"])
    texts: dict[str, str] = {"terminal": result.stdout.str()}
    for name in ("run.json", "summary.json", "report.html"):
        texts[f"embedded/{name}"] = (out / "embedded" / name).read_text(encoding="utf-8")
    for name in ("compare.html", "compare.json", "../report.json", "../junit.xml"):
        texts[name] = (out / name).read_text(encoding="utf-8")
    for where, text in texts.items():
        assert GGUF_NAME in text, where
        assert "gpt-4o-mini" not in text, where  # the API default a local model never used
    for where in ("embedded/run.json", "embedded/summary.json", "compare.json", "../report.json"):
        assert digest in texts[where], where  # the whole hash where data is read by programs
    for where in ("embedded/report.html", "compare.html", "../junit.xml"):
        assert short in texts[where], where
    summary = json.loads(texts["embedded/summary.json"])
    model: dict[str, Any] = summary["ran"]["sample_facts"]["model"]
    assert model["provider"] == "local" and model["file"] == GGUF_NAME and model["sha256"] == digest
    assert "model" not in model and "source" not in model
    config_model = json.loads(texts["embedded/run.json"])["run"]["agent"]["model"]
    assert "model" not in config_model and "base_url" not in config_model and config_model["n_ctx"] == 512
    block = json.loads(texts["../report.json"])["evomemory"]
    identities = {arm["name"]: arm["identity"] for arm in block["arms"]}
    assert identities["embedded"]["model"]["sha256"] == digest
    assert identities["sample_no_memory"]["model"] is None
    comparison = json.loads(texts["compare.json"])
    assert [run["model"] and run["model"]["file"] for run in comparison["runs"]] == [None, GGUF_NAME]
    # the config diff names the model section once, not a row per key against null
    assert [row["key"] for row in comparison["config_diff"] if row["key"].startswith("agent.model")] == ["agent.model"]
    properties = _junit_properties(pytester.path / "junit.xml")
    assert any(value.startswith(f"embedded: local {short}") for value in properties["evomemory_model"])
    # every artefact, a local model's identity included, is what the shipped schema says
    for arm in ("embedded", "sample_no_memory"):
        assert_run_dir_valid(out / arm)
    assert_valid("compare.json", comparison)
    assert_json_report_valid(json.loads(texts["../report.json"]))
    # the agent ran: its transcripts are in the drill-down
    pages = read_task_pages(texts["embedded/report.html"])
    assert [task["a"] for task in pages["sample_facts"]] == ["A", "A"]


def test_the_header_gives_the_model_in_words(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--collect-only")
    result.stdout.fnmatch_lines(["evomemory: model none (model-free agent)"])
    assert "{" not in "\n".join(line for line in result.outlines if line.startswith("evomemory: model"))


def test_a_resumed_run_names_what_ran_in_every_stream(pytester: pytest.Pytester) -> None:
    """Not only the streams the resuming process started: the run is one run."""
    first = pytester.runpytest(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=out", "--evomemory-limit=2", "-k", "sample_facts",
    )
    first.assert_outcomes(passed=2, deselected=2)
    resumed = pytester.runpytest("--evomemory-resume=out")
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.stdout.fnmatch_lines(["ran: agent *RecallBaselineAgent* [[]sample_facts, sample_choice[]]"])
    for name in ("summary.json", "run.json"):
        document = json.loads((pytester.path / "out" / name).read_text(encoding="utf-8"))
        assert set(document["ran"]) == {"sample_facts", "sample_choice"}, name
