"""The runtime's view of a stream's memory: counted, guarded, never altered.

:class:`ObservedMemory` is what the episode runner hands to agents in place of
the memory system: it forwards every call unchanged, counts operations by role,
keeps a transcript of what was written, and feeds the :class:`IsolationGuard`.
For ``tool_use`` agents it offers the memory's *declared* tools, with their own
specs and handlers (see :func:`instrument_memory_tools`). It never replays,
retains or recalls anything itself; resume goes through
:class:`~pytest_evomemory.memory.snapshot.StreamSnapshots` on :attr:`backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from ..core.errors import BudgetExhausted, MemoryBackendError, ProtocolViolation
from ..core.factories import user_frames
from ..core.tools import Tool, ToolArgumentError
from ..core.types import ConversationSession, MemoryHit
from .base import (
    Ingestible,
    MemorySystem,
    RecencyRecall,
    SelectiveStore,
    checked_hits,
    checked_id,
    checked_tools,
)
from .guard import IsolationGuard
from .tools import MemoryTool, MemoryToolCall, instrument_memory_tools

_T = TypeVar("_T")
_Item = TypeVar("_Item")

#: the one member of :class:`~.base.SelectiveStore`
_UNSTORED = next(iter(SelectiveStore.__annotations__))


class TurnLog(Generic[_Item]):
    """What reached the memory, in order, for as long as a turn may still ask.

    Indexes are absolute (counted from the stream's first entry): a turn's entries
    are ``log[start:end]`` with the lengths taken when it began and ended. Entries
    before the turn that began last are dropped when the next turn begins
    (:meth:`ObservedMemory.mark`), so a stream of 20,000 tasks does not keep
    20,000 tasks' writes and recalls (the records already hold them).
    """

    def __init__(self) -> None:
        self._items: list[_Item] = []
        self._offset = 0

    def __len__(self) -> int:
        return self._offset + len(self._items)

    def __iter__(self) -> Iterator[_Item]:
        return iter(self._items)

    def append(self, item: _Item) -> None:
        self._items.append(item)

    def extend(self, items: Iterable[_Item]) -> None:
        self._items.extend(items)

    @overload
    def __getitem__(self, key: int) -> _Item: ...

    @overload
    def __getitem__(self, key: slice) -> list[_Item]: ...

    def __getitem__(self, key: int | slice) -> _Item | list[_Item]:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if start < self._offset and start < stop:
                raise IndexError(f"entries before {self._offset} were forgotten (asked from {start})")
            return self._items[start - self._offset : stop - self._offset : step]
        index = key + len(self) if key < 0 else key
        if not self._offset <= index < len(self):
            raise IndexError(f"entry {key} is not kept (kept: {self._offset} to {len(self) - 1})")
        return self._items[index - self._offset]

    def forget_before(self, index: int) -> None:
        """Drop the entries before absolute position ``index``."""
        drop = min(index, self._offset + len(self._items)) - self._offset
        if drop > 0:
            del self._items[:drop]
            self._offset += drop


@dataclass
class OperationCounts:
    """Memory operations so far in the stream, by role (direct calls and tools)."""

    retains: int = 0
    recalls: int = 0
    forgets: int = 0
    other: int = 0
    #: retains the memory stored nothing for, as it counts them
    #: (:class:`~.base.SelectiveStore`; 0 for a memory that does not), as of the last mark
    unstored: int = 0

    def copy(self) -> OperationCounts:
        """These counts as they are now (twice a turn: ``dataclasses.replace``, or even
        ``__init__`` by keyword, costs several times as much for the same copy)."""
        copied = object.__new__(OperationCounts)
        copied.__dict__.update(self.__dict__)
        return copied


class ObservedMemory:
    """A MemorySystem wrapper for one stream: counts, transcript, isolation guard."""

    def __init__(self, backend: MemorySystem, stream: str, guard: IsolationGuard | None = None) -> None:
        self.backend = backend
        self.stream = stream
        self.guard = (guard if guard is not None else IsolationGuard()).open(stream)
        self.counts = OperationCounts()
        #: what reached the memory other than recalls, in order (for transcripts)
        self.writes: TurnLog[dict[str, Any]] = TurnLog()
        #: what recalls returned, in order (for the report's "recalled into the prompt")
        self.recalled: TurnLog[dict[str, Any]] = TurnLog()
        #: (writes, recalled) when the previous turn began or ended (see mark)
        self._marked = (0, 0)

    @property
    def default_top_k(self) -> int:
        return self.backend.default_top_k

    def mark(self) -> tuple[int, int]:
        """``(len(writes), len(recalled))`` now, as a turn begins or ends.

        A turn reads its entries between the marks taken at its start and end, so
        what came before the previous mark is needed no more and is dropped. The
        memory's own count of retains that stored nothing is read here too: the
        difference between two marks is the turn's.
        """
        writes, recalled = self.writes, self.recalled
        now = (len(writes), len(recalled))
        # SelectiveStore's one member read directly: an isinstance check against a
        # runtime-checkable protocol costs tens of microseconds, four times a task
        found = getattr(self.backend, _UNSTORED, None)
        if isinstance(found, int) and not isinstance(found, bool):  # an adapter's own attribute: a count or nothing
            self.counts.unstored = found
        writes.forget_before(self._marked[0])
        recalled.forget_before(self._marked[1])
        self._marked = now
        return now

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self.counts.retains += 1
        record_id = self._forward(lambda: self.backend.retain(content, metadata), "retain")
        text_id = checked_id(record_id, self._where("retain"))
        self.guard.note_write((text_id, content))
        self.writes.append({"content": content, "metadata": dict(metadata or {}), "id": text_id})
        return record_id

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self.counts.recalls += 1
        found = self._forward(lambda: self.backend.recall(query, top_k), "recall")
        hits = checked_hits(found, self._limit(top_k), self._where("recall"))
        self._check((str(hit.record_id), hit.content) for hit in hits)
        self.recalled.extend(hit.to_dict() for hit in hits)
        return hits

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """The backend's most recently retained records (:class:`~.base.RecencyRecall`),
        counted and checked as a recall; a backend without it fails clearly."""
        backend = self.backend
        if not isinstance(backend, RecencyRecall):
            raise MemoryBackendError(
                f"memory system {type(backend).__name__} of stream {self.stream!r} offers no "
                "recent(limit), which a recency window (agent kind 'exprecent') needs; use a built-in "
                "backend (inprocess, dense, sqlite, postgres, mem0, langmem) or add the method (docs/memory.md)"
            )
        self.counts.recalls += 1
        found = self._forward(lambda: backend.recent(limit), "recent")
        hits = checked_hits(found, self._limit(limit), self._where("recent"))
        self._check((str(hit.record_id), hit.content) for hit in hits)
        self.recalled.extend(hit.to_dict() for hit in hits)
        return hits

    @property
    def ingestible(self) -> bool:
        """Whether the memory ingests conversations by its own means (:class:`Ingestible`)."""
        return isinstance(self.backend, Ingestible)

    def ingest(self, session: ConversationSession) -> None:
        """The memory's own ingestion of one session (static memory, before any question).

        Not an agent operation: it is neither counted as a retain nor kept in the
        write transcript; the isolation guard learns that the memory is no longer empty.
        """
        backend = self.backend
        if not isinstance(backend, Ingestible):
            raise MemoryBackendError(
                f"memory {type(backend).__qualname__} of stream {self.stream!r} has no ingest(session) method "
                "(docs/locomo.md); add one (pytest_evomemory.memory.ingestion.ingest_turns stores one record "
                "per turn), or set 'ingest: agent' in the benchmark config"
            )
        self._forward(lambda: backend.ingest(session), "ingest")
        self.guard.note_write()

    def restored(self) -> None:
        """The backend was just restored from a snapshot (resume): it is not empty."""
        self.guard.note_write()

    def reset(self) -> None:
        self._forward(self.backend.reset, "reset")

    def close(self) -> None:
        try:
            self._forward(self.backend.close, "close")
        finally:
            self.guard.end_stream()

    def tools(self) -> Sequence[Tool]:
        """The memory's declared tools, observed; handlers and specs are its own."""
        declared = checked_tools(self._forward(self.backend.tools, "tools"), self._where("tools()"))
        return [self._failing_clearly(tool) for tool in instrument_memory_tools(declared, self._observe)]

    # ------------------------------------------------------------------ internals

    def _where(self, call: str) -> str:
        return f"memory {type(self.backend).__qualname__} of stream {self.stream!r}: {call}"

    def _limit(self, asked: int | None) -> int:
        """The most records a recall may return: what was asked, else the memory's default."""
        return asked if asked is not None else self._forward(lambda: self.backend.default_top_k, "default_top_k")

    def _observe(self, call: MemoryToolCall) -> None:
        if call.role == "recall":
            self.counts.recalls += 1
            records = call.records
            if records is not None:
                self._check(records)
                self.recalled.extend({"record_id": record_id, "content": content} for record_id, content in records)
            return
        if call.role == "retain":
            self.counts.retains += 1
        elif call.role == "forget":
            self.counts.forgets += 1
        else:
            self.counts.other += 1
        self.guard.note_write()
        self.writes.append(
            {"tool": call.tool, "role": call.role, "arguments": dict(call.arguments), "error": call.error is not None}
        )

    def _check(self, records: Any) -> None:
        message = self.guard.check_recall(records)
        if message is not None:
            raise ProtocolViolation(message)

    def _failing_clearly(self, tool: Tool) -> Tool:
        """A declared handler's unexpected exception becomes a MemoryBackendError
        naming the tool and stream; tool errors and violations pass unchanged."""
        handler = tool.handler

        def call(arguments: Mapping[str, Any]) -> str:
            return self._forward(lambda: handler(arguments), f"tool {tool.name!r}")

        if isinstance(tool, MemoryTool):
            return MemoryTool(tool.spec, call, tool.role, tool.read_records)
        return MemoryTool(tool.spec, call, None)

    def _forward(self, operation: Callable[[], _T], name: str) -> _T:
        try:
            return operation()
        except (ProtocolViolation, MemoryBackendError, ToolArgumentError, BudgetExhausted):
            raise  # BudgetExhausted: a memory library's own model call met the cost cap
        except Exception as error:
            raise MemoryBackendError(
                f"memory backend failed during {name} in stream {self.stream!r}: "
                f"{type(error).__name__}: {error}{user_frames(error)}"
            ) from error
