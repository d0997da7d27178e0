"""``provider: mock``: the dry-run model goes through the agent, tools, cache, cost
guard and artefacts as an endpoint does, and only its reply is scripted."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.config import ModelConfig
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.errors import ConfigError, ModelError
from pytest_evomemory.models import build_chat_model
from pytest_evomemory.models.context import StimulusRef, answering
from pytest_evomemory.models.factory import PROVIDERS
from pytest_evomemory.models.mock import MockChatModel
from pytest_evomemory.models.mockreply import script_reply

from ..conftest import CONFIGS, read_jsonl

FINAL = {"type": "function", "function": {"name": "final_answer", "parameters": {
    "type": "object", "properties": {"answer": {"type": "string"}}}}}
RECALL = {"type": "function", "function": {"name": "recall", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
RETAIN = {"type": "function", "function": {"name": "retain", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"}, "metadata": {"type": "object"}}}}}
ACK = {"type": "function", "function": {"name": "final_answer", "parameters": {
    "type": "object", "properties": {"answer": {"type": "string", "enum": ["Feedback recorded"]}}}}}


def mock(**settings: Any) -> ModelConfig:
    pricing = settings.pop("pricing", None)
    return ModelConfig.model_validate({"provider": "mock", "mock": settings, "pricing": pricing})


def answer_of(model: MockChatModel | Any, prompt: str, tools: list[dict[str, Any]] | None = None) -> Any:
    completion = model.complete([{"role": "user", "content": prompt}], tools if tools is not None else [FINAL])
    return json.loads(completion.tool_calls[0].arguments)["answer"] if completion.tool_calls else completion.content


def run(tmp_path: Path, agent: dict[str, Any] | str, *args: str, name: str = "dry") -> Path:
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"name": name, "benchmark": {"benchmark": "sample"}, "agent": agent,
                                      "memory": {"backend": "inprocess"}}))
    evomemory(["run", "--config", str(config), "--output-dir", str(tmp_path / name), "-q", *args])
    return tmp_path / name


def test_each_mode_scripts_its_reply_and_the_rest_is_an_endpoints(tmp_path: Path) -> None:
    sleeps: list[float] = []
    echo = MockChatModel(mock(latency_s=0.25, prompt_tokens=7, completion_tokens=3), sleep=sleeps.append)
    completion = echo.complete([{"role": "user", "content": "What is 2+2?"}], [FINAL])
    assert json.loads(completion.tool_calls[0].arguments) == {"answer": "What is 2+2?"}
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, sleeps) == (7, 3, [0.25])
    assert completion.model == "mock" and completion.finish_reason == "tool_calls"
    assert answer_of(MockChatModel(mock(mode="fixed", answer="42")), "anything") == "42"
    # Without tools (protocol: text) the answer is a Final Answer line the agent parses.
    assert answer_of(MockChatModel(mock(mode="fixed", answer="42")), "q", []).endswith("Final Answer: 42")
    # Estimated usage grows with the request (four characters a token).
    short, long = (MockChatModel(mock()).complete([{"role": "user", "content": c}], [FINAL]).usage.prompt_tokens
                   for c in ("x", "x" * 4000))
    assert long - short == 1000


def test_answers_by_task_id_come_from_the_stimulus_the_runtime_names(tmp_path: Path) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("f01: Paris\nsample_choice/c01: B\nc01: never\n")
    model = MockChatModel(mock(mode="answers", answers=str(answers), answer="no idea"))
    with answering(StimulusRef("sample_facts", "f01", "task")):
        assert answer_of(model, "capital?") == "Paris"
    with answering(StimulusRef("sample_choice", "c01", "task")):
        assert answer_of(model, "which?") == "B"  # stream/task wins over task
    with answering(StimulusRef("sample_facts", "f99", "task")):
        assert answer_of(model, "capital?") == "no idea"


def test_memory_mode_answers_from_a_similar_recalled_experience_only() -> None:
    settings = mock(mode="memory").mock
    prompt = ("Experiences from earlier tasks, most similar first (they may or may not help):\n\n"
              "[1] Task: What colour is the zorblax fruit?\nMy answer: red\nCorrect answer: teal\nOutcome: incorrect"
              "\n\n[2] Task: Who wrote the Quux saga?\nCorrect answer: Ana Li\n\n---\n\nCurrent task:\n"
              "What colour is the zorblax fruit when ripe?")
    reply = script_reply(settings, [{"role": "user", "content": prompt}], [FINAL], None, {})
    assert reply.calls == (("final_answer", {"answer": "teal"}),)
    unrelated = prompt.replace("What colour is the zorblax fruit when ripe?", "How tall is Mount Fleem?")
    assert script_reply(settings, [{"role": "user", "content": unrelated}], [FINAL], None, {}).calls[0][1] == {
        "answer": "unknown"}


def test_memory_mode_without_experiences_answers_with_the_first_remembered_conversation_turn() -> None:
    """LoCoMo: recalled records are conversation turns, most similar first."""
    prompt = ("Experiences from earlier tasks, most similar first (they may or may not help):\n\n"
              "[1] 8 May 2023: [D1:3] Caroline: I went to the LGBTQ support group yesterday.\n\n"
              "[2] 9 May 2023: [D2:1] Melanie: We painted a sunrise.\n\n---\n\nCurrent task:\n"
              "When did Caroline go to the LGBTQ support group?")
    reply = script_reply(mock(mode="memory").mock, [{"role": "user", "content": prompt}], [FINAL], None, {})
    assert reply.calls == (("final_answer", {"answer": "I went to the LGBTQ support group yesterday."}),)


def test_memory_mode_with_memory_tools_recalls_then_answers_and_retains_the_feedback() -> None:
    settings = mock(mode="memory").mock
    task = [{"role": "user", "content": "What colour is the zorblax fruit?"}]
    first = script_reply(settings, task, [FINAL, RECALL], StimulusRef("s", "t", "task"), {})
    assert first.calls == (("recall", {"query": "What colour is the zorblax fruit?"}),)
    recalled = [*task, {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "recall"}}]},
                {"role": "tool", "content": json.dumps([{"content": "Task: What colour is the zorblax fruit?\n"
                                                                    "Correct answer: teal"}])}]
    assert script_reply(settings, recalled, [FINAL, RECALL], StimulusRef("s", "t", "task"), {}).calls == (
        ("final_answer", {"answer": "teal"}),)
    feedback = [*recalled, {"role": "user", "content": "Feedback on the task you just answered.\n"
                            "Your submitted answer: teal\nThe correct answer: teal\nThen call final_answer."}]
    # No stimulus named: the feedback turn is known by final_answer's schema.
    assert script_reply(settings, feedback, [ACK, RETAIN], None, {}).calls == (
        ("retain", {"content": "Task: What colour is the zorblax fruit?\nCorrect answer: teal"}),)
    retained = [*feedback, {"role": "assistant", "tool_calls": [{"id": "2", "function": {"name": "retain"}}]},
                {"role": "tool", "content": "stored"}]
    assert script_reply(settings, retained, [ACK, RETAIN], None, {}).calls == (
        ("final_answer", {"answer": "Feedback recorded"}),)


def test_cache_keys_the_mock_by_its_settings_and_answers_file(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("t1: first\n")
    config = mock(mode="answers", answers=str(answers))
    with answering(StimulusRef("s", "t1", "task")):
        assert answer_of(build_chat_model(config), "q") == "first"
        replay = build_chat_model(config).complete([{"role": "user", "content": "q"}], [FINAL])
        assert replay.cached
        answers.write_text("t1: second\n")  # another file: not answered from the old one's replies
        assert answer_of(build_chat_model(config), "q") == "second"
        assert answer_of(build_chat_model(mock(mode="fixed", answer="third")), "q") == "third"
        # Another revision of the script (a package upgrade): not answered from the old replies.
        monkeypatch.setattr("pytest_evomemory.models.mock.SCRIPT_REVISION", -1)
        assert not build_chat_model(config).complete([{"role": "user", "content": "q"}], [FINAL]).cached


def test_the_request_bound_and_the_registry() -> None:
    model = MockChatModel(ModelConfig.model_validate({"provider": "mock", "max_request_bytes": 1024}))
    with pytest.raises(ModelError, match=r"over model\.max_request_bytes"):
        model.complete([{"role": "user", "content": "x" * 2000}], [FINAL])
    assert {"openai", "local", "mock"} <= set(PROVIDERS.names())
    assert repr(build_chat_model(mock(), cache=False)).startswith("MockChatModel")


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ({"provider": "mock", "mock": {"mode": "guess"}}, "model.mock.mode"),
        ({"provider": "mock", "mock": {"mode": "answers"}}, "mode 'answers' needs 'answers'"),
        ({"provider": "mock", "mock": {"mode": "echo", "answer": "x"}}, "'answer' is not read in mode 'echo'"),
        ({"provider": "mock", "base_url": "http://127.0.0.1:1/v1"}, "read only by provider 'openai'"),
        ({"provider": "mock", "n_ctx": 512}, "read only by provider 'local'"),
        ({"provider": "openai", "mock": {"mode": "fixed"}}, "read only by provider 'mock'"),
        ({"provider": "mock", "mock": {"mode": "answers", "answers": "missing.yaml"}}, "missing.yaml: file not found"),
    ],
)
def test_a_bad_mock_config_is_one_error_before_any_task(
    tmp_path: Path, model: dict[str, Any], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"name": "bad", "benchmark": {"benchmark": "sample"},
                                      "agent": {"kind": "tiny", "model": model}}))
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_run_config(config)
    assert evomemory(["run", "--config", str(config), "--output-dir", str(tmp_path / "out")]) == 4
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_answers_file_is_found_beside_the_agent_config_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "answers.yaml").write_text("f01: wrong on purpose\n")
    (tmp_path / "agents" / "dry.yaml").write_text(yaml.safe_dump(
        {"kind": "tiny", "memory_strategy": "none", "model": {"provider": "mock", "mock": {
            "mode": "answers", "answers": "answers.yaml"}}}))
    out = run(tmp_path, "agents/dry.yaml", "--limit", "2")
    scores = {record["task_id"]: record for record in read_jsonl(out / "scores.jsonl")}
    assert scores["f01"]["raw_answer"] == "wrong on purpose" and scores["c01"]["raw_answer"] == "unknown"
    run_json = json.loads((out / "run.json").read_text())
    answers = str(tmp_path / "agents" / "answers.yaml")
    # As written, and where it was found (the run's located paths).
    assert run_json["run"]["agent"]["model"]["mock"]["answers"] == "answers.yaml"
    assert run_json["run"]["paths"]["agent.model.mock.answers"] == answers
    ran = run_json["ran"]["sample_facts"]["model"]
    assert (ran["provider"], ran["mode"], ran["answers"], len(ran["sha256"])) == ("mock", "answers", answers, 64)


def test_the_shipped_dry_run_shows_memory_making_the_difference_and_the_cost_cap_holds(tmp_path: Path) -> None:
    memory = run(tmp_path, str(CONFIGS / "agents" / "tiny_mock.yaml"), name="memory")
    control = run(tmp_path, str(CONFIGS / "agents" / "tiny_mock_no_memory.yaml"), name="control")
    with_memory = json.loads((memory / "summary.json").read_text())["overall"]
    without = json.loads((control / "summary.json").read_text())["overall"]
    assert without["correct"] == 0 < with_memory["correct"]
    assert with_memory["cost_usd"] > 0 and with_memory["total_tokens"] > 0
    # Every right answer of the memory arm is the correct answer of an experience it was shown.
    right = {(r["stream"], r["task_id"]) for r in read_jsonl(memory / "scores.jsonl") if r["correct"]}
    responses = [r for r in read_jsonl(memory / "responses.jsonl") if (r["stream"], r["task_id"]) in right]
    assert len(right) == with_memory["correct"] == len([r for r in responses if r["kind"] == "task"])
    for response in responses:
        if response["kind"] == "task":
            assert f"Correct answer: {response['final_answer']}" in json.dumps(response["memory_recalled"])
    # Replayed replies cost nothing: the capped run calls the model again.
    capped = run(tmp_path, str(CONFIGS / "agents" / "tiny_mock.yaml"), "--max-cost", "0.0005",
                 "--set", "agent.model.cache=false", name="capped")
    completion = json.loads((capped / "summary.json").read_text())["completion"]
    assert not completion["complete"] and "--max-cost" in completion["reason"]
