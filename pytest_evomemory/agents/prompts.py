"""TinyAgent's prompt texts, kept apart so that they can be read and tuned alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..core.tools import FINAL_ANSWER_TOOL
from ..core.types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    INGESTION_ACKNOWLEDGEMENT,
    ConversationSession,
    MemoryHit,
    ToolSpec,
)
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

#: ReMem (the paper's think / act / refine-memory loop) under the tools protocol.
#: Think is a reply without a tool call, Refine a memory tool call, Act final_answer.
REMEM_ADDENDUM = (
    " You have a long-term memory of experiences that persists across the tasks of this "
    "stream, and you work in steps. At each step do exactly one of: THINK (reply with "
    "your reasoning as plain text, no tool call); REFINE your memory (call recall to find "
    "related experiences; retain to store a new one; update to rewrite a record by its id; "
    "forget to delete a wrong, misleading or duplicate record by its id); or ACT (call "
    "final_answer with your answer, which ends the task). Recalling before you act is usually "
    "worth it. When you are given feedback with the correct answer, retain the experience "
    "(the task, your answer, the correct answer, whether you were right, and the lesson), "
    "rewrite or delete records it shows to be wrong, then call final_answer with "
    f'"{FEEDBACK_ACKNOWLEDGEMENT}".'
)

#: After a ReMem think step (a reply without a tool call): go on.
REMEM_CONTINUE = (
    "Continue: refine your memory with its tools, or act by calling final_answer."
)

REMEM_FEEDBACK_CONTINUE = (
    f'Continue: refine your memory with its tools, then call final_answer with "{FEEDBACK_ACKNOWLEDGEMENT}".'
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

TEXT_REMEM_ADDENDUM = (
    " You have a long-term memory of experiences that persists across the tasks of this "
    "stream. Before answering, look for related experiences with a RECALL line. When you "
    "are given feedback with the correct answer, store the experience and its lesson with a "
    "RETAIN line, and delete records it shows to be wrong with FORGET lines (by their id)."
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
def acknowledgement_tool(acknowledgement: str, what: str) -> ToolSpec:
    """``final_answer`` whose schema admits only ``acknowledgement``."""
    return ToolSpec(
        name=FINAL_ANSWER_TOOL.name,
        description=f'Acknowledge the {what} and end this turn: call it with "{acknowledgement}".',
        parameters={
            "type": "object",
            "properties": {
                "answer": {
                    "type": "string",
                    "enum": [acknowledgement],
                    "description": f'Exactly "{acknowledgement}".',
                }
            },
            "required": ["answer"],
            "additionalProperties": False,
        },
    )


ACKNOWLEDGEMENT_TOOL = acknowledgement_tool(FEEDBACK_ACKNOWLEDGEMENT, "feedback")
#: ``final_answer`` as offered in an ingestion turn (LoCoMo, ``ingest: agent``).
INGESTION_TOOL = acknowledgement_tool(INGESTION_ACKNOWLEDGEMENT, "session")

INGESTION_NUDGE = f'Call final_answer with exactly "{INGESTION_ACKNOWLEDGEMENT}" now.'
TEXT_INGESTION_REMINDER = (
    f"(In the text format: write RETAIN lines for what to remember, then end your reply with "
    f"'Final Answer: {INGESTION_ACKNOWLEDGEMENT}'.)"
)
TEXT_INGESTION_NUDGE = f"Reply with exactly: Final Answer: {INGESTION_ACKNOWLEDGEMENT}"

ExperienceFormat = Literal["full", "answer_only", "labelled"]

#: Tools that store a record: left out of a feedback turn whose experience the
#: agent will not keep (``retain_policy: successes_only`` after a judged failure).
STORING_TOOLS = frozenset({"retain", "update"})


def system_prompt(custom: str | None, strategy: str, remem: bool = False) -> str:
    """The system prompt under the tools protocol."""
    base = custom if custom is not None else SYSTEM_PROMPT
    if custom is not None or strategy != "tool_use":
        return base
    return base + (REMEM_ADDENDUM if remem else TOOL_USE_ADDENDUM)


def text_system_prompt(custom: str | None, strategy: str, tools: Sequence[ToolSpec], remem: bool = False) -> str:
    """The system prompt under the text protocol: the format is always stated,
    after a custom prompt too, because the agent parses replies by it."""
    if custom is not None:
        base = custom
    elif strategy == "tool_use":
        base = TEXT_SYSTEM_PROMPT + (TEXT_REMEM_ADDENDUM if remem else TEXT_TOOL_USE_ADDENDUM)
    else:
        base = TEXT_SYSTEM_PROMPT
    return base + "\n\n" + textproto.instructions(tools, acknowledgement=FEEDBACK_ACKNOWLEDGEMENT)


def text_fallback(tools: Sequence[ToolSpec], *, feedback: bool) -> str:
    """What ``protocol: auto`` says when it falls back: the format, for this turn's kind."""
    acknowledgement = FEEDBACK_ACKNOWLEDGEMENT if feedback else None
    return "Reply in plain text. " + textproto.instructions(tools, acknowledgement=acknowledgement)


def feedback_tools(tools: Sequence[ToolSpec], acknowledgement: ToolSpec = ACKNOWLEDGEMENT_TOOL) -> list[ToolSpec]:
    """The turn's tools with ``final_answer`` narrowed to the acknowledgement."""
    return [acknowledgement if spec == FINAL_ANSWER_TOOL else spec for spec in tools]


def experience_text(
    task: str, answer: str | None, target: str, form: ExperienceFormat = "full", correct: bool | None = None
) -> str:
    """One ExpRAG experience, as retained after feedback and shown on recall.

    ``answer_only`` leaves out the agent's own earlier answer: a small model shown
    "My answer: <wrong>" copies it (issue 19: 10 of 14 repeated tasks with SmolLM2).
    ``labelled`` is the paper's experience: task, answer, feedback and the correctness
    label (``correct``, the agent's own verdict, see :mod:`.verdict`).
    """
    if form == "answer_only":
        return f"Task: {task}\nCorrect answer: {target}"
    shown = "(no answer)" if answer is None else answer
    text = f"Task: {task}\nMy answer: {shown}\nCorrect answer: {target}"
    if form == "labelled":
        text += f"\nOutcome: {'correct' if correct else 'incorrect'}"
    return text


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


def with_recent_memories(prompt: str, hits: Sequence[MemoryHit]) -> str:
    """The task prompt, preceded by the most recent experiences, newest first (ExpRecent)."""
    if not hits:
        return prompt
    blocks = "\n\n".join(f"[{index}] {hit.content}" for index, hit in enumerate(hits, 1))
    return (
        "Experiences from the most recent earlier tasks, newest first (they may or may not help):\n\n"
        f"{blocks}\n\n---\n\nCurrent task:\n{prompt}"
    )


#: Characters per token assumed when fitting a conversation into the model's
#: context (no tokenizer is at hand for every model; English text runs about 4).
CHARS_PER_TOKEN = 3
#: Tokens kept free for the system prompt, the question and the answer's overhead.
CONTEXT_RESERVE_TOKENS = 512


def context_budget(n_ctx: int, max_tokens: int | None, prompt: str) -> int:
    """Characters of conversation that fit beside ``prompt`` in an ``n_ctx`` window."""
    tokens = n_ctx - (max_tokens or 0) - CONTEXT_RESERVE_TOKENS
    return max(0, tokens * CHARS_PER_TOKEN - len(prompt))


def conversation_text(sessions: Sequence[ConversationSession], budget: int) -> tuple[str, int]:
    """The conversation as the full-context arm's prompt gives it, and how many turns
    were left out: as LoCoMo's own full-context evaluation does (evaluate_gpts.py,
    ``get_input_context``), whole turns are taken from the most recent backwards
    until the budget is spent, each session headed by its date."""
    blocks: list[str] = []
    used, left_out, full = 0, 0, False
    for session in reversed(sessions):
        header = f"DATE: {session.date_time}\nCONVERSATION:"
        lines: list[str] = []
        for turn in reversed(session.turns):
            line = turn.render()
            if full or used + len(header) + len(line) + 2 > budget:
                full = True
                left_out += 1
                continue
            lines.insert(0, line)
            used += len(line) + 1
        if lines:
            blocks.insert(0, header + "\n" + "\n".join(lines))
            used += len(header) + 2
    return "\n\n".join(blocks), left_out


def with_conversation(prompt: str, sessions: Sequence[ConversationSession], budget: int) -> str:
    """The question prompt after the whole conversation (the full-context arm)."""
    speakers = list(dict.fromkeys(turn.speaker for session in sessions for turn in session.turns))
    text, left_out = conversation_text(sessions, budget)
    cut = f" Its {left_out} earliest turns are left out to fit the context." if left_out else ""
    return (
        f"Below is a conversation between {' and '.join(speakers)}. It takes place over several days; "
        f"the date of each session is written at its beginning.{cut}\n\n{text}\n\n---\n\n{prompt}"
    )
