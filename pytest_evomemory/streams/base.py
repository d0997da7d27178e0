"""Streams and the benchmark sources that produce them.

A benchmark source knows its streams' names in their canonical order and loads
the selected ones all-or-nothing: a run never starts with a stream missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ..config import BenchmarkConfig, check_threshold_streams
from ..core.errors import ConfigError
from ..core.types import BenchmarkSample, ConversationSession
from ..rundocs import StreamOrder
from ..util.text import quoted_with_suggestions

#: Who writes a conversation's sessions into memory before its questions: the
#: memory system's own ingestion, or the agent in unscored ingestion turns.
IngestMode = Literal["memory", "agent"]

QuoteAnswer = Callable[[BenchmarkSample], Mapping[str, str]]


@dataclass(frozen=True)
class Stream:
    """An ordered task stream: one dataset, one memory system, one match mode."""

    name: str
    samples: tuple[BenchmarkSample, ...]
    match_mode: str
    description: str = ""
    #: Where the tasks came from (repository, revision, file, sha256, verified, rows
    #: read, tasks converted, converter settings): recorded per stream in run.json.
    #: See :func:`pytest_evomemory.streams.provenance.provenance_line`.
    provenance: Mapping[str, Any] = field(default_factory=dict)
    #: The record field whose value is each task's ``group`` (reports break the
    #: stream's accuracy down by it); ``None``: no breakdown.
    breakdown: str | None = None
    #: The answer in the source dataset's own fields, verbatim, for the feedback turn
    #: where it differs from the scored target (a choice letter in this task's
    #: order); ``None``: the target is the source's own answer field.
    quote_answer: QuoteAnswer | None = None
    #: The task order in use and where it came from (``benchmark.order``; set by
    #: :func:`pytest_evomemory.runtime.order.order_streams`), recorded per stream in
    #: run.json; empty (no field set) until ordered.
    order: StreamOrder = field(default_factory=StreamOrder)
    #: Whether each task is followed by a corrective feedback turn (Evo-Memory's
    #: test-time learning). ``False`` for static-memory streams (LoCoMo): the
    #: episode is task -> reset, and nothing tells the agent the answer.
    feedback: bool = True
    #: The conversation the tasks are about (LoCoMo), oldest session first: it is
    #: ingested before the first task (:mod:`pytest_evomemory.runtime.ingestion`).
    #: Empty for streams without an ingestion phase.
    sessions: tuple[ConversationSession, ...] = ()
    #: Who writes :attr:`sessions` into memory (only read when there are sessions).
    ingest: IngestMode = "memory"

    @property
    def ingestion_ids(self) -> tuple[str, ...]:
        """The task ids of the ingestion turns (``ingest: agent``), in order."""
        return tuple(session.session_id for session in self.sessions)

    def __len__(self) -> int:
        return len(self.samples)


class BenchmarkSource(Protocol):
    """Loads the streams of one benchmark (``benchmark:`` in the benchmark config)."""

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        """All stream names, in the benchmark's canonical order."""
        ...

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        """Load the named streams (already validated and ordered), limit applied.

        Raises :class:`~pytest_evomemory.core.errors.DataError` naming the stream and the
        cause if any one of them cannot be materialized or loaded.
        """
        ...


@dataclass(frozen=True)
class BenchmarkSpec:
    """A benchmark as configs name it (``benchmark: NAME``), registered in
    :data:`pytest_evomemory.streams.BENCHMARKS`.

    ``source`` makes its :class:`BenchmarkSource`; ``reads`` are the benchmark
    config keys only some benchmarks read (``files``, ``data_dir``, ...): such a key
    given to a benchmark that does not read it is refused, never ignored.
    ``upstream_files``: the benchmark downloads pinned upstream files into the data
    cache, which ``evomemory data`` fetches, verifies and locates ahead of a run.
    """

    name: str
    source: Callable[[], BenchmarkSource]
    reads: frozenset[str] = frozenset()
    upstream_files: bool = False


def select_streams(
    config: BenchmarkConfig, available: Sequence[str], source: str, selected_by: str | None = None
) -> list[str]:
    """The configured stream subset, in canonical order; unknown names are refused,
    naming where the selection was given (``selected_by``: the command line's option,
    else the config's key)."""
    check_threshold_streams(config, available, source)
    if config.streams is None:
        return list(available)
    unknown = [name for name in config.streams if name not in available]
    if unknown:
        where = f"{source}: {selected_by}" if selected_by else f"{source}: key 'streams'"
        raise ConfigError(
            f"{where}: unknown stream(s) {quoted_with_suggestions(unknown, available)} for "
            f"benchmark {config.benchmark!r}; available: {', '.join(available)}; use one of those names"
            + ("; give each stream its own option or list item, not one joined by commas"
               if any("," in name and set(name.split(",")) <= set(available) for name in unknown) else "")
        )
    return [name for name in available if name in config.streams]


def apply_limit(samples: Sequence[BenchmarkSample], limit: int | None) -> tuple[BenchmarkSample, ...]:
    """The first ``limit`` tasks of a stream (the stream order is never changed)."""
    return tuple(samples if limit is None else samples[:limit])
