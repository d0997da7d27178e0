"""Backend conformance through the strategies: every built-in backend, both memory
libraries and the copyable adapter of docs/memory.md run the same cases, as a run
uses them:

* **ExpRAG** (``exprag``): each task's experience is retained, and the next tasks'
  prompts hold the most similar ones, so a reworded question is answered from memory;
* **ExpRecent** (``exprecent``): the prompt holds the ``top_k`` experiences retained
  last, newest first, whatever their topic (the memory's ``recent``);
* **ReMem** (``remem``, ``tool_use``): the agent thinks, recalls and retains through
  the memory's own tools (by their roles: Mem0's ``search``/``add``/``delete``,
  LangMem's ``search_memory``/``manage_memory``, the docs' ``lookup``/``jot``/``tear_out``)
  and forgets a record that misled it where the memory has a forget tool;
* **LoCoMo ingestion** (``ingest: memory``): one record per dialogue turn, in order,
  with the turn's metadata, found again by a question's evidence;
* **resume after an interruption**: a LoCoMo run stopped in its first conversation
  and resumed ends with the scores and evidence recall of the uninterrupted run,
  without ingesting the conversation twice.

Models are the scripted OpenAI-compatible server on 127.0.0.1; the libraries store
text as given (``infer: false``) and embed with the hashing embedder (their ``infer``
and MiniLM runs are tests/memory/test_memory_libraries.py's). The library cases of
the two whole-run tests are marked slow.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import run_benchmark
from pytest_evomemory.agents.baseline import RecallBaselineAgent
from pytest_evomemory.agents.tiny import TinyAgent
from pytest_evomemory.config import AgentConfig
from pytest_evomemory.configs.load import load_run_config, validate_agent
from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample, Stimulus
from pytest_evomemory.evaluation.evomemory import EvoMemoryEvaluator
from pytest_evomemory.memory import MemorySystem, build_memory
from pytest_evomemory.memory.base import MemoryContext
from pytest_evomemory.memory.guard import records_in_tool_result
from pytest_evomemory.memory.langmem import read_search_result as langmem_results
from pytest_evomemory.memory.mem0 import read_search_result as mem0_results
from pytest_evomemory.runtime import ObservedMemory, StreamRun
from pytest_evomemory.runtime.stream import Episode, TaskOutcome
from pytest_evomemory.streams.locomo import SAMPLE_FILE, read_file
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    Reply,
    ScriptedServer,
    final_answer,
    make_echo_policy,
    scripted_model_config,
    text,
    tool_call,
)

from ..conftest import capture_responses, read_jsonl
from .conftest import DOCS_ADAPTER, LIBRARY_EXTRAS, memory_config, memory_document, skip_without_extra

LIBRARIES = ("mem0+hashing", "langmem+hashing")
STRATEGY_BACKENDS = ["inprocess", "sqlite+hashing", "dense+hashing", "postgres+hashing", *LIBRARIES, DOCS_ADAPTER]
#: The whole-run cases (three LoCoMo runs each) of the libraries are the slow ones.
HEAVY = [pytest.param(b, marks=pytest.mark.slow) if b in LIBRARIES else b for b in STRATEGY_BACKENDS]

POST = BenchmarkSample("f01", "facts", 0, "In Quillhaven, what colour are the post boxes?", "teal")
RIVER = BenchmarkSample("f02", "facts", 1, "Which river flows through Quillhaven's market?", "the Marrow")
CAT = BenchmarkSample("f03", "facts", 2, "What is the lighthouse keeper's cat called?", "Biscuit")
POST_AGAIN = BenchmarkSample("f04", "facts", 3, "Quillhaven post boxes: which colour are they painted?", "teal")
POST_NOW = BenchmarkSample("f05", "facts", 4, "In Quillhaven, what colour are the post boxes now?", "green")


def _kind(backend_id: str) -> str:
    return backend_id.partition("+")[0]


@pytest.fixture(params=STRATEGY_BACKENDS)
def strategy_backend(request: pytest.FixtureRequest) -> str:
    return _checked(request, request.param)


@pytest.fixture(params=HEAVY)
def heavy_backend(request: pytest.FixtureRequest) -> str:
    return _checked(request, request.param)


def _checked(request: pytest.FixtureRequest, backend_id: str) -> str:
    if _kind(backend_id) in LIBRARY_EXTRAS:
        skip_without_extra(_kind(backend_id))
    if backend_id.startswith("postgres"):
        request.getfixturevalue("postgres_settings")
    return backend_id


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> Callable[[str], Mapping[str, Any] | None]:
    def settings(backend_id: str) -> Mapping[str, Any] | None:
        return request.getfixturevalue("postgres_settings") if backend_id.startswith("postgres") else None

    return settings


@pytest.fixture
def open_backend(tmp_path: Path, postgres: Callable[[str], Mapping[str, Any] | None]) -> Iterator[Callable[..., MemorySystem]]:
    """``open_backend(backend_id, **memory_keys)``: the backend for stream ``facts``, as a run opens it."""
    opened: list[MemorySystem] = []

    def open_(backend_id: str, **overrides: Any) -> MemorySystem:
        config = memory_config(backend_id, dict(postgres(backend_id) or {}) or None, **overrides)
        memory = build_memory(config, MemoryContext("facts", tmp_path / "run", f"strat_{uuid.uuid4().hex[:10]}"))
        opened.append(memory)
        return memory

    yield open_
    for memory in opened:
        memory.close()


def stream_run(server: ScriptedServer, memory: MemorySystem, kind: str, *, top_k: int, **keys: Any) -> tuple[StreamRun, ObservedMemory]:
    """A StreamRun around the reference agent ``kind``, built as BenchmarkRun builds one."""
    config = validate_agent(
        {"kind": kind, "max_steps": keys.pop("max_steps", 6), "model": scripted_model_config(server), **keys},
        "test agent config",
    )
    observed = ObservedMemory(memory, "facts")
    deterministic = config.memory_strategy == "deterministic_recall"
    run = StreamRun(
        stream="facts", agent=TinyAgent(config, observed if deterministic else None), memory=observed,
        evaluator=EvoMemoryEvaluator(), memory_strategy=config.memory_strategy, max_steps=config.max_steps,
    )
    return run, observed


def episodes(run: StreamRun, samples: list[BenchmarkSample]) -> list[TaskOutcome]:
    """The stream's episodes, as run_stream runs them, leaving the memory open (and
    unreset) afterwards so that the test can read what it holds."""
    outcomes = []
    for sample in samples:
        episode = Episode(run, sample, lambda _record: None)
        try:
            outcomes.append(episode.run_task())
        finally:
            episode.finish()
    return outcomes


def newest_first(memory: MemorySystem) -> list[str]:
    recent = memory.recent  # every backend of this suite offers it
    return [hit.content for hit in recent(1000)]


# --------------------------------------------------------------------------- ExpRAG, ExpRecent


def _answer_from_the_first_experience(prompt: str) -> str:
    found = re.search(r"Correct answer: (.+)", prompt.split("Current task:")[0])
    return found.group(1).strip() if found else "blue"


def test_exprag_answers_a_reworded_question_from_the_most_similar_experience(
    strategy_backend: str, open_backend: Callable[..., MemorySystem], scripted_openai_server: ServerFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(_answer_from_the_first_experience))
    memory = open_backend(strategy_backend, top_k=1)
    run, observed = stream_run(server, memory, "exprag", top_k=1)
    responses = capture_responses(run)
    outcomes = episodes(run, [POST, RIVER, CAT, POST_AGAIN])
    # only the post-box question comes back, and only memory knows its answer
    assert [o.scored.score.correct for o in outcomes] == [False, False, False, True]
    last = [r for r in responses if r.kind == "task"][-1]
    assert last.memory_recalled[0]["content"].startswith(f"Task: {POST.prompt}\n")
    assert [text.splitlines()[0] for text in newest_first(memory)] == [
        f"Task: {sample.prompt}" for sample in (POST_AGAIN, CAT, RIVER, POST)
    ]
    assert observed.counts.retains == 4


def test_exprecent_shows_the_experiences_retained_last_newest_first(
    strategy_backend: str, open_backend: Callable[..., MemorySystem], scripted_openai_server: ServerFactory
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    memory = open_backend(strategy_backend, top_k=2)
    run, _ = stream_run(server, memory, "exprecent", top_k=2)
    responses = capture_responses(run)
    episodes(run, [POST, RIVER, CAT, POST_AGAIN])
    tasks = [r for r in responses if r.kind == "task"]
    assert [[hit["content"].splitlines()[0] for hit in r.memory_recalled] for r in tasks] == [
        [], [f"Task: {POST.prompt}"], [f"Task: {RIVER.prompt}", f"Task: {POST.prompt}"],
        [f"Task: {CAT.prompt}", f"Task: {RIVER.prompt}"],  # the most similar (POST) is not among them
    ]


# --------------------------------------------------------------------------- ReMem through the memory's own tools

#: tool name -> (role, its argument) for every memory of the suite.
TOOLS = {
    "retain": ("retain", "content"), "add": ("retain", "messages"), "manage_memory": ("retain", "content"),
    "jot": ("retain", "note"),
    "recall": ("recall", "query"), "search": ("recall", "query"), "search_memory": ("recall", "query"),
    "lookup": ("recall", "question"),
    "forget": ("forget", "id"), "delete": ("forget", "memory_id"), "tear_out": ("forget", "id"),
}


def _records(result: str) -> list[tuple[str | None, str]]:
    """(id, text) of a recall tool's result, in any of the suite's formats."""
    for reader in (mem0_results, langmem_results):
        found = reader(result)
        if found is not None:
            return found
    return records_in_tool_result(result) or []


def _tool(request: Mapping[str, Any], role: str) -> tuple[str, str] | None:
    for tool in request.get("tools", []):
        name = tool["function"]["name"]
        if TOOLS.get(name, ("", ""))[0] == role:
            return name, TOOLS[name][1]
    return None


def remem_policy(request: Mapping[str, Any]) -> Reply:
    """Think, recall, answer from the first recalled lesson; after the feedback retain
    the lesson and forget the recalled one that misled the answer (when it can)."""
    messages = list(request.get("messages") or [])[1:]
    feedback_at = next((i for i, m in enumerate(messages) if m["role"] == "user" and "Feedback on" in m["content"]), None)
    task = messages[0]["content"]
    task_part = messages if feedback_at is None else messages[:feedback_at]
    recall = _tool(request, "recall")
    results = [
        task_part[i + 1]["content"] for i, m in enumerate(task_part[:-1])
        if recall and any(c["function"]["name"] == recall[0] for c in m.get("tool_calls") or [])
    ]
    recalled = _records(results[-1]) if results else []
    if feedback_at is None:
        if not any(m["role"] == "assistant" for m in messages):
            return text("THINK: a fact about Quillhaven; my memory may hold it.")
        if not results and recall is not None:
            return tool_call(recall[0], {recall[1]: task})
        lessons = [content.rpartition("correct answer: ")[2] for _, content in recalled if "correct answer: " in content]
        return final_answer(lessons[0] if lessons else "blue")
    after = messages[feedback_at:]
    done = {c["function"]["name"] for m in after for c in m.get("tool_calls") or []}
    shown = after[0]["content"]
    correct = shown.split("The correct answer: ")[1].splitlines()[0]
    right = shown.split("Your submitted answer: ")[1].splitlines()[0] == correct
    retain, forget = _tool(request, "retain"), _tool(request, "forget")
    if retain is not None and retain[0] not in done:
        return tool_call(retain[0], {retain[1]: f"{task} -> correct answer: {correct}"})
    if recalled and not right and forget is not None and forget[0] not in done and recalled[0][0] is not None:
        return tool_call(forget[0], {forget[1]: recalled[0][0]})
    return final_answer(FEEDBACK_ACKNOWLEDGEMENT)


def test_remem_recalls_retains_and_forgets_through_the_memorys_own_tools(
    strategy_backend: str, open_backend: Callable[..., MemorySystem], scripted_openai_server: ServerFactory
) -> None:
    server = scripted_openai_server(remem_policy)
    builtin = _kind(strategy_backend) in ("inprocess", "sqlite", "dense", "postgres")
    memory = open_backend(strategy_backend, top_k=1, **({"editing_tools": True} if builtin else {}))
    run, observed = stream_run(server, memory, "remem", top_k=1)
    responses = capture_responses(run)
    outcomes = episodes(run, [POST, POST_AGAIN, POST_NOW])
    # task 2 answers from task 1's lesson; task 3 is misled by a lesson and gets it wrong
    assert [o.scored.score.correct for o in outcomes] == [False, True, False]
    assert outcomes[1].response.final_answer == "teal"
    can_forget = _tool(server.chat_requests[0], "forget") is not None
    assert can_forget == (_kind(strategy_backend) != "langmem")  # LangMem deletes through manage_memory
    lessons = [f"{sample.prompt} -> correct answer: {sample.target}" for sample in (POST, POST_AGAIN, POST_NOW)]
    left = newest_first(memory)[::-1]
    if can_forget:  # the lesson that misled task 3 is gone, the others stay in order
        assert len(left) == 2 and left[-1] == lessons[2] and set(left[:1]) < set(lessons[:2])
        assert observed.counts.forgets == 1
    else:
        assert left == lessons
    assert observed.counts.retains == 3
    assert all(r.protocol_violation is None for r in responses)


def test_the_dry_run_model_recalls_and_retains_through_the_memorys_own_tools(
    strategy_backend: str, open_backend: Callable[..., MemorySystem]
) -> None:
    """``provider: mock`` (``mode: memory``) checks a memory adapter before a paid run:
    it calls the memory's tools by the role the memory declares (Mem0's ``search``/``add``,
    LangMem's ``search_memory``/``manage_memory``, the docs' ``lookup``/``jot``), not by
    the names ``recall``/``retain``, and answers from what its recall returned."""
    memory = open_backend(strategy_backend, top_k=1)
    config = validate_agent({"kind": "tiny", "memory_strategy": "tool_use", "max_steps": 6,
                             "model": {"provider": "mock", "cache": False, "mock": {"mode": "memory"}}},
                            "test agent config")
    observed = ObservedMemory(memory, "facts")
    run = StreamRun(stream="facts", agent=TinyAgent(config, None), memory=observed, evaluator=EvoMemoryEvaluator(),
                    memory_strategy=config.memory_strategy, max_steps=config.max_steps)
    outcomes = episodes(run, [POST, POST_AGAIN])
    assert (observed.counts.recalls, observed.counts.retains) == (2, 2)
    assert [o.scored.score.correct for o in outcomes] == [False, True]
    assert outcomes[1].response.final_answer == "teal"


# --------------------------------------------------------------------------- LoCoMo: ingestion, and resume


def test_locomo_ingestion_stores_one_record_per_turn_with_its_metadata(
    strategy_backend: str, open_backend: Callable[..., MemorySystem]
) -> None:
    conversation = read_file(SAMPLE_FILE)[0]
    memory = open_backend(strategy_backend, top_k=3)
    observed = ObservedMemory(memory, conversation.sample_id)
    for session in conversation.sessions:
        observed.ingest(session)
    turns = [(session, turn) for session in conversation.sessions for turn in session.turns]
    stored = memory.recent(1000)[::-1]
    assert [hit.content for hit in stored] == [f"{session.date_time}: {turn.render()}" for session, turn in turns]
    assert [dict(hit.metadata) for hit in stored] == [
        {"conversation": session.conversation, "session": session.index, "date_time": session.date_time,
         "speaker": turn.speaker, "dia_id": turn.dia_id}
        for session, turn in turns
    ]
    assert observed.counts.retains == 0  # ingestion is not an agent operation
    # the questions' evidence turns are found again, by the dia_id in their metadata
    def found(question: str) -> set[Any]:
        return {hit.metadata.get("dia_id") for hit in observed.recall(question, top_k=5)}

    asked = [q for q in conversation.questions if q.evidence]
    assert any(set(q.evidence) <= found(q.question) for q in asked)


def _locomo_run(
    write_run_config: Callable[..., Path], out: Path, memory: Mapping[str, Any], *, stop_at: str | None = None,
    resume: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """A LoCoMo run of the recall baseline on the sample conversations; the agent
    interrupts the run at ``stop_at`` (``stream/task``). Returns the summary and the
    ingestion calls made."""
    config = load_run_config(write_run_config(
        name="locomo_conformance", benchmark={"benchmark": "locomo_sample"},
        agent={"kind": "recall_baseline", "memory_strategy": "deterministic_recall"}, memory=dict(memory),
    ))
    streams: list[str] = []
    ingested: list[str] = []

    class Interrupted(RecallBaselineAgent):
        def respond(self, stimulus: Stimulus, turn: Any) -> None:
            if f"{streams[-1]}/{stimulus.task_id}" == stop_at:
                raise KeyboardInterrupt
            super().respond(stimulus, turn)

    def agent(agent_config: AgentConfig, memory_system: MemorySystem | None) -> RecallBaselineAgent:
        assert isinstance(memory_system, ObservedMemory)
        streams.append(memory_system.stream)
        ingest = memory_system.ingest

        def logged(session: Any) -> None:
            ingested.append(f"{memory_system.stream}/{session.session_id}")
            ingest(session)

        memory_system.ingest = logged  # type: ignore[method-assign]
        return Interrupted(agent_config, memory_system)

    summary = run_benchmark(config, out, agent_factory=agent, resume=resume)
    return summary, ingested


def test_a_locomo_run_interrupted_and_resumed_ends_as_the_uninterrupted_run(
    heavy_backend: str, write_run_config: Callable[..., Path], tmp_path: Path,
    postgres: Callable[[str], Mapping[str, Any] | None],
) -> None:
    memory = memory_document(heavy_backend, dict(postgres(heavy_backend) or {}) or None, top_k=3)
    whole, ingested = _locomo_run(write_run_config, tmp_path / "whole", memory)
    assert whole["completion"]["complete"], whole
    assert ingested == ["conv-sample-1/session_1", "conv-sample-1/session_2", "conv-sample-1/session_3",
                        "conv-sample-2/session_1", "conv-sample-2/session_2"]
    stopped, _ = _locomo_run(write_run_config, tmp_path / "resumed", memory, stop_at="conv-sample-1/q004")
    assert not stopped["completion"]["complete"]
    resumed, again = _locomo_run(write_run_config, tmp_path / "resumed", memory, resume=True)
    assert resumed["completion"]["complete"], resumed
    # the interrupted conversation is restored from its snapshot, never ingested twice
    assert again == ["conv-sample-2/session_1", "conv-sample-2/session_2"]

    def scored(directory: Path) -> list[tuple[str, str, float, Any, str | None]]:
        return [(s["stream"], s["task_id"], s["value"], s["details"]["evidence_recall"], s["extracted"])
                for s in read_jsonl(directory / "scores.jsonl")]

    assert scored(tmp_path / "resumed") == scored(tmp_path / "whole")
    recalls = [s[3] for s in scored(tmp_path / "whole") if s[3] is not None]
    assert recalls and sum(recalls) > 0  # the ingested turns were found by the questions' evidence


def test_every_backend_of_the_suite_offers_what_the_strategies_and_locomo_need(
    strategy_backend: str, open_backend: Callable[..., MemorySystem]
) -> None:
    from pytest_evomemory.memory.base import Ingestible, RecencyRecall
    from pytest_evomemory.memory.snapshot import SnapshotCapable

    memory = open_backend(strategy_backend)
    assert isinstance(memory, RecencyRecall) and isinstance(memory, Ingestible) and isinstance(memory, SnapshotCapable)
    assert json.dumps([tool.spec.name for tool in memory.tools()])
