r"""The ``gpqa`` mode: GPQA-Diamond letters, read as openai/simple-evals reads them.

simple-evals (``gpqa_eval.py``) takes the first match of
``ANSWER_PATTERN_MULTICHOICE = r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?"`` and
scores 0 when there is none. Wherever it reads a letter we read the same one, so
a final ``Answer: D`` line wins over an earlier "the answer is (A)", except where
that pattern is demonstrably broken (docs/scoring.md lists each class):

* a letter that does not stand alone (``Answer: Both``, ``Answer: Clearly D``) is
  no answer, and the next match is tried;
* a lower-case letter counts only when it ends its line (``Answer: b``); the
  case-insensitive pattern reads the article of ``answer: a value`` and then
  scores it 0 because ``"a" != "A"``.

Where simple-evals reads nothing (``The answer is (C)``, ``\boxed{C}``, a bare
``C``) we fall back to the MMLU-Pro chain of :mod:`.choice` rather than score 0.
"""

from __future__ import annotations

import re

from ..core.types import BenchmarkSample, Score
from .choice import extract_choice, score_letter, target_problem
from .modes import register_match_mode

#: openai/simple-evals common.py, verbatim.
ANSWER_PATTERN_MULTICHOICE = r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?"
_PATTERN = re.compile(ANSWER_PATTERN_MULTICHOICE)
_ALONE = re.compile(r"(?![A-Za-z0-9])")
_LINE_END = re.compile(r"\s*[.)]?[ \t]*(?:\n|$)")
SIMPLE_EVALS_METHOD = "simple-evals 'Answer: X'"


def read_simple_evals(text: str) -> str | None:
    """The first standing-alone letter after ``Answer:``, upper-cased."""
    for match in _PATTERN.finditer(text):
        letter = match.group(1)
        if not _ALONE.match(text, match.end()):
            continue
        if letter.islower() and not _LINE_END.match(text, match.end()):
            continue
        return letter.upper()
    return None


def extract_gpqa(text: str, choices: tuple[str, ...], count: int) -> tuple[str | None, str]:
    """simple-evals' pattern first (on the raw text, as it sees it), then the MMLU-Pro chain."""
    letter = read_simple_evals(text)
    if letter is not None:
        return letter, SIMPLE_EVALS_METHOD
    return extract_choice(text, choices, count)


@register_match_mode("gpqa", check_target=target_problem)
def gpqa(answer: str, sample: BenchmarkSample) -> Score:
    """A GPQA answer: simple-evals' ``Answer: X`` first, then the MMLU-Pro chain."""
    return score_letter(
        answer, sample, "gpqa", extract_gpqa,
        "tried simple-evals' 'Answer: X', then 'answer is (X)', \\boxed{X}, the option texts, "
        "a labelled option and a standalone letter",
    )
