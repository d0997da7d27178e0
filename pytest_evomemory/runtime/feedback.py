"""The corrective feedback turn: the only place where the answer reaches the agent.

docs/design.md: the feedback contains "the canonical target answer exactly as supplied by
the source dataset". For most streams the scored target *is* the source's field
(AIME ``answer``, APIBench ``api_call``, a JSONL ``target``). For choice streams the
scored target is a letter in this task's option order, so the feedback also quotes
the source's own answer verbatim beside it, as the stream declares it
(:attr:`pytest_evomemory.streams.Stream.quote_answer`): GPQA's "Correct Answer"
text (the options are shuffled per task), MMLU-Pro's ``answer`` letter and that
option's text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.types import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample, UserStimulus

QuoteAnswer = Callable[[BenchmarkSample], Mapping[str, str]]


def _source_lines(answer: Mapping[str, str]) -> str:
    return "".join(f"  {name}: {value}\n" for name, value in answer.items())


def render_feedback(
    sample: BenchmarkSample, submitted: str | None, quote_answer: QuoteAnswer | None = None
) -> UserStimulus:
    """The corrective feedback stimulus: the target exactly as the source gives it,
    and the source's own answer as its stream quotes it (``quote_answer``)."""
    shown = "(no answer)" if submitted is None else submitted
    quoted = dict(quote_answer(sample)) if quote_answer is not None and sample.choices else {}
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
