"""TinyAgent's prompt texts, kept apart so that they can be read and tuned alone."""

from __future__ import annotations

from collections.abc import Sequence

from ..types import FEEDBACK_ACKNOWLEDGEMENT, MemoryHit

SYSTEM_PROMPT = (
    "You are a careful problem solver working through a stream of tasks. "
    "Think briefly, then submit your answer by calling the final_answer tool. "
    "Give only the answer itself: for multiple choice, the option letter; for maths, "
    "the final number or expression; for tool-selection tasks, exactly what is asked. "
    "Every turn must end with a final_answer call."
)

TOOL_USE_ADDENDUM = (
    " You have a long-term memory that persists across the tasks of this stream. "
    "Before answering, you may call recall to look for similar earlier tasks. "
    "When you are given feedback with the correct answer, call retain with what "
    "would help you next time (the task, your answer and the correct answer), then "
    f'call final_answer with "{FEEDBACK_ACKNOWLEDGEMENT}".'
)

NUDGE = (
    "You did not call a tool. Call final_answer now, with your answer as the "
    "'answer' argument."
)

FEEDBACK_NUDGE = f'Call final_answer with exactly "{FEEDBACK_ACKNOWLEDGEMENT}" now.'


def system_prompt(custom: str | None, strategy: str) -> str:
    base = custom if custom is not None else SYSTEM_PROMPT
    return base + TOOL_USE_ADDENDUM if strategy == "tool_use" and custom is None else base


def experience_text(task: str, answer: str | None, target: str) -> str:
    """One ExpRAG experience, as retained after feedback and shown on recall."""
    shown = "(no answer)" if answer is None else answer
    return f"Task: {task}\nMy answer: {shown}\nCorrect answer: {target}"


def with_memories(prompt: str, hits: Sequence[MemoryHit]) -> str:
    """The task prompt, preceded by recalled experiences, most similar first."""
    if not hits:
        return prompt
    ordered = sorted(hits, key=lambda hit: -hit.score)  # stable: ties keep backend order
    blocks = "\n\n".join(f"[{index}] {hit.content}" for index, hit in enumerate(ordered, 1))
    return (
        "Experiences from earlier tasks, most similar first (they may or may not help):\n\n"
        f"{blocks}\n\n---\n\nCurrent task:\n{prompt}"
    )
