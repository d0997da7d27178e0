"""Run documents whose ``ran`` (summary.json) and ``run.agent`` (run.json) hold the
identity blocks every provider writes, and the shapes older runs wrote: what the
identity readers (the run page's metadata, the JUnit properties) are tested on."""

from __future__ import annotations

from typing import Any

SHA = "0123456789abcdef" * 4

AGENT = {"class": "pytest_evomemory.agents.tiny:TinyAgent", "factory": "pytest_evomemory.agents.tiny:build",
         "kind": "tiny", "memory_strategy": "deterministic_recall", "options": {"max_turns": 3}}
MEMORY = {"class": "pytest_evomemory.memory.inprocess:InProcessMemory",
          "factory": "pytest_evomemory.memory.inprocess:build", "backend": "inprocess", "top_k": 4}
CONFIGURED_AGENT = {"kind": "tiny", "memory_strategy": "deterministic_recall", "options": {"max_turns": 3}}
CONFIGURED_MEMORY = {"backend": "inprocess", "top_k": 4}

LOCAL = {"provider": "local", "file": "SmolLM2.gguf", "path": "/m/SmolLM2.gguf", "sha256": SHA, "n_ctx": 4096,
         "temperature": 0.0, "max_tokens": 1024, "seed": 0}
OPENAI = {"provider": "openai", "model": "gpt-4o-mini", "endpoint": "http://127.0.0.1:8000/v1", "temperature": 0,
          "reported": ["gpt-4o-mini-2024-07-18"]}
MOCK = {"provider": "mock", "model": "mock-model", "mode": "oracle", "answers": "/a/answers.jsonl", "sha256": SHA,
        "temperature": 0.0}
OWN = {"provider": "my-server", "model": "house-model", "quantisation": "q4"}
FROM_CONFIG = {"provider": "openai", "model": "gpt-4o-mini", "endpoint": "http://127.0.0.1:8000/v1", "source": "config"}
#: what runs before the record named a file (``file``) and an endpoint (``endpoint``) wrote
OLD_LOCAL = {"provider": "local", "model_path": "/m/old/SmolLM2-old.gguf", "temperature": 0.0}
OLD_API = {"provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1"}


def run_json(agent: dict[str, Any] | None = None, memory: dict[str, Any] | None = None,
             model: dict[str, Any] | None = None) -> dict[str, Any]:
    agent = dict(CONFIGURED_AGENT if agent is None else agent)
    if model is not None:
        agent["model"] = model
    return {"run": {"name": "r", "benchmark": {"benchmark": "sample"}, "agent": agent,
                    "memory": CONFIGURED_MEMORY if memory is None else memory}}


def _ran(model: dict[str, Any] | None, agent: dict[str, Any] | None = None,
         memory: dict[str, Any] | None = MEMORY) -> dict[str, Any]:
    return {"agent": AGENT if agent is None else agent, "memory": memory, "model": model}


def summary(ran: dict[str, Any] | None) -> dict[str, Any]:
    return {"started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z",
            "versions": {"pytest-evomemory": "1.0"}, **({"ran": ran} if ran is not None else {})}


#: name -> (summary.json, run.json)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "local": (summary({"s1": _ran(LOCAL), "s2": _ran(LOCAL)}), run_json(model={"provider": "local"})),
    "openai": (summary({"s1": _ran(OPENAI)}), run_json(model={"provider": "openai", "model": "gpt-4o-mini"})),
    "mock": (summary({"s1": _ran(MOCK)}), run_json(model={"provider": "mock", "model": "mock-model"})),
    "own model, conftest factories": (summary({"s1": _ran(OWN, agent={
        "class": "conftest:MyAgent", "factory": "conftest:build", "kind": "conftest:build",
        "memory_strategy": "tool_use", "options": {}}, memory={
        "class": "conftest:MyMemory", "factory": "conftest:memory", "backend": "conftest:memory"})}), run_json()),
    "model from the config": (summary({"s1": _ran(FROM_CONFIG)}), run_json()),
    "model-free agent without memory": (summary({"s1": _ran(None, agent={
        "class": "a:Rule", "factory": "a:build", "kind": "a:build", "memory_strategy": "none"}, memory=None)}),
        run_json(agent={"kind": "a:build", "memory_strategy": "none"})),
    "streams that ran different models": (summary({"s1": _ran(LOCAL), "s2": _ran(OPENAI)}), run_json()),
    "full-context arm": (summary({"s1": _ran(LOCAL, agent={**AGENT, "memory_strategy": "none",
                                                           "full_context": True}, memory=None)}),
                         run_json(agent={"kind": "tiny", "memory_strategy": "none", "full_context": True})),
    "old local record": (summary({"s1": _ran(OLD_LOCAL)}), run_json()),
    "old api record": (summary({"s1": _ran(OLD_API)}), run_json()),
    "old run without a record of what ran": (summary(None), run_json(model={
        "provider": "local", "model": "gpt-4o-mini", "model_path": "/m/SmolLM2.gguf", "temperature": 0.0})),
    "old api run without a record": (summary(None), run_json(model={
        "provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1", "seed": 1})),
}
