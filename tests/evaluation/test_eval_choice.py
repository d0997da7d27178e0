"""The ``choice`` mode (GPQA-Diamond, MMLU-Pro): golden cases and properties.

The golden answers are the shapes real models produce: the MMLU-Pro prompt's
"The answer is (X)", simple-evals' "Answer: X", the Evo-Memory "Final Answer:"
format, markdown, LaTeX boxes, bare letters and option texts.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import MATCH_MODES, TaskQAEvaluator
from pytest_evomemory.evaluation.modes import normalize_answer

GPQA_OPTIONS = ("1.2 eV", "3.4 eV", "0.5 eV", "2.1 eV")
MMLU_OPTIONS = (
    "a decrease in aggregate supply",
    "an increase in aggregate demand",
    "a fall in the price level",
    "no change in real output",
    "higher unemployment",
    "a budget surplus",
    "a trade deficit",
    "lower interest rates",
    "stagflation",
    "none of the above",
)

EVALUATOR = TaskQAEvaluator()


def gpqa(target: str = "B") -> BenchmarkSample:
    return BenchmarkSample("rec1", "gpqa_diamond", 0, "Q", target, "choice", GPQA_OPTIONS)


def mmlu(target: str, options: tuple[str, ...] = MMLU_OPTIONS) -> BenchmarkSample:
    return BenchmarkSample("70", "mmlu_pro", 0, "Q", target, "choice", options)


# (answer, expected extracted letter or None) against GPQA target B.
GPQA_CASES: list[tuple[str, str | None]] = [
    ("B", "B"),
    ("(B)", "B"),
    ("B.", "B"),
    ("b", "B"),
    ("**B**", "B"),
    ("\uff22", "B"),  # full-width B
    ("Answer: B", "B"),
    ("ANSWER: B", "B"),
    ("Answer: $B$", "B"),
    ("The answer is (B).", "B"),
    ("The answer is B", "B"),
    ("Therefore, the correct answer is (B) 3.4 eV.", "B"),
    ("Final Answer: B", "B"),
    ("**Final Answer:** B", "B"),
    ("**Answer:** B", "B"),
    ("Rationale: the photon carries the band-gap energy.\nFinal Answer: B", "B"),
    ("\\boxed{B}", "B"),
    ("$\\boxed{\\text{B}}$", "B"),
    ("The final answer is $\\boxed{(B)}$.", "B"),
    ("B) 3.4 eV", "B"),
    ("(B) 3.4 eV", "B"),
    ("B. 3.4 eV", "B"),
    ("3.4 eV", "B"),
    ("3.4 eV.", "B"),
    ("The answer is 3.4 eV", "B"),
    ("Option B", "B"),
    ("I considered A and C, but the answer is (B).", "B"),
    ("Answer: B\nAnswer: D", "B"),  # official: first line with a match
    ("Answer: A. Re-checking the units... Answer: B", "B"),  # official: last on that line
    ("A is wrong because of parity, D ignores spin; so B", "B"),
    ("A is incorrect; the correct option is B.", "B"),
    ("B is the correct answer.", "B"),
    ("Let me think step by step.\n\nThe gap is 3.4 eV, so the answer is (B)", "B"),
    # wrong answers: a letter is read, it is not the target
    ("C", "C"),
    ("Answer: C", "C"),
    ("The answer is (A)", "A"),
    ("2.1 eV", "D"),
    ("\\boxed{D}", "D"),
    ("D. 2.1 eV", "D"),
    ("(A) 1.2 eV", "A"),
    # nothing countable
    ("answer is (E)", None),  # outside A-D
    ("E", None),
    ("I don't know", None),
    ("The answer is Carbon", None),  # not read as C
    ("the answer is (b)", None),  # the official patterns are case-sensitive
    ("none of these", None),
]

# (answer, target, expected extracted letter or None) on ten MMLU-Pro options.
MMLU_CASES: list[tuple[str, str, str | None]] = [
    ("J", "J", "J"),
    ("The answer is (J).", "J", "J"),
    ("answer is (I)", "I", "I"),
    ("I think the answer is (H)", "H", "H"),
    ("I", "I", "I"),
    ("Answer: I", "I", "I"),
    ("The answer is (F)", "G", "F"),
    ("an increase in aggregate demand", "B", "B"),
    ("Let's think step by step. Demand shifts right.\nThe answer is (E).", "E", "E"),
    ("A", "A", "A"),
    ("(J) none of the above", "J", "J"),
    ("**The answer is (G)**", "G", "G"),
    ("Stagflation", "I", "I"),
    ("The answer is (C)\nWait, no. The answer is (D)", "C", "C"),  # official: first match
    ("", "A", None),
]


@pytest.mark.parametrize(("answer", "expected"), GPQA_CASES)
def test_gpqa_golden(answer: str, expected: str | None) -> None:
    score = EVALUATOR.score(gpqa("B"), answer)
    assert score.extracted == expected, score.reason
    assert score.correct is (expected == "B")
    assert score.match_mode == "choice"
    assert score.target == "B"
    assert score.reason


@pytest.mark.parametrize(("answer", "target", "expected"), MMLU_CASES)
def test_mmlu_pro_golden(answer: str, target: str, expected: str | None) -> None:
    score = EVALUATOR.score(mmlu(target), answer)
    assert score.extracted == expected, score.reason
    assert score.correct is (expected == target)


def test_only_letters_within_the_options_count() -> None:
    seven = MMLU_OPTIONS[:7]  # "N/A" padding dropped: A-G
    score = EVALUATOR.score(mmlu("B", seven), "The answer is (H)")
    assert not score.correct
    assert score.extracted is None
    assert "not one of the options A-G" in score.reason
    assert score.details["out_of_range"] == "H"


def test_nothing_found_scores_zero_and_says_the_official_script_would_guess() -> None:
    score = EVALUATOR.score(gpqa("B"), "I am not sure.")
    assert (score.correct, score.value, score.extracted) == (False, 0.0, None)
    assert "random guess" in score.reason
    assert "scored 0" in score.reason


def test_score_explains_itself() -> None:
    score = EVALUATOR.score(gpqa("B"), "Final Answer: B")
    assert score.raw_answer == "Final Answer: B"
    assert score.details["method"] == "MMLU-Pro pattern 2 'Answer: X'"
    assert score.details["letters"] == "A-D"
    assert score.details["target_letter"] == "B"
    assert "equals target B" in score.reason


def test_target_given_as_option_text_or_malformed() -> None:
    assert EVALUATOR.score(gpqa("3.4 eV"), "B").correct
    bad = EVALUATOR.score(gpqa("Z"), "B")
    assert not bad.correct and "malformed" in bad.reason


def test_without_choices_letters_a_to_j_count() -> None:
    sample = BenchmarkSample("t", "s", 0, "Q", "J", "choice")
    assert EVALUATOR.score(sample, "The answer is (J)").correct


def test_long_single_line_answers_are_read() -> None:
    # The official ".*[aA]nswer:" and last-letter lookahead are quadratic here; how
    # long ours takes is measured by benchmarks/ (tests/evaluation/bench_scoring.py).
    choice = MATCH_MODES.get("choice").score
    answer = "x " * 10_000 + "answer: " * 1_000 + "A B " * 1_000
    assert choice(answer, gpqa("B")).extracted == "A"  # the last "answer: X" on the first line that has one
    assert choice("x " * 10_000 + "C " * 5_000, gpqa("B")).extracted == "C"


# ----------------------------------------------------------------- properties

_TEMPLATES = [
    "{L}",
    "({L})",
    "{L}.",
    "The answer is ({L}).",
    "Answer: {L}",
    "Final Answer: {L}",
    "**Answer:** {L}",
    "\\boxed{{{L}}}",
    "$\\boxed{{\\text{{{L}}}}}$",
    "{L}. {text}",
    "({L}) {text}",
    "{text}",
    "The answer is {text}",
]

_option_text = st.text(alphabet=string.ascii_lowercase + " -", min_size=2, max_size=30).filter(
    lambda text: len(normalize_answer(text)) >= 2
)


@st.composite
def _question(draw: st.DrawFn) -> tuple[tuple[str, ...], int, int, str, str]:
    count = draw(st.integers(min_value=2, max_value=10))
    options = draw(st.lists(_option_text, min_size=count, max_size=count, unique_by=normalize_answer))
    right = draw(st.integers(min_value=0, max_value=count - 1))
    wrong = draw(st.integers(min_value=0, max_value=count - 1).filter(lambda index: index != right))
    template = draw(st.sampled_from(_TEMPLATES))
    reasoning = draw(st.text(alphabet=string.ascii_lowercase + " ,.", max_size=200))
    return tuple(options), right, wrong, template, reasoning


def _render(template: str, options: tuple[str, ...], index: int, reasoning: str) -> str:
    body = template.format(L="ABCDEFGHIJ"[index], text=options[index])
    # Reasoning before the answer only where the template is not a whole-answer form.
    return f"{reasoning}\n{body}" if "answer" in template.lower() else body


@settings(max_examples=300, deadline=None)
@given(_question())
def test_a_well_formatted_right_answer_always_matches(
    case: tuple[tuple[str, ...], int, int, str, str],
) -> None:
    options, right, _, template, reasoning = case
    sample = BenchmarkSample("t", "s", 0, "Q", "ABCDEFGHIJ"[right], "choice", options)
    score = EVALUATOR.score(sample, _render(template, options, right, reasoning))
    assert score.correct, score.reason


@settings(max_examples=300, deadline=None)
@given(_question())
def test_a_different_letter_never_matches(case: tuple[tuple[str, ...], int, int, str, str]) -> None:
    options, right, wrong, template, reasoning = case
    sample = BenchmarkSample("t", "s", 0, "Q", "ABCDEFGHIJ"[right], "choice", options)
    score = EVALUATOR.score(sample, _render(template, options, wrong, reasoning))
    assert not score.correct, score.reason
    assert score.extracted == "ABCDEFGHIJ"[wrong]
