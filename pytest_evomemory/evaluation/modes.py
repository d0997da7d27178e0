"""Match modes: how one source dataset decides whether an answer is right.

Each mode is a function ``(answer, sample) -> Score`` registered under a name that
stream definitions put in ``BenchmarkSample.match_mode``. The answer a mode sees is
already a bounded ``str`` (see :mod:`pytest_evomemory.evaluation.taskqa`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..text import normalize
from ..types import BenchmarkSample, Score

MatchMode = Callable[[str, BenchmarkSample], Score]

MATCH_MODES: dict[str, MatchMode] = {}


def register_match_mode(name: str) -> Callable[[MatchMode], MatchMode]:
    """Register a mode under ``name`` (used by built-in and user-defined streams)."""

    def decorate(mode: MatchMode) -> MatchMode:
        MATCH_MODES[name] = mode
        return mode

    return decorate


def _strip_answer(text: str) -> str:
    return normalize(text).strip(" .!\"'`")


@register_match_mode("exact")
def exact(answer: str, sample: BenchmarkSample) -> Score:
    """Normalized string equality: casefolded, whitespace collapsed, edge punctuation off."""
    extracted = _strip_answer(answer)
    expected = _strip_answer(sample.target)
    correct = extracted == expected
    reason = (
        "normalized answer equals the normalized target"
        if correct
        else f"normalized answer {extracted!r} differs from normalized target {expected!r}"
    )
    return Score(correct, answer, extracted, sample.target, "exact", reason)


_LETTER_ONLY = re.compile(r"^\(?([A-Za-z])\)?[.:)]?$")
_ANSWER_IS = re.compile(r"answer is \(?([A-Z])\)?", re.IGNORECASE)


@register_match_mode("choice")
def choice(answer: str, sample: BenchmarkSample) -> Score:
    """A choice letter (A, B, ...), or the text of one of the rendered options."""
    letters = [chr(ord("A") + index) for index in range(len(sample.choices))] or list(
        "ABCDEFGHIJ"
    )
    text = answer.strip()
    extracted: str | None = None
    how = ""
    match = _LETTER_ONLY.match(text) or _ANSWER_IS.search(text)
    if match and match.group(1).upper() in letters:
        extracted, how = match.group(1).upper(), "letter"
    else:
        wanted = _strip_answer(text)
        for index, option in enumerate(sample.choices):
            if _strip_answer(option) == wanted:
                extracted, how = letters[index], "option text"
                break
    target = sample.target.strip().upper()
    if extracted is None:
        return Score(False, answer, None, sample.target, "choice", "no choice letter or option text found")
    correct = extracted == target
    reason = f"{how} {extracted} {'equals' if correct else 'differs from'} target {target}"
    return Score(correct, answer, extracted, sample.target, "choice", reason)
