"""The ``choice`` mode: multiple-choice letters, read as MMLU-Pro's official script reads them.

The extraction follows the chain of TIGER-AI-Lab/MMLU-Pro ``evaluate_from_api.py``
(``extract_answer`` -> ``extract_again`` -> ``extract_final``), because a reported
accuracy is only comparable when answers are read the way the official script
reads them: wherever that chain reads a letter, we read the same one, except in
the classes where it is demonstrably broken, each listed in docs/scoring.md with
an example and its measured effect:

* a letter must stand alone after "answer is" / "Answer:", so "The answer is
  Carbon" does not read as C;
* an answer that states one option whole (``B``, ``(B)``, ``\\boxed{B}``, the
  option's text, ``B. <that option's text>``) is read as that option before the
  official last resort "last standalone letter", which would read
  ``C. Vitamin D`` as D;
* that last resort only considers the sample's own option letters (a stray "I" on
  a four-option question is no answer);
* full-width letters and Unicode spaces are read as ASCII, so "The answer is (E)"
  (a full-width E) is E where the official ASCII patterns miss it and read a stray letter;
* when nothing is found the official script scores a seeded random guess; we
  score 0 and say so in the reason, so accuracy never contains luck.

The explicit statements ("answer is (X)", "Answer: X") are read over the full
A-J range as the official script does; a letter beyond the sample's options is
then scored 0 (the official script scores it wrong too).

The official step-2 and step-3 regexes (``.*[aA]nswer:`` and
``\\b[A-J]\\b(?!.*\\b[A-J]\\b)``) backtrack quadratically on long single-line
answers, so we use linear-time equivalents that give the same results.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ..core.types import BenchmarkSample, Score
from .modes import last_match, normalize_answer, register_match_mode

#: MMLU-Pro has at most ten options (A-J); used when a sample lists no choices.
DEFAULT_OPTION_COUNT = 10
#: The official patterns read A-J whatever the question's option count.
OFFICIAL_LETTERS = 10

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LONE_METHOD = "MMLU-Pro pattern 3 (last standalone letter)"

#: Reads an answer: ``(text, choices, option count) -> (letter or None, rule)``.
Extractor = Callable[[str, tuple[str, ...], int], tuple[str | None, str]]


@dataclass(frozen=True)
class _Patterns:
    """The extraction regexes for one letter range (A..last)."""

    letters: str
    bare: re.Pattern[str]
    answer_is: re.Pattern[str]
    answer_colon: re.Pattern[str]
    boxed: re.Pattern[str]
    label: re.Pattern[str]
    lone: re.Pattern[str]


def letter_class(count: int) -> str:
    letters = _ALPHABET[:count]
    return f"[{letters[0]}-{letters[-1]}]" if count > 1 else f"[{letters}]"


@lru_cache(maxsize=32)
def _patterns(count: int) -> _Patterns:
    cls = letter_class(count)
    alone = r"(?![A-Za-z0-9])"
    return _Patterns(
        letters=_ALPHABET[:count],
        bare=re.compile(r"[(\[]? ?([A-Za-z]) ?[)\]]?[.:)]?"),
        answer_is=re.compile(rf"answer is \(?({cls})\)?{alone}"),
        answer_colon=re.compile(rf"[aA]nswer:\s*({cls}){alone}"),
        boxed=re.compile(
            rf"\\boxed\s*\{{\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*\{{\s*)?\(?({cls})\)?\s*\}}"
        ),
        label=re.compile(rf"\s*(?:(?i:option|choice)\s+({cls})\b|[(\[]?({cls})[)\].:])\s*"),
        lone=re.compile(rf"\b{cls}\b"),
    )


# Phrases after which an agent names its option by text rather than by letter.
_ANSWER_PREFIX = re.compile(
    r"^(?:(?:so|thus|therefore|hence),?\s+)?(?:the\s+)?(?:final\s+|correct\s+|best\s+)?"
    r"(?:answer|option|choice)\s*(?:is|:|=)\s*",
    re.IGNORECASE,
)
_ANSWER_PHRASE = re.compile(r"(?:answer|option|choice)\s*(?:is|:|=)\s*", re.IGNORECASE)


def first_line_last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """What ``re.search(r'.*' + pattern, text)`` finds, in linear time.

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


def option_by_text(text: str, choices: tuple[str, ...], letters: str) -> str | None:
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


def labelled_option(text: str, choices: tuple[str, ...], letters: str) -> str | None:
    """``B. 3.4 eV`` / ``(B) 3.4 eV`` / ``Option B``: a label that states one option whole.

    The label counts only when nothing but that option's own text follows it: an
    answer that opens with "A. 31.1 eV - incorrect" and walks through the options
    is a rationale, and is left to the later rules.
    """
    match = _patterns(len(letters)).label.match(text)
    if match is None:
        return None
    letter = (match.group(1) or match.group(2)).upper()
    rest = normalize_answer(text[match.end() :])
    if not rest:
        return letter
    index = letters.find(letter)
    if index < 0 or index >= len(choices):
        return None
    return letter if rest == normalize_answer(choices[index]) else None


#: Full-width forms (U+FF01-FF5E, a full-width C) are ASCII in another width, and
#: Unicode spaces (no-break, narrow no-break, ideographic) are spaces: both are read
#: as ASCII. Not NFKC: it also turns the degree-Celsius sign U+2103 into a degree
#: sign and C, and a mathematical bold A into A, letters that stand alone where the
#: official script sees none.
_AS_ASCII = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | dict.fromkeys(
    (0x00A0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000), " "
)


def as_ascii(text: str) -> str:
    """``text`` with full-width forms and Unicode spaces as their ASCII equivalents."""
    return text.translate(_AS_ASCII)


def prepare(text: str) -> str:
    """ASCII letters and spaces (see :func:`as_ascii`) and no markdown bold, which
    hides the official patterns (later revisions of the official script remove it)."""
    return as_ascii(text).replace("**", "")


def read_statements(text: str, count: int) -> tuple[str | None, str]:
    """The official explicit statements, over ``count`` letters: steps 1 and 2."""
    patterns = _patterns(count)
    match = patterns.answer_is.search(text)
    if match:
        return match.group(1), "MMLU-Pro pattern 1 'answer is (X)'"
    match = first_line_last_match(patterns.answer_colon, text)
    if match:
        return match.group(1), "MMLU-Pro pattern 2 'Answer: X'"
    return None, ""


def read_bare(text: str) -> str | None:
    stripped = text.strip()
    bare = _patterns(1).bare.fullmatch(stripped) if len(stripped) <= 8 else None
    return bare.group(1).upper() if bare else None


def read_whole_forms(
    text: str, choices: tuple[str, ...], count: int
) -> tuple[str | None, str]:
    """Answers that state one option whole: boxed letter, option text, labelled option."""
    patterns = _patterns(count)
    match = last_match(patterns.boxed, text)
    if match:
        return match.group(1), "last \\boxed{X}"
    letter = option_by_text(text, choices, patterns.letters)
    if letter:
        return letter, "option text"
    letter = labelled_option(text, choices, patterns.letters)
    if letter:
        return letter, "option label followed by that option's text"
    return None, ""


def read_lone(text: str, count: int) -> tuple[str | None, str]:
    match = last_match(_patterns(count).lone, text)
    return (match.group(0), LONE_METHOD) if match else (None, "")


def extract_choice(text: str, choices: tuple[str, ...], count: int) -> tuple[str | None, str]:
    """The letter an answer names, and which rule of the chain found it.

    The letter may lie beyond ``count`` only when an explicit statement names it
    (the official patterns read A-J); callers score such a letter 0.
    """
    text = prepare(text)
    bare = read_bare(text)
    if bare is not None:
        return bare, "bare letter"
    letter, method = read_statements(text, max(count, OFFICIAL_LETTERS))
    if letter:
        return letter, method
    letter, method = read_whole_forms(text, choices, count)
    if letter:
        return letter, method
    return read_lone(text, count)


def score_letter(
    answer: str,
    sample: BenchmarkSample,
    mode: str,
    extract: Extractor,
    official: str,
) -> Score:
    """Score what ``extract`` reads against the sample's target letter (shared by modes)."""
    count = min(len(sample.choices) or DEFAULT_OPTION_COUNT, len(_ALPHABET))
    letters = _ALPHABET[:count]
    span = f"{letters[0]}-{letters[-1]}"
    target = target_letter(sample, letters)
    details: dict[str, object] = {"letters": span, "options": len(sample.choices)}
    if target is None:
        return Score(
            False, answer, None, sample.target, mode,
            f"the target {sample.target!r} is neither a letter in {span} nor an option's text; "
            "the sample is malformed",
            details=details,
        )
    details["target_letter"] = target
    extracted, method = extract(answer, sample.choices, count)
    details["method"] = method or None
    if extracted is not None and extracted not in letters:
        details["out_of_range"] = extracted
        return Score(
            False, answer, None, sample.target, mode,
            f"{method}: read {extracted}, which is not one of the options {span}; scored 0",
            details=details,
        )
    if extracted is None:
        return Score(
            False, answer, None, sample.target, mode,
            f"no option letter in {span} found ({official}); scored 0 — the official MMLU-Pro "
            "script would score a seeded random guess here",
            details=details,
        )
    correct = extracted == target
    verdict = "equals" if correct else "differs from"
    return Score(
        correct, answer, extracted, sample.target, mode,
        f"{method}: read {extracted}, which {verdict} target {target}",
        details=details,
    )


def target_letter(sample: BenchmarkSample, letters: str) -> str | None:
    """The option letter a task's target names (a letter, or one option's exact text)."""
    target = sample.target.strip().strip("()[]. ").upper()
    if len(target) == 1 and target in letters:
        return target
    return option_by_text(sample.target, sample.choices, letters)


def target_problem(sample: BenchmarkSample) -> str | None:
    """Why the scorer could never read a task's target as one of its letters, or None:
    the scorer's own reading, so the check and the scoring cannot disagree."""
    letters = _ALPHABET[: min(len(sample.choices) or DEFAULT_OPTION_COUNT, len(_ALPHABET))]
    if target_letter(sample, letters) is not None:
        return None
    return (
        f"the target {sample.target!r} is neither a letter in "
        f"A-{letters[-1]} nor exactly one option's text; give the correct option's letter"
    )



_TRIED = (
    "tried 'answer is (X)', 'Answer: X', \\boxed{X}, the option texts, a labelled option "
    "and a standalone letter"
)


@register_match_mode("choice", check_target=target_problem)
def choice(answer: str, sample: BenchmarkSample) -> Score:
    """A multiple-choice answer, read with the MMLU-Pro official extraction chain."""
    return score_letter(answer, sample, "choice", extract_choice, _TRIED)
