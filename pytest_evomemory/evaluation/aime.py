"""The ``aime`` mode: an integer answer 0-999, compared by value.

Peers (HuggingFace lighteval and open-r1, both on math-verify) take the last
``\\boxed{...}`` or an "answer is N" statement and compare values, not strings,
so ``073``, ``73.0``, ``\\frac{146}{2}`` and ``73^\\circ`` all equal 73. We do the
same in two tiers:

1. a fast, dependency-free reader for what models write almost always (a plain
   integer with leading zeros, signs, units, a trailing period, ``$...$``);
2. math-verify for real LaTeX (``\\frac``, ``\\sqrt``, ``2^6+9``), on a bounded
   candidate and with its signal-based timeouts disabled, because ``signal.alarm``
   only works in the main thread and scoring runs in any thread (xdist, pools).

A value counts only when it is exactly an integer: math-verify's float tolerance
would let 73.0000001 equal 73, and an AIME answer is an integer by definition.
Only plain arithmetic reaches sympy: with no timeout available, an eagerly
evaluated ``9^{9^{9}}`` or factorial would hang scoring for good.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..core.types import BenchmarkSample, Score
from ..util.text import shorten
from .modes import last_match, register_match_mode

#: math-verify parses with sympy; bounding its input keeps every call in milliseconds.
MAX_MATH_VERIFY_CHARS = 200
#: How far after "answer is" a number still belongs to it (math-verify: ``.{0,50}?``).
ANCHOR_REACH = 60

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_IS = re.compile(
    r"answer\s*(?:is|:|=|would\s+be|should\s+be)\s*[:=]?\s*", re.IGNORECASE
)
# At most 30 digits: int() refuses very long digit strings (and they are never 0-999).
_INTEGER = re.compile(r"^([+-]?\d{1,30})(?:\.0+)?$")
_LEADING_INTEGER = re.compile(r"^([+-]?\d{1,30})(?:\.0+)?(?![\d.,/^*]|\s*[-+*/^]\s*\d)")
# What may reach sympy: numbers, arithmetic and a few LaTeX commands, with small
# literal exponents. sympy evaluates 9^{9^{9}} or (10^{10})! eagerly and would
# never return, and without signal-based timeouts nothing could stop it.
# Possessive quantifiers: a backtracking version of this check is itself
# exponential on long digit runs.
_SAFE_FOR_SYMPY = re.compile(
    r"(?:\d++|[\s+\-*/().,{}\[\]]|\^\s*+(?:\d{1,2}+(?!\d)|\{\s*+\d{1,2}+\s*+\})"
    r"|\\(?:[dt]?frac|sqrt|cdot|times|div|left|right)(?![A-Za-z])|\\[!,;: ])*+"
)
_LONG_NUMBER = re.compile(r"\d{13}")
_MAX_POWERS = 1  # (a^b)^c with three-digit literals already takes seconds
# A number standing alone: not part of a word, a decimal, "1,073" (thousands) or
# a LaTeX argument/exponent such as the 2 of "\\frac{73}{2}" or "x^2", or a factorial.
# The second number of a ratio or time ("3:1") is not read: math-verify reads its first.
# "1,073" is one number, as math-verify reads it.
_NUMBER = re.compile(
    r"(?<![\w.{^_/])(?<!\d,)(?<!\d:)[+-]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?![\w}/^!]|[.,]\d)"
)
_DECIMAL = re.compile(r"[+-]?\d+\.\d+")
#: ``_Reading.via`` for a number that math-verify reads exactly and that is no integer.
NOT_AN_INTEGER = "not an integer"
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_LATEX_SIGNS = re.compile(r"[\\^/*]|\d\s*[-+]\s*\d")
# Formatting commands keep their content: \boxed{\mathbf{459}} states 459.
_TEXT_COMMAND = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mathsf|mathtt|mathnormal|bm|boldsymbol"
    r"|mbox|operatorname|underline|overline)\s*\{([^{}]*)\}"
)
# Prose: a word of two or more letters outside LaTeX commands. An answer with prose
# is not one expression, so it is not read whole ("With n = 9 fixed, there are 788 ways.").
_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_UNITS = re.compile(r"\^\s*\{?\\circ\}?|\\%|[%°]|\\[,;!: ]|\{,\}")
_WRAPPERS = re.compile(r"\$|\\\(|\\\)|\\\[|\\\]|\\displaystyle|\*\*")


@dataclass(frozen=True)
class _Reading:
    value: int | None
    candidate: str
    method: str
    via: str = ""


def _last_boxed(text: str) -> tuple[str, int] | None:
    """The last balanced ``\\boxed{...}`` body and where it ends (regexes cannot nest braces).

    Only the last few openings are tried, each over a bounded span, so an answer
    made of thousands of unclosed ``\\boxed{`` stays cheap to read.
    """
    starts = [match.end() for match in _BOXED.finditer(text)]
    for start in reversed(starts[-20:]):
        depth, index = 1, start
        end = min(len(text), start + 1_000)
        while index < end and depth:
            char = text[index]
            depth += (char == "{") - (char == "}")
            index += 1
        if depth == 0:
            return text[start : index - 1], index
    return None


def _clean(candidate: str) -> str:
    candidate = _THOUSANDS.sub("", _WRAPPERS.sub("", candidate))
    candidate = _TEXT_COMMAND.sub(r" \1 ", _TEXT_COMMAND.sub(r" \1 ", candidate))
    candidate = _UNITS.sub(" ", candidate)
    # "n = 73", "2^6+9 = 73": the value stated last is the answer.
    candidate = candidate.rsplit("=", 1)[-1]
    return candidate.strip().rstrip(".;:,").strip()


def _after_anchor(text: str) -> str | None:
    """What follows the last "answer is" / "Answer:" up to the end of its sentence."""
    last = last_match(_ANSWER_IS, text)
    if last is None:
        return None
    rest = text[last.end() : last.end() + 400].split("\n", 1)[0]
    inline = re.match(r"\s*(\$\$?|\\\(|\\\[)(.*?)(\$\$?|\\\)|\\\])", rest)
    if inline:
        return inline.group(2)
    return re.split(r"(?<=[^\d\s])[.,;]\s|[.,;]\s+(?=[A-Za-z])|\.$|,\s", rest, maxsplit=1)[0]


def _fast_integer(candidate: str) -> int | None:
    cleaned = _clean(candidate)
    whole = _INTEGER.match(cleaned)
    if whole:
        return int(whole.group(1))
    # "73 apples", "073 (mod 1000)": an integer followed by words, not by an operation.
    leading = _LEADING_INTEGER.match(cleaned)
    if leading and not _LATEX_SIGNS.search(cleaned[leading.end() :][:1]):
        rest = cleaned[leading.end() :].strip()
        if not rest or rest[0].isalpha() or rest[0] in "(":
            return int(leading.group(1))
    return None


def _math_verify_integer(candidate: str) -> tuple[int | None, str]:
    """The exact integer value of a LaTeX/expression candidate, via math-verify."""
    cleaned = _WRAPPERS.sub("", candidate).rsplit("=", 1)[-1].strip().rstrip(".;:,")
    if not cleaned or len(cleaned) > MAX_MATH_VERIFY_CHARS:
        return None, "candidate too long for math-verify" if cleaned else "empty candidate"
    if (
        not _SAFE_FOR_SYMPY.fullmatch(cleaned)
        or cleaned.count("^") > _MAX_POWERS
        or _LONG_NUMBER.search(cleaned)
    ):
        return None, "not a plain arithmetic expression (not evaluated)"
    try:
        import sympy
        from math_verify import parse
    except ImportError:  # pragma: no cover - math-verify is a dependency
        return None, "math-verify is not installed"
    _quiet_math_verify()
    try:
        value, via = _exact_integer(parse(f"${cleaned}$", parsing_timeout=None), sympy)
    except Exception as error:  # e.g. a value too large to convert; never an answer
        return None, f"math-verify could not evaluate it ({type(error).__name__})"
    if value is not None and value.bit_length() > 100:
        # Not an AIME answer, and too long to print: int->str is capped at 4300 digits.
        return None, "math-verify read an integer of more than 30 digits"
    return value, via


def _exact_integer(parsed: list[Any], sympy: Any) -> tuple[int | None, str]:
    if not parsed:
        return None, "math-verify found no expression"
    value: Any = parsed[0]
    if not isinstance(value, sympy.Basic) or not value.is_number:
        return None, f"math-verify read {parsed[-1]!r}, which is not a number"
    if value.is_Integer:
        return int(value), "math-verify"
    if value.is_Float:
        return (int(value), "math-verify") if value == int(value) else (None, NOT_AN_INTEGER)
    if value.is_Rational:
        return None, NOT_AN_INTEGER
    # sqrt(5329), 2^6+9 ...: find the nearest integer numerically, then prove it exactly.
    approx = value.evalf(50)
    if not approx.is_real or abs(approx) > 10**30:
        return None, f"math-verify read {parsed[-1]!r}, which is not an integer"
    nearest = int(approx.round())
    if abs(approx - nearest) > 1e-30 or sympy.simplify(value - nearest) != 0:
        return None, f"math-verify read {parsed[-1]!r}, which is not an integer"
    return nearest, "math-verify"


def _without_group_braces(candidate: str) -> str:
    """``{892}`` (``\\boxed{{892}}``) is 892: a brace group around the whole is no set."""
    stripped = candidate.strip()
    while len(stripped) > 2 and stripped[0] == "{" and stripped[-1] == "}":
        inner = stripped[1:-1]
        depth = 0
        for char in inner:
            depth += (char == "{") - (char == "}")
            if depth < 0:
                return stripped  # "{a}+{b}": the braces are two groups
        stripped = inner.strip()
    return stripped


def _read(candidate: str, method: str) -> _Reading:
    candidate = _without_group_braces(candidate)
    value = _fast_integer(candidate)
    if value is not None:
        return _Reading(value, candidate, method, "integer")
    if _LATEX_SIGNS.search(candidate):
        value, via = _math_verify_integer(candidate)
        return _Reading(value, candidate, method, via)
    return _Reading(None, candidate, method, "no integer")


_FINAL_ANSWER = re.compile(r"final answer", re.IGNORECASE)
_IS = re.compile(r"\s+is:?")
# What math-verify accepts right after "final answer ... is": a number (one space
# before it), or a LaTeX span opening.
_STATED_NUMBER = re.compile(r"\s(-?\d+(?:,\d{3})*(?:\.\d+)?)(?!\d)")
_LATEX_OPENING = re.compile(r"\s*(\$\$?|\\\[|\\\(|\\boxed\s*\{)")
_LATEX_CLOSING = {"$": "$", "$$": "$$", "\\[": "\\]", "\\(": "\\)"}
FINAL_ANSWER_REACH = 100


def _latex_span(text: str, opening: re.Match[str]) -> tuple[str, int] | None:
    """The content of the LaTeX span that ``opening`` starts, and where it ends."""
    token = re.sub(r"\s+", "", opening.group(1))
    if token.startswith("\\boxed"):
        depth, index = 1, opening.end()
        while index < min(len(text), opening.end() + 1_000) and depth:
            depth += (text[index] == "{") - (text[index] == "}")
            index += 1
        return (text[opening.end() : index - 1], index) if depth == 0 else None
    close = text.find(_LATEX_CLOSING[token], opening.end(), opening.end() + 1_000)
    return (text[opening.end() : close], close + len(token)) if close >= 0 else None


def _final_answer_statement(text: str) -> tuple[int, str] | None:
    """What the last "final answer ... is N" states, and where it ends.

    math-verify ranks these statements (a number right after "is", or a LaTeX span
    there) with ``\\boxed`` and reads the one ending last: a self-correction after
    the last box ("\\boxed{13} ... the final answer is 12.") is read as 12, a box
    after the statement as the box.
    """
    best: tuple[int, str] | None = None
    # The statement ending last wins, so the last few are enough and bound the work.
    for anchor in list(_FINAL_ANSWER.finditer(text))[-20:]:
        reach = text[anchor.end() : anchor.end() + FINAL_ANSWER_REACH + 4]
        line_end = reach.find("\n")
        number_found = latex_found = False
        for verb in _IS.finditer(reach):
            at = anchor.end() + verb.end()
            if not number_found and (line_end < 0 or verb.start() < line_end):
                number = _STATED_NUMBER.match(text, at)
                if number is not None:
                    number_found = True
                    if best is None or number.end() > best[0]:
                        best = (number.end(), number.group(1))
            if not latex_found:
                opening = _LATEX_OPENING.match(text, at)
                span = _latex_span(text, opening) if opening else None
                if span is not None:
                    latex_found = True
                    if best is None or span[1] > best[0]:
                        best = (span[1], span[0])
    return best


def read_aime_answer(text: str) -> _Reading:
    """The integer an answer states, trying the forms in the order math-verify does."""
    text = unicodedata.normalize("NFKC", text)
    stated = _final_answer_statement(text)
    boxed = _last_boxed(text)
    if stated is not None and (boxed is None or stated[0] > boxed[1]):
        reading = _read(stated[1], "'final answer is N'")
        if reading.value is not None:
            return reading
    if boxed is not None:
        return _read(boxed[0], "last \\boxed{...}")
    failed: _Reading | None = None  # the first unreadable candidate explains best
    anchored = _after_anchor(text)
    if anchored is not None:
        reading = _read(anchored, "'answer is N'")
        if reading.value is not None or reading.via == NOT_AN_INTEGER:
            return reading  # "the answer is 29/30": math-verify reads the fraction
        failed = reading
        # "the answer is clearly 204, which uses 3 colors": the first number soon after
        # the anchor, as math-verify's ``answer.{0,50}?<number>`` reads it.
        first = _NUMBER.search(anchored[:ANCHOR_REACH])
        if first is not None:
            reading = _read(first.group(0), "first number after 'answer is'")
            if reading.value is not None or _DECIMAL.fullmatch(first.group(0)):
                # "the answer is 4.5. Check: 3": 4.5 is the answer, not an integer
                return reading
    stripped = text.strip()
    if len(stripped) <= MAX_MATH_VERIFY_CHARS and not _WORD.search(_COMMAND.sub(" ", stripped)):
        reading = _read(stripped, "whole answer")
        if reading.value is not None:
            return reading
        failed = failed or reading
    last = last_match(_NUMBER, text)
    if last is not None:
        reading = _read(last.group(0), "last number in the answer")
        if reading.value is not None:
            return reading
        failed = failed or reading
    return failed or _Reading(None, "", "", "no number found")


def target_problem(sample: BenchmarkSample) -> str | None:
    """Why ``sample``'s target can never be matched (it is no integer), or None: checked
    when the stream loads, so a task that would score wrong whatever the answer
    (a NaN or blank answer cell read as text) is refused before any model call."""
    if _fast_integer(sample.target.strip()) is None:
        return (
            f"the target {shorten(sample.target, 60)!r} is not an integer, and an aime "
            "answer always is; give the integer answer"
        )
    return None


@register_match_mode("aime", check_target=target_problem)
def aime(answer: str, sample: BenchmarkSample) -> Score:
    """An AIME answer: the stated integer equals the target integer."""
    target = _fast_integer(sample.target.strip())
    if target is None:
        return Score(
            False, answer, None, sample.target, "aime",
            f"the target {sample.target!r} is not an integer; the sample is malformed",
        )
    reading = read_aime_answer(answer)
    details: dict[str, object] = {
        "method": reading.method or None,
        "candidate": reading.candidate[:200] or None,
        "parsed_by": reading.via,
        "target_value": target,
    }
    if reading.value is None:
        where = f" ({reading.method}: {reading.candidate[:80]!r})" if reading.method else ""
        return Score(
            False, answer, None, sample.target, "aime",
            f"no integer answer found{where}: {reading.via}", details=details,
        )
    details["value"] = reading.value
    if not 0 <= reading.value <= 999:
        details["out_of_range"] = True
    correct = reading.value == target
    verdict = "equals" if correct else "differs from"
    return Score(
        correct, answer, str(reading.value), sample.target, "aime",
        f"{reading.method} read {reading.value} (via {reading.via}), which {verdict} target {target}",
        details=details,
    )


class _DropTimeoutNotice(logging.Filter):
    """math-verify logs a notice when its timeout is off; ours is the input bound."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


_QUIETED = False


def _quiet_math_verify() -> None:
    global _QUIETED
    if not _QUIETED:
        for name in ("math_verify.parser", "math_verify.grader"):
            logging.getLogger(name).addFilter(_DropTimeoutNotice())
        _QUIETED = True
