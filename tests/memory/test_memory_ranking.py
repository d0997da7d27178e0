"""The shared ranking pieces: query terms, which words gather, reciprocal rank fusion, vector index."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from pytest import MonkeyPatch

from pytest_evomemory.memory import _ranking as ranking
from pytest_evomemory.memory._ranking import (
    MAX_QUERY_TERMS,
    RRF_K,
    plan_gathering,
    query_terms,
    reciprocal_rank_fusion,
)
from pytest_evomemory.memory.vectorindex import VectorIndex


def test_query_terms_hold_only_letters_and_digits() -> None:
    terms = query_terms('What is "NEAR(lamp* OR oil)" -fire: Zürich 東京 🚀 x_y AND')
    assert terms == ["near", "lamp", "oil", "fire", "zürich", "東京", "x", "y"]
    assert all(term.isalnum() for term in terms)
    assert query_terms("the of and") == ["the", "of", "and"]  # only stopwords: keep them
    assert query_terms("🚀 ?! ()") == []
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == MAX_QUERY_TERMS


def test_rrf_rewards_agreement_and_breaks_ties_by_the_first_ranking() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 4, 1]])
    assert [record_id for record_id, _ in fused] == [1, 3, 2, 4]
    assert fused[0][1] == 1 / (RRF_K + 1) + 1 / (RRF_K + 3)
    assert [r for r, _ in reciprocal_rank_fusion([[5], [6]])] == [5, 6]


def test_vector_index_exact_search_grows_and_clears() -> None:
    index = VectorIndex(4)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3000, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for record_id, vector in enumerate(vectors, start=1):
        index.add(record_id, vector)
    assert len(index) == 3000
    hits = index.search(vectors[41], 5)
    assert hits[0][0] == 42 and abs(hits[0][1] - 1.0) < 1e-5
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert all(score > 0 for _, score in index.search(-vectors[0], 3000))
    index.clear()
    assert index.search(vectors[0], 5) == []


# --------------------------------------------------------------------------- which words gather


def test_gathering_takes_the_rarest_informative_words_while_the_budget_lasts(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "GATHER_POSTINGS", 100)
    asked: list[list[str]] = []

    def holders(words: Sequence[str]) -> int:
        asked.append(list(words))
        return 10

    words = ["common", "mid", "rare", "unseen", "phrase", "rarer", "big"]
    frequencies: list[int | None] = [900, 60, 3, 0, None, 2, 150]
    plan = plan_gathering(words, frequencies, 1000, 4, holders)
    # rarest first; "mid" (3 + 2 + 60 <= 100) still fits; "big" is over the budget
    # on its own, "common" is in more than half the records, "unseen" in none
    assert plan.gather == ["rarer", "rare", "mid"]
    assert plan.fill == ["common", "phrase", "big"]
    assert asked == []  # everything taken fitted the budget: the index was not asked


def test_beyond_the_budget_a_word_is_taken_only_while_too_few_records_are_held(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "GATHER_POSTINGS", 10)
    held = {("a", "b"): 3}
    asked: list[tuple[str, ...]] = []

    def holders(words: Sequence[str]) -> int:
        asked.append(tuple(words))
        return held[tuple(words)]

    # a and b overlap (3 records between them): too few for top_k 5, so c is taken past
    # the budget; c alone holds 9 >= 5 records, so d is not (and nobody counts again)
    plan = plan_gathering(["a", "b", "c", "d"], [2, 3, 9, 10], 1000, 5, holders)
    assert plan.gather == ["a", "b", "c"]
    assert plan.fill == ["d"]
    assert asked == [("a", "b")]
    # a single word holding enough records ends the gathering without asking
    asked.clear()
    assert plan_gathering(["x", "y"], [6, 9], 1000, 5, holders).gather == ["x"]
    assert asked == []


def test_a_small_store_gathers_with_every_word_and_a_large_one_never_with_common_words() -> None:
    never = lambda words: pytest.fail("no count needed")  # noqa: E731
    assert plan_gathering(["w", "v"], [5, 7], 7, 3, never).gather == ["w", "v"]
    assert plan_gathering(["w", "v"], [5, 7], 12, 3, never) == ranking.Gathering(["w"], ["v"])


def test_gathered_ranking_fills_with_the_newest_records_only_when_too_few_were_gathered() -> None:
    plan = ranking.Gathering(["rare"], ["common"])
    ranked = [(7, 2.5)]
    newest = [9, 7, 8, 6, 5]
    result = ranking.gathered_ranking(plan, 4, 3, lambda words, depth: list(ranked), lambda words, n: newest[:n])
    assert result == [(7, 2.5), (9, 0.0), (8, 0.0), (6, 0.0)]
    enough = [(7, 2.5), (3, 1.0), (2, 0.5)]
    assert ranking.gathered_ranking(plan, 4, 3, lambda w, d: list(enough), lambda w, n: newest) == enough
