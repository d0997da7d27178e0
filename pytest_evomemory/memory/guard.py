"""The isolation guard: a stream starts with an empty memory and sees no other stream.

What it checks, exactly (and nothing more, so memories that consolidate, merge,
extract or decay records pass):

* A recall made before anything was written in this stream returns nothing.
  "Written" is any memory operation other than a recall — a retain, a forget, a
  tool without a declared role — or a restore on resume.
* A recall never returns a record that a recall in an *earlier* stream of this
  process returned, identified by its id together with its content. Ids alone
  are not enough (a fresh SQLite file numbers from 1 in every stream), and
  retain's ids are not the reference: a consolidating memory answers with
  derived records whose ids ``retain`` never returned.

It is pure bookkeeping — the runtime feeds it what it observed (hits of direct
``recall`` calls, and recall-tool results it can read) and turns the returned
message into a ProtocolViolation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from .. import boundedread

#: (record id or None, content) of one recalled record.
SeenRecord = tuple[str | None, str]


def _fingerprint(record_id: str | None, content: str) -> bytes:
    return hashlib.blake2b(f"{record_id}\0{content}".encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass
class IsolationGuard:
    """Per-process bookkeeping of what each stream's recalls returned."""

    stream: str | None = None
    _written: bool = False
    _current: set[bytes] = field(default_factory=set)
    _earlier: dict[bytes, str] = field(default_factory=dict)

    def start_stream(self, stream: str) -> None:
        """A stream begins (with a memory that must be empty)."""
        self.end_stream()
        self.stream = stream
        self._written = False

    def note_write(self, retained: SeenRecord | None = None) -> None:
        """Something other than a recall reached the memory (or it was restored).

        ``retained``: the (id, content) a direct ``retain`` stored, so that it is
        caught if a later stream recalls it even though this one never did.
        """
        self._written = True
        if retained is not None:
            self._current.add(_fingerprint(*retained))

    def check_recall(self, records: Iterable[SeenRecord]) -> str | None:
        """Record a recall's results; a message saying what leaked, or None if clean."""
        records = list(records)
        if not records:
            return None
        stream = self.stream or "?"
        if not self._written:
            return (
                f"memory leak: recall in stream {stream!r} returned {len(records)} record(s) before "
                "anything was stored in this stream; a stream must start with an empty memory "
                f"(first: {records[0][1][:80]!r})"
            )
        for record_id, content in records:
            print_ = _fingerprint(record_id, content)
            earlier = self._earlier.get(print_)
            if earlier is not None:
                return (
                    f"memory leak: recall in stream {stream!r} returned record {record_id!r} "
                    f"({content[:80]!r}), which stream {earlier!r} stored or recalled earlier; the memory "
                    "system must give every stream its own, empty store"
                )
            self._current.add(print_)
        return None

    def end_stream(self) -> None:
        """The stream finished: what it recalled must not show up in a later one."""
        if self.stream is not None:
            for print_ in self._current:
                self._earlier.setdefault(print_, self.stream)
        self._current = set()
        self.stream = None


def records_in_tool_result(result: str) -> list[SeenRecord] | None:
    """The records a recall tool's text result lists, if it is readable.

    Readable means a JSON list of objects with a string ``content`` (and maybe
    ``id``), as the built-in recall tool writes; ``None`` for any other text —
    such a recall is then not checked, which docs/memory.md says.
    """
    try:
        value = boundedread.loads(result, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except (TypeError, ValueError):
        return None
    if not isinstance(value, list):
        return None
    records: list[SeenRecord] = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            return None
        record_id = item.get("id")
        records.append((None if record_id is None else str(record_id), item["content"]))
    return records
