"""The embedded model's reply is a function of its prompt: not of the call before it.

llama-cpp-python reuses the KV cache of the longest prefix the previous prompt
shares, and llama.cpp's logits depend on how the tokens before them were batched;
a reply then depended on which stream, arm or xdist worker happened to call the
model before (README's main job scored 11/24 on one machine, 13/24 on another).
These tests compare the model's raw logits, bit for bit, which a reply's text
would hide for most prompts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.models import local

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer with one word."}


def _task(number: int, experiences: int) -> list[dict[str, Any]]:
    shown = "\n".join(
        f"Experience {i}: the capital of the invented land Zorbia-{i} is Qel{i}ton." for i in range(experiences)
    )
    return [SYSTEM, {"role": "user", "content": f"{shown}\nWhat is the capital of Zorbia-{number}?"}]


#: Prompts that share the system message (a partial prefix) but not their tasks: a
#: short, a middle and a long one (each reply costs about a second of one core).
PROMPTS = [_task(0, 0), _task(5, 5), _task(11, 12)]


def _last_logits(llama: Any) -> str:
    import ctypes

    import llama_cpp

    pointer = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
    values = ctypes.string_at(pointer, ctypes.sizeof(ctypes.c_float) * llama.n_vocab())
    return hashlib.sha256(values).hexdigest()


def _reply(llama: Any, messages: list[dict[str, Any]]) -> tuple[str, str]:
    generation = local.generate(llama, messages, [], max_tokens=8, temperature=0.0, seed=0)
    return generation.text, _last_logits(llama)


def _model(gguf_path: Path, n_threads: int) -> Any:
    return local.load_model(gguf_path, 1024, n_threads).llama


def test_a_reply_does_not_depend_on_the_call_before_it(gguf_path: Path) -> None:
    llama = _model(gguf_path, 1)
    alone = []
    for messages in PROMPTS:
        llama.reset()
        alone.append(_reply(llama, messages))
    after_others = [_reply(llama, messages) for messages in PROMPTS]  # each after the previous one
    reversed_order = [_reply(llama, messages) for messages in reversed(PROMPTS)][::-1]
    assert after_others == alone
    assert reversed_order == alone


def test_a_reply_does_not_depend_on_the_thread_count(gguf_path: Path) -> None:
    # The short and the middle prompt: two threads on a CPU another process keeps busy
    # wait for each other at every operation, and the long prompt then costs tens of seconds.
    one = [_reply(_model(gguf_path, 1), messages) for messages in PROMPTS[:2]]
    two = [_reply(_model(gguf_path, 2), messages) for messages in PROMPTS[:2]]
    assert one == two


def test_a_continued_conversation_keeps_its_cache_and_is_the_same_every_time(gguf_path: Path) -> None:
    """The feedback turn after its task turn extends exactly what the cache holds:
    that prefix is reused (no second evaluation of the task), and the result is the
    same whatever ran before the task turn."""
    llama = _model(gguf_path, 1)
    task = PROMPTS[1]

    def episode(before: list[dict[str, Any]] | None) -> tuple[tuple[str, str], tuple[str, str], int]:
        if before is not None:
            _reply(llama, before)
        answer = _reply(llama, task)
        held = llama.n_tokens
        follow_up = [*task, {"role": "assistant", "content": answer[0]}, {"role": "user", "content": "Thanks."}]
        prompt = local.fit_prompt(llama, follow_up, [], 8)
        continued = len(llama.tokenize(prompt.encode(), add_bos=True, special=True)) > held
        local.start_unless_continued(llama, prompt)
        kept = llama.n_tokens if continued else -1
        return answer, _reply(llama, follow_up), kept

    first = episode(None)
    assert first[2] > 0, "the feedback turn re-evaluated its task instead of continuing the cache"
    assert episode(PROMPTS[2]) == first
    assert episode(PROMPTS[0]) == first


def test_the_server_defaults_are_one_thread_and_fixed_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m pytest_evomemory.models.local`` passes llama_cpp.server what the
    in-process model uses, unless the command line gives its own."""
    import sys

    from llama_cpp.server import __main__ as server_main

    seen: list[str] = []
    monkeypatch.setattr(server_main, "main", lambda: seen.extend(sys.argv[1:]))
    monkeypatch.setattr(sys, "argv", ["serve"])
    local.serve(["--port", "1", "--n_threads=3"])
    assert "--n_threads=3" in seen and "--n_threads" not in seen
    options = {seen[index]: seen[index + 1] for index in range(len(seen) - 1) if seen[index].startswith("--")}
    assert options["--n_threads_batch"] == "1"
    assert options["--n_batch"] == options["--n_ubatch"] == str(local.BATCH_TOKENS)


def test_model_n_threads_picks_the_thread_count(gguf_path: Path) -> None:
    config = ModelConfig(provider="local", model_path=str(gguf_path), n_ctx=1024, n_threads=2)
    assert local.LocalChatModel(config)._model is local.load_model(gguf_path, 1024, 2)
    assert ModelConfig(provider="local").n_threads == 1
