"""The shared ranking pieces: query terms, reciprocal rank fusion, vector index, term statistics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_evomemory.memory._ranking import (
    EXACT_COUNT_RECORDS,
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
    big = EXACT_COUNT_RECORDS * 10  # large stores: cached estimates
    counts = {"answer": big * 9 // 10, "zebra": 2}
    asked: list[str] = []

    def count(terms: Sequence[str]) -> list[int]:
        asked.extend(terms)
        return [counts[term] for term in terms]

    stats = TermStatistics()
    assert stats.informative(["answer", "zebra"], big, count) == ["zebra"]
    assert stats.informative(["answer", "zebra"], big * 11 // 10, count) == ["zebra"]
    assert asked == ["answer", "zebra"]  # cached while the store grew by < 25%
    stats.informative(["zebra"], big * 2, count)
    assert asked[-1] == "zebra"
    assert stats.informative(["answer"], 4, count) == ["answer"]  # tiny stores: no pruning


def test_term_statistics_count_small_stores_afresh_so_a_restored_memory_ranks_the_same() -> None:
    """A memory restored on resume starts with an empty cache: below the exact-count
    size, the informative terms must not depend on what an earlier recall counted."""
    counts = {"answer": 10, "zebra": 2}
    asked: list[str] = []

    def count(terms: Sequence[str]) -> list[int]:
        asked.extend(terms)
        return [counts[term] for term in terms]

    warm = TermStatistics()
    assert warm.informative(["answer", "zebra"], 100, count) == ["answer", "zebra"]
    counts["answer"] = 60  # the store's contents changed: 60 of 110 records hold "answer"
    restored = TermStatistics()
    assert warm.informative(["answer", "zebra"], 110, count) == restored.informative(["answer", "zebra"], 110, count)
    assert warm.informative(["answer", "zebra"], 110, count) == ["zebra"]
    assert asked.count("answer") == 4  # counted on every call, no cached estimate
