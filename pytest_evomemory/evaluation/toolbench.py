"""The ``toolbench`` match mode: was the right API chosen, and was it called right?

The Evo-Memory paper reports its ToolBench stream (Gorilla's APIBench TorchHub
split, Patil et al. 2023) as two numbers, "API / Acc.". Ours, per item:

* **API** (``details["api_match"]``): the answer's ``torch.hub.load`` call names the
  record's own hub API: the same ``repo_or_dir`` (a ``:ref`` suffix ignored), the
  same ``model`` entry point and the same extra positional arguments (MEAL-V2's
  variant name). Gorilla's ``ast_eval_th.py`` identifies the API the same way but
  then credits any API *of the question's domain*; we credit only the record's API
  (see docs/scoring.md for the measured difference).
* **Acc.** (``details["call_match"]``, and ``Score.correct``): the API matches *and*
  every other argument of the reference call is present with an equal value
  (e.g. ``pretrained=True``). Extra arguments are allowed and listed.

Calls are compared by parameter, not by spelling: ``torch.hub.load``'s parameters
(``repo_or_dir``, ``model``, then ``*args`` and ``**kwargs``) match whether given by
position or by keyword, a ``**{...}`` splat is its keyword arguments, and a reference
argument whose value is a variable name (``model_type=model_type``) accepts any value.
Nothing is executed or ``eval``-ed. Some upstream references are not valid Python
(``torch.hub.load(repo_or_dir='szq0214/MEAL-V2', 'meal_v2', model='mealv2_...')``);
they are read as their authors' runnable code spells them: arguments fill the
parameters in source order, and a keyword naming a parameter that is already filled
is the next positional argument.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..core.types import BenchmarkSample, Score
from .modes import Metric, register_match_mode

#: Named parameters that positional arguments fill, in order, per function; further
#: positionals are ``*0``, ``*1``... (``torch.hub.load`` passes them to the entry point).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "torch.hub.load": ("repo_or_dir", "model"),
}
#: Arguments that say *which* API is meant (the "API" figure); extra positionals
#: (``*0``...) select a variant of the entry point and identify it too.
IDENTIFYING: dict[str, tuple[str, ...]] = {
    "torch.hub.load": ("repo_or_dir", "model"),
}

_CALLEE = re.compile(r"(?<![\w.])([A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\(")
_API_CALL_LABEL = re.compile(r"api_call\W*", re.IGNORECASE)
_KEYWORD = re.compile(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", re.DOTALL)
_DICT_ENTRY = re.compile(r"^(['\"])(\w+)\1\s*:\s*(.*)$", re.DOTALL)
_VARIABLE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_CONSTANTS = frozenset({"True", "False", "None"})
_ARGUMENT_END = re.compile(r"\s*[,)]")


@dataclass(frozen=True)
class ParsedCall:
    """A call reduced to its dotted callee and its arguments by parameter name.

    ``variables`` names the arguments whose value is a bare variable name: a
    reference spelt that way leaves the value to the caller.
    """

    callee: str
    arguments: dict[str, str] = field(default_factory=dict)
    source: str = ""
    variables: frozenset[str] = frozenset()


def _outside_strings(text: str, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, str]]:
    """The characters of ``text`` from ``start`` that are not inside a string
    literal, with their index: both scanners below only look at code, never at
    the commas and brackets a quoted argument may contain."""
    quote: str | None = None
    escaped = False
    for index in range(start, len(text) if stop is None else min(stop, len(text))):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote or (char in "'\"" and _ARGUMENT_END.match(text, index + 1)):
                # 'hustvl/yolop", ...: a model's mismatched quote still ends the argument
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


#: A call longer than this is not an API call; bounds the scan of unbalanced text.
MAX_CALL_CHARS = 2_000
#: Calls tried per name group, from the preferred end: bounds answers made of
#: thousands of unclosed calls.
MAX_CALLS_TRIED = 20


def _matching_paren(text: str, open_at: int) -> int:
    """Index of the parenthesis closing the one at ``open_at`` (or -1 if unbalanced).

    The scan starts at the call, never earlier: an apostrophe in the prose before
    it ("Here's the call") must not be read as a string that swallows the call.
    """
    depth = 0
    for index, char in _outside_strings(text, open_at, open_at + MAX_CALL_CHARS):
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
    if len(value) >= 2 and value[0] in "'\"" and value[-1] in "'\"":
        value = value[1:-1]
    return value.strip()


def _canonical(callee: str, name: str, value: str) -> str:
    value = normalize_value(value)
    if callee == "torch.hub.load" and name == "repo_or_dir":
        # 'pytorch/vision:v0.10.0' and 'pytorch/vision' name the same hub repository.
        value = value.split(":", 1)[0]
    return value


def _is_variable(value: str) -> bool:
    value = value.strip()
    return bool(_VARIABLE.match(value)) and value not in _CONSTANTS


def _splat(part: str) -> list[tuple[str, str]] | None:
    """``**{'k': v, ...}`` as keyword arguments (``None`` if it is not a dict literal)."""
    inner = part[2:].strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        return None
    entries = []
    for entry in _split_top_level(inner[1:-1]):
        match = _DICT_ENTRY.match(entry)
        if match is None:
            return None
        entries.append((match.group(2), match.group(3)))
    return entries


def bind_arguments(callee: str, parts: list[str]) -> tuple[dict[str, str], frozenset[str]]:
    """Name every argument as the function would receive it, tolerating invalid order.

    Arguments are taken in source order: a positional one fills the next free named
    parameter, then ``*0``, ``*1``...; a keyword naming a parameter already filled
    (Python would raise "multiple values") is read as the next positional argument,
    which is what its author's runnable code passes.
    """
    slots = SIGNATURES.get(callee, ())
    raw: dict[str, str] = {}
    extra = 0

    def positional(value: str) -> None:
        nonlocal extra
        free = next((slot for slot in slots if slot not in raw), None)
        if free is not None:
            raw[free] = value
        else:
            raw[f"*{extra}"] = value
            extra += 1

    for part in parts:
        if part.startswith("**"):
            entries = _splat(part)
            if entries is None:
                raw[part] = ""  # **kwargs of unknown content: kept, never equal to anything
                continue
            for name, value in entries:
                raw[name] = value
            continue
        keyword = _KEYWORD.match(part)
        if keyword is None:
            positional(part)
        elif keyword.group(1) in raw and keyword.group(1) in slots:
            positional(keyword.group(2))
        else:
            raw[keyword.group(1)] = keyword.group(2)
    variables = frozenset(key for key, value in raw.items() if _is_variable(value))
    return {key: _canonical(callee, key, value) for key, value in raw.items()}, variables


def parse_call(text: str, callee: str | None = None) -> ParsedCall | None:
    """A call in ``text``, or ``None``.

    With ``callee``, the **last** call to it (then the last whose name ends the same
    way, ``hub.load``, then the first call of any name), as Gorilla's evaluator reads
    the last ``torch.hub.load`` of an answer; without, the first call. A closed call
    is preferred; an unclosed one is read to the end of ``text``.
    """
    found = [(re.sub(r"\s+", "", m.group(1)), m.start(), m.end()) for m in _CALLEE.finditer(text)]
    groups = [found]
    if callee is not None:
        last = "." + callee.rsplit(".", 1)[-1]
        groups = [
            [c for c in reversed(found) if c[0] == callee],
            [c for c in reversed(found) if ("." + c[0]).endswith(last)],
            found,
        ]
    for group in groups:
        for name, start, open_end in group[:MAX_CALLS_TRIED]:
            close = _matching_paren(text, open_end - 1)
            if close >= 0:
                return _parsed(text, name, start, open_end, close)
    # Only unclosed calls (an answer cut off mid-call): the preferred one runs to the
    # end of the text, as a parser's error recovery closes it (Gorilla reads it so).
    preferred = next((group[0] for group in groups if group), None)
    if preferred is None:
        return None
    name, start, open_end = preferred
    return _parsed(text, name, start, open_end, min(len(text), open_end + MAX_CALL_CHARS))


def _parsed(text: str, name: str, start: int, open_end: int, close: int) -> ParsedCall:
    arguments, variables = bind_arguments(name, _split_top_level(text[open_end:close]))
    return ParsedCall(name, arguments, text[start : close + 1], variables)


def _answer_region(answer: str) -> str:
    """Gorilla-style outputs label the call (``<<<api_call>>>: ...``); prefer that part.

    The labelled part is code, as Gorilla parses it: a call in a ``#`` comment
    (``model = torch.hub.load(...)  # or: torch.hub.load(...)``) is no call.
    """
    label = _API_CALL_LABEL.search(answer)
    if label is None:
        return answer
    region = answer[label.end() :]
    return blank_comments(re.split(r"api_provider", region, maxsplit=1, flags=re.IGNORECASE)[0])


def blank_comments(code: str) -> str:
    """``code`` with each ``#`` comment (outside string literals) replaced by spaces."""
    if "#" not in code:
        return code
    chars = list(code)
    quote = ""
    index = 0
    while index < len(chars):
        char = chars[index]
        if char == "\n":
            quote = ""  # a one-line string literal cannot run past its line
        elif quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            end = code.find("\n", index)
            end = len(code) if end < 0 else end
            chars[index:end] = " " * (end - index)
            index = end
            continue
        index += 1
    return "".join(chars)


_ESCAPED_QUOTE = re.compile(r"\\+(['\"])")


def read_call(answer: str, callee: str = "torch.hub.load") -> ParsedCall | None:
    """The call an answer makes: in its ``api_call`` part if labelled, else anywhere.

    Models that answer in Gorilla's dict format often escape the quotes of the call
    (``torch.hub.load(\\"pytorch/vision\\", ...)``); those are quotes, not escapes.
    """
    answer = _ESCAPED_QUOTE.sub(r"\1", answer)
    return parse_call(_answer_region(answer), callee) or parse_call(answer, callee)


_LITERAL_SETTING = re.compile(r"^(?:True|False|None|[-+]?\d+(?:\.\d+)?)$")


def _identifying(call: ParsedCall) -> list[str]:
    """The named identifying parameters, and extra positionals that name a variant
    (``'mealv2_resnest50_cutmix'``); a positional ``True`` or ``3`` is a setting."""
    named = IDENTIFYING.get(call.callee, ())
    return [
        key
        for key, value in call.arguments.items()
        if key in named or (key.startswith("*") and not _LITERAL_SETTING.match(value))
    ]


def _agrees(reference: ParsedCall, candidate: ParsedCall, key: str) -> bool:
    """A reference argument spelt as a variable name accepts any value, or none."""
    if key in reference.variables:
        return True
    return candidate.arguments.get(key) == reference.arguments[key]


def same_api(reference: ParsedCall, candidate: ParsedCall) -> bool:
    """Whether ``candidate`` names the hub API ``reference`` names (the "API" figure)."""
    return candidate.callee == reference.callee and all(
        _agrees(reference, candidate, key) for key in _identifying(reference)
    )


#: The paper's "API" figure beside "Acc." (Table 1's ToolBench columns).
API_METRIC = Metric(
    "api", "api_match", "API",
    "share of tasks whose answer names the right API (ToolBench as the paper reports it)",
)


@register_match_mode("toolbench", metrics=(API_METRIC,))
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
    candidate = read_call(answer, reference.callee)
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
    same_function = candidate.callee == reference.callee
    wrong_identity = [
        key for key in _identifying(reference) if not _agrees(reference, candidate, key)
    ]
    api_match = same_function and not wrong_identity
    configuring = [key for key in reference.arguments if key not in _identifying(reference)]
    missing = sorted(
        key
        for key in configuring
        if key not in candidate.arguments and key not in reference.variables
    )
    different = sorted(
        key
        for key in configuring
        if key in candidate.arguments and not _agrees(reference, candidate, key)
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
