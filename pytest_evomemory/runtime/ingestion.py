"""The ingestion phase of a conversation stream (LoCoMo), and evidence recall.

Before a conversation's first question its sessions are written into the stream's
memory, in order, with their dates, by one of two writers (benchmark config key
``ingest``):

* ``memory``: the memory system's own ingestion (:class:`~..memory.base.Ingestible`),
  what "static memory" means in the memory-system literature (Mem0's
  ``add(messages)`` per session). No agent turn, no model call, no record.
* ``agent``: one unscored ingestion turn per session (an :class:`IngestionStimulus`),
  which the agent ends with ``final_answer("Session recorded")``; it stores what it
  chooses through its memory. Ingestion turns are responses of kind ``ingestion``:
  they count in the stimulus, turn and token figures like feedback turns, and are
  never scored. The agent is reset after each one, as after a task.

The framework never recalls or answers for the agent: ingestion only writes, and
only through the memory's or the agent's own means. A stream without a memory (the
control arm, the full-context arm) has nothing to ingest into and skips the phase.

:meth:`StreamRun.prepare_memory <.stream.StreamRun.prepare_memory>` decides when
ingestion runs (:func:`plan`), so that a fresh stream always ingests before its
first question and a resumed one never ingests twice: the memory right after
ingestion is snapshot slot "0 completed questions".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal

from ..core.errors import ConfigError
from ..core.types import (
    INGESTION_ACKNOWLEDGEMENT,
    AgentResponse,
    BenchmarkSample,
    ConversationSession,
    IngestionStimulus,
    ScoredItem,
)
from ..memory.ingestion import dia_ids_of, evidence_recall
from ..streams.base import Stream
from .records import IngestionRecord, Record

#: What :meth:`StreamRun.prepare_memory` does about a conversation's ingestion.
Plan = Literal["ingest", "restore"]


def plan(completed: int | None, saved_after_ingestion: bool) -> Plan:
    """``ingest`` (into an emptied memory) or ``restore`` (a snapshot that already
    holds the ingestion).

    ``completed`` is :meth:`prepare_memory`'s: ``None`` for a stream starting fresh
    (always ingest), a count of completed questions otherwise. With 0 completed the
    ingestion is restored from slot 0 when it was saved (resume, or an xdist worker
    taking over), and run again when it never finished; with more, the snapshot of
    that moment holds it.
    """
    if completed is None:
        return "ingest"
    if completed == 0:
        return "restore" if saved_after_ingestion else "ingest"
    return "restore"


def ingestion_stimulus(session: ConversationSession, speakers: Sequence[str] = ()) -> IngestionStimulus:
    """One session as the agent receives it in an ingestion turn."""
    between = f" between {' and '.join(speakers)}" if speakers else ""
    content = (
        f"Session {session.index} of a long conversation{between} ({session.date_time}). "
        "You will later be asked questions about the whole conversation, without seeing it again. "
        "Store in your memory what you may need (the dialogue ids in brackets name the turns):\n\n"
        f"{session.render()}\n\n"
        f'Then call final_answer with exactly "{INGESTION_ACKNOWLEDGEMENT}".'
    )
    return IngestionStimulus(task_id=session.session_id, stream=session.conversation, content=content, session=session)


def speakers_of(sessions: Sequence[ConversationSession]) -> list[str]:
    """The conversation's speakers, in order of first appearance."""
    return list(dict.fromkeys(turn.speaker for session in sessions for turn in session.turns))


def ingest_by_agent(
    sessions: Sequence[ConversationSession],
    deliver: Callable[[IngestionStimulus, str], AgentResponse],
    reset: Callable[[], None],
    records: list[Record],
) -> None:
    """One ingestion turn per session, the agent reset after each; each turn's
    record is appended to ``records`` as it ends (a failed turn raises, and the
    records of the turns before it are in ``records``)."""
    speakers = speakers_of(sessions)
    for session in sessions:
        try:
            response = deliver(ingestion_stimulus(session, speakers), session.session_id)
        finally:
            reset()
        records.append(IngestionRecord(response=response.document()))


def with_evidence(sample: BenchmarkSample, response: AgentResponse, scored: ScoredItem, *, memory: bool) -> ScoredItem:
    """The scored question with its evidence and evidence recall in ``details``.

    Evidence recall is the share of the question's evidence dialogue ids among the
    records recalled during its turn (:func:`~..memory.ingestion.evidence_recall`);
    ``None`` for a question without evidence, or a run without a memory (the
    control and full-context arms recall nothing by design).
    """
    evidence = sample.metadata.get("evidence_ids")
    if not isinstance(evidence, list):
        return scored
    recalled = [dict(hit) for hit in response.memory_recalled]
    found = sorted(set().union(*(dia_ids_of(hit) for hit in recalled))) if recalled else []
    details = {
        **scored.score.details,
        "evidence": list(evidence),
        "evidence_recall": evidence_recall(evidence, recalled) if memory else None,
        "recalled_dia_ids": found[:100],
    }
    unmatched = sample.metadata.get("evidence_unmatched")
    if isinstance(unmatched, list) and unmatched:
        details["evidence_unmatched"] = list(unmatched)
    return dataclasses.replace(scored, score=dataclasses.replace(scored.score, details=details))


def check_conversation_options(full_context: bool, streams: Sequence[Stream], source: str) -> None:
    """Refuse ``full_context`` for streams that hold no conversation, up front."""
    if not full_context:
        return
    without = [stream.name for stream in streams if not stream.sessions]
    if without:
        raise ConfigError(
            f"{source}: key 'full_context': streams {', '.join(map(repr, without[:5]))} hold no conversation "
            "to put in the prompt (full_context is for LoCoMo: benchmark locomo or locomo_sample); remove it"
        )


__all__ = [
    "Plan",
    "check_conversation_options",
    "ingest_by_agent",
    "ingestion_stimulus",
    "plan",
    "speakers_of",
    "with_evidence",
]
