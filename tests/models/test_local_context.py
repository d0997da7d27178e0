"""The embedded model's KV-cache rule (models/local.py start_unless_continued),
with a stand-in for llama_cpp.Llama: the cache survives only a call that
continues exactly what it holds; the real-model consequences are in
tests/local_llm/test_local_determinism.py."""

from __future__ import annotations

from pytest_evomemory.models.local import start_unless_continued


class FakeLlama:
    """One token per character; ``input_ids``/``n_tokens``/``reset`` as llama_cpp has them."""

    def __init__(self, held: str) -> None:
        self.input_ids = [ord(character) for character in held] + [0] * 8  # a buffer longer than what is held
        self.n_tokens = len(held)
        self.resets = 0

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [ord(character) for character in text.decode()]

    def reset(self) -> None:
        self.resets += 1
        self.n_tokens = 0


def test_an_empty_cache_is_left_alone() -> None:
    llama = FakeLlama("")
    start_unless_continued(llama, "system task")
    assert llama.resets == 0


def test_a_continuation_of_everything_held_keeps_the_cache() -> None:
    llama = FakeLlama("system task answer")
    start_unless_continued(llama, "system task answer feedback")
    assert llama.resets == 0 and llama.n_tokens == len("system task answer")


def test_a_shared_partial_prefix_starts_afresh() -> None:
    llama = FakeLlama("system task one")
    start_unless_continued(llama, "system task two")
    assert llama.resets == 1


def test_the_same_prompt_again_starts_afresh() -> None:
    """llama_cpp would re-evaluate its last token alone, in a batch of one: a different logit."""
    llama = FakeLlama("system task")
    start_unless_continued(llama, "system task")
    assert llama.resets == 1


def test_a_shorter_prompt_starts_afresh() -> None:
    llama = FakeLlama("system task answer")
    start_unless_continued(llama, "system")
    assert llama.resets == 1
