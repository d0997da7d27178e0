"""The ``toolbench`` match mode: was the right API chosen, and was it called right?

The Evo-Memory paper reports its ToolBench stream (Gorilla's APIBench, Patil et al.
2023) as two numbers, "API / Acc.". We read them as:

* **API** (``details["api_match"]``): the answer calls the reference function
  (``torch.hub.load``) and names the same API with it, i.e. the identifying
  arguments (``repo_or_dir`` without a ``:ref`` suffix, and ``model``) are equal.
  This is what Gorilla's own AST check tests.
* **Acc.** (``details["call_match"]``, and ``Score.correct``): the API matches *and*
  every argument of the reference call is present with an equal value
  (e.g. ``pretrained=True``). Extra arguments are allowed and listed.

``Score.correct`` is the stricter full-call match, so stream accuracy is "Acc.";
"API" accuracy is the mean of ``details["api_match"]``. Calls are parsed leniently,
not executed and not ``eval``-ed: some upstream reference calls are not valid Python
(a positional argument after a keyword one), and agents add prose, code fences,
assignments or Gorilla's ``<<<api_call>>>:`` labels around the call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..types import BenchmarkSample, Score
from .modes import register_match_mode

#: Positional parameters of functions whose arguments we must name to compare
#: ``f('a', 'b')`` with ``f(x='a', y='b')``. Unknown functions keep positions.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "torch.hub.load": ("repo_or_dir", "model"),
}
#: Arguments that say *which* API is meant (the "API" number); the rest configure it.
IDENTIFYING: dict[str, tuple[str, ...]] = {
    "torch.hub.load": ("repo_or_dir", "model"),
}

_CALLEE = re.compile(r"(?<![\w.])([A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\(")
_API_CALL_LABEL = re.compile(r"api_call\W*", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedCall:
    """A call reduced to its dotted callee and its arguments by name."""

    callee: str
    arguments: dict[str, str] = field(default_factory=dict)
    source: str = ""


def _outside_strings(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """The characters of ``text`` from ``start`` that are not inside a string
    literal, with their index: both scanners below only look at code, never at
    the commas and brackets a quoted argument may contain."""
    quote: str | None = None
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "'\"":
            quote = char
        yield index, char


def _split_top_level(text: str) -> list[str]:
    """Split an argument list at commas outside brackets and string literals."""
    parts: list[str] = []
    depth = 0
    last = 0
    for index, char in _outside_strings(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[last:index])
            last = index + 1
    parts.append(text[last:])
    return [part.strip() for part in parts if part.strip()]


def _matching_paren(text: str, open_at: int) -> int:
    """Index of the parenthesis closing the one at ``open_at`` (or -1 if unbalanced)."""
    depth = 0
    for index, char in _outside_strings(text, open_at):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    return -1


def normalize_value(value: str) -> str:
    """Compare literals, not spellings: quotes and surrounding whitespace do not count."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value.strip()


def _canonical(callee: str, name: str, value: str) -> str:
    value = normalize_value(value)
    if callee == "torch.hub.load" and name == "repo_or_dir":
        # 'pytorch/vision:v0.10.0' and 'pytorch/vision' name the same hub repository.
        value = value.split(":", 1)[0]
    return value


def parse_call(text: str, callee: str | None = None) -> ParsedCall | None:
    """The first call in ``text`` (the first to ``callee`` if given), or ``None``."""
    candidates = []
    for match in _CALLEE.finditer(text):
        name = re.sub(r"\s+", "", match.group(1))
        close = _matching_paren(text, match.end() - 1)
        if close < 0:
            continue
        candidates.append((name, match.start(), match.end(), close))
    if not candidates:
        return None
    # Prose may mention other calls ("print(...)"); the reference's function wins,
    # then one with the same last name (``hub.load``), then simply the first call.
    chosen = candidates[0]
    if callee is not None:
        last = "." + callee.rsplit(".", 1)[-1]
        chosen = next(
            (c for c in candidates if c[0] == callee),
            next((c for c in candidates if ("." + c[0]).endswith(last)), chosen),
        )
    name, start, open_end, close = chosen
    positional_names = SIGNATURES.get(name, ())
    arguments: dict[str, str] = {}
    positional: list[str] = []
    for part in _split_top_level(text[open_end:close]):
        keyword = re.match(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", part, re.DOTALL)
        if keyword:
            arguments[keyword.group(1)] = keyword.group(2)
        else:
            positional.append(part)
    free = [p for p in positional_names if p not in arguments]
    for index, value in enumerate(positional):
        key = free[index] if index < len(free) else f"*{index}"
        arguments[key] = value
    return ParsedCall(
        name,
        {key: _canonical(name, key, value) for key, value in arguments.items()},
        text[start : close + 1],
    )


def _answer_region(answer: str) -> str:
    """Gorilla-style outputs label the call (``<<<api_call>>>: ...``); prefer that part."""
    label = _API_CALL_LABEL.search(answer)
    if label is None:
        return answer
    region = answer[label.end() :]
    return re.split(r"api_provider", region, maxsplit=1, flags=re.IGNORECASE)[0]


@register_match_mode("toolbench")
def toolbench(answer: str, sample: BenchmarkSample) -> Score:
    """API match and full-call match against the source's ``api_call`` (see module doc)."""
    reference = parse_call(sample.target)
    if reference is None:
        return Score(
            False,
            answer,
            None,
            sample.target,
            "toolbench",
            "the reference api_call could not be parsed; report this stream's source",
            details={"api_match": False, "call_match": False},
        )
    candidate = parse_call(_answer_region(answer), reference.callee) or parse_call(answer, reference.callee)
    base_details: dict[str, object] = {
        "reference_function": reference.callee,
        "reference_arguments": dict(reference.arguments),
    }
    if candidate is None:
        return Score(
            False,
            answer,
            None,
            sample.target,
            "toolbench",
            "no function call found in the answer",
            details={**base_details, "api_match": False, "call_match": False},
        )
    identifying = IDENTIFYING.get(reference.callee, ())
    same_function = candidate.callee == reference.callee
    wrong_identity = [
        key
        for key in identifying
        if key in reference.arguments and candidate.arguments.get(key) != reference.arguments[key]
    ]
    api_match = same_function and not wrong_identity
    missing = sorted(key for key in reference.arguments if key not in candidate.arguments)
    different = sorted(
        key
        for key in reference.arguments
        if key in candidate.arguments and candidate.arguments[key] != reference.arguments[key]
    )
    extra = sorted(key for key in candidate.arguments if key not in reference.arguments)
    call_match = api_match and not missing and not different
    if not same_function:
        reason = f"calls {candidate.callee}, the reference calls {reference.callee}"
    elif wrong_identity:
        reason = "wrong API: " + ", ".join(
            f"{key}={candidate.arguments.get(key)!r} (reference {reference.arguments[key]!r})"
            for key in wrong_identity
        )
    elif not call_match:
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [
            f"{key}={candidate.arguments[key]!r} (reference {reference.arguments[key]!r})"
            for key in different
        ]
        reason = "right API, wrong call: " + "; ".join(problems)
    else:
        reason = "right API and every reference argument matches"
        if extra:
            reason += f" (extra arguments allowed: {', '.join(extra)})"
    return Score(
        call_match,
        answer,
        candidate.source,
        sample.target,
        "toolbench",
        reason,
        details={
            **base_details,
            "api_match": api_match,
            "call_match": call_match,
            "candidate_function": candidate.callee,
            "candidate_arguments": dict(candidate.arguments),
            "missing_arguments": missing,
            "different_arguments": different,
            "extra_arguments": extra,
        },
    )
