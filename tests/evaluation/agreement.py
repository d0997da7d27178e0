"""Compare our match modes with the reference scorers on the seeded corpus.

For every item the reference either reads nothing (ours may read more) or reads
an answer; then ours must read the same one, or the item must fall in a
documented deviation class (docs/scoring.md, "Agreement with the reference
scorers"). Each class is recognised by a check of its own condition, never by the
corpus template that produced the item, so a held-out corpus is judged the same way.

``python -m tests.evaluation.agreement`` prints the table docs/scoring.md quotes.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field

from pytest_evomemory.core.types import Score
from pytest_evomemory.evaluation import TaskQAEvaluator
from pytest_evomemory.evaluation.choice import as_ascii
from pytest_evomemory.evaluation.toolbench import parse_call, read_call, same_api

from . import corpus, references

EVALUATOR = TaskQAEvaluator()

AGREE = "agree"
NOTHING = "reference reads nothing"
UNDOCUMENTED = "UNDOCUMENTED"

# The documented deviation classes (docs/scoring.md lists each with an example).
WORD_LETTER = "letter inside a word after 'answer is' / 'Answer:'"
WHOLE_OPTION = "answer states one option whole; the reference reads a later stray letter"
BEYOND_OPTIONS = "standalone letter beyond the question's options"
LOWER_CASE = "lower-case letter after 'Answer:'"
WIDE_OR_SPACED = "answer stated in full-width letters or with Unicode spaces"
MV_SET = "several stated values (boxes, `$a$ or $b$`), which math-verify joins into a set or one number"
MV_UNPARSED = "a number math-verify cannot parse (`943**`, `\\boxed{70.}`): it falls back to another number"
MV_TEXT = "number inside \\text{}/\\textbf{}: math-verify reads a symbol, equal only when spelt alike"
MV_FBOX = "\\fbox{N}: math-verify does not read \\fbox and takes a number from the rationale"
GORILLA_SUBSTRING = "Gorilla finds the API's argument strings anywhere in the call, not as its parameters"


@dataclass
class Tally:
    """Counts per class, and the accuracy each scorer gives the corpus."""

    mode: str
    items: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    ours_correct: int = 0
    reference_correct: float = 0.0
    effect: dict[str, float] = field(default_factory=dict)  # ours - reference, per class
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, cls: str, ours: bool, reference: float, answer: str) -> None:
        self.items += 1
        self.classes[cls] += 1
        self.ours_correct += ours
        self.reference_correct += reference
        self.effect[cls] = self.effect.get(cls, 0.0) + int(ours) - reference
        self.examples.setdefault(cls, answer)

    @property
    def read(self) -> int:
        return self.items - self.classes[NOTHING]

    @property
    def raw(self) -> float:
        return self.classes[AGREE] / self.read

    @property
    def after_deviations(self) -> float:
        return 1 - self.classes[UNDOCUMENTED] / self.read

    def row(self) -> str:
        return (
            f"| {self.mode} | {self.items} | {self.read} | {self.raw:.1%} | {self.after_deviations:.1%} "
            f"| {self.ours_correct / self.items:.1%} | {self.reference_correct / self.items:.1%} |"
        )


def _read(score: Score) -> str | None:
    out_of_range = score.details.get("out_of_range")
    return score.extracted or (out_of_range if isinstance(out_of_range, str) else None)


def _guess(options: int, answer_index: int) -> float:
    """MMLU-Pro ``update_result``: ``random.seed(12345); random.randint(0, n - 1)``."""
    random.seed(12345)
    return float(random.randint(0, options - 1) == answer_index)


def _follows_word(text: str, end: int) -> bool:
    return end < len(text) and text[end].isalnum()


def classify_mmlu_pro(answer: str, score: Score, letters: str) -> str:
    reference = references.mmlu_pro_extract(answer)
    if reference is None:
        return NOTHING
    if _read(score) == reference:
        return AGREE
    cls = _mmlu_pro_disagreement(answer, reference, score, letters)
    ascii_answer = as_ascii(answer)
    if cls == UNDOCUMENTED and ascii_answer != answer:
        # The official patterns are ASCII: a statement in full-width letters or with a
        # no-break space is invisible to them. Read as ASCII, the answer must agree
        # (or differ only in a documented class).
        ascii_reference = references.mmlu_pro_extract(ascii_answer)
        if ascii_reference != reference and (
            ascii_reference == _read(score)
            or _mmlu_pro_disagreement(ascii_answer, ascii_reference, score, letters) != UNDOCUMENTED
        ):
            return WIDE_OR_SPACED
    return cls


def _mmlu_pro_disagreement(answer: str, reference: str | None, score: Score, letters: str) -> str:
    if reference is None:
        return NOTHING
    text = answer.replace("**", "")
    for pattern in (r"answer is \(?([A-J])\)?", r".*[aA]nswer:\s*([A-J])"):
        match = re.search(pattern, text)
        if match:
            return WORD_LETTER if _follows_word(text, match.end(1)) else UNDOCUMENTED
    if reference not in letters:
        return BEYOND_OPTIONS
    if score.details.get("method") in (
        "bare letter", "last \\boxed{X}", "option text", "option label followed by that option's text",
    ):
        return WHOLE_OPTION
    return UNDOCUMENTED


def classify_gpqa(answer: str, score: Score) -> str:
    reference = references.simple_evals_extract(answer)
    if reference is None:
        return NOTHING
    if _read(score) == reference:
        return AGREE
    match = re.search(references.ANSWER_PATTERN_MULTICHOICE, answer)
    assert match is not None
    if _follows_word(answer, match.end(1)) or (
        match.group(0).endswith("$") and _follows_word(answer, match.end())
    ):
        return WORD_LETTER
    if reference.islower():
        return LOWER_CASE
    return UNDOCUMENTED


def choice_tally(mode: str, items: list[corpus.CorpusItem]) -> tuple[Tally, list[corpus.CorpusItem]]:
    tally, undocumented = Tally(mode), []
    for item in items:
        score = EVALUATOR.score(item.sample, item.answer)
        letters = corpus.LETTERS[: len(item.sample.choices)]
        if mode == "gpqa":
            cls = classify_gpqa(item.answer, score)
            reference_letter = references.simple_evals_extract(item.answer)
            reference_score = float(reference_letter == item.sample.target)
        else:
            cls = classify_mmlu_pro(item.answer, score, letters)
            reference_letter = references.mmlu_pro_extract(item.answer)
            reference_score = (
                _guess(len(letters), letters.index(item.sample.target))
                if reference_letter is None
                else float(reference_letter == item.sample.target)
            )
        tally.add(cls, score.correct, reference_score, item.answer)
        if cls == UNDOCUMENTED:
            undocumented.append(item)
    return tally, undocumented


def aime_tally(items: list[corpus.CorpusItem]) -> tuple[Tally, list[corpus.CorpusItem]]:
    import sympy

    tally, undocumented = Tally("aime"), []
    for item in items:
        score = EVALUATOR.score(item.sample, item.answer)
        verified, parsed = references.math_verify_reference(item.sample.target, item.answer)
        ours_value = score.details.get("value")
        if not parsed:
            cls = NOTHING
        elif isinstance(parsed[0], sympy.Integer) or isinstance(parsed[0], int):
            cls = AGREE if ours_value == int(parsed[0]) else UNDOCUMENTED
        elif isinstance(parsed[0], sympy.FiniteSet):
            # {892} (from \boxed{{892}}) verifies as 892: only a set of several values is the class
            several = len(parsed[0].args) >= 2
            cls = AGREE if score.correct == verified else MV_SET if several else UNDOCUMENTED
        elif score.correct == verified:
            cls = AGREE
        elif isinstance(parsed[0], sympy.Symbol) and parsed[0].name.isdigit():
            cls = MV_TEXT if int(parsed[0].name) == ours_value else UNDOCUMENTED
        else:
            cls = UNDOCUMENTED
        if cls == UNDOCUMENTED and "\\fbox" in item.answer and "\\boxed" not in item.answer:
            cls = MV_FBOX if score.details.get("method") == "last \\boxed{...}" else cls
        if cls == UNDOCUMENTED:
            cls = _math_verify_fault(item.answer, parsed, score)
        tally.add(cls, score.correct, float(verified), item.answer)
        if cls == UNDOCUMENTED:
            undocumented.append(item)
    return tally, undocumented


# "943**" (markdown bold read as a Python power) or "70." (a box's trailing period).
_UNPARSED_NUMBER = re.compile(r"\s*[-+]?(\d+)(?:\*\*|\.)[\s.,;:!?*]*")


def _math_verify_fault(answer: str, parsed: list[object], score: Score) -> str:
    """The documented math-verify faults that explain a disagreement, if any.

    ``parsed[-1]`` is the first text math-verify tried (its fallback string).
    """
    tried = parsed[-1] if isinstance(parsed[-1], str) else ""
    ours = score.details.get("value")
    if (
        answer.count("\\boxed") >= 2
        and score.details.get("method") == "last \\boxed{...}"
        and "," in tried
    ):
        return MV_SET  # "\boxed{20} ... \boxed{241}" is read as "20,241"
    unparsed = _UNPARSED_NUMBER.fullmatch(tried)
    if unparsed is not None and int(unparsed.group(1)) == ours:
        return MV_UNPARSED  # "**Answer: 943**" tried as the power "943**"
    return UNDOCUMENTED


def gorilla_database() -> list[references.GorillaApi]:
    return [references.GorillaApi(api.reference, api.domain) for api in corpus.HUB_APIS]


def toolbench_tally(items: list[corpus.CorpusItem]) -> tuple[Tally, list[corpus.CorpusItem], float]:
    """Agreement on *which API* the answer names, and Gorilla's own accuracy figure."""
    database = gorilla_database()
    tally, undocumented = Tally("toolbench"), []
    gorilla_credit = 0
    for item in items:
        score = EVALUATOR.score(item.sample, item.answer)
        index = references.gorilla_match(item.answer, database)
        domain = str(item.sample.metadata["domain"])
        gorilla_credit += references.gorilla_correct(item.answer, database, domain)
        if index is None:
            cls = NOTHING
        else:
            ours = read_call(item.answer)
            matched = parse_call(database[index].api_call)
            assert matched is not None
            if ours is not None and same_api(matched, ours):
                cls = AGREE
            elif ours is not None and all(
                arg.strip("'\"") in ours.source for arg in references.gorilla_get_args(database[index].api_call)
            ):
                cls = GORILLA_SUBSTRING
            else:
                cls = UNDOCUMENTED
        reference_api = float(index is not None and same_api(parse_call(item.sample.target), parse_call(database[index].api_call)))  # type: ignore[arg-type]
        tally.add(cls, bool(score.details["api_match"]), reference_api, item.answer)
        if cls == UNDOCUMENTED:
            undocumented.append(item)
    return tally, undocumented, gorilla_credit / len(items)


def tallies(
    mmlu_pro: list[corpus.CorpusItem],
    gpqa: list[corpus.CorpusItem],
    aime: list[corpus.CorpusItem],
    toolbench: list[corpus.CorpusItem],
) -> dict[str, tuple[Tally, list[corpus.CorpusItem]]]:
    """Each mode's tally and undocumented items, for any corpus (this one, the fuzz one)."""
    tool, tool_undocumented, _ = toolbench_tally(toolbench)
    return {
        "choice": choice_tally("choice", mmlu_pro),
        "gpqa": choice_tally("gpqa", gpqa),
        "aime": aime_tally(aime),
        "toolbench": (tool, tool_undocumented),
    }


def all_tallies() -> dict[str, tuple[Tally, list[corpus.CorpusItem]]]:
    return tallies(corpus.mmlu_pro_corpus(), corpus.gpqa_corpus(), corpus.aime_corpus(), corpus.toolbench_corpus())


def print_table(tallies: dict[str, tuple[Tally, list[corpus.CorpusItem]]]) -> None:  # pragma: no cover
    """The docs/scoring.md table of these tallies."""
    print("| mode | items | reference reads | raw agreement | after documented deviations | ours accuracy | reference accuracy |")
    print("|---|---|---|---|---|---|---|")
    for tally, _ in tallies.values():
        print(tally.row())


def main() -> None:  # pragma: no cover - prints the docs table
    tallies = all_tallies()
    print_table(tallies)
    for tally, undocumented in tallies.values():
        print(f"\n{tally.mode}:")
        for cls, count in tally.classes.most_common():
            print(f"  {cls}: {count} (effect {tally.effect[cls] / tally.items:+.2%}) e.g. {tally.examples[cls][:100]!r}")
        for item in undocumented[:8]:
            print("  UNDOCUMENTED:", item.kind, repr(item.answer[:160]), item.sample.target)
    _, _, gorilla = toolbench_tally(corpus.toolbench_corpus())
    print(f"\nGorilla functionality accuracy on the toolbench corpus: {gorilla:.1%}")


if __name__ == "__main__":  # pragma: no cover
    main()
