"""TaskQAEvaluator: score a final answer with the stream's own match mode.

It is the single place that turns whatever an agent returned (``None``, bytes-ish
strings, a megabyte of text) into a bounded string before a mode sees it, so a bad
answer always gets a defined score of 0 and a reason instead of crashing scoring.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..types import BenchmarkSample, Score
from .modes import MATCH_MODES

#: Answers longer than this are scored on their last part: models put the final
#: answer at the end, and regexes over megabytes would dominate run time.
MAX_SCORED_CHARS = 20_000


class TaskQAEvaluator:
    """Delegates each task to the match mode named by ``sample.match_mode``."""

    def __init__(self, default_mode: str = "exact") -> None:
        self.default_mode = default_mode

    def score(self, sample: BenchmarkSample, answer: object) -> Score:
        mode_name = sample.match_mode or self.default_mode
        mode = MATCH_MODES.get(mode_name)
        if mode is None:
            raise ConfigError(
                f"stream {sample.stream!r} uses unknown match mode {mode_name!r}; "
                f"known modes: {', '.join(sorted(MATCH_MODES))}"
            )
        if answer is None:
            return Score(False, None, None, sample.target, mode_name, "no answer was submitted")
        if not isinstance(answer, str):
            return Score(
                False, repr(answer)[:200], None, sample.target, mode_name,
                f"answer is a {type(answer).__name__}, not text",
            )
        text = answer.replace("\x00", "")
        if not text.strip():
            return Score(False, answer, None, sample.target, mode_name, "answer is empty")
        truncated = len(text) > MAX_SCORED_CHARS
        if truncated:
            text = text[-MAX_SCORED_CHARS:]
        try:
            score = mode(text, sample)
        except Exception as error:  # a mode bug must not lose the run
            return Score(
                False, _preview(answer), None, sample.target, mode_name,
                f"match mode {mode_name!r} failed on this answer: {type(error).__name__}: {error}",
            )
        if truncated:
            return Score(
                score.correct, _preview(answer), score.extracted, score.target, score.match_mode,
                f"{score.reason} (answer of {len(answer)} characters scored on its last "
                f"{MAX_SCORED_CHARS})",
                score.value, score.details,
            )
        return score


def _preview(answer: str) -> str:
    return answer if len(answer) <= 2000 else answer[:1000] + " [...] " + answer[-1000:]
