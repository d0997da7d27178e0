"""The paper's reference agents (kinds exprag, exprecent, remem) through StreamRun and
the real HTTP client against the scripted server: what each sends the model, which
tools it calls, and what it leaves in memory."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from pytest_evomemory.agents.tiny import TinyAgent
from pytest_evomemory.agents.verdict import judged_correct
from pytest_evomemory.config import AgentConfig
from pytest_evomemory.configs.load import validate_agent
from pytest_evomemory.core.errors import ConfigError, EpisodeError
from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample
from pytest_evomemory.evaluation.evomemory import EvoMemoryEvaluator
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.runtime import ObservedMemory, StreamRun, run_stream
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    Reply,
    ScriptedServer,
    final_answer,
    is_feedback,
    make_echo_policy,
    scripted_model_config,
    text,
    tool_call,
)

from ..conftest import capture_responses

POST = BenchmarkSample("f01", "facts", 0, "In Quillhaven, what colour are the post boxes?", "teal")
RIVER = BenchmarkSample("f02", "facts", 1, "Which river flows through Quillhaven's market?", "the Marrow")
CAT = BenchmarkSample("f03", "facts", 2, "What is the lighthouse keeper's cat called?", "Biscuit")
POST_AGAIN = BenchmarkSample("f04", "facts", 3, "Quillhaven post boxes: which colour are they painted?", "teal")
CHOICE = BenchmarkSample(
    "c01", "facts", 0, "Which island has glass bells?\n\nA. Ost\nB. Merrow\nC. Tallis", "C",
    match_mode="choice", choices=("Ost", "Merrow", "Tallis"),
)


@pytest.fixture
def open_stream() -> Iterator[Any]:
    """``open_stream(server, kind, **agent_keys)``: a StreamRun around the reference agent,
    with an in-process memory (editing tools on), built as BenchmarkRun builds one."""
    opened: list[StreamRun] = []

    def build(server: ScriptedServer, kind: str, *, top_k: int = 4, **keys: Any) -> StreamRun:
        config = validate_agent(
            {"kind": kind, "max_steps": keys.pop("max_steps", 6), "model": scripted_model_config(server), **keys},
            "test agent config",
        )
        backend = InProcessMemory(default_top_k=top_k)
        backend.editing_tools = True
        memory = ObservedMemory(backend, "facts")
        deterministic = config.memory_strategy == "deterministic_recall"
        run = StreamRun(
            stream="facts",
            agent=TinyAgent(config, memory if deterministic else None),
            memory=memory,
            evaluator=EvoMemoryEvaluator(),
            memory_strategy=config.memory_strategy,
            max_steps=config.max_steps,
        )
        # what the memory held when the stream ended (teardown empties it)
        reset = memory.reset

        def keep_then_reset() -> None:
            run.final_records = [hit.content for hit in backend.recent(10_000)][::-1]  # type: ignore[attr-defined]
            reset()

        memory.reset = keep_then_reset  # type: ignore[method-assign]
        opened.append(run)
        return run

    yield build
    for run in opened:
        run.close()


def stored(run: StreamRun) -> list[str]:
    """The records left in the stream's memory at its end, oldest first."""
    records: list[str] = run.final_records  # type: ignore[attr-defined]
    return records


def task_requests(server: ScriptedServer) -> list[dict[str, Any]]:
    return [body for body in server.chat_requests if not is_feedback(body)]


def tool_names(request: Mapping[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


# --------------------------------------------------------------------------- configs


def test_reference_kinds_set_their_strategy_and_refuse_another() -> None:
    """The kinds' presets come from the AGENTS registry (AgentKind.memory_strategy,
    .defaults), filled in and checked when a config is loaded."""
    model = {"model": "m", "api_key_env": None}

    def load(data: dict[str, object]) -> AgentConfig:
        return validate_agent(data, "agent.yaml")

    assert load({"kind": "exprag", "model": model}).memory_strategy == "deterministic_recall"
    assert load({"kind": "exprecent", "model": model}).experience_format == "labelled"
    assert load({"kind": "remem", "model": model}).memory_strategy == "tool_use"
    explicit = load({"kind": "exprag", "experience_format": "answer_only", "model": model})
    assert explicit.experience_format == "answer_only"
    assert load({"kind": "tiny", "model": model}).experience_format == "full"
    with pytest.raises(ConfigError, match=r"agent\.yaml: key 'memory_strategy': kind 'remem' is memory_strategy 'tool_use'"):
        load({"kind": "remem", "memory_strategy": "deterministic_recall", "model": model})
    with pytest.raises(ConfigError, match="kind 'exprecent' is memory_strategy 'deterministic_recall'"):
        load({"kind": "exprecent", "memory_strategy": "none", "model": model})
    with pytest.raises(ConfigError, match="key 'retain_policy': memory_strategy 'none' retains nothing"):
        load({"kind": "tiny", "memory_strategy": "none", "retain_policy": "successes_only", "model": model})
    with pytest.raises(ConfigError, match="always retains"):
        load({"kind": "recall_baseline", "retain_policy": "successes_only"})
    with pytest.raises(ConfigError, match="key 'model': required for kind 'exprecent'"):
        load({"kind": "exprecent"})


# --------------------------------------------------------------------------- verdict


@pytest.mark.parametrize(
    ("submitted", "target", "choices", "expected"),
    [
        ("teal", "teal", (), True),
        ("  Teal. ", "teal", (), True),
        ("blue", "teal", (), False),
        (None, "teal", (), False),
        ("", "teal", (), False),
        ("042", "42", (), True),
        ("$1,000", "1000", (), True),
        ("41", "42", (), False),
        ("C", "C", ("Ost", "Merrow", "Tallis"), True),
        ("(c)", "C", ("Ost", "Merrow", "Tallis"), True),
        ("C. Tallis", "C", ("Ost", "Merrow", "Tallis"), True),
        ("The answer is C", "C", ("Ost", "Merrow", "Tallis"), True),
        ("Tallis", "C", ("Ost", "Merrow", "Tallis"), True),
        ("B", "C", ("Ost", "Merrow", "Tallis"), False),
        ("D", "D", ("Ost", "Merrow", "Tallis"), True),  # same text wins even off the option list
        ("Answer: A", "C", ("Ost", "Merrow", "Tallis"), False),
    ],
)
def test_the_agent_judges_its_answer_from_what_the_feedback_shows(
    submitted: str | None, target: str, choices: tuple[str, ...], expected: bool
) -> None:
    assert judged_correct(submitted, target, choices) is expected


# --------------------------------------------------------------------------- ExpRAG


def test_exprag_recalls_the_most_similar_and_retains_labelled_experiences(
    scripted_openai_server: ServerFactory, open_stream: Any
) -> None:
    answers = {POST.prompt: "blue", RIVER.prompt: "the Marrow", CAT.prompt: "Whiskers"}
    server = scripted_openai_server(make_echo_policy(lambda prompt: answers.get(prompt.split("Current task:\n")[-1], "teal")))
    run = open_stream(server, "exprag", top_k=2)
    responses = capture_responses(run)
    outcomes = list(run_stream(run, [POST, RIVER, CAT, POST_AGAIN]))
    assert [o.scored.score.correct for o in outcomes] == [False, True, False, True]
    assert all(tool_names(body) == ["final_answer"] for body in server.chat_requests)
    assert stored(run)[:3] == [
        f"Task: {POST.prompt}\nMy answer: blue\nCorrect answer: teal\nOutcome: incorrect",
        f"Task: {RIVER.prompt}\nMy answer: the Marrow\nCorrect answer: the Marrow\nOutcome: correct",
        f"Task: {CAT.prompt}\nMy answer: Whiskers\nCorrect answer: Biscuit\nOutcome: incorrect",
    ]
    writes = [w for r in responses if r.kind == "feedback" for w in r.memory_writes]
    assert [w["metadata"]["correct"] for w in writes] == [False, True, False, True]
    # the last task sees top_k = 2 experiences, the post-box one (most similar) first
    last = task_requests(server)[-1]["messages"][1]["content"]
    assert last.startswith("Experiences from earlier tasks, most similar first")
    assert last.count("\n[") == 2 and last.index(POST.prompt) < last.index("Task: ", last.index(POST.prompt) + 1)
    task_turns = [r for r in responses if r.kind == "task"]
    assert [r.memory_recalls for r in task_turns] == [1, 1, 1, 1]
    assert [len(r.memory_recalled) for r in task_turns] == [0, 1, 1, 2]  # lexical: CAT shares one word


def test_successes_only_keeps_the_experiences_the_agent_judged_correct(
    scripted_openai_server: ServerFactory, open_stream: Any
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    run = open_stream(server, "exprag", retain_policy="successes_only")
    responses = capture_responses(run)
    list(run_stream(run, [POST, RIVER, POST_AGAIN]))
    assert stored(run) == [
        f"Task: {POST.prompt}\nMy answer: teal\nCorrect answer: teal\nOutcome: correct",
        f"Task: {POST_AGAIN.prompt}\nMy answer: teal\nCorrect answer: teal\nOutcome: correct",
    ]
    feedback = [r for r in responses if r.kind == "feedback"]
    assert [r.memory_retains for r in feedback] == [1, 0, 1]
    assert all(r.protocol_violation is None for r in feedback)


# --------------------------------------------------------------------------- ExpRecent


def test_exprecent_shows_the_k_most_recent_experiences_newest_first_whatever_their_topic(
    scripted_openai_server: ServerFactory, open_stream: Any
) -> None:
    server = scripted_openai_server(make_echo_policy(lambda prompt: "teal"))
    run = open_stream(server, "exprecent", top_k=2)
    responses = capture_responses(run)
    list(run_stream(run, [POST, RIVER, CAT, POST_AGAIN]))
    last = task_requests(server)[-1]["messages"][1]["content"]
    assert last.startswith("Experiences from the most recent earlier tasks, newest first")
    # the post-box experience is the most similar, but not among the two most recent
    assert POST.prompt not in last.split("Current task:")[0]
    assert last.index(CAT.prompt) < last.index(RIVER.prompt)
    assert last.endswith(f"Current task:\n{POST_AGAIN.prompt}")
    task_turns = [r for r in responses if r.kind == "task"]
    assert [r.memory_recalls for r in task_turns] == [1, 1, 1, 1]
    assert [h["content"].splitlines()[0] for h in task_turns[-1].memory_recalled] == [
        f"Task: {CAT.prompt}", f"Task: {RIVER.prompt}"
    ]


def test_exprecent_refuses_a_memory_without_a_recency_order(scripted_openai_server: ServerFactory) -> None:
    class NoRecency:
        default_top_k = 4

        def retain(self, content: str, metadata: object = None) -> str:
            return "1"

        def recall(self, query: str, top_k: int | None = None) -> list[Any]:
            return []

        def reset(self) -> None: ...
        def close(self) -> None: ...
        def tools(self) -> list[Any]:
            return []

    server = scripted_openai_server()
    config = validate_agent({"kind": "exprecent", "model": scripted_model_config(server)}, "test agent config")
    with pytest.raises(ConfigError, match="needs a memory with recent"):
        TinyAgent(config, ObservedMemory(NoRecency(), "facts"))


# --------------------------------------------------------------------------- ReMem


def _since_system(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(request.get("messages") or [])[1:]


def remem_policy(request: Mapping[str, Any]) -> Reply:
    """Think, recall, act; after feedback retain, refine what recall found, acknowledge.

    Tasks: the answer is taken from a recalled record ("... correct answer: X"), else
    "blue". Feedback: retain the experience; if the task recalled a record, rewrite it
    when the answer was right and forget it when it was wrong."""
    messages = _since_system(request)
    feedback_at = next((i for i, m in enumerate(messages) if m["role"] == "user" and "Feedback on" in m["content"]), None)
    task = messages[0]["content"]
    task_part = messages if feedback_at is None else messages[:feedback_at]
    calls = [c for m in task_part for c in m.get("tool_calls") or []]
    # the scripted server numbers every reply's calls from 0: pair a call with the
    # tool message right after its assistant message
    results = [
        task_part[i + 1]["content"]
        for i, m in enumerate(task_part[:-1])
        if any(c["function"]["name"] == "recall" for c in m.get("tool_calls") or [])
    ]
    recalled = json.loads(results[-1]) if results else []
    if feedback_at is None:
        if not any(m["role"] == "assistant" for m in messages):
            return text("THINK: this looks like a fact about Quillhaven; my memory may hold it.")
        if not calls:
            return tool_call("recall", {"query": task})
        remembered = [r["content"].rpartition("correct answer: ")[2] for r in recalled if "correct answer: " in r["content"]]
        return final_answer(remembered[0] if remembered else "blue")
    after = messages[feedback_at:]
    done = [c["function"]["name"] for m in after for c in m.get("tool_calls") or []]
    shown = after[0]["content"]
    correct = shown.split("The correct answer: ")[1].splitlines()[0]
    right = shown.split("Your submitted answer: ")[1].splitlines()[0] == correct
    offered = {tool["function"]["name"] for tool in request.get("tools", [])}
    if "retain" in offered and "retain" not in done:
        return tool_call("retain", {"content": f"{task} -> correct answer: {correct}"})
    if recalled and not ({"update", "forget"} & set(done)):
        first = recalled[0]["id"]
        if right and "update" in offered:
            return tool_call("update", {"id": first, "content": f"(confirmed) {recalled[0]['content']}"})
        if not right:
            return tool_call("forget", {"id": first})
    return final_answer(FEEDBACK_ACKNOWLEDGEMENT)


def test_remem_thinks_refines_and_acts(scripted_openai_server: ServerFactory, open_stream: Any) -> None:
    server = scripted_openai_server(remem_policy)
    run = open_stream(server, "remem", max_steps=6)
    responses = capture_responses(run)
    wrong = BenchmarkSample("f05", "facts", 4, "In Quillhaven, what colour are the post boxes now?", "green")
    outcomes = list(run_stream(run, [POST, POST_AGAIN, wrong]))
    assert [o.scored.score.correct for o in outcomes] == [False, True, False]

    first = server.chat_requests[0]
    assert "THINK" in first["messages"][0]["content"] and "REFINE" in first["messages"][0]["content"]
    assert tool_names(first) == ["final_answer", "retain", "recall", "forget", "update"]
    task_a = responses[0]
    # think (no tool call) -> the agent says "Continue" -> recall -> final_answer
    assert [m["role"] for m in task_a.messages] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant", "tool"]
    assert task_a.messages[3]["content"].startswith("Continue: refine your memory")
    assert [c.name for c in task_a.tool_calls] == ["recall", "final_answer"]
    assert task_a.agent_turns == 3

    # task 2 recalled task 1's lesson and answered from it; its feedback rewrote the record
    assert outcomes[1].response.final_answer == "teal"
    assert [c.name for c in responses[3].tool_calls] == ["retain", "update", "final_answer"]
    # task 3 recalled the rewritten record, answered "teal", was wrong, and forgot it
    assert [c.name for c in responses[5].tool_calls] == ["retain", "forget", "final_answer"]
    assert stored(run) == [
        f"{POST_AGAIN.prompt} -> correct answer: teal",
        f"{wrong.prompt} -> correct answer: green",
    ]
    assert run.memory is not None
    assert (run.memory.counts.retains, run.memory.counts.forgets, run.memory.counts.other) == (3, 1, 1)


def test_remem_successes_only_offers_no_storing_tool_after_a_judged_failure(
    scripted_openai_server: ServerFactory, open_stream: Any
) -> None:
    server = scripted_openai_server(remem_policy)
    run = open_stream(server, "remem", retain_policy="successes_only")
    list(run_stream(run, [POST]))  # answered "blue": wrong
    feedback = [body for body in server.chat_requests if is_feedback(body)]
    assert feedback and all(tool_names(body) == ["final_answer", "recall", "forget"] for body in feedback)
    assert stored(run) == []


def test_remem_that_only_thinks_fails_at_max_steps(scripted_openai_server: ServerFactory, open_stream: Any) -> None:
    server = scripted_openai_server(lambda request: text("THINK: still thinking"))
    run = open_stream(server, "remem", max_steps=3)
    with pytest.raises(EpisodeError, match="max_steps"):
        list(run_stream(run, [POST]))
    assert len(server.chat_requests) == 3 + 3  # the task's 3 steps, then its feedback's
