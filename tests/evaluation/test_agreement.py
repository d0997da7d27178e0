"""Our match modes read the answer the reference scorers read, on a seeded corpus.

Wherever a reference reads an answer, ours must read the same one, or the item
must fall in a deviation class documented in docs/scoring.md. The figures printed
by ``python -m tests.evaluation.agreement`` are the ones docs/scoring.md quotes.
"""

from __future__ import annotations

import pytest

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import TaskQAEvaluator

from . import agreement, corpus, references

EVALUATOR = TaskQAEvaluator()


@pytest.fixture(scope="module")
def tallies() -> dict[str, tuple[agreement.Tally, list[corpus.CorpusItem]]]:
    return agreement.all_tallies()


@pytest.mark.parametrize(("mode", "minimum"), [("choice", 1000), ("gpqa", 500), ("aime", 500), ("toolbench", 300)])
def test_every_disagreement_is_a_documented_class(
    tallies: dict[str, tuple[agreement.Tally, list[corpus.CorpusItem]]], mode: str, minimum: int
) -> None:
    tally, undocumented = tallies[mode]
    assert tally.items >= minimum
    assert tally.read >= 0.3 * tally.items  # the corpus exercises the reference, not only our extras
    assert not undocumented, [(item.kind, item.answer[:120], item.sample.target) for item in undocumented[:5]]
    assert tally.after_deviations == 1.0


def test_each_documented_class_is_listed_in_the_docs(
    tallies: dict[str, tuple[agreement.Tally, list[corpus.CorpusItem]]],
) -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "scoring.md").read_text(encoding="utf-8")
    seen = {cls for tally, _ in tallies.values() for cls in tally.classes}
    for cls in seen - {agreement.AGREE, agreement.NOTHING}:
        assert cls in docs, cls


@pytest.mark.parametrize("mode", ["choice", "gpqa", "aime", "toolbench"])
def test_the_docs_quote_the_current_figures(
    tallies: dict[str, tuple[agreement.Tally, list[corpus.CorpusItem]]], mode: str
) -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "scoring.md").read_text(encoding="utf-8")
    row = next(line for line in docs.splitlines() if line.startswith(f"| `{mode}`") and "%" in line)
    tally = tallies[mode][0]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    expected = [str(tally.items), str(tally.read), f"{tally.raw:.1%}", f"{tally.after_deviations:.1%}"]
    assert cells[1:5] == expected, "rerun `python -m tests.evaluation.agreement` and update docs/scoring.md"


def test_the_corpus_is_deterministic() -> None:
    assert [item.answer for item in corpus.mmlu_pro_corpus()[:50]] == [
        item.answer for item in corpus.mmlu_pro_corpus()[:50]
    ]
    assert len({item.kind for item in corpus.mmlu_pro_corpus()}) >= 35


# ------------------------------------------------------------ the reference logic itself


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("The answer is (B).", "B"),
        ("Answer: Clearly D", "C"),  # broken: the C of "Clearly"
        ("The answer is (C)\nWait. The answer is (D)", "C"),  # first match
        ("Answer: A\nAnswer: B", "A"),  # first line with a match
        ("A is wrong, so B", "B"),  # last standalone letter
        ("C. Vitamin D", "D"),
        ("**Answer:** E", "E"),
        ("nothing here", None),
    ],
)
def test_mmlu_pro_reference(answer: str, expected: str | None) -> None:
    assert references.mmlu_pro_extract(answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Answer: D", "D"),
        ("the answer is (A). Later...\nAnswer: D", "D"),
        ("answer: b", "b"),
        ("Answer: $C$", "C"),
        ("The answer is (C)", None),
        ("\\boxed{C}", None),
        ("**Answer:** C", None),
        ("Answer: Both", "B"),
    ],
)
def test_simple_evals_reference(answer: str, expected: str | None) -> None:
    assert references.simple_evals_extract(answer) == expected


def test_gorilla_reference() -> None:
    database = agreement.gorilla_database()
    meal = next(i for i, api in enumerate(corpus.HUB_APIS) if api.variant == "mealv2_efficientnet_b0")
    runnable = corpus.HUB_APIS[meal].runnable()
    assert references.gorilla_match(f"api_call: {runnable}", database) == meal
    assert references.gorilla_match(runnable, database) is None  # no api_call label: no answer
    wide = "api_call: torch.hub.load('pytorch/vision', 'wide_resnet50_2', pretrained=True)"
    assert references.gorilla_match(wide, database) == 0  # 'resnet50' is a substring
    assert references.gorilla_match("api_call: torch.hub.load('ultralytics/yolov5', 'yolov5x')", database) == 9
    assert references.gorilla_correct(wide, database, "Classification")


# ------------------------------------------------------------ the classes the issue names


def _mmlu(target: str, options: tuple[str, ...]) -> BenchmarkSample:
    return BenchmarkSample("1", "mmlu_pro", 0, "Q", target, "choice", options)


def test_a_rationale_walking_through_the_options_is_not_a_leading_label() -> None:
    options = ("31.1 eV", "266.97 K", "4.2 J", "7 N", "1 W", "2 W", "3 W", "4 W", "5 W", "6 W")
    answer = "A. 31.1 eV - incorrect. B. 266.97 K - wrong. C. 4.2 J - wrong. Hence J"
    score = EVALUATOR.score(_mmlu("J", options), answer)
    assert score.extracted == "J" == references.mmlu_pro_extract(answer)
    assert EVALUATOR.score(_mmlu("A", options), "A. 31.1 eV").extracted == "A"


def test_gpqa_final_answer_line_outranks_an_early_answer_is() -> None:
    sample = BenchmarkSample("r", "gpqa_diamond", 0, "Q", "D", "gpqa", ("1", "2", "3", "4"))
    answer = "At first I thought the answer is (A), but the units rule it out.\n\nAnswer: D"
    assert EVALUATOR.score(sample, answer).extracted == "D" == references.simple_evals_extract(answer)
    assert EVALUATOR.score(sample, "The answer is (D).").correct  # simple-evals reads nothing here


@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("With n = 9 fixed, there are 788 ways.", "788"),
        ("$\\boxed{\\mathbf{459}}$", "459"),
        ("So m + n = 73.", "73"),
    ],
)
def test_aime_reads_what_math_verify_reads(answer: str, target: str) -> None:
    sample = BenchmarkSample("a", "aime_2024", 0, "Q", target, "aime")
    assert EVALUATOR.score(sample, answer).correct
    assert references.math_verify_reference(target, answer)[0]


def test_a_bold_zero_padded_integer_is_its_value() -> None:
    # math-verify reads \textbf{073} as the symbol "073", unequal to 73: a documented class.
    sample = BenchmarkSample("a", "aime_2024", 0, "Q", "73", "aime")
    assert EVALUATOR.score(sample, "\\boxed{\\textbf{073}}").correct
    assert not references.math_verify_reference("73", "\\boxed{\\textbf{073}}")[0]
