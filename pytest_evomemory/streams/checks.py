"""Checks of a loaded task: every door (a JSONL file, an upstream converter) refuses
the same tasks, with the same words, naming the file and line."""

from __future__ import annotations

from ..errors import DataError
from ..evaluation.modes import MATCH_MODES
from ..types import BenchmarkSample
from ..validation import MAX_CHOICES, check_task_id


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
    if not sample.prompt.strip():
        raise DataError(f"{where}: task {sample.task_id!r}: the prompt is empty; write the question")
    choices = sample.choices
    is_choice = bool(choices) or sample.match_mode == "choice"
    if not sample.target.strip():
        hint = "give the correct option's letter (e.g. 'B')" if is_choice else "give the expected answer"
        raise DataError(f"{where}: task {sample.task_id!r}: the target is empty; {hint}")
    own = MATCH_MODES.get(sample.match_mode) if sample.match_mode in MATCH_MODES else None
    if not is_choice:
        # a mode that knows its targets' shape (aime: an integer) says which it never matches
        problem = own.check_target(sample) if own is not None and own.check_target is not None else None
        if problem:
            raise DataError(f"{where}: {problem}")
        return
    if len(choices) > MAX_CHOICES:
        raise DataError(f"{where}: {len(choices)} choices, but at most {MAX_CHOICES} can be lettered A-Z; drop some")
    if not empty_options and any(not option.strip() for option in choices):
        raise DataError(f"{where}: an option in 'choices' is empty; remove it or give its text")
    # the scorer's own reading of the target: a check cannot disagree with the scoring
    check = own.check_target if own is not None and own.check_target is not None else (
        MATCH_MODES.get("choice").check_target
    )
    problem = check(sample) if check is not None else None
    if problem:
        raise DataError(f"{where}: {problem}")
