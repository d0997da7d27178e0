"""``locomo_f1`` gives every answer the score LoCoMo's own evaluation gives it.

The reference (:func:`references.locomo_eval_question_answering`) is the official
per-line loop of ``task_eval/evaluation.py`` with evaluate_gpts.py's category-5
option mapping; ours is the whole path a run takes (schema reader, converter,
``TaskQAEvaluator``). Every difference must fall in a class docs/locomo.md lists;
``python -m tests.evaluation.test_locomo_agreement`` prints the figures it quotes.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from pytest_evomemory.evaluation import TaskQAEvaluator
from pytest_evomemory.evaluation.locomo import (
    CORRECT_AT,
    f1_score,
    multi_answer_f1,
    normalize_answer,
    option_answer,
)
from pytest_evomemory.evaluation.modes import UNPRINTABLE
from pytest_evomemory.evaluation.taskqa import MAX_SCORED_CHARS

from . import references
from .locomo_corpus import LocomoItem, locomo_corpus

EVALUATOR = TaskQAEvaluator()
DOCS = Path(__file__).parents[2] / "docs" / "locomo.md"

AGREE = "agree"
CONTROL = "control characters in the answer, which every match mode drops before scoring"
LONG = "answer longer than 20,000 characters, scored on its last 20,000 as every match mode does"
UNDOCUMENTED = "UNDOCUMENTED"


def classify(item: LocomoItem) -> tuple[str, float, float]:
    ours = EVALUATOR.score(item.sample, item.answer)
    reference = float(references.locomo_eval_question_answering(item.line, item.answer))
    if math.isclose(ours.value, reference, rel_tol=1e-12, abs_tol=1e-12):
        cls = AGREE
    elif UNPRINTABLE.search(item.answer):
        cls = CONTROL
    elif len(item.answer) > MAX_SCORED_CHARS:
        cls = LONG
    else:
        cls = UNDOCUMENTED
    return cls, ours.value, reference


def tally(items: list[LocomoItem]) -> tuple[Counter[str], list[tuple[LocomoItem, float, float]]]:
    classes: Counter[str] = Counter()
    undocumented = []
    for item in items:
        cls, ours, reference = classify(item)
        classes[cls] += 1
        if cls == UNDOCUMENTED:
            undocumented.append((item, ours, reference))
    return classes, undocumented


@pytest.fixture(scope="module")
def corpus_tally() -> tuple[list[LocomoItem], Counter[str], list[tuple[LocomoItem, float, float]]]:
    items = locomo_corpus()
    classes, undocumented = tally(items)
    return items, classes, undocumented


def test_every_disagreement_is_a_documented_class(corpus_tally) -> None:  # type: ignore[no-untyped-def]
    items, classes, undocumented = corpus_tally
    assert len(items) >= 2000
    assert not undocumented, [(i.kind, i.answer[:80], i.sample.target, o, r) for i, o, r in undocumented[:5]]
    assert classes[AGREE] >= 0.9 * len(items)


def test_the_corpus_covers_every_category_and_score_range(corpus_tally) -> None:  # type: ignore[no-untyped-def]
    items, _, _ = corpus_tally
    categories = Counter(item.line["category"] for item in items)
    assert set(categories) == {1, 2, 3, 4, 5}
    values = [references.locomo_eval_question_answering(item.line, item.answer) for item in items[:800]]
    assert any(v == 0 for v in values) and any(v == 1 for v in values) and any(0 < v < 1 for v in values)


def test_the_docs_quote_the_current_figures(corpus_tally) -> None:  # type: ignore[no-untyped-def]
    items, classes, _ = corpus_tally
    text = DOCS.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `locomo_f1`"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    expected = [str(len(items)), str(classes[AGREE]), str(classes[CONTROL]), str(classes[LONG]), str(classes[UNDOCUMENTED])]
    assert cells[1:6] == expected, "rerun `python -m tests.evaluation.test_locomo_agreement` and update docs/locomo.md"
    for cls in (CONTROL, LONG):
        assert cls in text


# ------------------------------------------------------------ the rules, one by one


def _sample(category: int, target: str, options: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    from pytest_evomemory.core.types import BenchmarkSample

    metadata: dict[str, object] = {"locomo_category": category}
    if options:
        metadata["options"] = options
    return BenchmarkSample("q001", "conv-x", 0, "Q", target, "locomo_f1", metadata=metadata)


def test_normalization_drops_commas_punctuation_and_the_four_words() -> None:
    assert normalize_answer("The cat, AND a Dog!") == "cat dog"
    assert normalize_answer("an apple; the end.") == "apple end"
    assert normalize_answer("U.S. Open") == "us open"
    assert normalize_answer("and/or") == "andor"  # punctuation goes first, then "and" is inside a word


def test_stemming_makes_plurals_and_tenses_one_token() -> None:
    assert f1_score("Adoption agencies", "adopting agency") == 1.0
    assert f1_score("ran", "running") == 0.0  # Porter does not know irregular verbs


def test_token_f1_by_hand() -> None:
    # prediction: [green, bicycl, old] ; gold: [old, green, bicycl, from, flea, market]: 3 common
    assert f1_score("green bicycle, old", "an old green bicycle from a flea market") == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_category_1_means_the_best_part_per_gold_part() -> None:
    assert multi_answer_f1("rowing, a cat named Pepper", "a cat named Pepper, rowing") == 1.0
    assert multi_answer_f1("rowing", "a cat named Pepper, rowing") == 0.5
    score = EVALUATOR.score(_sample(1, "a cat named Pepper, rowing"), "rowing")
    assert (score.value, score.correct) == (0.5, True)  # correct is value >= 0.5


def test_category_3_cuts_the_gold_at_its_first_semicolon() -> None:
    score = EVALUATOR.score(_sample(3, "Likely yes; he restored an old bicycle himself"), "likely yes")
    assert score.value == 1.0 and "cut" in score.reason


def test_category_5_reads_option_letters_as_upstream() -> None:
    options = {"a": "Pepper", "b": "Not mentioned in the conversation"}
    assert option_answer("B", options) == options["b"]
    assert option_answer("x", options) == options["b"]  # one character without an "a": option (b)
    assert option_answer("yes", options) == options["b"]  # three characters without "(a)": option (b)
    assert option_answer("(a)", options) == "Pepper"
    assert EVALUATOR.score(_sample(5, "Not mentioned in the conversation", options), "(b)").value == 1.0
    assert EVALUATOR.score(_sample(5, "Not mentioned in the conversation", options), "Pepper").value == 0.0
    assert EVALUATOR.score(_sample(5, "x", options), "I have no information available").correct


def test_values_are_fractions_and_correct_is_at_half() -> None:
    score = EVALUATOR.score(_sample(4, "an old green bicycle from a flea market"), "green")
    assert score.value == pytest.approx(2 / 7) and not score.correct  # precision 1, recall 1/6
    assert 0 < score.value < CORRECT_AT
    assert score.to_dict()["value"] == score.value


def main() -> None:  # pragma: no cover - prints the docs row
    items = locomo_corpus()
    classes, undocumented = tally(items)
    print("| mode | items | agree | control characters | longer than 20,000 | undocumented |")
    print("|---|---|---|---|---|---|")
    print(f"| `locomo_f1` | {len(items)} | {classes[AGREE]} | {classes[CONTROL]} | {classes[LONG]} | {classes[UNDOCUMENTED]} |")
    for item, ours, reference in undocumented[:10]:
        print("UNDOCUMENTED", item.kind, repr(item.answer[:80]), item.sample.target, ours, reference)


if __name__ == "__main__":  # pragma: no cover
    main()
