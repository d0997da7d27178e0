"""The corrective feedback turn: the only place where the answer reaches the agent.

DESIGN.md: the feedback contains "the canonical target answer exactly as supplied by
the source dataset". For most streams the scored target *is* the source's field
(AIME ``answer``, APIBench ``api_call``, a JSONL ``target``). For choice streams the
scored target is a letter in this task's option order, so the feedback also quotes
the source's own answer verbatim beside it: GPQA's "Correct Answer" text (the
options are shuffled per task), MMLU-Pro's ``answer`` letter and that option's text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .types import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample, UserStimulus

#: Label of MMLU-Pro's option text in :attr:`UserStimulus.source_answer`.
MMLU_PRO_OPTION_FIELD = "options[answer_index]"


def _gpqa(sample: BenchmarkSample) -> dict[str, str]:
    text = sample.metadata.get("correct_answer")
    return {"Correct Answer": text} if isinstance(text, str) else {}


def _mmlu_pro(sample: BenchmarkSample) -> dict[str, str]:
    letter = sample.metadata.get("answer")
    if not isinstance(letter, str):
        return {}
    # The converter letters the options after dropping "N/A" padding, so the scored
    # target indexes ``choices``; the option it names is the source's answer option.
    index = ord(sample.target) - ord("A") if len(sample.target) == 1 else -1
    if not 0 <= index < len(sample.choices):
        return {"answer": letter}
    return {"answer": letter, MMLU_PRO_OPTION_FIELD: sample.choices[index]}


def _source_answer_readers() -> dict[str, Callable[[BenchmarkSample], dict[str, str]]]:
    # Imported here: the sources module is loaded whenever such a sample exists, and
    # the feedback of other streams should not pull in the dataset machinery.
    from .streams.evomemory.catalog import GPQA_DIAMOND, MMLU_PRO

    return {GPQA_DIAMOND.source.repo_id: _gpqa, MMLU_PRO.source.repo_id: _mmlu_pro}


def source_answer(sample: BenchmarkSample) -> dict[str, str]:
    """The answer in the source dataset's own fields, verbatim, where it differs
    from the scored target; empty for streams whose target is the source field."""
    source = sample.metadata.get("source")
    if not isinstance(source, str) or not sample.choices:
        return {}
    reader = _source_answer_readers().get(source)
    return reader(sample) if reader is not None else {}


def _source_lines(answer: Mapping[str, str]) -> str:
    return "".join(f"  {name}: {value}\n" for name, value in answer.items())


def render_feedback(sample: BenchmarkSample, submitted: str | None) -> UserStimulus:
    """The corrective feedback stimulus: the target exactly as the source gives it."""
    shown = "(no answer)" if submitted is None else submitted
    quoted = source_answer(sample)
    if quoted:
        answer = (
            f"The correct answer: {sample.target} (the option letter in this task's ordering)\n"
            "The answer as the source dataset gives it:\n"
            f"{_source_lines(quoted)}"
        )
    else:
        answer = f"The correct answer: {sample.target}\n"
    content = (
        "Feedback on the task you just answered.\n"
        f"Your submitted answer: {shown}\n"
        f"{answer}"
        "If this experience could help with later tasks, store it in memory now. "
        f'Then call final_answer with exactly "{FEEDBACK_ACKNOWLEDGEMENT}".'
    )
    return UserStimulus(
        task_id=sample.task_id,
        stream=sample.stream,
        content=content,
        target=sample.target,
        submitted_answer=submitted,
        source_answer=quoted,
    )
