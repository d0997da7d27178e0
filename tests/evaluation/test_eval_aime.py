"""The ``aime`` mode: golden cases from what models write, properties, threads."""

from __future__ import annotations

import string
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import TaskQAEvaluator

EVALUATOR = TaskQAEvaluator()


def aime(target: str = "73") -> BenchmarkSample:
    return BenchmarkSample("60", "aime_2024", 0, "Find m+n.", target, "aime")


# (answer, target, expected extracted integer as text, or None when nothing is read)
AIME_CASES: list[tuple[str, str, str | None]] = [
    ("73", "73", "73"),
    ("073", "73", "73"),
    ("0073", "73", "73"),
    ("73", "073", "73"),
    ("\\boxed{73}", "73", "73"),
    ("$\\boxed{073}$", "73", "73"),
    ("The answer is 73.", "73", "73"),
    ("the answer is 073", "73", "73"),
    ("Final Answer: 73", "73", "73"),
    ("**Final Answer:** \\boxed{73}", "73", "73"),
    ("Rationale: sum the residues mod 1000.\nFinal Answer: 73", "73", "73"),
    ("73.", "73", "73"),
    ("$73$", "73", "73"),
    ("\\(73\\)", "73", "73"),
    ("73 apples", "73", "73"),
    ("73 degrees", "73", "73"),
    ("$73^\\circ$", "73", "73"),
    ("73%", "73", "73"),
    ("\\boxed{\\text{73}}", "73", "73"),
    ("\\boxed{n=73}", "73", "73"),
    ("m+n = 73", "73", "73"),
    ("\\frac{146}{2}", "73", "73"),
    ("\\boxed{\\frac{146}{2}}", "73", "73"),
    ("2^6+9", "73", "73"),
    ("the answer is \\(\\sqrt{5329}\\)", "73", "73"),
    ("73.0", "73", "73"),
    ("The final answer is $\\boxed{73}$. I hope it is correct.", "73", "73"),
    ("So the remainder when divided by 1000 is 73.", "73", "73"),
    ("After computing, m + n = 73, so the answer is 73.", "73", "73"),
    ("I got 72 at first, but the correct value is 73", "73", "73"),
    ("\\boxed{72} ... wait, that double counts. \\boxed{73}", "73", "73"),
    ("Answer: 204", "204", "204"),
    ("\\boxed{0}", "0", "0"),
    ("\\boxed{999}", "999", "999"),
    ("\\boxed{000}", "0", "0"),
    ("**Answer:** $\\boxed{25}$", "25", "25"),
    ("The answer is $113$.", "113", "113"),
    ("Thus $m+n=\\boxed{809}$.", "809", "809"),
    # wrong: a number is read, it is a different number
    ("74", "73", "74"),
    ("\\boxed{74}", "73", "74"),
    ("-73", "73", "-73"),
    ("730", "73", "730"),
    ("\\boxed{73} and then \\boxed{74}", "73", "74"),
    ("Answer: 37", "73", "37"),
    ("10^3 + 73", "73", "1073"),
    ("The answer is 73 - 1", "73", "72"),
    ("\\boxed{1073}", "73", "1073"),
    # nothing that is an integer
    ("73.5", "73", None),
    ("7.3", "73", None),
    ("\\frac{73}{2}", "73", None),
    ("73.0000001", "73", None),
    ("I don't know", "73", None),
    ("\\boxed{}", "73", None),
    ("The answer is seventy-three", "73", None),
]
# "1,073" is one thousand and seventy-three, as math-verify reads it (never 73).
AIME_CASES.append(("1,073", "73", "1073"))


@pytest.mark.parametrize(("answer", "target", "expected"), AIME_CASES)
def test_aime_golden(answer: str, target: str, expected: str | None) -> None:
    score = EVALUATOR.score(aime(target), answer)
    assert score.extracted == expected, score.reason
    assert score.correct is (expected is not None and int(expected) == int(target)), score.reason
    assert score.match_mode == "aime"
    assert score.reason


def test_score_explains_itself() -> None:
    score = EVALUATOR.score(aime("73"), "so the answer is $\\frac{146}{2}$.")
    assert score.correct
    assert score.raw_answer == "so the answer is $\\frac{146}{2}$."
    assert score.details["method"] == "'answer is N'"
    assert score.details["parsed_by"] == "math-verify"
    assert score.details["value"] == 73
    assert "equals target 73" in score.reason


def test_out_of_range_is_recorded() -> None:
    score = EVALUATOR.score(aime("73"), "\\boxed{1073}")
    assert not score.correct and score.details["out_of_range"] is True


def test_malformed_target_is_reported_not_raised() -> None:
    score = EVALUATOR.score(aime("seventy-three"), "73")
    assert not score.correct and "malformed" in score.reason


def test_math_verify_works_off_the_main_thread() -> None:
    # math-verify's default timeouts use signal.alarm, which raises outside the main thread.
    answers = ["\\frac{146}{2}", "\\sqrt{5329}", "2^6+9", "\\boxed{\\frac{148}{2}}"] * 8
    with ThreadPoolExecutor(max_workers=8) as pool:
        scores = list(pool.map(lambda answer: EVALUATOR.score(aime("73"), answer), answers))
    assert [score.correct for score in scores] == [True, True, True, False] * 8
    assert threading.current_thread() is threading.main_thread()


def test_long_latex_is_not_handed_to_math_verify_unbounded() -> None:
    answer = "\\frac{1}{2}" + "+\\frac{1}{2}" * 500
    score = EVALUATOR.score(aime("73"), answer)
    assert not score.correct
    assert score.extracted is None


# ----------------------------------------------------------------- properties

_FORMATS = [
    "{n}",
    "{n:03d}",
    "\\boxed{{{n}}}",
    "$\\boxed{{{n:03d}}}$",
    "The answer is {n:03d}.",
    "the answer is ${n}$",
    "Final Answer: {n}",
    "**Final Answer:** {n}",
    "**Answer:** \\boxed{{{n}}}",
    "{n} units",
    "$m+n = {n}$",
    "\\boxed{{\\text{{{n}}}}}",
]
_reasoning = st.text(alphabet=string.ascii_letters + " ,.", max_size=200)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 999), st.sampled_from(_FORMATS), _reasoning, st.booleans())
def test_a_well_formatted_right_answer_always_matches(
    n: int, template: str, reasoning: str, as_padded_target: bool
) -> None:
    answer = f"{reasoning}\n{template.format(n=n)}"
    target = f"{n:03d}" if as_padded_target else str(n)
    score = EVALUATOR.score(aime(target), answer)
    assert score.correct, score.reason
    assert score.extracted == str(n)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 999),
    st.integers(-1000, 100_000),
    st.sampled_from(_FORMATS),
    _reasoning,
)
def test_a_different_number_never_matches(n: int, m: int, template: str, reasoning: str) -> None:
    if m == n:
        m = n + 1
    rendered = template.format(n=abs(m)) if m >= 0 else template.replace("{n:03d}", "{n}").format(n=m)
    score = EVALUATOR.score(aime(str(n)), f"{reasoning}\n{rendered}")
    assert not score.correct, score.reason


@pytest.mark.parametrize(
    "answer",
    [
        "\\boxed{9^{9^{9}}}",
        "\\boxed{(10^{10})!}",
        "((2^{999})^{999})^{999}",
        "(2^{999})^{999}",
        "10^{999999}",
        "\\boxed{" + "1" * 5_000 + "}",
        "99!",
        "0" * 40 + "73",
    ],
)
def test_expressions_sympy_could_not_finish_are_not_evaluated(answer: str) -> None:
    # No signal-based timeout is available off the main thread, so such input
    # must never reach sympy's eager evaluation.
    started = time.perf_counter()
    score = EVALUATOR.score(aime("73"), answer)
    assert time.perf_counter() - started < 1.0
    assert not score.correct
    assert "failed on this answer" not in score.reason
