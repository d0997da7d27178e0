"""The shared ranking pieces: query terms, reciprocal rank fusion, vector index, term statistics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_evomemory.memory._ranking import (
    MAX_QUERY_TERMS,
    RRF_K,
    TermStatistics,
    VectorIndex,
    query_terms,
    reciprocal_rank_fusion,
)


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


def test_term_statistics_drop_common_terms_and_count_each_term_once_per_growth() -> None:
    counts = {"answer": 90, "zebra": 2}
    asked: list[str] = []

    def count(terms: Sequence[str]) -> list[int]:
        asked.extend(terms)
        return [counts[term] for term in terms]

    stats = TermStatistics()
    assert stats.informative(["answer", "zebra"], 100, count) == ["zebra"]
    assert stats.informative(["answer", "zebra"], 110, count) == ["zebra"]
    assert asked == ["answer", "zebra"]  # cached while the store grew by < 25%
    stats.informative(["zebra"], 200, count)
    assert asked[-1] == "zebra"
    assert stats.informative(["answer"], 4, count) == ["answer"]  # tiny stores: no pruning
