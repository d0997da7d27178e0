"""Read LoCoMo conversation documents into checked value objects.

Two layouts of the same records exist upstream (snap-research/locomo), and both are
read here:

* the per-conversation files inside ``data/locomo10.zip`` (``26.json``, ...): one
  object with ``speaker_a``, ``speaker_b``, ``session_<N>``/``session_<N>_date_time``,
  ``qa`` (and generated fields we ignore) at the top level; the conversation is named
  ``conv-<file stem>``;
* the layout the repository's README documents (``data/locomo10.json``): a list of
  samples ``{"sample_id": "conv-26", "conversation": {speaker_a, speaker_b,
  session_<N>, session_<N>_date_time}, "qa": [...]}``.

A session is a list of turns ``{speaker, dia_id, text}`` (a turn that shared an
image also has ``blip_caption``, ``img_url``, ``query``); a question is
``{question, answer, evidence, category}``, and category 5 (adversarial) carries
``adversarial_answer`` instead of ``answer``. Anything that would make a question
unscorable, or a session unreadable, is refused with the conversation, session or
question named; fields we do not use are not checked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...core.errors import DataError
from ...core.types import ConversationSession, DialogueTurn

_SESSION_KEY = re.compile(r"session_(\d+)")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Dialogue ids inside an ``evidence`` entry (a few entries hold two, or a typo:
#: the pinned file has ``"D8:6; D9:17"``, ``"D9:1 D4:4 D4:6"`` and ``"D:11:26"``).
DIA_ID = re.compile(r"D:?\d+:\d+")


@dataclass(frozen=True)
class Question:
    """One ``qa`` item: the question, its gold answer(s), evidence and category."""

    index: int
    question: str
    category: int
    #: The gold answer as text (``str()`` of an integer answer, as evaluation.py
    #: does); ``None`` for adversarial questions without one.
    answer: str | None
    #: Category 5's wrong-but-plausible answer, offered beside "Not mentioned".
    adversarial_answer: str | None
    #: The source's ``evidence`` entries, verbatim.
    evidence: tuple[str, ...]

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """The dialogue ids the evidence names (``"D8:6; D9:17"`` is two)."""
        return tuple(dict.fromkeys(found for entry in self.evidence for found in DIA_ID.findall(entry)))


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: two speakers, dated sessions, and its questions."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[ConversationSession, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> int:
        return sum(len(session.turns) for session in self.sessions)

    @cached_property
    def _turn_ids(self) -> dict[str, str]:
        """Each turn's id as :func:`_canonical` spells it -> as the turn spells it: made
        once per conversation, not once per question (conv-26 asks 199 of them)."""
        return {_canonical(turn.dia_id): turn.dia_id for session in self.sessions for turn in session.turns}

    def resolve_evidence(self, question: Question) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The question's evidence ids split into those naming a turn of this
        conversation (as the turn spells it: ``D1:03`` is turn ``D1:3``) and those
        naming none (a typo, or a turn the file lacks).

        Only the first count in evidence recall: an id naming no turn can never be
        recalled, so counting it would cap the question's recall below 1 whatever
        the memory does. The others are kept and reported (docs/locomo.md).
        """
        turns = self._turn_ids
        named: list[str] = []
        unnamed: list[str] = []
        for entry in question.evidence:
            found = DIA_ID.findall(entry)
            if not found and entry.strip():
                unnamed.append(entry)  # no dialogue id at all (the pinned file has a bare "D")
            for dia_id in found:
                turn = turns.get(_canonical(dia_id))
                if turn is None:
                    unnamed.append(dia_id)
                elif turn not in named:
                    named.append(turn)
        return tuple(named), tuple(dict.fromkeys(unnamed))


def _canonical(dia_id: str) -> str:
    """``D01:003``, ``D:1:3`` and ``D1:3`` name the same turn."""
    match = re.fullmatch(r"D:?0*(\d+):0*(\d+)", dia_id.strip())
    return f"D{match.group(1)}:{match.group(2)}" if match else dia_id


def read_zip_member(name: str, document: Any) -> Conversation:
    """A conversation file of ``data/locomo10.zip`` (``.../26.json`` is ``conv-26``)."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".json")
    where = f"{name}"
    if not isinstance(document, Mapping):
        raise DataError(f"{where}: expected a JSON object (one conversation), got {_kind(document)}")
    return _conversation(f"conv-{stem}", document, document, where)


def read_samples(document: Any, where: str) -> list[Conversation]:
    """The README layout: a list of ``{sample_id, conversation, qa}`` samples."""
    if not isinstance(document, list):
        raise DataError(f"{where}: expected a JSON list of conversations, got {_kind(document)}")
    conversations: list[Conversation] = []
    seen: set[str] = set()
    for number, sample in enumerate(document, 1):
        at = f"{where}: conversation {number}"
        if not isinstance(sample, Mapping):
            raise DataError(f"{at}: expected an object, got {_kind(sample)}")
        sample_id = _text(sample, "sample_id", at)
        if sample_id in seen:
            raise DataError(f"{at}: sample_id {sample_id!r} appears twice; each conversation needs its own id")
        seen.add(sample_id)
        body = sample.get("conversation")
        if not isinstance(body, Mapping):
            raise DataError(f"{at} ({sample_id}): key 'conversation' must be an object, got {_kind(body)}")
        conversations.append(_conversation(sample_id, body, sample, f"{where}: {sample_id}"))
    if not conversations:
        raise DataError(f"{where}: the list holds no conversation")
    return conversations


def _conversation(
    sample_id: str, body: Mapping[str, Any], container: Mapping[str, Any], where: str
) -> Conversation:
    speaker_a = _text(body, "speaker_a", where)
    speaker_b = _text(body, "speaker_b", where)
    sessions = _sessions(sample_id, body, where)
    if not sessions:
        raise DataError(f"{where}: no non-empty 'session_<N>' list; a conversation needs at least one session")
    qa = container.get("qa")
    if not isinstance(qa, list):
        raise DataError(f"{where}: key 'qa' must be a list of questions, got {_kind(qa)}")
    if not qa:
        raise DataError(
            f"{where}: key 'qa' is an empty list, so this conversation has no question to ask; "
            "add its questions or remove the conversation from the file"
        )
    questions = tuple(_question(index, item, f"{where}: qa[{index - 1}]") for index, item in enumerate(qa, 1))
    return Conversation(sample_id, speaker_a, speaker_b, sessions, questions)


def _sessions(sample_id: str, body: Mapping[str, Any], where: str) -> tuple[ConversationSession, ...]:
    """Sessions in chronological (numeric) order; empty ones skipped, as upstream does.

    A ``session_<N>_date_time`` without its session (the zip has some) is ignored.
    """
    keys = sorted(
        ((int(match.group(1)), str(key)) for key in body if (match := _SESSION_KEY.fullmatch(str(key)))),
    )
    sessions: list[ConversationSession] = []
    seen_ids: set[str] = set()
    for position, (number, key) in enumerate(keys):
        at = f"{where}: {key}"
        if position and keys[position - 1][0] == number:
            raise DataError(
                f"{at}: '{keys[position - 1][1]}' and '{key}' are both session {number}; keep one of them"
            )
        turns = body[key]
        if not isinstance(turns, list):
            raise DataError(f"{at}: expected a list of turns, got {_kind(turns)}")
        if not turns:
            continue
        date_time = body.get(f"{key}_date_time")
        if not isinstance(date_time, str) or not date_time.strip():
            raise DataError(f"{at}: '{key}_date_time' is missing or empty; every session needs its date")
        _unicode(date_time, at, f"{key}_date_time")
        parsed = tuple(_turn(turn, f"{at}[{index}]") for index, turn in enumerate(turns))
        for turn in parsed:
            if turn.dia_id in seen_ids:
                raise DataError(f"{at}: dia_id {turn.dia_id!r} appears twice; evidence could not name one turn")
            seen_ids.add(turn.dia_id)
        sessions.append(ConversationSession(sample_id, number, date_time, parsed))
    return tuple(sessions)


def _turn(turn: Any, where: str) -> DialogueTurn:
    if not isinstance(turn, Mapping):
        raise DataError(f"{where}: expected a turn object {{speaker, dia_id, text}}, got {_kind(turn)}")
    caption = turn.get("blip_caption")
    return DialogueTurn(
        dia_id=_text(turn, "dia_id", where),
        speaker=_text(turn, "speaker", where),
        text=_string(turn, "text", where),
        image_caption=_unicode(caption, where, "blip_caption") if isinstance(caption, str) and caption.strip() else None,
    )


def _question(index: int, item: Any, where: str) -> Question:
    if not isinstance(item, Mapping):
        raise DataError(f"{where}: expected a question object, got {_kind(item)}")
    question = _text(item, "question", where)
    category = item.get("category")
    if isinstance(category, bool) or category not in (1, 2, 3, 4, 5):
        raise DataError(f"{where}: 'category' must be 1, 2, 3, 4 or 5, got {category!r}")
    answer = _answer(item.get("answer"), where, "answer")
    adversarial = _answer(item.get("adversarial_answer"), where, "adversarial_answer")
    if category == 5 and adversarial is None and answer is None:
        raise DataError(f"{where}: an adversarial (category 5) question needs 'adversarial_answer'")
    if category != 5 and answer is None:
        raise DataError(f"{where}: a category {category} question needs a non-empty 'answer'")
    evidence = item.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(entry, str) for entry in evidence):
        raise DataError(f"{where}: 'evidence' must be a list of dialogue ids such as ['D1:3']")
    return Question(index, question, int(category), answer, adversarial, tuple(evidence))


def _answer(value: Any, where: str, key: str) -> str | None:
    """``str()`` of the gold, as evaluation.py reads it (six answers are integers)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DataError(f"{where}: '{key}' must be text or a number, got {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"{where}: '{key}' is {value!r}, not an answer; write the gold answer as text or a number")
    text = _unicode(str(value), where, key)
    return text if text.strip() else None


def _text(mapping: Mapping[str, Any], key: str, where: str) -> str:
    value = _string(mapping, key, where)
    if not value.strip():
        raise DataError(f"{where}: key {key!r} is empty")
    return value


def _string(mapping: Mapping[str, Any], key: str, where: str) -> str:
    value = mapping.get(key)
    if not isinstance(value, str):
        raise DataError(f"{where}: key {key!r} must be text, got {_kind(value)}")
    return _unicode(value, where, key)


def _unicode(value: str, where: str, key: str) -> str:
    """Refuse a lone surrogate (JSON's ``"\\ud800"`` decodes to one): it is no
    character, so one memory would store it and another refuse it mid-run."""
    found = _SURROGATE.search(value)
    if found:
        raise DataError(
            f"{where}: key {key!r} holds a lone surrogate ({found.group()!a}) at character {found.start()}, "
            "which is not valid Unicode; fix that escape in the file"
        )
    return value


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "text", int: "a number", float: "a number", bool: "true/false"}
    if value is None:
        return "nothing"
    return names.get(type(value), type(value).__name__)


def conversation_names(conversations: Sequence[Conversation]) -> list[str]:
    return [conversation.sample_id for conversation in conversations]
