"""The memory libraries as backends (Mem0, LangMem): the real libraries, offline.

Model calls go to the scripted OpenAI-compatible server on 127.0.0.1, which also
answers ``/v1/embeddings`` and plays the libraries' fact extraction (Mem0's JSON
reply, LangMem's ``Memory`` tool calls). What is proved here, beyond the shared
conformance suite (which runs both with ``infer: false``):

* the backends are registered like the built-in ones (``BACKEND`` with its
  section model, extra and check), without importing the libraries;
* the configuration is refused up front, naming the key (unknown keys of the
  backend's section, a missing extra, ``infer`` without a model endpoint, two
  embedders);
* the tools are the libraries' own operations under their own names, and the
  isolation guard reads their results;
* ``infer: true`` stores what the library's LLM extracted (one model call per
  retain for Mem0), and facts extracted alike in two streams are not a leak;
* a snapshot restores the store exactly: the same ids, contents and scores bit
  for bit, and the same ranking for what is written afterwards;
* a whole run (TinyAgent calling the library's tools, the library calling its
  model, the bundled MiniLM embedding) opens no socket off 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import run_benchmark
from pytest_evomemory.config import MemoryConfig, ModelConfig
from pytest_evomemory.configs.load import load_run_config, unread_memory_options, validate_memory
from pytest_evomemory.core.errors import ConfigError, MemoryBackendError, ProtocolViolation
from pytest_evomemory.core.tools import ToolArgumentError
from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT
from pytest_evomemory.memory import IsolationGuard, ObservedMemory, build_memory
from pytest_evomemory.memory.base import MemoryContext, SelectiveStore
from pytest_evomemory.memory.factory import MEMORY_BACKENDS
from pytest_evomemory.memory.libraries import NO_KEY, ChatEndpoint, resolve_chat
from pytest_evomemory.memory.tools import MemoryTool, tool_role
from pytest_evomemory.testing.scripted_server import (
    ScriptedServer,
    echo_policy,
    final_answer,
    langmem_conversation,
    mem0_new_messages,
    memory_library_policy,
    scripted_model_config,
    task_text,
    text,
    tool_call,
)

from ..conftest import read_jsonl
from .conftest import HAS_EMBEDDINGS_EXTRA, NO_EMBEDDINGS_REASON, skip_without_extra

LIBRARIES = ["mem0", "langmem"]
WORDS = "river mountain signal quantum ledger harvest orbit velvet cipher lantern meadow granite".split()


@pytest.fixture(params=LIBRARIES)
def library(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    skip_without_extra(backend)
    return backend


def memory_config(backend: str, **settings: Any) -> MemoryConfig:
    """The backend with the hashing embedder, ``infer: false`` unless ``settings`` say
    otherwise (its own section: ``memory.mem0`` / ``memory.langmem``)."""
    return validate_memory(
        {"backend": backend, "top_k": 3, "embedder": "hashing", backend: {"infer": False, **settings}}, "memory.yaml"
    )


def check_memory_backend(config: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
    """The backend's preflight check, as the session runs it before any stream."""
    check = MEMORY_BACKENDS.get(config.backend).check
    assert check is not None
    check(config, agent_model, source)


@pytest.fixture
def open_library(tmp_path: Path) -> Iterator[Any]:
    opened: list[Any] = []

    def open_(backend: str, stream: str = "s1", agent_model: ModelConfig | None = None, **options: Any) -> Any:
        memory = build_memory(memory_config(backend, **options), MemoryContext(stream, tmp_path / "run", "r", agent_model))
        opened.append(memory)
        return memory

    yield open_
    for memory in opened:
        memory.close()


#: A question and its answer, as the tests retain them ("Q: ... A: ...") or as
#: TinyAgent's experiences hold them ("Task: ... Correct answer: ...").
_PAIR = re.compile(r"(?:Q|Task): (.+?)\s*(?:My answer: .*?\s*)?(?:A|Correct answer): ([^\n\"\\]+)")


def the_facts(text: str) -> list[str]:
    """The canned extraction: every question/answer pair in the text, as one fact."""
    return [f"Q: {question.strip()} A: {answer.strip()}" for question, answer in _PAIR.findall(text)]


# --------------------------------------------------------------------------- configuration, refused up front


def _name(kind: object) -> str:
    return f"{getattr(kind, '__module__', '')}:{getattr(kind, '__qualname__', '')}"


def test_the_backends_are_registered_with_their_sections_without_importing_the_libraries() -> None:
    """Loading a mem0 or langmem memory config (which reads every backend's section
    model from the registry) imports neither library: only opening a stream does."""
    mem0, langmem = MEMORY_BACKENDS.get("mem0"), MEMORY_BACKENDS.get("langmem")
    # compared by name: an in-process pytester run earlier in this worker may have
    # dropped the backend modules from sys.modules after the registry resolved them,
    # so a fresh import here would make classes equal in all but identity
    assert (_name(mem0.options), mem0.extra, mem0.check is not None, mem0.locations is not None) == (
        "pytest_evomemory.memory.mem0:Mem0Options", "mem0", True, True)
    assert (_name(langmem.options), langmem.extra, langmem.check is not None) == (
        "pytest_evomemory.memory.langmem:LangMemOptions", "langmem", True)
    assert (getattr(mem0.options, "SECTION", None), getattr(langmem.options, "SECTION", None)) == ("mem0", "langmem")
    code = (
        "import sys\n"
        "from pytest_evomemory.configs.load import validate_memory\n"
        "for name in ('mem0', 'langmem'):\n"
        "    validate_memory({'backend': name, name: {'infer': False}}, 'memory.yaml')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('mem0', 'langmem', 'langgraph', 'langchain_openai', 'qdrant_client'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_free_form_options_are_refused_for_the_libraries(library: str) -> None:
    """Their settings are their own section's; ``memory.options`` is read by neither."""
    config = validate_memory({"backend": library, "options": {"infer": False}}, "memory.yaml")
    problem = unread_memory_options(config)
    assert problem is not None and "['infer']" in problem


@pytest.mark.parametrize(
    ("settings", "key", "message"),
    [
        ({"infr": False}, "infr", "unknown key (did you mean 'infer'?); the keys here are: infer, llm, embeddings"),
        ({"infer": "no"}, "infer", "bool"),
        ({"infer": False, "llm": {"base_url": "localhost:8000/v1"}}, "llm.base_url", "http://"),
        ({"infer": False, "llm": {"api_key_env": "sk-abcdefghijklmnopqrstuvwxyz0123456789"}}, "llm.api_key_env",
         "looks like the secret itself"),
        ({"infer": False, "embeddings": {"base_url": "http://127.0.0.1:1/v1"}}, "embeddings.model", "missing"),
    ],
)
def test_a_bad_setting_is_refused_naming_its_key(library: str, settings: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        validate_memory({"backend": library, library: settings}, "memory.yaml")
    assert caught.value.key == f"{library}.{key}"
    assert str(caught.value).startswith("memory.yaml")
    assert "sk-abcdefghij" not in str(caught.value)


def test_a_section_of_the_other_library_is_refused(library: str) -> None:
    other = "langmem" if library == "mem0" else "mem0"
    with pytest.raises(ConfigError, match=f"key '{other}' is read only by memory backend '{other}'"):
        validate_memory({"backend": library, other: {"infer": False}}, "memory.yaml")


def test_mem0_path_must_give_every_stream_its_own_store() -> None:
    with pytest.raises(ConfigError, match=r"must contain '\{stream\}'") as caught:
        validate_memory({"backend": "mem0", "mem0": {"infer": False, "path": "/data/mem0"}}, "memory.yaml")
    assert caught.value.key == "mem0.path"


@pytest.mark.parametrize("agent_model", [None, ModelConfig(provider="local")], ids=["model-free agent", "local model"])
def test_infer_without_a_model_endpoint_is_refused_before_any_stream(library: str, agent_model: ModelConfig | None) -> None:
    config = validate_memory({"backend": library}, "memory.yaml")  # infer: true is the libraries' default
    pattern = rf"set {library}.llm.base_url and {library}.llm.model .* or set {library}.infer: false"
    with pytest.raises(ConfigError, match=pattern) as caught:
        check_memory_backend(config, agent_model, "memory.yaml")
    assert caught.value.key == f"{library}.infer"


def test_two_embedders_are_refused(library: str) -> None:
    config = validate_memory({
        "backend": library, "embedder": "hashing",
        library: {"infer": False, "embeddings": {"base_url": "http://127.0.0.1:1/v1", "model": "e"}},
    }, "memory.yaml")
    with pytest.raises(ConfigError, match=r"both an embeddings endpoint and memory\.embedder"):
        check_memory_backend(config, None, "memory.yaml")


def test_the_agents_key_goes_only_to_the_agents_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KEY", "secret-of-the-agent")
    agent = ModelConfig(base_url="https://models.example/v1", model="m", api_key_env="AGENT_KEY")
    same = resolve_chat(None, agent, "mem0", "memory.yaml")
    assert (same.base_url, same.model, same.api_key) == ("https://models.example/v1", "m", "secret-of-the-agent")
    other = resolve_chat(ChatEndpoint(base_url="http://127.0.0.1:9000/v1"), agent, "mem0", "memory.yaml")
    assert (other.base_url, other.model, other.api_key) == ("http://127.0.0.1:9000/v1", "m", NO_KEY)
    monkeypatch.delenv("AGENT_KEY")
    with pytest.raises(ConfigError, match=r"AGENT_KEY .* is not set"):
        resolve_chat(None, agent, "mem0", "memory.yaml")


def test_the_agents_key_survives_the_loaders_section_defaults(library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader records a section with every default (run.json says every setting):
    an ``llm`` naming only another model still calls the agent's endpoint with the
    agent's key, and one naming another server gets no key unless it names one."""
    monkeypatch.setenv("AGENT_KEY", "secret-of-the-agent")
    monkeypatch.setenv("OTHER_KEY", "secret-of-the-other")
    agent = ModelConfig(base_url="https://models.example/v1", model="m", api_key_env="AGENT_KEY")
    options = MEMORY_BACKENDS.get(library).options
    assert options is not None

    def resolved(llm: dict[str, Any]) -> tuple[str | None, str, str]:
        config = validate_memory({"backend": library, library: {"llm": llm}}, "memory.yaml")
        chat = resolve_chat(config.section(options).llm, agent, library, "memory.yaml")  # type: ignore[attr-defined]
        return chat.base_url, chat.model, chat.api_key

    assert resolved({"model": "extractor"}) == ("https://models.example/v1", "extractor", "secret-of-the-agent")
    assert resolved({"base_url": "http://127.0.0.1:9000/v1"}) == ("http://127.0.0.1:9000/v1", "m", NO_KEY)
    assert resolved({"base_url": "http://127.0.0.1:9000/v1", "api_key_env": "OTHER_KEY"})[2] == "secret-of-the-other"


def test_a_missing_extra_is_one_line_and_exit_4_before_any_task(
    write_run_config: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from pytest_evomemory.cli import main

    run = write_run_config(memory={"backend": "mem0", "mem0": {"infer": False}})
    monkeypatch.setitem(sys.modules, "mem0", None)  # as if mem0ai were not installed
    assert importlib.util.find_spec("mem0") is None
    status = main(["run", "--config", str(run), "--output-dir", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert status == 4
    (line,) = error.strip().splitlines()
    assert line.startswith("evomemory: error: ") and line.endswith(
        "key 'backend': memory backend 'mem0' needs mem0, which is not installed; "
        "install it with: pip install 'pytest-evomemory[mem0]'"
    )
    assert not (tmp_path / "out" / "scores.jsonl").exists()


def test_a_missing_extra_names_every_absent_module_in_one_sentence() -> None:
    """A fresh venv lacks both of mem0's modules: the line said "needs mem0,
    qdrant_client, which is not installed"."""
    from dataclasses import replace

    from pytest_evomemory.memory.factory import MEMORY_BACKENDS, missing_extra

    spec = MEMORY_BACKENDS.get("mem0")
    two = replace(spec, requires=("evomemory_absent_a", "evomemory_absent_b"))
    assert missing_extra(two) == (
        "memory backend 'mem0' needs evomemory_absent_a and evomemory_absent_b, which are not installed; "
        "install them with: pip install 'pytest-evomemory[mem0]'"
    )
    one = replace(spec, requires=("json", "evomemory_absent_a"))
    assert missing_extra(one) == (
        "memory backend 'mem0' needs evomemory_absent_a, which is not installed; "
        "install it with: pip install 'pytest-evomemory[mem0]'"
    )


def test_two_arms_sharing_a_mem0_store_are_refused_before_any_task(
    write_run_config: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Mem0 keeps its store in files (its backend's ``locations``): a ``mem0.path``
    without ``{run_name}`` would give two arms one store, which the preflight refuses."""
    from pytest_evomemory.cli import main

    memory = {"backend": "mem0", "embedder": "hashing", "mem0": {"infer": False, "path": str(tmp_path / "mem0" / "{stream}")}}
    arms = [
        write_run_config(name=f"arm_{arm}", memory=memory, directory=tmp_path / arm) for arm in ("a", "b")
    ]
    status = main(["run", *(f"--config={arm}" for arm in arms), "--output-dir", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert status == 4
    assert "arm 'arm_b', stream 'sample_facts' would keep its memory in" in error and "{run_name}" in error
    assert not (tmp_path / "mem0").exists()


# --------------------------------------------------------------------------- the libraries' own tools


def test_mem0_tools_are_add_search_delete_with_mem0s_results(open_library: Any) -> None:
    skip_without_extra("mem0")
    memory = open_library("mem0")
    tools = {tool.name: tool for tool in memory.tools()}
    assert {name: tool_role(tool) for name, tool in tools.items()} == {"add": "retain", "search": "recall", "delete": "forget"}
    added = json.loads(tools["add"].handler({"messages": "The ferry leaves at 7:15 from pier 4."}))
    (item,) = added["results"]
    assert (item["memory"], item["event"]) == ("The ferry leaves at 7:15 from pier 4.", "ADD")
    found = json.loads(tools["search"].handler({"query": "when does the ferry leave from the pier"}))
    assert [(hit["id"], hit["memory"]) for hit in found["results"]] == [(item["id"], item["memory"])]
    assert found["results"][0]["agent_id"] and isinstance(found["results"][0]["score"], float)
    assert json.loads(tools["delete"].handler({"memory_id": item["id"]})) == {"message": "Memory deleted successfully!"}
    with pytest.raises(ToolArgumentError, match="not found"):
        tools["delete"].handler({"memory_id": item["id"]})
    assert json.loads(tools["search"].handler({"query": "ferry pier"})) == {"results": []}


def test_langmem_tools_are_manage_memory_and_search_memory_with_langmems_results(open_library: Any) -> None:
    skip_without_extra("langmem")
    memory = open_library("langmem")
    tools = {tool.name: tool for tool in memory.tools()}
    assert {name: tool_role(tool) for name, tool in tools.items()} == {"manage_memory": "retain", "search_memory": "recall"}
    assert set(tools["manage_memory"].spec.parameters["properties"]) == {"content", "action", "id"}
    assert tools["search_memory"].spec.parameters["required"] == ["query"]
    created = tools["manage_memory"].handler({"content": "The ferry leaves at 7:15 from pier 4."})
    key = created.removeprefix("created memory ")
    found = json.loads(tools["search_memory"].handler({"query": "ferry pier"}))
    assert [(item["key"], item["value"]) for item in found] == [(key, {"content": "The ferry leaves at 7:15 from pier 4."})]
    assert tools["manage_memory"].handler({"action": "update", "id": key, "content": "The ferry leaves at 8:00."}) == (
        f"updated memory {key}"
    )
    assert [hit.content for hit in memory.recall("ferry")] == ["The ferry leaves at 8:00."]
    tools["manage_memory"].handler({"action": "delete", "id": key})
    assert memory.recall("ferry") == []
    with pytest.raises(ToolArgumentError, match="MEMORY ID"):
        tools["manage_memory"].handler({"action": "delete"})


def test_the_isolation_guard_reads_the_libraries_search_results(library: str, open_library: Any) -> None:
    """A record of an earlier stream showing up in a later one is caught in the
    library's own result format too (here: the earlier stream's store, reused)."""
    backend = open_library(library)
    guard = IsolationGuard()
    first = ObservedMemory(backend, "first", guard)
    tools = {tool_role(tool): tool for tool in first.tools()}
    argument = (tools["retain"].spec.parameters.get("required") or ["content"])[0]
    tools["retain"].handler({argument: "alpha secret: the vault code is 1234"})
    tools["recall"].handler({"query": "vault code secret"})
    assert first.recalled and first.recalled[0]["content"] == "alpha secret: the vault code is 1234"
    guard.end_stream()
    second = ObservedMemory(backend, "second", guard)  # a backend that failed to give it a fresh store
    recall = {tool_role(tool): tool for tool in second.tools()}["recall"]
    assert isinstance(recall, MemoryTool) and recall.read_records is not None
    with pytest.raises(ProtocolViolation, match="memory leak: recall in stream 'second'"):
        recall.handler({"query": "vault code secret"})


# --------------------------------------------------------------------------- infer: the library's LLM decides


def test_infer_stores_what_the_librarys_model_extracted_and_alike_facts_are_no_leak(
    library: str, open_library: Any
) -> None:
    with ScriptedServer(memory_library_policy(the_facts)) as server:
        agent = scripted_model_config(server)
        guard = IsolationGuard()
        for stream in ("first", "second"):
            memory = ObservedMemory(open_library(library, stream, agent, infer=True), stream, guard)
            before = len(server.requests)
            memory.retain("Task: What colour are the post boxes?\nQ: What colour are the post boxes?\nA: teal")
            memory.retain("Nothing worth remembering was said.")
            if library == "mem0":
                assert len(server.requests) - before == 2  # one extraction call per add
            hits = memory.recall("post boxes colour")
            # the extracted fact, not the text retained; the same text in both streams,
            # with new ids: the guard does not take it for a leak
            assert [hit.content for hit in hits] == ["Q: What colour are the post boxes? A: teal"]
            memory.close()
        assert server.requests and all(request.status == 200 for request in server.requests)


def _stub_model(request: Mapping[str, Any]) -> Any:
    """A stub model: "A" to every request, the library's extraction included (no
    fact in a form the library reads)."""
    return final_answer("A") if request.get("tools") else {"choices": [
        {"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}]}


def test_a_retain_the_librarys_extraction_stored_nothing_for_is_counted(library: str, open_library: Any) -> None:
    """With infer the library's model decides what to keep: a reply with no new fact
    (or one the library cannot read, as a stub model gives) stores nothing and the
    retain still succeeds. The memory counts it (SelectiveStore), and the observed
    memory's marks carry the count, so a turn's response says how many."""
    with ScriptedServer(memory_library_policy(the_facts)) as server:
        memory = ObservedMemory(open_library(library, "s", scripted_model_config(server), infer=True), "s")
        assert isinstance(memory.backend, SelectiveStore) and memory.backend.unstored_retains == 0
        memory.mark()
        assert memory.retain("Q: What colour are the post boxes?\nA: teal")  # a fact: stored
        assert memory.backend.unstored_retains == 0
        assert memory.retain("Nothing worth remembering was said.") == ""  # no fact: nothing stored
        memory.mark()
        assert (memory.backend.unstored_retains, memory.counts.unstored, memory.counts.retains) == (1, 1, 2)
        assert len(memory.backend) == 1
    with ScriptedServer(_stub_model) as server:
        stub = ObservedMemory(open_library(library, "t", scripted_model_config(server), infer=True), "t")
        for number in range(3):
            stub.retain(f"Q: Question {number}?\nA: answer {number}")
        if library == "mem0":  # Mem0's add tool goes through the same extraction
            add = next(tool for tool in stub.tools() if tool.name == "add")
            add.handler({"messages": "Q: What colour are the post boxes?\nA: teal"})
        stub.mark()
        assert stub.counts.unstored == stub.backend.unstored_retains == (4 if library == "mem0" else 3)
        assert len(stub.backend) == 0


def test_without_infer_every_retain_is_stored_and_none_is_counted(library: str, open_library: Any) -> None:
    memory = open_library(library, "s")
    memory.retain("Nothing worth remembering was said.")
    assert memory.unstored_retains == 0 and len(memory) == 1


class _CountsOddly:
    """An adapter's own ``unstored_retains`` that is no count."""

    unstored_retains: object = "many"


def test_an_adapters_unstored_count_that_is_no_whole_number_is_not_read() -> None:
    memory = ObservedMemory(_CountsOddly(), "s")  # type: ignore[arg-type]
    memory.mark()
    assert memory.counts.unstored == 0
    memory.backend.unstored_retains = 2  # type: ignore[attr-defined]
    memory.mark()
    assert memory.counts.unstored == 2


def test_a_run_whose_mem0_stored_nothing_says_so_once_per_stream(
    write_run_config: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evomemory run`` with Mem0 (infer) and a stub model: Mem0's extraction finds
    no fact in "A", so the store stays empty. Each feedback turn's response counts
    the retain that stored nothing, the stream's summary adds them up, and the
    terminal says so in one line for the stream, not one per retain."""
    skip_without_extra("mem0")
    from pytest_evomemory.cli import main

    def stub(request: Mapping[str, Any]) -> Any:
        return text("A") if mem0_new_messages(request) is not None else echo_policy(request)

    with ScriptedServer(stub) as server:
        run = write_run_config(
            benchmark={"benchmark": "sample", "streams": ["sample_facts"], "limit": 3},
            agent={"kind": "tiny", "memory_strategy": "deterministic_recall",
                   "model": scripted_model_config(server).model_dump(mode="json")},
            memory={"backend": "mem0", "top_k": 3, "embedder": "hashing", "mem0": {"infer": True}},
        )
        status = main(["run", "--config", str(run), "--output-dir", str(tmp_path / "out")])
    shown = capsys.readouterr().out
    assert status == 0, shown
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    stream = summary["streams"]["sample_facts"]
    assert stream["memory_retains"] == 3 and stream["memory_unstored"] == 3
    assert summary["overall"]["memory_unstored"] == 3
    responses = read_jsonl(tmp_path / "out" / "responses.jsonl")
    assert [r.get("memory_unstored") for r in responses] == [None, 1] * 3  # each feedback turn's retain
    lines = [line for line in shown.splitlines() if "stored nothing" in line]
    assert lines == ["evomemory: stream 'sample_facts': the mem0 memory stored nothing for 3 of 3 retains (its own "
                     "extraction kept nothing from them: with infer: true its model found no new fact, or replied in "
                     'a form the library does not read; docs/memory.md, "When a library stores nothing")']


def test_an_embeddings_endpoint_is_used_through_the_librarys_client(library: str, tmp_path: Path) -> None:
    with ScriptedServer(embedding_dims=32) as server:
        config = validate_memory({
            "backend": library, "top_k": 2,
            library: {"infer": False, "embeddings": {"base_url": server.base_url, "model": "scripted-embeddings"}},
        }, "memory.yaml")
        memory = build_memory(config, MemoryContext("s1", tmp_path / "run", "r"))
        try:
            memory.retain("the lighthouse lamp burns whale oil")
            memory.retain("the bakery opens at dawn")
            assert memory.recall("lighthouse lamp oil")[0].content == "the lighthouse lamp burns whale oil"
        finally:
            memory.close()
        assert len(server.embedding_requests) >= 4  # the probe for the vector size, two texts, one query
        assert {request["model"] for request in server.embedding_requests} == {"scripted-embeddings"}


# --------------------------------------------------------------------------- resume


def test_a_snapshot_restores_the_store_exactly(library: str, open_library: Any, tmp_path: Path) -> None:
    rng = random.Random(3)
    original = open_library(library, "s1")
    ids = [original.retain(" ".join(rng.choice(WORDS) for _ in range(8)), {"n": n}) for n in range(30)]
    forget = {tool_role(tool): tool for tool in original.tools()}
    if library == "mem0":  # a deleted point keeps its row in Qdrant: the restore must too
        forget["forget"].handler({"memory_id": ids[4]})
    else:
        forget["retain"].handler({"action": "delete", "id": ids[4]})
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    original.snapshot(snapshot)
    restored = open_library(library, "s2")
    restored.restore(snapshot)
    queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(25)]

    def answers(memory: Any) -> list[list[tuple[str, str, float, dict[str, Any]]]]:
        return [[(h.record_id, h.content, h.score, dict(h.metadata)) for h in memory.recall(q, top_k=5)] for q in queries]

    assert answers(restored) == answers(original)  # ids, contents, metadata, scores bit for bit
    for memory in (original, restored):
        memory.retain("granite lantern meadow after the restore")
    after = [[h.content for h in memory.recall("granite lantern", top_k=5)] for memory in (original, restored)]
    assert after[0] == after[1] and "granite lantern meadow after the restore" in after[0]


def test_a_snapshot_of_another_kind_is_refused(library: str, open_library: Any, tmp_path: Path) -> None:
    other = "langmem" if library == "mem0" else "mem0"
    skip_without_extra(other)
    source = open_library(other, "s1")
    source.retain("a record")
    source.snapshot(tmp_path)
    target = open_library(library, "s2")
    with pytest.raises(MemoryBackendError, match=f"was not written by a {library} memory.* cannot be restored into one"):
        target.restore(tmp_path)
    with pytest.raises(MemoryBackendError, match=rf"no {library} memory snapshot in .*manifest.json is missing"):
        target.restore(tmp_path / "elsewhere")
    # a snapshot file of its own name, written by something else
    (tmp_path / "manifest.json").write_text(json.dumps({"format": 99, "kind": other}), encoding="utf-8")
    with pytest.raises(MemoryBackendError, match=f"was not written by a {library} memory.* cannot be restored into one"):
        target.restore(tmp_path)


# --------------------------------------------------------------------------- a whole run, offline


def library_agent_policy(search: str | None, add: str | None, add_argument: str = "") -> Any:
    """TinyAgent's model. Tasks: search the library (tool_use; with deterministic
    recall the memories are in the prompt already) and answer with the answer of
    the most similar memory, "unknown" without one. Feedback: add "Q: task A: target"
    (tool_use) and acknowledge."""

    def policy(request: Mapping[str, Any]) -> Any:
        prompt = task_text(request)
        messages = list(request.get("messages") or [])
        called = [call["function"]["name"] for message in messages for call in message.get("tool_calls") or []]
        if FEEDBACK_ACKNOWLEDGEMENT in prompt:
            if add is None or add in called:
                return final_answer(FEEDBACK_ACKNOWLEDGEMENT)
            task = next(m["content"] for m in messages if m.get("role") == "user")
            target = re.search(r"correct answer[^:]*:\s*(.+)", prompt, re.IGNORECASE)
            assert target is not None, prompt
            return tool_call(add, {add_argument: f"Q: {task.strip()}\nA: {target.group(1).strip()}"})
        if search is not None and search not in called:
            return tool_call(search, {"query": prompt})
        remembered = next((m["content"] for m in reversed(messages) if m.get("role") == "tool"), prompt)
        pairs = _PAIR.findall(remembered)
        return final_answer(pairs[0][1].strip() if pairs else "unknown")

    return policy


_CONNECTIONS: list[tuple[str, Any]] = []
_AUDITING: list[bool] = []


def _audit(event: str, arguments: tuple[Any, ...]) -> None:
    if _AUDITING and event in ("socket.connect", "socket.getaddrinfo"):
        _CONNECTIONS.append((event, arguments[1] if event == "socket.connect" else arguments[0]))


@pytest.fixture
def socket_audit() -> Iterator[list[tuple[str, Any]]]:
    """Every socket connect and name lookup of this process while the test runs."""
    if not getattr(socket_audit, "installed", False):
        sys.addaudithook(_audit)  # audit hooks cannot be removed: it records only while asked to
        socket_audit.installed = True  # type: ignore[attr-defined]
    _CONNECTIONS.clear()
    _AUDITING.append(True)
    yield _CONNECTIONS
    _AUDITING.clear()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "strategy", "tools"),
    [
        # The agent calls Mem0's add and search; add has Mem0's LLM extract the facts.
        ("mem0", "tool_use", ("search", "add", "messages")),
        # ExpRAG through LangMem: retain hands each experience to LangMem's memory
        # manager (its LLM writes the memories), recall is the store search.
        ("langmem", "deterministic_recall", (None, None, "")),
    ],
)
def test_a_run_with_the_library_learns_and_no_socket_leaves_this_machine(
    backend: str,
    strategy: str,
    tools: tuple[str | None, str | None, str],
    write_run_config: Any,
    tmp_path: Path,
    socket_audit: list[tuple[str, Any]],
) -> None:
    """TinyAgent using the library, the library extracting facts with its model
    (infer) and embedding with the bundled MiniLM (the default): the repeated
    questions of the sample stream are answered from memory, and every connection
    of the process goes to 127.0.0.1."""
    skip_without_extra(backend)
    if not HAS_EMBEDDINGS_EXTRA:
        pytest.skip(NO_EMBEDDINGS_REASON)
    search, add, argument = tools
    with ScriptedServer(memory_library_policy(the_facts, then=library_agent_policy(search, add, argument))) as server:
        model = scripted_model_config(server).model_dump(mode="json")
        run = write_run_config(
            benchmark={"benchmark": "sample", "streams": ["sample_facts"], "limit": 8},
            agent={"kind": "tiny", "memory_strategy": strategy, "model": model},
            memory={"backend": backend, "top_k": 3, backend: {"infer": True}},
        )
        summary = run_benchmark(load_run_config(run), tmp_path / "out")
        extraction = [body for body in server.chat_requests if memory_library_request(body)]
    assert summary["completion"]["complete"], summary
    scores = read_jsonl(tmp_path / "out" / "scores.jsonl")
    # f04, f06 and f08 ask f01's, f02's and f03's questions again, reworded: only
    # those can be answered, and only from memory
    seen: set[str] = set()
    expected = []
    for score in scores:
        expected.append(score["target"] in seen)
        seen.add(score["target"])
    assert [score["correct"] for score in scores] == expected == [False] * 3 + [True, False, True, False, True]
    assert len(extraction) == 8  # the library's model extracted once per task's experience
    if add is not None:
        responses = read_jsonl(tmp_path / "out" / "responses.jsonl")
        called = {call["name"] for response in responses for call in response["tool_calls"]}
        assert {search, add} <= called
    hosts = {target[0] if isinstance(target, tuple) else target for _, target in socket_audit}
    assert hosts == {"127.0.0.1"}, socket_audit


def memory_library_request(body: Mapping[str, Any]) -> bool:
    return mem0_new_messages(body) is not None or langmem_conversation(body) is not None


@pytest.mark.slow
def test_mem0_runs_under_xdist_through_the_plugin_as_it_runs_alone(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``-n 2`` through the plugin (each worker a stream, each stream its own Mem0
    store, embedded Qdrant included) scores what one process scores (run_benchmark)."""
    skip_without_extra("mem0")
    config = (
        "name: mem0_xdist\nbenchmark: {benchmark: sample, limit: 4}\n"
        "agent: {kind: recall_baseline, memory_strategy: deterministic_recall}\n"
        "memory: {backend: mem0, top_k: 3, embedder: hashing, mem0: {infer: false}}\n"
    )
    (pytester.path / "run.yaml").write_text(config, encoding="utf-8")
    result = pytester.runpytest_subprocess("--evomemory-config=run.yaml", "--evomemory-output-dir=out", "-n", "2",
                                           "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=8)
    out = pytester.path / "out"
    assert sorted(p.name for p in (out / "memory").iterdir() if p.name.endswith(".mem0")) == [
        "sample_choice.mem0", "sample_facts.mem0"]
    run_benchmark(load_run_config(pytester.path / "run.yaml"), tmp_path / "alone")

    def scored(directory: Path) -> list[tuple[str, str, bool, str | None]]:
        return sorted((s["stream"], s["task_id"], s["correct"], s["extracted"]) for s in read_jsonl(directory / "scores.jsonl"))

    assert scored(out) == scored(tmp_path / "alone")


@pytest.mark.parametrize("variable", ["LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"])
def test_langmem_calls_are_never_traced_whatever_the_environment_says(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangMem's calls run with LangSmith tracing off; the context that turns it off is
    skipped only when nothing would trace (it costs 75 µs a call)."""
    skip_without_extra("langmem")
    from langsmith.utils import get_env_var, tracing_is_enabled

    from pytest_evomemory.memory.langmem import _untraced

    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.delenv(name, raising=False)
    get_env_var.cache_clear()
    assert not tracing_is_enabled()
    with _untraced():
        assert not tracing_is_enabled()
    monkeypatch.setenv(variable, "true")
    get_env_var.cache_clear()
    try:
        assert tracing_is_enabled()  # the environment asks for tracing ...
        with _untraced():
            assert not tracing_is_enabled()  # ... and LangMem's calls are not traced
    finally:
        monkeypatch.delenv(variable)
        get_env_var.cache_clear()
