"""Match modes: how one source dataset decides whether an answer is right.

Each mode is a function ``(answer, sample) -> Score`` registered under a name that
stream definitions put in ``BenchmarkSample.match_mode``. The answer a mode sees is
already a bounded, cleaned ``str`` (see :mod:`pytest_evomemory.evaluation.taskqa`),
so modes can concentrate on the dataset's own rules. The built-in modes live in
their own modules (``choice``, ``aime``, ``toolbench``, ``locomo``), which register themselves
when imported; the registry imports them on first lookup. ``exact`` stays here
because user-defined streams default to it.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..core.registry import Registry
from ..core.types import BenchmarkSample, Score
from ..util.text import shorten

MatchMode = Callable[[str, BenchmarkSample], Score]


@dataclass(frozen=True)
class Metric:
    """A figure a mode's scores carry beyond accuracy.

    ``kind="share"``: the share of tasks whose score has ``details[detail]`` true
    (ToolBench's "API" beside "Acc."); the summary reports it as ``<name>_matches``,
    ``<name>_accuracy`` and ``<name>_accuracy_ci``. ``kind="mean"``: the mean over
    the tasks of the number ``details[detail]`` (LoCoMo's token F1), a failed
    episode counting 0; the summary reports ``<name>_sum`` and ``<name>_mean``.
    Tables show either as ``<label> / Acc.``.
    """

    name: str
    detail: str
    label: str
    description: str = ""
    kind: Literal["share", "mean"] = "share"


@dataclass(frozen=True)
class MatchModeSpec:
    """A match mode as streams name it (``match_mode: NAME``).

    ``score`` judges one answer; ``metrics`` are the figures its scores support
    beyond accuracy; ``check_target`` says why a task's target could never be
    matched (``None`` when it can), so such a task is refused when the stream loads.
    ``headline`` names the declared mean figure the dataset itself reports (LoCoMo's
    mean F1): the figure ``--evomemory-min-accuracy`` and ``thresholds`` gate on, and
    the one the per-category table and the comparison's continuous statistics use.
    ``None``: the headline is the accuracy.
    """

    name: str
    score: MatchMode
    metrics: tuple[Metric, ...] = ()
    check_target: Callable[[BenchmarkSample], str | None] | None = None
    headline: str | None = None

    def __post_init__(self) -> None:
        if self.headline is not None and self.headline_metric is None:
            raise ValueError(
                f"match mode {self.name!r}: headline {self.headline!r} is not one of its declared mean figures"
            )

    @property
    def headline_metric(self) -> Metric | None:
        """The declared mean figure the mode reports as its headline, None for accuracy."""
        return next(
            (metric for metric in self.metrics if metric.name == self.headline and metric.kind == "mean"), None
        )


#: Mode name -> spec. Built-in modes in other modules are imported on first lookup:
#: their modules compile a few dozen regular expressions (about 20 ms), and every
#: process of a run would otherwise pay it at start-up, before the first model call.
#: A built-in name belongs to its module: a conftest silently rescoring GPQA would
#: void the figure, so nothing else may take it.
MATCH_MODES: Registry[MatchModeSpec] = Registry("match mode")
for _name, _module in (
    ("exact", __name__), ("choice", f"{__package__}.choice"), ("gpqa", f"{__package__}.gpqa"),
    ("aime", f"{__package__}.aime"), ("toolbench", f"{__package__}.toolbench"),
    ("locomo_f1", f"{__package__}.locomo"),
):
    MATCH_MODES.builtin(_name, f"{_module}:{_name}")


def register_match_mode(
    name: str,
    *,
    metrics: tuple[Metric, ...] = (),
    check_target: Callable[[BenchmarkSample], str | None] | None = None,
    headline: str | None = None,
) -> Callable[[MatchMode], MatchMode]:
    """Register a mode under ``name`` (used by built-in and user-defined streams).

    ``headline`` names one of ``metrics`` of kind ``"mean"`` that replaces accuracy
    as the mode's headline figure (:attr:`MatchModeSpec.headline`).

    A built-in name (``exact``, ``choice``, ``gpqa``, ``aime``, ``toolbench``, ``locomo_f1``) is
    refused with :class:`ConfigError` unless the mode is the built-in one itself.
    """

    def decorate(mode: MatchMode) -> MatchMode:
        __tracebackhide__ = True  # pytest shows the user's conftest line, not ours
        owner = getattr(mode, "__module__", None)
        MATCH_MODES.register(name, MatchModeSpec(name, mode, metrics, check_target, headline), owner=owner)
        return mode

    return decorate


def match_mode(name: str) -> MatchModeSpec:
    """The spec of mode ``name`` (ConfigError naming the known modes otherwise)."""
    return MATCH_MODES.get(name)


def headline_metric(mode: object) -> Metric | None:
    """The headline mean figure of the mode a scored item names (``match_mode``), or
    None: the mode's headline is accuracy, or the mode is unknown (an artefact
    written by a conftest mode not loaded now)."""
    if not isinstance(mode, str) or mode not in MATCH_MODES:
        return None
    return MATCH_MODES.get(mode).headline_metric


# Zero-width and format characters survive NFKC and make two visually identical
# answers compare unequal, so they are removed before comparing.
_INVISIBLE = dict.fromkeys(
    cp for cp in (0x00AD, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF)
)
# C0/C1 controls other than tab/newline/carriage return carry no answer and break
# terminals and JSON consumers; targets get the same cleaning as answers.
UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_EDGE_PUNCTUATION = " \t\n.,;:!?\"'`*_\u201c\u201d\u2018\u2019\u00ab\u00bb"
# The Evo-Memory single-turn prompt asks for "Rationale: ... Final Answer: ...";
# agents that echo that format into final_answer still mean the part after it.
_FINAL_ANSWER = re.compile("final\\s+answer\\s*[:\uff1a]", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """The comparison form shared by ``exact`` and option-text matching.

    Casefolding, NFKC and whitespace collapsing make formatting differences that
    no grader would count (case, full-width forms, line breaks, markdown emphasis,
    a trailing period, quotes) irrelevant, while keeping every word and digit.
    """
    text = unicodedata.normalize("NFKC", UNPRINTABLE.sub("", text)).translate(_INVISIBLE)
    text = " ".join(text.casefold().split())
    previous = None
    while previous != text:
        previous = text
        text = text.strip(_EDGE_PUNCTUATION)
    return text


def last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of ``pattern``: final answers come at the end of a response."""
    found: re.Match[str] | None = None
    for found in pattern.finditer(text):  # noqa: B007
        pass
    return found


def _after_final_answer(text: str) -> tuple[str, bool]:
    last = last_match(_FINAL_ANSWER, text)
    if last is None:
        return text, False
    rest = text[last.end() :].strip()
    return (rest, True) if rest else (text, False)


@register_match_mode("exact")
def exact(answer: str, sample: BenchmarkSample) -> Score:
    """Normalized string equality, for user-defined streams without a scorer of their own."""
    candidate, labelled = _after_final_answer(answer)
    extracted = normalize_answer(candidate)
    expected = normalize_answer(sample.target)
    details = {"normalized_target": expected, "final_answer_label": labelled}
    if not expected:
        return Score(
            False, answer, extracted, sample.target, "exact",
            "the target is empty after normalization; nothing can match it", details=details,
        )
    if not extracted:
        return Score(
            False, answer, None, sample.target, "exact",
            "the answer is empty after normalization", details=details,
        )
    correct = extracted == expected
    where = "text after the last 'Final Answer:'" if labelled else "answer"
    reason = (
        f"normalized {where} equals the normalized target {expected!r}"
        if correct
        else f"normalized {where} {_short(extracted)!r} differs from normalized target {_short(expected)!r}"
    )
    return Score(correct, answer, extracted, sample.target, "exact", reason, details=details)


def _short(text: str) -> str:
    return shorten(text, 120)


#: Packages whose version decides what a built-in mode reads, beside our own.
_MODE_DEPENDENCIES: dict[str, tuple[str, ...]] = {"aime": ("math-verify", "sympy"), "locomo_f1": ("nltk", "regex")}


def _distribution_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def scorer_identity(name: str) -> dict[str, object]:
    """Which code scores a mode: module, function, package and version.

    run.json records it per stream, so two results can be compared only when the
    same scorer produced them. Raises ``ConfigError`` for an unknown mode.
    """
    mode = MATCH_MODES.get(name).score
    module = getattr(mode, "__module__", None) or ""
    top = module.split(".", 1)[0]
    if top == __package__.split(".", 1)[0]:
        package: str | None = "pytest-evomemory"
        version = getattr(sys.modules.get(top), "__version__", None) or _distribution_version(
            "pytest-evomemory"
        )
    else:
        distributions = importlib.metadata.packages_distributions().get(top, [])
        package = distributions[0] if distributions else None
        version = _distribution_version(package) if package else None
    identity: dict[str, object] = {
        "mode": name,
        "module": module,
        "function": getattr(mode, "__qualname__", repr(mode)),
        "package": package,
        "version": version,
        "builtin": MATCH_MODES.is_builtin(name),
    }
    dependencies = {dep: _distribution_version(dep) for dep in _MODE_DEPENDENCIES.get(name, ())}
    if dependencies:
        identity["dependencies"] = dependencies
    return identity
