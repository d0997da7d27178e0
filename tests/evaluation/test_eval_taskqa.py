"""TaskQAEvaluator: the ``exact`` mode, bad answers, explainability and the registry."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_evomemory
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.types import BenchmarkSample, Score
from pytest_evomemory.evaluation import (
    MATCH_MODES,
    Evaluator,
    EvoMemoryEvaluator,
    MatchMode,
    TaskQAEvaluator,
    register_match_mode,
)
from pytest_evomemory.evaluation.taskqa import MAX_RECORDED_CHARS, MAX_SCORED_CHARS

EVALUATOR = TaskQAEvaluator()


def sample(mode: str = "exact", target: str = "Paris", choices: tuple[str, ...] = ()) -> BenchmarkSample:
    return BenchmarkSample("t1", "user_stream", 3, "Capital of France?", target, mode, choices)


EXACT_CASES: list[tuple[str, str, bool]] = [
    ("Paris", "Paris", True),
    ("paris", "Paris", True),
    ("  PARIS.  ", "Paris", True),
    ('"Paris"', "Paris", True),
    ("**Paris**", "Paris", True),
    ("\uff30\uff41\uff52\uff49\uff53", "Paris", True),  # full-width forms
    ("Par\u200bis", "Paris", True),  # zero-width space
    ("Rationale: it is the capital.\nFinal Answer: Paris", "Paris", True),
    ("New  York\nCity", "new york city", True),
    ("Paris, France", "Paris", False),
    ("Lyon", "Paris", False),
    ("Pari", "Paris", False),
    ("f(x)", "f(x)", True),
    ("Final Answer:", "final answer", True),  # nothing after the label: the text itself
]


@pytest.mark.parametrize(("answer", "target", "correct"), EXACT_CASES)
def test_exact_golden(answer: str, target: str, correct: bool) -> None:
    score = EVALUATOR.score(sample("exact", target), answer)
    assert score.correct is correct, score.reason
    assert score.match_mode == "exact"


def test_exact_empty_target_never_matches() -> None:
    score = EVALUATOR.score(sample("exact", "  . "), "anything")
    assert not score.correct and "target is empty" in score.reason


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=50).filter(lambda text: any(char.isalnum() for char in text)))
def test_exact_matches_its_own_target(target: str) -> None:
    assert EVALUATOR.score(sample("exact", target), target).correct


# ------------------------------------------------------- bad answers never crash

BAD_ANSWERS: list[tuple[str, object, str]] = [
    ("none", None, "no answer was submitted"),
    ("empty", "", "empty"),
    ("blank", " \n\t ", "empty"),
    ("nul-and-controls", "\x00\x01\x02\x1b", "control characters"),
    ("bytes", b"Paris", "not text"),
    ("dict", {"answer": "Paris"}, "not text"),
    ("float", 3.5, "not text"),
    ("bool", True, "not text"),
    ("binary", bytes(range(256)).decode("latin-1") * 4, ""),
    ("surrogates", "\ud800\udfff\ud83d", ""),
    ("emoji-and-rtl", "🤖 \u202eملف\u202c ∑∫≈", ""),
    ("huge", "x" * 1_000_000, "scored on its last"),
    ("huge-binary", "\x00\xff" * 500_000, ""),
]


@pytest.mark.parametrize("mode", ["exact", "choice", "aime"])
@pytest.mark.parametrize(("label", "answer", "reason_part"), BAD_ANSWERS, ids=[case[0] for case in BAD_ANSWERS])
def test_a_bad_answer_gets_a_defined_zero_with_a_reason(
    mode: str, label: str, answer: object, reason_part: str
) -> None:
    target = {
        "exact": "Paris", "choice": "B", "gpqa": "B", "aime": "73",
        "toolbench": "torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)",
    }[mode]
    score = EVALUATOR.score(sample(mode, target, ("x", "y", "z", "w")), answer)
    assert score.correct is False
    assert score.value == 0.0
    assert score.reason and reason_part in score.reason
    assert score.match_mode == mode and score.target == target
    # every score is serializable as the artefacts write it, UTF-8 included
    json.dumps(score.to_dict(), ensure_ascii=False).encode("utf-8")
    assert score.raw_answer is None or len(score.raw_answer) <= MAX_RECORDED_CHARS + 100


def test_an_integer_answer_is_read_as_text() -> None:
    assert EVALUATOR.score(sample("aime", "73"), 73).correct


def test_a_huge_answer_is_scored_on_its_end_quickly_and_recorded_bounded() -> None:
    answer = "blah " * 200_000 + "The answer is (B)"
    started = time.perf_counter()
    score = EVALUATOR.score(sample("choice", "B", ("x", "y", "z", "w")), answer)
    assert time.perf_counter() - started < 1.0
    assert score.correct
    assert f"scored on its last {MAX_SCORED_CHARS}" in score.reason
    assert score.details["answer_chars"] == len(answer)
    assert score.raw_answer is not None and "characters omitted" in score.raw_answer
    assert score.raw_answer.endswith("The answer is (B)")


def test_control_characters_are_removed_and_counted() -> None:
    score = EVALUATOR.score(sample("exact", "Paris"), "Pa\x00ris\x07")
    assert score.correct
    assert score.details["removed_characters"] == 2
    assert score.raw_answer == "Paris"


def test_a_failing_mode_gives_zero_not_an_exception() -> None:
    @register_match_mode("_test_broken")
    def broken(answer: str, sample: BenchmarkSample) -> Score:
        raise RuntimeError("boom")

    try:
        score = EVALUATOR.score(sample("_test_broken"), "anything")
    finally:
        MATCH_MODES.unregister("_test_broken")
    assert not score.correct
    assert "failed on this answer: RuntimeError: boom" in score.reason


def test_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown match mode 'nope'"):
        EVALUATOR.score(sample("nope"), "x")


def test_built_in_modes_load_on_first_lookup_and_cannot_be_replaced() -> None:
    import subprocess
    import sys

    code = """
import sys
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.evaluation import MATCH_MODES
from pytest_evomemory.evaluation.modes import register_match_mode
loaded = lambda: sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("pytest_evomemory.evaluation.")
                        and m.rsplit(".", 1)[1] in ("aime", "choice", "gpqa", "locomo", "toolbench"))
assert loaded() == [], loaded()
assert sorted(MATCH_MODES) == ["aime", "choice", "exact", "gpqa", "locomo_f1", "toolbench"]
assert loaded() == []
assert MATCH_MODES.get("aime").score.__name__ == "aime" and loaded() == ["aime"]
try:
    register_match_mode("choice")(len)
except ConfigError as error:
    assert "'choice' is built in" in str(error) and "under a new name" in str(error), error
else:
    raise AssertionError("a built-in mode was replaced")
register_match_mode("mine")(len)
assert MATCH_MODES.get("mine").score is len and "mine" in MATCH_MODES
MATCH_MODES.unregister("mine")
assert "mine" not in MATCH_MODES
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names_and_built_in_modes() -> None:
    assert {"exact", "choice", "aime"} <= set(MATCH_MODES)
    assert isinstance(TaskQAEvaluator(), Evaluator)
    assert pytest_evomemory.TaskQAEvaluator is TaskQAEvaluator
    assert pytest_evomemory.EvoMemoryEvaluator is EvoMemoryEvaluator
    mode: MatchMode = MATCH_MODES.get("exact").score
    assert mode("Paris", sample()).correct


def test_every_score_records_the_explanation_fields() -> None:
    for mode, target, answer in [("exact", "Paris", "paris"), ("choice", "B", "B"), ("aime", "73", "073")]:
        score = EVALUATOR.score(sample(mode, target, ("x", "y", "z", "w")), answer)
        record = score.to_dict()
        assert record["raw_answer"] == answer
        assert record["extracted"] is not None
        assert record["target"] == target
        assert record["match_mode"] == mode
        assert record["reason"]
        assert isinstance(record["details"], dict)


# Shapes that make naive regexes backtrack quadratically (found while writing this).
ADVERSARIAL = [
    " " * 19_990 + "1",
    "\n" * 19_990 + "1",
    " " * 5_000 + "(" + " " * 5_000 + "1",
    "(\n" * 8_000 + "1",
    "answer is " + " " * 19_980 + "x",
    "Answer:" + " " * 19_990 + "z",
    "$" * 19_999 + "1",
    "{" * 19_999,
    "\\boxed{" * 2_800 + "}" * 2_800,
    "1" * 20_000,
    "1." * 10_000,
    "A " * 10_000,
    "x " * 10_000 + "answer: " * 1_000,
    "final answer is \\boxed{" * 800,
    "The final answer is $" * 900,
    "Answer: a " * 2_000,
    "torch.hub.load(" * 1_300,
    "api_call: torch.hub.load('" * 700,
]


@pytest.mark.parametrize("mode", ["exact", "choice", "gpqa", "aime", "toolbench"])
@pytest.mark.parametrize("answer", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_answers_stay_fast(mode: str, answer: str) -> None:
    target = {
        "exact": "Paris", "choice": "B", "gpqa": "B", "aime": "73",
        "toolbench": "torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)",
    }[mode]
    started = time.perf_counter()
    score = EVALUATOR.score(sample(mode, target, ("x", "y", "z", "w")), answer)
    assert time.perf_counter() - started < 0.5
    assert score.reason


_PIECES = [*" \n()[]{}$\\^/*+-=.,:;!'\"ABCabc0123456789", "99", "torch.hub.load(", "api_call: ",
           "final answer is ", "9999999999999", "answer is ",
           "Answer: ", "\\boxed{", "\\frac{", "\\sqrt{", "\\text{", "\\cdot ", "^{", "\\left(",
           "\\right)", "Final Answer:", "option ", "\x00", "\ud800", "\u00e9", "\uff22"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=400).map("".join),
    st.sampled_from(["exact", "choice", "gpqa", "aime", "toolbench"]),
)
def test_any_answer_gets_a_defined_score_quickly(answer: str, mode: str) -> None:
    target = {
        "exact": "Paris", "choice": "B", "gpqa": "B", "aime": "73",
        "toolbench": "torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)",
    }[mode]
    # The one-time import of sympy and the LaTeX grammar (about 1.2 s) is not timed.
    EVALUATOR.score(sample("aime", "73"), "\\frac{146}{2}")
    started = time.perf_counter()
    score = EVALUATOR.score(sample(mode, target, ("x", "y", "z", "w")), answer)
    assert time.perf_counter() - started < 1.0
    assert score.reason and "failed on this answer" not in score.reason
    assert score.value in (0.0, 1.0)
    json.dumps(score.to_dict(), ensure_ascii=False).encode("utf-8")
