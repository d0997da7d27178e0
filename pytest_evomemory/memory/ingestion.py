"""How the built-in backends ingest a conversation, and how a recalled record is
traced back to the dialogue turns it came from.

One record per dialogue turn: the unit LoCoMo's own retrieval baseline uses (its
"dialog" database, each turn prefixed with its session's date), and the unit its
``evidence`` lists name, so evidence recall is exact. The record's text starts
with the session's date (temporal questions need it, and a lexical recall can
match it) and holds the turn as :meth:`DialogueTurn.render` writes it, with its
``[D<session>:<turn>]`` tag; its metadata holds the conversation, session, date,
speaker and ``dia_id``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..core.types import ConversationSession, DialogueTurn

#: A dialogue id as :meth:`DialogueTurn.render` tags it in a text.
DIA_TAG = re.compile(r"\[(D\d+:\d+)\]")


class _Retaining(Protocol):
    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str: ...


def turn_record(session: ConversationSession, turn: DialogueTurn) -> tuple[str, dict[str, Any]]:
    """The content and metadata of one turn's record."""
    content = f"{session.date_time}: {turn.render()}"
    metadata = {
        "conversation": session.conversation,
        "session": session.index,
        "date_time": session.date_time,
        "speaker": turn.speaker,
        "dia_id": turn.dia_id,
    }
    return content, metadata


def dialogue_text(content: str) -> str | None:
    """What was said in a remembered conversation turn (``... [D1:3] Name: text``),
    without its date, tag and speaker; ``None`` for any other record. What a reader
    of recalled records answers with: the recall baseline, and the dry-run model."""
    tag = DIA_TAG.search(content)
    if tag is None:
        return None
    _, colon, said = content[tag.end():].partition(": ")
    text = (said if colon else content[tag.end():]).strip()
    return text or None


def ingest_turns(memory: _Retaining, session: ConversationSession) -> list[str]:
    """Retain every turn of ``session`` as its own record (the built-in ``ingest``)."""
    return [memory.retain(*turn_record(session, turn)) for turn in session.turns]


def dia_ids_of(record: Mapping[str, Any]) -> set[str]:
    """The dialogue ids a recalled record stands for: its metadata's ``dia_id`` (or
    ``dia_ids``), and every ``[D1:3]`` tag in its text (records an agent wrote by
    copying ingested turns, or a session-sized record, keep their tags)."""
    found: set[str] = set()
    metadata = record.get("metadata")
    if isinstance(metadata, Mapping):
        single = metadata.get("dia_id")
        if isinstance(single, str):
            found.add(single)
        several = metadata.get("dia_ids")
        if isinstance(several, list | tuple):
            found.update(item for item in several if isinstance(item, str))
    content = record.get("content")
    if isinstance(content, str):
        found.update(DIA_TAG.findall(content))
    return found


def evidence_recall(evidence: Iterable[str], recalled: Iterable[Mapping[str, Any]]) -> float | None:
    """The share of the evidence ids found among the recalled records' ids; ``None``
    for a question without evidence (there is nothing to find)."""
    wanted = list(dict.fromkeys(evidence))
    if not wanted:
        return None
    seen: set[str] = set()
    for record in recalled:
        seen |= dia_ids_of(record)
    return sum(1 for dia_id in wanted if dia_id in seen) / len(wanted)


__all__ = ["DIA_TAG", "dia_ids_of", "dialogue_text", "evidence_recall", "ingest_turns", "turn_record"]
