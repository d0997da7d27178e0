"""The composed adversarial outputs of :mod:`.fuzz` agree with the references too.

Each mode's generated answers (prefix + statement + suffix, every statement class
drawn) must be read as the reference reads them, or fall in a documented class;
the named cases pin each disagreement class the hunt found, in both directions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import TaskQAEvaluator

from . import agreement, corpus, fuzz, references

EVALUATOR = TaskQAEvaluator()
OPTIONS = ("12 eV", "3.4 eV", "0.5 eV", "2.1 eV", "7 K", "9 K", "1 W", "2 W", "3 W", "4 W")


@pytest.fixture(scope="module")
def tallies() -> dict[str, tuple[agreement.Tally, list[corpus.CorpusItem]]]:
    return fuzz.fuzz_tallies()


@pytest.mark.parametrize("mode", ["choice", "gpqa", "aime", "toolbench"])
def test_every_generated_disagreement_is_a_documented_class(
    tallies: dict[str, tuple[agreement.Tally, list[corpus.CorpusItem]]], mode: str
) -> None:
    tally, undocumented = tallies[mode]
    assert tally.read >= 0.3 * tally.items
    assert not undocumented, [(item.kind, item.answer[-160:], item.sample.target) for item in undocumented[:5]]
    docs = (Path(__file__).parents[2] / "docs" / "scoring.md").read_text(encoding="utf-8")
    for cls in set(tally.classes) - {agreement.AGREE, agreement.NOTHING}:
        assert cls in docs, cls


def test_every_statement_class_is_generated() -> None:
    kinds = {item.kind.split("+")[1] for item in fuzz.mmlu_pro_fuzz()}
    assert kinds == set(fuzz.CHOICE_STATEMENTS)
    assert {item.kind.split("+")[1] for item in fuzz.aime_fuzz()} == set(fuzz.AIME_STATEMENTS)


def _choice(target: str, mode: str = "choice") -> BenchmarkSample:
    return BenchmarkSample("1", "mmlu_pro", 0, "Q", target, mode, OPTIONS)


@pytest.mark.parametrize(
    ("answer", "ours", "official"),
    [
        # full-width letters and Unicode spaces: the ASCII patterns miss the statement
        ("The answer is (\uff25). (A is a distractor.)", "E", "A"),
        ("The answer\u00a0is (C).\nNote: A and B are both incorrect here.", "C", "B"),
        ("Answer: \uff24 (not B)", "D", "B"),
        # but "\u2103" is not "\u00b0C": no letter C where the official script sees none
        ("Option B holds at 25 \u2103.", "B", "B"),
        ("Option B holds (25 \u2109)", "B", "B"),
    ],
)
def test_full_width_and_unicode_spaces_are_read_as_ascii(answer: str, ours: str, official: str) -> None:
    assert EVALUATOR.score(_choice(ours), answer).extracted == ours
    assert references.mmlu_pro_extract(answer) == official
    if ours != official:
        score = EVALUATOR.score(_choice(ours), answer)
        assert agreement.classify_mmlu_pro(answer, score, "ABCDEFGHIJ") == agreement.WIDE_OR_SPACED


def _aime(target: str) -> BenchmarkSample:
    return BenchmarkSample("a", "aime_2024", 0, "Q", target, "aime")


@pytest.mark.parametrize(
    ("answer", "target", "math_verify"),
    [
        # math-verify joins boxes that are not each inside $...$: "20,241"
        ("First \\boxed{20}. Then \\boxed{241}", "241", 20241),
        ("A first guess is $\\boxed{29}$, but that misses a case. \\boxed{\\text{847}}", "847", 29),
        # "943**" is tried as a Python power, fails, and the last number is read
        ("**Answer: 943**\nThis uses 2 steps.", "943", 2),
        ("\\boxed{70.}\nThis uses 17 colours and 2 steps.", "70", 2),
    ],
)
def test_math_verify_faults_are_documented_classes(answer: str, target: str, math_verify: object) -> None:
    verified, parsed = references.math_verify_reference(target, answer)
    assert not verified and parsed[0] == math_verify
    score = EVALUATOR.score(_aime(target), answer)
    assert score.correct
    tally, undocumented = agreement.aime_tally([corpus.CorpusItem(_aime(target), answer, "case")])
    assert not undocumented and tally.classes[agreement.AGREE] == 0


@pytest.mark.parametrize(
    "answer",
    ["The answer is 29/30. So 7.", "Of 12 the answer is 4.5. Check 7."],
)
def test_a_non_integer_after_answer_is_is_the_answer_not_a_later_number(answer: str) -> None:
    # math-verify reads 29/30 and 4.5; reading the 7 after them would differ.
    score = EVALUATOR.score(_aime("7"), answer)
    assert not score.correct and score.extracted is None
    assert not references.math_verify_reference("7", answer)[0]
