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
import threading
import weakref
from collections.abc import Callable, Iterable

from ..core import boundedread

#: (record id or None, content) of one recalled record.
SeenRecord = tuple[str | None, str]


def _fingerprint(record_id: str | None, content: str) -> bytes:
    return hashlib.blake2b(f"{record_id}\0{content}".encode("utf-8", "surrogatepass"), digest_size=16).digest()


class IsolationGuard:
    """Per-process bookkeeping of what each stream's recalls returned (one per run).

    Streams of a run may be open at once (``evomemory run`` drives several chains
    in one process): each opens its own view (:meth:`open`), and a record one
    stream stored or recalled is a leak when another stream of the run recalls it,
    whether that stream ended or is still running. One stream at a time, that is
    exactly "an earlier stream"."""

    def __init__(self) -> None:
        #: fingerprint -> the first stream that stored or recalled it
        self._seen: dict[bytes, str] = {}
        self._lock = threading.Lock()
        self._serial: StreamGuard | None = None

    def open(self, stream: str) -> StreamGuard:
        """A stream begins (with a memory that must be empty)."""
        return StreamGuard(self, stream)

    # One stream at a time, through the guard itself (a memory's own tests do this).

    def start_stream(self, stream: str) -> None:
        self._serial = self.open(stream)

    def note_write(self, retained: SeenRecord | None = None) -> None:
        if self._serial is not None:
            self._serial.note_write(retained)

    def check_recall(self, records: Iterable[SeenRecord]) -> str | None:
        return self._serial.check_recall(records) if self._serial is not None else None

    def end_stream(self) -> None:
        self._serial = None

    def _claim(self, print_: bytes, stream: str) -> str | None:
        """Note that ``stream`` saw ``print_``; the other stream that saw it first, if any."""
        with self._lock:
            owner = self._seen.setdefault(print_, stream)
        return owner if owner != stream else None


class PartsLedger:
    """Which stream of a run was given which agent and memory object (one per run).

    A factory that hands every stream one object shares its state between them (a
    conversation, the memory a ``deterministic_recall`` agent was built with, the
    records of a memory): a leak the recall check cannot see. Kept apart from the
    :class:`IsolationGuard`, which an agent can reach through the memory it is given:
    this ledger holds the other streams' agents and memories themselves."""

    def __init__(self) -> None:
        #: id of a part -> (the part, weakly where it allows, and its stream)
        self._parts: dict[int, tuple[Callable[[], object], str]] = {}
        self._lock = threading.Lock()

    def claim(self, part: object, stream: str) -> str | None:
        """Note that ``stream`` was given ``part``; the other stream that was given the
        very same object, if any. Parts are held weakly where they allow it, so a
        finished stream's agent and memory are still freed."""
        try:
            ref: Callable[[], object] = weakref.ref(part)
        except TypeError:  # no weak references to it (__slots__ without __weakref__)
            ref = lambda: part  # noqa: E731  (kept alive, so its id cannot be reused)
        with self._lock:
            held = self._parts.get(id(part))
            if held is not None and held[0]() is part and held[1] != stream:
                return held[1]
            self._parts[id(part)] = (ref, stream)
        return None


class StreamGuard:
    """One stream's view of its run's :class:`IsolationGuard`."""

    def __init__(self, guard: IsolationGuard, stream: str) -> None:
        self._guard = guard
        self.stream = stream
        self._written = False

    def note_write(self, retained: SeenRecord | None = None) -> None:
        """Something other than a recall reached the memory (or it was restored).

        ``retained``: the (id, content) a direct ``retain`` stored, so that it is
        caught if another stream recalls it even though this one never did.
        """
        self._written = True
        if retained is not None:
            self._guard._claim(_fingerprint(*retained), self.stream)

    def check_recall(self, records: Iterable[SeenRecord]) -> str | None:
        """Record a recall's results; a message saying what leaked, or None if clean."""
        records = list(records)
        if not records:
            return None
        stream = self.stream
        if not self._written:
            return (
                f"memory leak: recall in stream {stream!r} returned {len(records)} record(s) before "
                "anything was stored in this stream; a stream must start with an empty memory "
                f"(first: {records[0][1][:80]!r})"
            )
        for record_id, content in records:
            other = self._guard._claim(_fingerprint(record_id, content), stream)
            if other is not None:
                return (
                    f"memory leak: recall in stream {stream!r} returned record {record_id!r} "
                    f"({content[:80]!r}), which stream {other!r} stored or recalled earlier; the memory "
                    "system must give every stream its own, empty store"
                )
        return None

    def end_stream(self) -> None:
        """The stream finished (what it saw stays noted: another stream must not recall it)."""


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
