"""The agent's own reading of the feedback: was my answer right?

The paper's experiences carry a correctness label, and its experience-quality study
keeps only the successes. The framework never tells the agent its score: the
feedback turn shows the agent its submitted answer and the correct answer (see
:mod:`pytest_evomemory.runtime.feedback`), and the agent compares them itself, here. The
rules are deliberately simple and visible (the official scorers are richer, e.g.
ToolBench's AST match): the same text after normalisation, the same option letter
for a multiple-choice task, or the same number. Where this verdict and the score
differ, the label is the agent's mistake, as it would be in any agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from ..util.text import normalize

#: A leading option letter: "B", "(B)", "B.", "B) text", "b: text".
_LEADING_LETTER = re.compile(r"^\(?([A-Za-z])\)?(?:[.):\s]|$)")
#: "... answer is B" / "Answer: (B)" anywhere in a longer reply.
_ANSWER_LETTER = re.compile(r"answer(?:\s+is)?\s*[:\-]?\s*\(?([A-Za-z])\)?(?![A-Za-z])", re.IGNORECASE)
_NUMBER_NOISE = re.compile(r"[\s,$]|\\,")
#: A finite Decimal holds at least one decimal digit (any script's, as ``\d`` matches).
_DIGIT = re.compile(r"\d")


def judged_correct(submitted: str | None, target: str, choices: Sequence[str] = ()) -> bool:
    """Whether ``submitted`` says what ``target`` says, as far as the agent can tell.

    ``choices`` are the task's options (lettered A, B, ...): with them a one-letter
    target is compared as an option letter, and the option's own text counts too.
    """
    if submitted is None or not submitted.strip():
        return False
    answer, correct = normalize(submitted), normalize(target)
    if answer == correct or answer.strip(" .") == correct.strip(" ."):
        return True
    if choices and len(target.strip()) == 1 and target.strip().isalpha():
        return _option_letter(submitted, choices) == target.strip().upper()
    number, expected = _number(answer), _number(correct)
    return number is not None and number == expected


def _option_letter(submitted: str, choices: Sequence[str]) -> str | None:
    text = submitted.strip()
    letters = {chr(ord("A") + index) for index in range(len(choices))}
    for pattern in (_LEADING_LETTER, _ANSWER_LETTER):
        match = pattern.search(text) if pattern is _ANSWER_LETTER else pattern.match(text)
        if match and match.group(1).upper() in letters:
            return match.group(1).upper()
    shown = normalize(text).strip(" .")
    for index, option in enumerate(choices):
        if shown == normalize(option).strip(" ."):
            return chr(ord("A") + index)
    return None


def _number(text: str) -> Decimal | None:
    cleaned = _NUMBER_NOISE.sub("", text).rstrip(".")
    if not cleaned or len(cleaned) > 64 or _DIGIT.search(cleaned) is None:
        return None  # no digit: Decimal would refuse it, or read NaN or Infinity (raising is slow)
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


__all__ = ["judged_correct"]
