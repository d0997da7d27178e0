"""What a session will ask of each arm's memory system, checked before any task.

A memory system offers retain/recall, and optionally more (:mod:`..memory.base`,
:mod:`..memory.snapshot`): ``ingest`` (LoCoMo's ``ingest: memory``), ``recent``
(the ExpRecent agent's recency window), ``forget`` (the editing tools) and
``snapshot``/``restore`` (a resume). Which of these a session needs follows from its
configs; whether a memory offers one is asked of the memory itself, by its protocol
(:class:`~..memory.base.Ingestible` and the others), never from a list of backend
names, so a backend that gains a method is accepted the moment it has it.

Asked twice: of the class a factory declares it returns (the built-in backends'
``open_*`` functions, a ``module:factory`` backend), in the session's preflight,
so the session is refused once, with exit 4, before any arm runs; and of the
instance each stream builds (a conftest factory declares nothing), which refuses
the session in the same words before anything is recorded.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import RunConfig
from ..memory.base import Forgetting, Ingestible, RecencyRecall
from ..memory.snapshot import SnapshotCapable
from ..streams.base import Stream


@dataclass(frozen=True)
class Need:
    """One capability the session will call, why, and what to do when it is missing."""

    protocol: type
    #: what it is missing, as the refusal names it ("recent(limit) method")
    method: str
    why: str
    fix: str


def memory_needs(config: RunConfig, streams: Sequence[Stream], *, resuming: bool, builtin_agent: bool) -> list[Need]:
    """What the session will ask of this run config's memory, from its configs alone."""
    if config.agent.memory_strategy == "none":
        return []
    needs: list[Need] = []
    if any(stream.sessions and stream.ingest == "memory" for stream in streams):
        needs.append(Need(
            Ingestible, "ingest(session) method",
            f"benchmark {config.benchmark.benchmark!r} with 'ingest: memory' hands it each conversation session "
            "(docs/locomo.md)",
            "add one (pytest_evomemory.memory.ingestion.ingest_turns stores one record per turn), or set "
            "'ingest: agent' in the benchmark config",
        ))
    if builtin_agent and config.agent.kind == "exprecent":
        needs.append(Need(
            RecencyRecall, "recent(limit) method",
            "agent kind 'exprecent' calls for the most recently retained records",
            "use a built-in backend that has it (inprocess, dense, sqlite, postgres, mem0, langmem), add one, or use agent kind "
            "'exprag'",
        ))
    if config.memory.editing_tools:
        needs.append(Need(
            Forgetting, "forget(record_id) method",
            "the forget and update tools of 'editing_tools: true' call",
            "set 'editing_tools: false', or use a backend that can forget",
        ))
    if resuming:
        needs.append(Need(
            SnapshotCapable, "snapshot(directory) and restore(directory) methods",
            "a resume needs to restore each stream's memory from its snapshot (docs/memory.md)",
            "run again without the resume option",
        ))
    return needs


def declared_class(factory: Callable[..., Any] | None) -> type | None:
    """The concrete class ``factory`` declares it returns (its return annotation), or
    None when it declares none or only a protocol (then only the instance tells)."""
    if factory is None:
        return None
    target = inspect.unwrap(factory)
    annotation = getattr(target, "__annotations__", {}).get("return")
    if isinstance(annotation, str):  # postponed annotations: a name in the factory's module
        annotation = getattr(target, "__globals__", {}).get(annotation.strip())
    if not isinstance(annotation, type) or getattr(annotation, "_is_protocol", False):
        return None
    return annotation


def missing(memory: object, needs: Sequence[Need], where: str) -> str | None:
    """One line naming the first capability ``memory`` (a class or an instance; an
    observer is looked through) lacks, or None."""
    subject = getattr(memory, "backend", memory)
    name = subject.__qualname__ if isinstance(subject, type) else type(subject).__qualname__
    for need in needs:
        offered = (
            all(callable(getattr(subject, attribute, None)) for attribute in _methods(need.protocol))
            if isinstance(subject, type) else isinstance(subject, need.protocol)
        )
        if not offered:
            return f"{where}: memory {name} has no {need.method}, which {need.why}; {need.fix}"
    return None


def _methods(protocol: type) -> list[str]:
    """The methods a protocol names (its own, not ``object``'s or ``Protocol``'s)."""
    return [name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")]


__all__ = ["Need", "declared_class", "memory_needs", "missing"]
