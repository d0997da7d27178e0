"""Bounded recall returns exactly the ranking docs/memory.md promises, checked against
an exhaustive computation of that ranking over the whole store.

Each built-in backend keeps document frequencies as records are stored and reads
only the records its query's rarest words hold (``_ranking.plan_gathering``), or
the newest records holding a common word (the fallback). The reference here
counts every frequency by brute force (a count over the whole index per word),
ranks *every* record holding a gathered word with no LIMIT, and lists every
record holding a fill word: the backend's top-k must be that list's head.

The store is seeded (common words in every record, a Zipf vocabulary, words no
record holds in the queries) and the postings budget is shrunk, so that going
past the budget, the cap on frequent words and the newest-records fill all
happen on a few hundred records.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_evomemory.memory import _ranking, build_memory
from pytest_evomemory.memory._ranking import (
    COMMON_TERM_SHARE,
    SMALL_STORE,
    gathered_ranking,
    plan_gathering,
    query_terms,
)
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.postgres import PostgresMemory, _tsquery
from pytest_evomemory.memory.sqlite import SqliteMemory, _match_expression
from pytest_evomemory.util.text import tokens

from .conftest import memory_config

#: small enough that a few hundred records go past it
BUDGET = 40

SYLLABLES = "ka lo mi ne ru sa ti vo ze pa qu ri on el an".split()


def vocabulary(rng: random.Random, size: int = 150) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) + "x")
    return sorted(words)


def seeded_store(seed: int = 11, records: int = 260) -> tuple[list[str], list[str]]:
    """Records (each holds the common words "lesson" and "answer") and the vocabulary,
    Zipf-weighted so that some words are in most records, some in a few, most in one."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    weights = [1.0 / (rank + 2) for rank in range(len(words))]
    contents = [
        "lesson answer " + " ".join(rng.choices(words, weights, k=rng.randint(4, 12))) for _ in range(records)
    ]
    return contents, words


def seeded_queries(contents: Sequence[str], words: Sequence[str], seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    queries = []
    for _ in range(14):  # part of a stored record
        stored = rng.choice(contents).split()
        start = rng.randrange(max(1, len(stored) - 5))
        queries.append(" ".join(stored[start : start + 5]))
    for index in range(8):  # the fallback: distinguishing words no record holds, plus common ones
        queries.append(f"lesson answer unseenword{index} zq{index}")
    for index in range(8):  # unseen words with a few rare and frequent stored ones
        queries.append(f"unseenword{index} " + " ".join(rng.sample(list(words), 3)))
    queries.append("lesson answer")
    queries.append(" ".join(words[:6]))  # the most frequent words only
    return queries


@pytest.fixture(params=["inprocess", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(_ranking, "GATHER_POSTINGS", BUDGET)
    backend = request.param
    postgres = request.getfixturevalue("postgres_settings") if backend == "postgres" else None
    config = memory_config(backend, postgres, top_k=4)
    memory = build_memory(config, MemoryContext("s1", tmp_path / "run", f"exhaustive_{tmp_path.name[-20:]}"))
    contents, words = seeded_store()
    warm_up = seeded_queries(contents, words, seed=2)[:6]
    for index, content in enumerate(contents):
        memory.retain(content)
        if index % 40 == 39:  # recalls along the way: what a backend counts is then kept up incrementally
            for query in warm_up:
                memory.recall(query)
    yield memory, contents, words
    memory.close()


def test_bounded_recall_equals_the_exhaustive_ranking(store: Any) -> None:
    memory, contents, words = store
    reference = {InProcessMemory: inprocess_reference, SqliteMemory: sqlite_reference, PostgresMemory: postgres_reference}[
        type(memory)
    ]
    fallbacks = 0
    for query in seeded_queries(contents, words):
        for limit in (1, 4, 10):
            expected = reference(memory, query, limit)
            actual = [(hit.record_id, hit.score) for hit in memory.recall(query, top_k=limit)]
            assert_same_ranking(actual, expected, f"{query!r} top_k={limit}")
            fallbacks += any(score == 0.0 for _, score in expected)
    assert fallbacks >= 10  # the fallback (newest records holding a common word) was exercised


def test_a_recall_reads_a_bounded_part_of_the_store(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the index is asked to rank never includes a word held by more than the
    budget: the words gathered add up to at most the budget plus what was taken
    past it while too few records were held (each of those alone below top_k)."""
    memory, contents, words = store
    plans: list[_ranking.Gathering[Any]] = []
    real = _ranking.plan_gathering

    def spy(*args: Any) -> _ranking.Gathering[Any]:
        plan = real(*args)
        frequencies = dict(zip(args[0], args[1], strict=True))
        assert all(0 < (frequencies[word] or 0) <= BUDGET for word in plan.gather)
        plans.append(plan)
        return plan

    module = {InProcessMemory: "inprocess", SqliteMemory: "sqlite", PostgresMemory: "postgres"}[type(memory)]
    monkeypatch.setattr(f"pytest_evomemory.memory.{module}.plan_gathering", spy)
    for query in seeded_queries(contents, words):
        memory.recall(query, top_k=4)
    assert len(plans) >= 20
    assert any(plan.gather and plan.fill for plan in plans)


def assert_same_ranking(actual: list[tuple[str, float]], expected: list[tuple[str, float]], what: str) -> None:
    """Same ids in the same order, except that ids whose reference scores tie (to
    1e-9: the reference sums in another order) may come in either order."""
    assert len(actual) == len(expected), (what, actual, expected)
    for (_, got), (_, want) in zip(actual, expected, strict=True):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (what, actual, expected)
    groups: dict[float, set[str]] = {}
    for record_id, score in expected:
        key = next((existing for existing in groups if abs(existing - score) <= 1e-9 * max(1.0, abs(score))), score)
        groups.setdefault(key, set()).add(record_id)
    position = 0
    for _, members in sorted(groups.items(), key=lambda item: -item[0]):
        got_ids = {record_id for record_id, _ in actual[position : position + len(members)]}
        assert got_ids == members, (what, actual, expected)
        position += len(members)


# --------------------------------------------------------------------------- references


def sqlite_reference(memory: SqliteMemory, query: str, limit: int) -> list[tuple[str, float]]:
    connection = memory._connection

    def count(words: Sequence[str]) -> int:
        row = connection.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", (_match_expression(words),)
        ).fetchone()
        return int(row[0])

    words = query_terms(query)
    frequencies: list[int | None] = [count([word]) for word in words]
    total = int(connection.execute("SELECT count(*) FROM records").fetchone()[0])
    plan = plan_gathering(words, frequencies, total, limit, count)

    def rank(gathered: Sequence[str], depth: int) -> list[tuple[int, float]]:
        rows = connection.execute(
            "SELECT rowid, -bm25(records_fts) FROM records_fts WHERE records_fts MATCH ? "
            "ORDER BY bm25(records_fts), rowid",
            (_match_expression(gathered),),
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows][:depth]

    def newest(fill: Sequence[str], n: int) -> list[int]:
        rows = connection.execute(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH ?", (_match_expression(fill),)
        ).fetchall()
        return sorted((int(r[0]) for r in rows), reverse=True)[:n]

    return [(str(i), s) for i, s in gathered_ranking(plan, limit, limit, rank, newest)]


def postgres_reference(memory: PostgresMemory, query: str, limit: int) -> list[tuple[str, float]]:
    from psycopg import sql

    connection, table, config = memory._connection, memory._table, memory._config

    def count(words: Sequence[str]) -> int:
        row = connection.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE tsv @@ to_tsquery({}::regconfig, %s)").format(table, config),
            (_tsquery(words),),
        ).fetchone()
        return int(row[0]) if row else 0

    words = query_terms(query)
    frequencies: list[int | None] = []
    for word in words:
        row = connection.execute(
            sql.SQL("SELECT tsvector_to_array(to_tsvector({}::regconfig, %s))").format(config), (word,)
        ).fetchone()
        lexemes = row[0] if row else []
        frequencies.append(None if len(lexemes) > 1 else count([word]) if lexemes else 0)
    row = connection.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    total = int(row[0]) if row else 0
    informative = [
        word for word, held in zip(words, frequencies, strict=True)
        if held is not None and held > 0 and (total < SMALL_STORE or held <= total * COMMON_TERM_SHARE)
    ]
    plan = plan_gathering(words, frequencies, total, limit, count)

    def rank(gathered: Sequence[str], depth: int) -> list[tuple[int, float]]:
        rows = connection.execute(
            sql.SQL(
                "SELECT id, ts_rank_cd(tsv, to_tsquery({c}::regconfig, %s), 32) AS score FROM {t} "
                "WHERE tsv @@ to_tsquery({c}::regconfig, %s) ORDER BY score DESC, id"
            ).format(t=table, c=config),
            (_tsquery(informative or gathered), _tsquery(gathered)),
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows][:depth]

    def newest(fill: Sequence[str], n: int) -> list[int]:
        rows = connection.execute(
            sql.SQL("SELECT id FROM {} WHERE tsv @@ to_tsquery({}::regconfig, %s)").format(table, config),
            (_tsquery(fill),),
        ).fetchall()
        return sorted((int(r[0]) for r in rows), reverse=True)[:n]

    return [(str(i), s) for i, s in gathered_ranking(plan, limit, limit, rank, newest)]


def inprocess_reference(memory: InProcessMemory, query: str, limit: int) -> list[tuple[str, float]]:
    """TF-IDF cosine of every record, computed record by record from the contents."""
    records = memory._records
    bags = [Counter(tokens(record.content)) for record in records]
    total = len(bags)
    held = Counter(word for bag in bags for word in bag)

    def weight(word: str) -> float:
        return float(np.log(np.array([1.0 + total / (1.0 + held[word])]))[0]) + 1.0

    query_bag = Counter(tokens(query))
    known = [word for word in query_bag if held[word] > 0]
    if not known:
        return []
    query_norm = math.sqrt(sum(
        (count * (weight(word) if held[word] else math.log(1.0 + total) + 1.0)) ** 2 for word, count in query_bag.items()
    ))

    def holders(words: Sequence[str]) -> int:
        return sum(1 for bag in bags if any(word in bag for word in words))

    plan = plan_gathering(known, [held[word] for word in known], total, limit, holders)
    scored = []
    for index, bag in enumerate(bags):
        if any(word in bag for word in plan.gather):
            dot = sum(query_bag[word] * weight(word) * count * weight(word) for word, count in bag.items() if word in query_bag)
            norm = math.sqrt(sum((count * weight(word)) ** 2 for word, count in bag.items()))
            scored.append((-dot / (query_norm * norm), index))
    ranked = [(records[index].record_id, -score) for score, index in sorted(scored)[:limit]]
    if len(ranked) < limit and plan.fill:
        taken = {record_id for record_id, _ in ranked}
        for index in range(total - 1, -1, -1):
            if any(word in bags[index] for word in plan.fill) and records[index].record_id not in taken:
                ranked.append((records[index].record_id, 0.0))
                if len(ranked) >= limit:
                    break
    return ranked



def test_few_candidates_are_scored_in_python_to_the_bit_of_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recall over a few records is scored in plain Python (numpy's per-call cost
    outweighs its speed there), a larger one by numpy: both give the same hits with
    the same scores, bit for bit (the scores go into every transcript)."""
    from pytest_evomemory.memory import inprocess

    contents, words = seeded_store(seed=3, records=120)
    memory = InProcessMemory(default_top_k=4)
    queries = seeded_queries(contents, words, seed=9)
    paths_taken = 0
    for index, content in enumerate(contents):
        memory.retain(content, {"n": index})
        if index % 7 and index > 20:
            continue
        for query in queries:
            for limit in (1, 4, 10):
                monkeypatch.setattr(inprocess, "FEW_POSITIONS", 0)
                by_numpy = [(hit.record_id, hit.score, hit.metadata) for hit in memory.recall(query, top_k=limit)]
                monkeypatch.setattr(inprocess, "FEW_POSITIONS", 10**9)
                by_python = [(hit.record_id, hit.score, hit.metadata) for hit in memory.recall(query, top_k=limit)]
                assert by_python == by_numpy, (index, query, limit)
                assert all(type(score) is float for _, score, _ in by_python)
                paths_taken += any(score > 0 for _, score, _ in by_python)
    assert paths_taken > 100
