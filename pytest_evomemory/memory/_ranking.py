"""Pieces the built-in backends share: safe query terms, which words gather a
recall's candidates, and hybrid (lexical + vector) rank fusion. The vector index
they fuse with is :mod:`.vectorindex` (numpy): this module stays pure Python, so the
in-process backend imports it without numpy before its first recall needs numpy.

Hybrid ranking is reciprocal rank fusion (Cormack et al., 2009): each record's
fused score is ``sum(1 / (RRF_K + rank))`` over the lexical and the vector
rankings it appears in (rank counted from 1). RRF needs no calibration between
BM25 / ts_rank_cd scores and cosines, which live on unrelated scales, and a
record ranked well by both signals beats one ranked first by only one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..util.text import STOPWORDS

if TYPE_CHECKING:
    from .vectorindex import VectorIndex

#: The customary RRF constant; it damps the influence of the very top ranks.
RRF_K = 60

#: Cap on distinct query terms: an agent may pass a whole task (or a 1 MB record)
#: as the query, and an OR over thousands of terms only costs time.
MAX_QUERY_TERMS = 64

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(query: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """Distinct content words of ``query``, in order, holding only letters and digits.

    Query languages (FTS5 MATCH, to_tsquery) give meaning to quotes, parentheses,
    ``*``, ``-``, ``:`` and AND/OR/NEAR; words made only of letters and digits can
    be quoted safely, and users' text never becomes query syntax.
    """
    words = _WORD.findall(unicodedata.normalize("NFKC", query).casefold())
    content = [word for word in words if word not in STOPWORDS] or words
    return list(dict.fromkeys(content))[:limit]


#: A word found in more than this share of the records never gathers candidates:
#: it carries no ranking signal (FTS5's BM25 clamps its IDF to ~0 once it is in
#: half the records; ts_rank_cd, which has no IDF, would let it drown the
#: informative words) and matching it means reading half the store.
COMMON_TERM_SHARE = 0.5

#: Below this many records no word counts as common: every word gathers.
SMALL_STORE = 8

#: A recall gathers its candidates from words whose records add up to at most
#: this many (their postings), and goes beyond it only while fewer than top_k
#: records are held by the words taken so far; a word held by more records than
#: this never gathers. What a recall reads is bounded by it, whatever the store's
#: size: about 2,000 postings are read in a millisecond or two.
GATHER_POSTINGS = 2000


#: A query word as a backend knows it: the word itself, or its id in a vocabulary.
Word = TypeVar("Word", bound=Hashable)


@dataclass(frozen=True)
class Gathering(Generic[Word]):
    """Which of a query's words a recall gathers its candidates with.

    ``gather``: the candidates are the records holding any of these words (the
    rarest first: see :func:`plan_gathering`); the backend ranks them by its
    score. ``fill``: the other words some record holds; when the candidates are
    fewer than top_k, the newest records holding one of these follow them,
    newest first, with score 0.
    """

    gather: list[Word]
    fill: list[Word]


def plan_gathering(
    words: Sequence[Word],
    frequencies: Sequence[int | None],
    total: int,
    enough: int,
    holders: Callable[[Sequence[Word]], int],
) -> Gathering[Word]:
    """The words a recall over ``total`` records gathers with, rarest first.

    ``frequencies[i]``: how many records hold ``words[i]`` (exact, kept as records
    are stored), or None when the index cannot say (the word is more than one
    token to it): such a word only fills. A word no record holds is dropped.

    Gatherable words — held by at most :data:`COMMON_TERM_SHARE` of the records
    (any word in a store under :data:`SMALL_STORE` records) and by at most
    :data:`GATHER_POSTINGS` — are taken rarest first (ties in query order) while
    their records add up to at most GATHER_POSTINGS, and beyond that only while
    the words taken hold fewer than ``enough`` records (``holders(words)`` counts
    the records holding any of them, up to ``enough``). A small store therefore
    gathers with every informative word, and a large one reads a bounded number
    of postings whatever its size.
    """
    order = sorted(
        (frequency, position, word)
        for position, (word, frequency) in enumerate(zip(words, frequencies, strict=True))
        if frequency is not None
        and 0 < frequency <= GATHER_POSTINGS
        and (total < SMALL_STORE or frequency <= total * COMMON_TERM_SHARE)
    )
    gather: list[Word] = []
    postings = largest = 0
    for frequency, _, word in order:
        if postings + frequency > GATHER_POSTINGS:
            held_enough = largest >= enough or (postings >= enough and holders(gather) >= enough)
            if held_enough:
                break
        gather.append(word)
        postings += frequency
        largest = max(largest, frequency)
    taken = set(gather)
    fill = [
        word for word, frequency in zip(words, frequencies, strict=True)
        if word not in taken and (frequency is None or frequency > 0)
    ]
    return Gathering(gather, fill)


def gathered_ranking(
    plan: Gathering[str],
    depth: int,
    enough: int,
    rank: Callable[[Sequence[str], int], list[tuple[int, float]]],
    newest: Callable[[Sequence[str], int], list[int]],
) -> list[tuple[int, float]]:
    """The lexical ranking every built-in backend returns for ``plan``.

    ``rank(words, depth)``: the backend's best ``depth`` records holding any of
    ``words``, best first. ``newest(words, n)``: the ids of the ``n`` newest
    records holding any of ``words``, newest first. Fill records (only when the
    gathered candidates are fewer than ``enough``) score 0.
    """
    ranked = rank(plan.gather, depth) if plan.gather else []
    if len(ranked) >= enough or not plan.fill or len(ranked) >= depth:
        return ranked
    seen = {record_id for record_id, _ in ranked}
    for record_id in newest(plan.fill, depth):
        if record_id not in seen:
            ranked.append((record_id, 0.0))
            if len(ranked) >= depth:
                break
    return ranked


def candidate_count(top_k: int) -> int:
    """How deep each ranking goes before fusion: deep enough that a record ranked
    modestly by both signals can still make the fused top ``top_k``."""
    return max(50, 4 * top_k)


def reciprocal_rank_fusion(rankings: Iterable[Sequence[int]]) -> list[tuple[int, float]]:
    """Fuse ranked id lists; ties keep the order in which ids were first seen
    (the lexical ranking is passed first, so it breaks ties)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, record_id in enumerate(ranking, start=1):
            scores[record_id] = scores.get(record_id, 0.0) + 1.0 / (RRF_K + rank)
    order = {record_id: index for index, record_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


def hybrid_ranking(
    lexical: Callable[[int], list[tuple[int, float]]],
    index: VectorIndex | None,
    vector: Any,
    limit: int,
) -> list[tuple[int, float]]:
    """The ranked ``(record_id, score)`` list both SQL backends return.

    ``lexical(depth)`` ranks by the backend's full-text search. Without an embedder
    that is the answer; with one, the lexical and vector rankings (each ``depth``
    deep) are fused by reciprocal rank, so neither kind of score needs calibrating.
    """
    if vector is None or index is None:
        return lexical(limit)
    depth = candidate_count(limit)
    lexical_ids = [record_id for record_id, _ in lexical(depth)]
    semantic_ids = [record_id for record_id, _ in index.search(vector, depth)]
    return reciprocal_rank_fusion([lexical_ids, semantic_ids])[:limit]


def prepare_recall(query: str, embedder: Any) -> tuple[list[str], Any] | None:
    """What both SQL backends need before a recall: ``(terms, vector)``.

    ``None`` means there is no word to search for, so the recall returns nothing
    (not even a dense embedder is asked to guess).
    """
    terms = query_terms(query)
    if not terms:
        return None
    vector = embedder.embed([query])[0] if embedder else None
    return terms, vector
