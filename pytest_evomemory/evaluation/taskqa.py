"""TaskQAEvaluator: score a final answer with the stream's own match mode.

It is the single place that turns whatever an agent returned (``None``, bytes,
control characters, lone surrogates, a megabyte of text) into a bounded, clean
string before a mode sees it, so a bad answer always gets a defined score of 0
and a reason instead of crashing scoring, and modes stay simple.
"""

from __future__ import annotations

import dataclasses
import re

from ..core.errors import ConfigError
from ..core.types import BenchmarkSample, Score
from .modes import MATCH_MODES, UNPRINTABLE

#: Answers longer than this are scored on their last part: models put the final
#: answer at the end, and regexes over megabytes would dominate run time.
MAX_SCORED_CHARS = 20_000

#: ``Score.raw_answer`` keeps answers up to this size whole; longer ones keep
#: their head and tail, so one runaway answer cannot bloat every artefact.
MAX_RECORDED_CHARS = 20_000
_PREVIEW_EDGE = 2_000

# Lone surrogates cannot be encoded as UTF-8, so no artefact could hold them.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class TaskQAEvaluator:
    """Delegates each task to the match mode named by ``sample.match_mode``."""

    def __init__(self, default_mode: str = "exact") -> None:
        self.default_mode = default_mode

    def score(self, sample: BenchmarkSample, answer: object) -> Score:
        mode_name = sample.match_mode or self.default_mode
        if mode_name not in MATCH_MODES:
            # A config error, not a bad answer: every task of the stream would score 0.
            raise ConfigError(
                f"stream {sample.stream!r} uses unknown match mode {mode_name!r}; "
                f"known modes: {', '.join(sorted(MATCH_MODES))}"
            )
        mode = MATCH_MODES.get(mode_name).score

        def zero(reason: str, raw: str | None, **details: object) -> Score:
            return Score(False, raw, None, sample.target, mode_name, reason, details=details)

        if answer is None:
            return zero("no answer was submitted", None)
        if isinstance(answer, int) and not isinstance(answer, bool):
            answer = str(answer)  # final_answer(73) from a lenient tool schema
        if not isinstance(answer, str):
            return zero(
                f"the answer is a {type(answer).__name__}, not text", _clean(repr(answer)[:200])
            )
        original_chars = len(answer)
        truncated = original_chars > MAX_SCORED_CHARS
        # Clean only what is scored or recorded: a megabyte is never scanned whole.
        text, removed = _sanitize(answer[-MAX_SCORED_CHARS:] if truncated else answer)
        raw = _preview(answer)
        details: dict[str, object] = {}
        if removed:
            details["removed_characters"] = removed
        if truncated:
            details["answer_chars"] = original_chars
        if not text.strip():
            what = "empty" if not removed else "empty once control characters were removed"
            if truncated:
                what += f" in its last {MAX_SCORED_CHARS} characters"
            return zero(f"the answer is {what}", raw, **details)
        try:
            score = mode(text, sample)
        except Exception as error:  # a mode bug must not lose the run
            return zero(
                f"match mode {mode_name!r} failed on this answer: {type(error).__name__}: "
                f"{str(error)[:300]}",
                raw, **details,
            )
        reason = score.reason
        if truncated:
            reason += (
                f" (answer of {original_chars} characters scored on its last {MAX_SCORED_CHARS})"
            )
        return dataclasses.replace(
            score, raw_answer=raw, reason=reason, details={**details, **score.details}
        )


def _sanitize(answer: str) -> tuple[str, int]:
    """The answer without characters no grader can read, and how many were removed."""
    text = _SURROGATE.sub("\ufffd", answer)
    cleaned = UNPRINTABLE.sub("", text)
    return cleaned, len(text) - len(cleaned)


def _clean(text: str) -> str:
    return _sanitize(text)[0]


def _preview(answer: str) -> str:
    if len(answer) <= MAX_RECORDED_CHARS:
        return _clean(answer)
    omitted = len(answer) - 2 * _PREVIEW_EDGE
    return (
        f"{_clean(answer[:_PREVIEW_EDGE])} [... {omitted} characters omitted ...] "
        f"{_clean(answer[-_PREVIEW_EDGE:])}"
    )
