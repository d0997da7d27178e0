"""The ``choice`` mode: multiple-choice letters, scored as GPQA-Diamond and MMLU-Pro are.

The extraction follows the chain of TIGER-AI-Lab/MMLU-Pro ``evaluate_from_api.py``
(``extract_answer`` -> ``extract_again`` -> ``extract_final``), because a reported
accuracy is only comparable when answers are read the way the official script
reads them. Deviations are few, deliberate and listed in docs/scoring.md:

* letters are limited to the sample's own options (A-D for GPQA, up to A-J for
  MMLU-Pro), so "answer is (E)" on a four-option question is not an extraction;
* a letter must stand alone after "answer is" / "Answer:", so "The answer is
  Carbon" does not read as C;
* whole-answer forms that an agent's ``final_answer`` typically holds (``B``,
  ``(B)``, ``\\boxed{B}``, the option's text itself, ``B. <text>``) are read before
  the official last-resort "last standalone letter", which would read
  ``C. Vitamin D`` as D;
* when nothing is found the official script scores a seeded random guess; we
  score 0 and say so in the reason, so accuracy never contains luck.

The official step-2 and step-3 regexes (``.*[aA]nswer:`` and
``\\b[A-J]\\b(?!.*\\b[A-J]\\b)``) backtrack quadratically on long single-line
answers, so we use linear-time equivalents that give the same results.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from ..types import BenchmarkSample, Score
from .modes import last_match, normalize_answer, register_match_mode

#: MMLU-Pro has at most ten options (A-J); used when a sample lists no choices.
DEFAULT_OPTION_COUNT = 10

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LONE_METHOD = "MMLU-Pro pattern 3 (last standalone letter)"


@dataclass(frozen=True)
class _Patterns:
    """The extraction regexes for one option count (A..last)."""

    letters: str
    bare: re.Pattern[str]
    answer_is: re.Pattern[str]
    answer_colon: re.Pattern[str]
    boxed: re.Pattern[str]
    labelled: re.Pattern[str]
    lone: re.Pattern[str]


@lru_cache(maxsize=32)
def _patterns(count: int) -> _Patterns:
    letters = _ALPHABET[:count]
    cls = f"[{letters[0]}-{letters[-1]}]" if count > 1 else f"[{letters}]"
    alone = r"(?![A-Za-z0-9])"
    return _Patterns(
        letters=letters,
        bare=re.compile(r"[(\[]? ?([A-Za-z]) ?[)\]]?[.:)]?"),
        answer_is=re.compile(rf"answer is \(?({cls})\)?{alone}"),
        answer_colon=re.compile(rf"[aA]nswer:\s*({cls}){alone}"),
        boxed=re.compile(
            rf"\\boxed\s*\{{\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*\{{\s*)?\(?({cls})\)?\s*\}}"
        ),
        labelled=re.compile(
            rf"\s*(?:(?i:option|choice)\s+({cls})\b|[(\[]?({cls})[)\].:])",
        ),
        lone=re.compile(rf"\b{cls}\b"),
    )


# Phrases after which an agent names its option by text rather than by letter.
_ANSWER_PREFIX = re.compile(
    r"^(?:(?:so|thus|therefore|hence),?\s+)?(?:the\s+)?(?:final\s+|correct\s+|best\s+)?"
    r"(?:answer|option|choice)\s*(?:is|:|=)\s*",
    re.IGNORECASE,
)
_ANSWER_PHRASE = re.compile(r"(?:answer|option|choice)\s*(?:is|:|=)\s*", re.IGNORECASE)


def _extract_answer_colon(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """What ``re.search(r'.*[aA]nswer:\\s*X', text)`` finds, in linear time.

    ``.*`` cannot cross a newline, so the official search settles on the first line
    that holds a match and, being greedy, on the last match on that line.
    """
    chosen: re.Match[str] | None = None
    line_start = -1
    for match in pattern.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if chosen is None:
            chosen, line_start = match, start
        elif start == line_start:
            chosen = match
        else:
            break
    return chosen


def _option_by_text(text: str, choices: tuple[str, ...], letters: str) -> str | None:
    """The option whose text the answer states: whole, after "answer is", or last line."""
    candidates = [text, text.strip().rsplit("\n", 1)[-1]]
    phrase = last_match(_ANSWER_PHRASE, text)
    if phrase is not None:
        candidates.append(text[phrase.end() :].split("\n", 1)[0])
    options = [normalize_answer(option) for option in choices[: len(letters)]]
    for candidate in candidates:
        wanted = normalize_answer(_ANSWER_PREFIX.sub("", candidate.strip(), count=1))
        hits = [index for index, option in enumerate(options) if wanted and option == wanted]
        if len(hits) == 1:
            return letters[hits[0]]
    return None


def _target_letter(sample: BenchmarkSample, letters: str) -> str | None:
    target = sample.target.strip().strip("()[]. ").upper()
    if len(target) == 1 and target in letters:
        return target
    return _option_by_text(sample.target, sample.choices, letters)


def extract_choice(text: str, choices: tuple[str, ...], count: int) -> tuple[str | None, str]:
    """The letter an answer names, and which rule of the chain found it."""
    patterns = _patterns(count)
    letters = patterns.letters
    # Markdown bold ("**Answer:** B") would hide the official patterns.
    text = unicodedata.normalize("NFKC", text).replace("**", "")

    # Matched on the stripped text: adjacent \s* runs would backtrack quadratically.
    stripped = text.strip()
    bare = patterns.bare.fullmatch(stripped) if len(stripped) <= 8 else None
    if bare:
        letter = bare.group(1).upper()
        if letter in letters:
            return letter, "bare letter"
    match = patterns.answer_is.search(text)
    if match:
        return match.group(1), "MMLU-Pro pattern 1 'answer is (X)'"
    match = _extract_answer_colon(patterns.answer_colon, text)
    if match:
        return match.group(1), "MMLU-Pro pattern 2 'Answer: X'"
    match = last_match(patterns.boxed, text)
    if match:
        return match.group(1), "last \\boxed{X}"
    letter = _option_by_text(text, choices, letters)
    if letter:
        return letter, "option text"
    match = patterns.labelled.match(text)
    if match:
        return (match.group(1) or match.group(2)).upper(), "leading option label 'X. ...'"
    match = last_match(patterns.lone, text)
    if match:
        return match.group(0), _LONE_METHOD
    return None, ""


@register_match_mode("choice")
def choice(answer: str, sample: BenchmarkSample) -> Score:
    """A multiple-choice answer, read with the MMLU-Pro official extraction chain."""
    count = min(len(sample.choices) or DEFAULT_OPTION_COUNT, len(_ALPHABET))
    letters = _patterns(count).letters
    span = f"{letters[0]}-{letters[-1]}"
    target = _target_letter(sample, letters)
    details: dict[str, object] = {"letters": span, "options": len(sample.choices)}
    if target is None:
        return Score(
            False, answer, None, sample.target, "choice",
            f"the target {sample.target!r} is neither a letter in {span} nor an option's text; "
            "the sample is malformed",
            details=details,
        )
    details["target_letter"] = target
    extracted, method = extract_choice(answer, sample.choices, count)
    details["method"] = method or None
    if extracted is None:
        stray, stray_method = extract_choice(answer, (), len(_ALPHABET))
        # Only explicit statements: a stray capital "I" or "E" in prose is no answer.
        if stray is not None and stray not in letters and stray_method != _LONE_METHOD:
            details["out_of_range"] = stray
            return Score(
                False, answer, None, sample.target, "choice",
                f"{stray_method}: read {stray}, which is not one of the options {span}; scored 0",
                details=details,
            )
        return Score(
            False, answer, None, sample.target, "choice",
            f"no option letter in {span} found (tried 'answer is (X)', 'Answer: X', \\boxed{{X}}, "
            "a leading label, the option texts and a standalone letter); scored 0 — the "
            "official MMLU-Pro script would score a seeded random guess here",
            details=details,
        )
    correct = extracted == target
    verdict = "equals" if correct else "differs from"
    return Score(
        correct, answer, extracted, sample.target, "choice",
        f"{method}: read {extracted}, which {verdict} target {target}",
        details=details,
    )
