"""Checks of a loaded task: every door (a JSONL file, an upstream converter) refuses
the same tasks, with the same words, naming the file and line."""

from __future__ import annotations

from ..core.errors import ConfigError, DataError
from ..core.factories import user_frames
from ..core.types import BenchmarkSample
from ..core.validation import MAX_CHOICES, check_task_id
from ..evaluation.modes import MATCH_MODES, MatchModeSpec
from ..util.text import shorten


def check_sample(sample: BenchmarkSample, where: str, *, empty_options: bool = False) -> None:
    """Refuse a task that could never be scored meaningfully.

    Every task needs a non-empty prompt and a non-empty target. A task with ``choices`` (or in ``choice`` mode) must have at most 26 options
    (letters A-Z), no empty option, and a non-empty target that the choice scorer
    itself reads as one of its letters (a letter, or one option's text); otherwise
    every answer would be scored wrong and the stream's accuracy would silently
    measure nothing. The scorer's own reading is used, so the two cannot disagree.
    ``empty_options`` lets an empty option through: a converter of an upstream file
    keeps that file's options as they are (the option is shown as an empty line).
    """
    check_task_id(sample.task_id, where)
    at = f"{where}: task {sample.task_id!r}"
    if not sample.prompt.strip():
        raise DataError(f"{at}: the prompt is empty; write the question")
    choices = sample.choices
    is_choice = bool(choices) or sample.match_mode == "choice"
    if not sample.target.strip():
        hint = "give the correct option's letter (e.g. 'B')" if is_choice else "give the expected answer"
        raise DataError(f"{at}: the target is empty; {hint}")
    own = MATCH_MODES.get(sample.match_mode) if sample.match_mode in MATCH_MODES else None
    if is_choice:
        if len(choices) > MAX_CHOICES:
            raise DataError(f"{at}: {len(choices)} choices, but at most {MAX_CHOICES} can be lettered A-Z; drop some")
        if not empty_options and any(not option.strip() for option in choices):
            raise DataError(f"{at}: an option in 'choices' is empty; remove it or give its text")
        if own is None or own.check_target is None:
            own = MATCH_MODES.get("choice")  # the choice scorer's reading of a lettered target
    # the scorer's own reading of the target (aime: an integer; a choice: one of its
    # letters), so a check cannot disagree with the scoring
    problem = _target_problem(own, sample) if own is not None and own.check_target is not None else None
    if problem:
        raise DataError(f"{at}: {problem}")


def _target_problem(mode: MatchModeSpec, sample: BenchmarkSample) -> str | None:
    """The mode's own verdict on ``sample``'s target; a user's check that raises is
    refused naming the mode, not an error inside the plugin."""
    assert mode.check_target is not None
    try:
        return mode.check_target(sample)
    except Exception as error:
        raise ConfigError(
            f"match mode {mode.name!r}: its check_target raised {type(error).__name__}: "
            f"{shorten(' '.join(str(error).split()), 200)}{user_frames(error)}; fix the check "
            "(it returns a problem as text, or None)"
        ) from None
