"""The stream's memory system as the runtime hands it to the agent: counted and guarded.

The wrapper observes every operation (for the per-stimulus counts in responses) and
checks isolation; it never stores or recalls anything on the agent's behalf.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import MemoryBackendError, ProtocolViolation
from ..memory.base import MemorySystem
from ..memory.tools import RECALL_SPEC, RETAIN_SPEC, memory_tools
from ..tools import Tool
from ..types import MemoryHit

_T = TypeVar("_T")


@dataclass
class OperationCounts:
    retains: int = 0
    recalls: int = 0
    writes: int = 0
    recalled: int = 0


class InstrumentedMemory:
    """Wraps the stream's memory system to count operations and catch leaks.

    Every id that ``recall`` returns must have been retained during this stream;
    anything else came from another stream (or from before the stream started)
    and is reported as a protocol violation.
    """

    def __init__(self, backend: MemorySystem, stream: str) -> None:
        self.backend = backend
        self.stream = stream
        self.counts = OperationCounts()
        self.writes: list[dict[str, Any]] = []
        self.recalled: list[dict[str, Any]] = []
        self._retained_ids: set[str] = set()

    @property
    def default_top_k(self) -> int:
        return self.backend.default_top_k

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self.counts.retains += 1
        record_id = self._guard(lambda: self.backend.retain(content, metadata), "retain")
        self._retained_ids.add(str(record_id))
        self.writes.append({"content": content, "metadata": dict(metadata or {})})
        return record_id

    def replay(self, writes: Sequence[Mapping[str, Any]]) -> None:
        """Restore a resumed stream's memory by re-applying its recorded writes."""
        for write in writes:
            self.retain(str(write["content"]), write.get("metadata") or None)

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self.counts.recalls += 1
        hits = self._guard(lambda: self.backend.recall(query, top_k), "recall")
        for hit in hits:
            if str(hit.record_id) not in self._retained_ids:
                raise ProtocolViolation(
                    f"memory leak: recall in stream {self.stream!r} returned record "
                    f"{hit.record_id!r}, which was not retained in this stream; the "
                    "memory backend must start empty for every stream"
                )
        self.recalled.extend(hit.to_dict() for hit in hits)
        return hits

    def reset(self) -> None:
        self._guard(self.backend.reset, "reset")
        self._retained_ids.clear()

    def close(self) -> None:
        self._guard(self.backend.close, "close")

    def tools(self) -> Sequence[Tool]:
        declared = list(self.backend.tools())
        standard = {RETAIN_SPEC.name: RETAIN_SPEC, RECALL_SPEC.name: RECALL_SPEC}
        routed: list[Tool] = []
        own = {tool.name: tool for tool in memory_tools(self)}
        for tool in declared:
            if standard.get(tool.name) == tool.spec:
                routed.append(own[tool.name])  # counted and leak-guarded
            else:
                routed.append(tool)
        return routed

    def _guard(self, operation: Callable[[], _T], name: str) -> _T:
        try:
            return operation()
        except (ProtocolViolation, MemoryBackendError):
            raise
        except Exception as error:
            raise MemoryBackendError(
                f"memory backend failed during {name} in stream {self.stream!r}: "
                f"{type(error).__name__}: {error}"
            ) from error



def operation_counts(memory: InstrumentedMemory | None) -> OperationCounts:
    if memory is None:
        return OperationCounts()
    return OperationCounts(
        memory.counts.retains, memory.counts.recalls, len(memory.writes), len(memory.recalled)
    )


