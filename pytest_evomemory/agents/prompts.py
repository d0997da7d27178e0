"""TinyAgent's prompt texts, kept apart so that they can be read and tuned alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..tools import FINAL_ANSWER_TOOL
from ..types import FEEDBACK_ACKNOWLEDGEMENT, MemoryHit, ToolSpec
from . import textproto

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


#: The text protocol's counterpart of SYSTEM_PROMPT: same task, no tool named.
TEXT_SYSTEM_PROMPT = (
    "You are a careful problem solver working through a stream of tasks. "
    "Give only the answer itself: for multiple choice, the option letter; for maths, "
    "the final number or expression; for tool-selection tasks, exactly what is asked."
)

TEXT_TOOL_USE_ADDENDUM = (
    " You have a long-term memory that persists across the tasks of this stream. "
    "Before answering, you may look for similar earlier tasks with a RECALL line. "
    "When you are given feedback with the correct answer, write a RETAIN line with what "
    "would help you next time (the task and the correct answer)."
)

TEXT_NUDGE = "Your reply was empty. Reply again, ending with 'Final Answer: <answer>'."

TEXT_FEEDBACK_NUDGE = f"Reply with exactly: Final Answer: {FEEDBACK_ACKNOWLEDGEMENT}"

#: Added to the feedback message under the text protocol, whose model has no
#: final_answer tool to call.
TEXT_FEEDBACK_REMINDER = f"(In the text format: end your reply with 'Final Answer: {FEEDBACK_ACKNOWLEDGEMENT}'.)"

#: ``final_answer`` as offered in a feedback turn: its schema admits only the
#: acknowledgement. A grammar-constrained model (``provider: local``) cannot write
#: anything else; API models read it as a strong hint. Without it a small model
#: copies its task answer into the feedback turn's final_answer.
ACKNOWLEDGEMENT_TOOL = ToolSpec(
    name=FINAL_ANSWER_TOOL.name,
    description=f'Acknowledge the feedback and end this turn: call it with "{FEEDBACK_ACKNOWLEDGEMENT}".',
    parameters={
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "enum": [FEEDBACK_ACKNOWLEDGEMENT],
                "description": f'Exactly "{FEEDBACK_ACKNOWLEDGEMENT}".',
            }
        },
        "required": ["answer"],
        "additionalProperties": False,
    },
)

ExperienceFormat = Literal["full", "answer_only"]


def system_prompt(custom: str | None, strategy: str) -> str:
    """The system prompt under the tools protocol."""
    base = custom if custom is not None else SYSTEM_PROMPT
    return base + TOOL_USE_ADDENDUM if strategy == "tool_use" and custom is None else base


def text_system_prompt(custom: str | None, strategy: str, tools: Sequence[ToolSpec]) -> str:
    """The system prompt under the text protocol: the format is always stated,
    after a custom prompt too, because the agent parses replies by it."""
    if custom is not None:
        base = custom
    else:
        base = TEXT_SYSTEM_PROMPT + (TEXT_TOOL_USE_ADDENDUM if strategy == "tool_use" else "")
    return base + "\n\n" + textproto.instructions(tools, acknowledgement=FEEDBACK_ACKNOWLEDGEMENT)


def text_fallback(tools: Sequence[ToolSpec], *, feedback: bool) -> str:
    """What ``protocol: auto`` says when it falls back: the format, for this turn's kind."""
    acknowledgement = FEEDBACK_ACKNOWLEDGEMENT if feedback else None
    return "Reply in plain text. " + textproto.instructions(tools, acknowledgement=acknowledgement)


def feedback_tools(tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The turn's tools with ``final_answer`` narrowed to the acknowledgement."""
    return [ACKNOWLEDGEMENT_TOOL if spec == FINAL_ANSWER_TOOL else spec for spec in tools]


def experience_text(task: str, answer: str | None, target: str, form: ExperienceFormat = "full") -> str:
    """One ExpRAG experience, as retained after feedback and shown on recall.

    ``answer_only`` leaves out the agent's own earlier answer: a small model shown
    "My answer: <wrong>" copies it (issue 19: 10 of 14 repeated tasks with SmolLM2).
    """
    if form == "answer_only":
        return f"Task: {task}\nCorrect answer: {target}"
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
