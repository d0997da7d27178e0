"""One LoCoMo conversation becomes one stream: its sessions, then its questions.

The question prompts follow the official evaluation (snap-research/locomo,
``task_eval/evaluate_gpts.py`` at 92286325, ``QA_PROMPT``/``QA_PROMPT_CAT_5`` and
the per-category pre-processing), adapted for an agent that answers from its memory
instead of a conversation pasted above the question:

* every question asks for a short phrase, in the conversation's own words where
  possible;
* category 2 (temporal) appends the official sentence "Use DATE of CONVERSATION to
  answer with an approximate date.";
* category 5 (adversarial) is asked as upstream asks it: "Select the correct
  answer: (a) ... (b) ...", one option "Not mentioned in the conversation", the
  other the source's ``adversarial_answer``, in an order drawn per question (upstream
  draws it with an unseeded ``random.random() < 0.5``; we seed it with the benchmark
  ``seed``, the conversation and the question number, so every run and arm asks the
  same thing).

The category is kept out of what the agent sees (``locomo_category`` is not a task
metadata key): knowing that a question is adversarial would tell the answer.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from ...core.types import BenchmarkSample
from ...evaluation.locomo import CATEGORY_NAMES, MODE
from ..base import IngestMode, Stream, apply_limit
from ..checks import check_sample
from .schema import Conversation, Question

#: What an adversarial question's right answer says (evaluate_gpts.py's option text).
NOT_MENTIONED = "Not mentioned in the conversation"
#: The official temporal (category 2) suffix, verbatim.
TEMPORAL_SUFFIX = " Use DATE of CONVERSATION to answer with an approximate date."

_SHORT_ANSWER = (
    "Based on the conversation, write an answer in the form of a short phrase for the following question. "
    "Answer with exact words from the conversation whenever possible."
)
_ADVERSARIAL = "Based on the conversation, answer the following question."


def task_id(question: Question) -> str:
    """``q001``, ``q002``, ...: the question's 1-based place in the source's ``qa`` list."""
    return f"q{question.index:03d}"


def adversarial_options(conversation: str, question: Question, seed: int) -> dict[str, str]:
    """Options (a) and (b) of a category-5 question, in a seeded order."""
    wrong = question.adversarial_answer or question.answer or ""
    draw = random.Random(f"locomo:{seed}:{conversation}:{question.index}").random()
    return {"a": NOT_MENTIONED, "b": wrong} if draw < 0.5 else {"a": wrong, "b": NOT_MENTIONED}


def question_prompt(conversation: Conversation, question: Question, options: Mapping[str, str] | None) -> str:
    header = (
        f"This question is about a long conversation between {conversation.speaker_a} and "
        f"{conversation.speaker_b}, held over several sessions, each with its date."
    )
    text = question.question
    if question.category == 2:
        text += TEMPORAL_SUFFIX
    if options is not None:
        text += f" Select the correct answer: (a) {options['a']} (b) {options['b']}. "
        return f"{header}\n\n{_ADVERSARIAL}\n\nQuestion: {text} Short answer:"
    return f"{header}\n\n{_SHORT_ANSWER}\n\nQuestion: {text} Short answer:"


def to_sample(
    conversation: Conversation, question: Question, position: int, seed: int, source: str
) -> BenchmarkSample:
    options = adversarial_options(conversation.sample_id, question, seed) if question.category == 5 else None
    named, unnamed = conversation.resolve_evidence(question)
    metadata: dict[str, Any] = {
        "source": source,
        "locomo_category": question.category,
        "question": question.question,
        "evidence": list(question.evidence),
        "evidence_ids": list(named),
    }
    if unnamed:
        metadata["evidence_unmatched"] = list(unnamed)
    if options is not None:
        metadata["options"] = options
        metadata["adversarial_answer"] = options["a"] if options["b"] == NOT_MENTIONED else options["b"]
    target = NOT_MENTIONED if question.category == 5 else question.answer
    assert target is not None  # schema: categories 1-4 have an answer
    sample = BenchmarkSample(
        task_id=task_id(question),
        stream=conversation.sample_id,
        position=position,
        prompt=question_prompt(conversation, question, options),
        target=target,
        match_mode=MODE,
        metadata=metadata,
        group=CATEGORY_NAMES[question.category],
    )
    check_sample(sample, f"LoCoMo conversation {conversation.sample_id!r}: question {question.index}")
    return sample


def to_stream(
    conversation: Conversation,
    *,
    seed: int,
    limit: int | None,
    ingest: IngestMode,
    provenance: Mapping[str, Any],
    source: str,
) -> Stream:
    """The stream of one conversation; ``limit`` keeps its first N questions (every
    session is still ingested: the questions are about the whole conversation)."""
    samples = [
        to_sample(conversation, question, position, seed, source)
        for position, question in enumerate(conversation.questions)
    ]
    selected = apply_limit(samples, limit)
    unmatched = [sample.task_id for sample in samples if sample.metadata.get("evidence_unmatched")]
    description = (
        f"LoCoMo conversation {conversation.sample_id} ({conversation.speaker_a} and {conversation.speaker_b}): "
        f"{len(conversation.sessions)} sessions, {conversation.turns} turns, {len(samples)} questions"
    )
    if unmatched:
        description += (
            f"; the evidence of {len(unmatched)} (first {unmatched[0]}) names a turn the conversation lacks, "
            "left out of evidence recall"
        )
    return Stream(
        conversation.sample_id,
        selected,
        MODE,
        description,
        provenance={**provenance, "questions": len(samples), "tasks_selected": len(selected),
                    "sessions": len(conversation.sessions), "turns": conversation.turns,
                    "evidence_unmatched": len(unmatched)},
        breakdown="category",
        feedback=False,
        sessions=conversation.sessions,
        ingest=ingest,
    )


__all__ = ["NOT_MENTIONED", "TEMPORAL_SUFFIX", "adversarial_options", "question_prompt", "task_id", "to_stream"]
