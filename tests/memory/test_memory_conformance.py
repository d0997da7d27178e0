"""One conformance suite that every built-in backend must pass (see conftest's BACKENDS).

A third-party adapter can reuse it: what these tests demand is what the episode
runner and the agents rely on.
"""

from __future__ import annotations

import random

import pytest

from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.core.tools import Tool
from pytest_evomemory.memory import IsolationGuard, MemorySystem, ObservedMemory
from pytest_evomemory.memory.guard import records_in_tool_result
from pytest_evomemory.memory.tools import MemoryTool, tool_role

from .conftest import CONFORMANCE_TOP_K, OpenMemory

WORDS = (
    "river mountain signal quantum ledger harvest orbit velvet cipher lantern meadow "
    "granite beacon falcon thunder prism harbor canyon ember glacier compass mosaic"
).split()


def sentence(rng: random.Random, n: int = 30) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.content for hit in hits]


def test_implements_the_protocol(open_memory: OpenMemory) -> None:
    memory = open_memory()
    assert isinstance(memory, MemorySystem)
    assert memory.default_top_k == CONFORMANCE_TOP_K


@pytest.mark.embedder_meaning
def test_retain_then_recall_round_trip(open_memory: OpenMemory) -> None:
    memory = open_memory()
    record_id = memory.retain("The capital of Atlantis is Poseidonia.")
    assert isinstance(record_id, str) and record_id
    hits = memory.recall("What is the capital of Atlantis?")
    assert [hit.record_id for hit in hits] == [record_id]
    assert hits[0].content == "The capital of Atlantis is Poseidonia."
    assert isinstance(hits[0].score, float)


@pytest.mark.embedder_meaning
def test_recall_of_an_empty_store_or_an_unmatched_query_is_empty(open_memory: OpenMemory) -> None:
    memory = open_memory()
    assert memory.recall("anything at all") == []
    memory.retain("zebra crossings are painted white")
    # a query without a single word finds nothing, even for a dense embedder
    assert memory.recall("") == []
    assert memory.recall("   ?!  ") == []


@pytest.mark.embedder_meaning
def test_most_similar_record_comes_first(open_memory: OpenMemory) -> None:
    memory = open_memory()
    unrelated = memory.retain("The committee approved the annual budget on Tuesday.")
    partial = memory.retain("Solar energy is abundant in deserts.")
    best = memory.retain("Solar panel efficiency improved with perovskite coatings.")
    hits = memory.recall("solar panel efficiency with perovskite", top_k=3)
    ids = [hit.record_id for hit in hits]
    assert ids[:2] == [best, partial]
    if unrelated in ids:  # a dense embedder may return it, but never above a match
        assert ids.index(unrelated) == 2
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_top_k_defaults_to_the_config_and_an_explicit_value_wins(open_memory: OpenMemory) -> None:
    memory = open_memory()
    for index in range(10):
        memory.retain(f"lighthouse keeper log entry number {index} about the lighthouse lamp")
    assert len(memory.recall("lighthouse lamp")) == CONFORMANCE_TOP_K
    assert len(memory.recall("lighthouse lamp", top_k=5)) == 5
    assert len(memory.recall("lighthouse lamp", top_k=1)) == 1
    assert len(memory.recall("lighthouse lamp", top_k=50)) == 10


def test_metadata_is_kept(open_memory: OpenMemory) -> None:
    memory = open_memory()
    metadata = {"task_id": "f01", "stream": "s1", "position": 3, "tags": ["a", "b"], "nested": {"ok": True}}
    memory.retain("Mercury is the closest planet to the Sun.", metadata)
    memory.retain("Neptune is the farthest planet.")
    hits = {hit.content: hit for hit in memory.recall("closest planet Sun Mercury", top_k=2)}
    assert dict(hits["Mercury is the closest planet to the Sun."].metadata) == metadata
    if "Neptune is the farthest planet." in hits:
        assert dict(hits["Neptune is the farthest planet."].metadata) == {}


def test_reset_empties_the_store_and_it_stays_usable(open_memory: OpenMemory) -> None:
    memory = open_memory()
    for index in range(5):
        memory.retain(f"volcano eruption report {index}")
    assert memory.recall("volcano eruption")
    memory.reset()
    assert memory.recall("volcano eruption") == []
    new_id = memory.retain("volcano eruption after the reset")
    assert [hit.record_id for hit in memory.recall("volcano eruption")] == [new_id]


def test_two_streams_never_see_each_others_records(open_memory: OpenMemory) -> None:
    first = open_memory("stream_a")
    second = open_memory("stream_b")
    first_id = first.retain("alpha secret: the vault code is 1234")
    second_id = second.retain("beta secret: the vault code is 9876")
    assert contents(first.recall("vault code secret", top_k=10)) == ["alpha secret: the vault code is 1234"]
    assert contents(second.recall("vault code secret", top_k=10)) == ["beta secret: the vault code is 9876"]
    second.reset()
    assert [hit.record_id for hit in first.recall("vault code", top_k=10)] == [first_id]
    assert second_id not in [hit.record_id for hit in second.recall("vault code")]


def test_two_runs_of_one_stream_open_at_once_never_see_each_others_records(open_memory: OpenMemory) -> None:
    """The arms (and replicates) of a session each hold their own memory of a stream,
    open at the same time in one process (`evomemory run` drives their chains at once):
    an adapter keeping its state per stream alone (a module-level client keyed by
    ``context.stream``) hands one arm the other's records, which no runtime check can
    tell from the arm's own (deterministic arms store the same texts)."""
    first = open_memory("stream_a", run_name="arm_a")
    second = open_memory("stream_a", run_name="arm_b")
    first_id = first.retain("arm a: the harbour ferry leaves at 7:15")
    assert second.recall("harbour ferry leaves", top_k=10) == []
    second.retain("arm b: the harbour ferry leaves at 8:00")
    assert contents(first.recall("harbour ferry leaves", top_k=10)) == ["arm a: the harbour ferry leaves at 7:15"]
    second.reset()
    assert [hit.record_id for hit in first.recall("harbour ferry", top_k=10)] == [first_id]


def test_a_stream_opened_again_starts_empty(open_memory: OpenMemory) -> None:
    """A second run (same name, same stream) must not recall the first run's records."""
    first = open_memory("stream_a", run_name="same_run")
    first.retain("left over from the previous run: harbor pilot schedule")
    first.close()
    again = open_memory("stream_a", run_name="same_run")
    assert again.recall("harbor pilot schedule") == []


def test_observed_memory_sees_no_leak_across_streams(open_memory: OpenMemory) -> None:
    guard = IsolationGuard()
    for stream in ("stream_a", "stream_b"):
        memory = ObservedMemory(open_memory(stream), stream, guard)
        for index in range(4):
            memory.retain(f"{stream} fact {index}: glacier melt rate")
        assert len(memory.recall("glacier melt rate", top_k=10)) == 4
        memory.reset()
        memory.close()


@pytest.mark.embedder_meaning
def test_unicode_round_trips_and_is_searchable(open_memory: OpenMemory) -> None:
    memory = open_memory()
    texts = [
        "Zürich café naïve résumé — ünïcödé façade",
        "東京タワー は 東京 に あります",
        "Привет мир, это память",
        "rocket launch 🚀 at dawn",
        "مرحبا بالعالم",
    ]
    ids = [memory.retain(text, {"text": text}) for text in texts]
    for record_id, text, query in zip(
        ids, texts, ["Zürich résumé", "東京タワー", "Привет мир", "rocket 🚀 launch", "مرحبا"], strict=True
    ):
        hits = memory.recall(query, top_k=1)
        assert [hit.record_id for hit in hits] == [record_id], query
        assert hits[0].content == text
        assert hits[0].metadata["text"] == text


@pytest.mark.embedder_meaning
def test_one_megabyte_records_round_trip(open_memory: OpenMemory, backend_id: str) -> None:
    memory = open_memory()
    rng = random.Random(7)
    big = ("needle haystack " + sentence(rng, 200) + "\n") * 1
    while len(big.encode("utf-8")) < 1_000_000:
        big += sentence(rng, 200) + " ünïcödé 東京\n"
    record_id = memory.retain(big, {"size": len(big)})
    memory.retain("a small record about sewing")
    hits = memory.recall("needle haystack", top_k=2)
    if not backend_id.startswith("dense+sentence"):
        # a semantic encoder reads the first 256 tokens of random words, and need not
        # rank them above a short sentence: for it, only the round trip is checked
        assert hits[0].record_id == record_id
    hit = next(h for h in hits if h.record_id == record_id)
    assert hit.content == big
    assert hit.metadata["size"] == len(big)


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "(parenthesis",
        "a AND b OR c NOT d",
        "NEAR(lamp oil, 3)",
        "lamp*",
        "*",
        "-lamp",
        "lamp:oil ^lamp {oil}",
        "col:value",
        "lamp & oil | !fire <-> (x)",
        "'single' \"double\" `back`",
        "\\ ; -- DROP TABLE records; /* */",
        "\x00 nul \x01",
        "🚀 東京 Zürich",
        "AND",
        "OR OR OR",
        "x" * 5000,
        " ".join(f"word{i}" for i in range(2000)),
    ],
)
def test_query_syntax_characters_never_break_recall(open_memory: OpenMemory, query: str) -> None:
    memory = open_memory()
    memory.retain("the lamp oil is stored next to the fire exit")
    hits = memory.recall(query)
    assert isinstance(hits, list)
    if "lamp" in query and "word" not in query:
        assert contents(hits)[:1] == ["the lamp oil is stored next to the fire exit"]


def test_a_closed_store_fails_clearly(open_memory: OpenMemory) -> None:
    memory = open_memory()
    memory.retain("before closing")
    memory.close()
    for call in (
        lambda: memory.retain("after closing"),
        lambda: memory.recall("before closing"),
        memory.reset,
    ):
        with pytest.raises(MemoryBackendError, match="closed"):
            call()
    memory.close()  # closing twice is harmless (teardown paths may overlap)


def test_tools_are_working_retain_and_recall_tools(open_memory: OpenMemory) -> None:
    """A tool for each of the roles retain and recall (by declared role, whatever its
    name and result format: a library's own result is read as its tool declares)."""
    memory = open_memory()
    tools = {tool_role(tool): tool for tool in memory.tools()}
    assert {"retain", "recall"} <= tools.keys()

    def call(tool: Tool, text: str) -> str:
        parameters = tool.spec.parameters
        argument = (parameters.get("required") or list(parameters["properties"]))[0]
        return tool.handler({argument: text})

    stored = call(tools["retain"], "The ferry leaves at 7:15 from pier 4.")
    found = call(tools["recall"], "when does the ferry leave")
    recall_tool = tools["recall"]
    read = recall_tool.read_records if isinstance(recall_tool, MemoryTool) and recall_tool.read_records else records_in_tool_result
    records = read(found)
    assert records is not None, found
    assert records[0][1] == "The ferry leaves at 7:15 from pier 4."
    record_id = memory.recall("ferry pier")[0].record_id
    assert records[0][0] == record_id
    assert record_id in stored  # the retain tool's answer names the record it stored


@pytest.mark.embedder_meaning
def test_words_in_every_record_neither_drown_rare_ones_nor_empty_the_result(open_memory: OpenMemory) -> None:
    memory = open_memory()
    for index in range(40):
        memory.retain(f"Task {index} answer: the expected answer was option {index % 4}")
    zebra = memory.retain("Task 99 answer: the zebra enclosure answer was option 2")
    assert memory.recall("task answer zebra option")[0].record_id == zebra
    assert len(memory.recall("task answer option")) == CONFORMANCE_TOP_K
