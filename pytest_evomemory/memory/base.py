"""The MemorySystem protocol: what the benchmark needs from the memory under test.

A memory system is owned by one stream: it is created when the stream starts,
persists across that stream's episodes, and is reset and closed at stream
teardown. The framework never calls ``recall`` or ``retain`` itself; only the
agent does, directly (``deterministic_recall``) or through the tools the memory
system declares (``tool_use``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, cast, runtime_checkable

from ..core.errors import MemoryBackendError
from ..core.tools import FINAL_ANSWER_TOOL, Tool
from ..core.types import ConversationSession, MemoryHit

if TYPE_CHECKING:
    from ..config import BackendOptions, MemoryConfig, ModelConfig
    from ..config.pricing import Pricing


@runtime_checkable
class MemorySystem(Protocol):
    """Adapter interface for a memory backend (SQLite, PostgreSQL, mem0, ...)."""

    @property
    def default_top_k(self) -> int:
        """How many records ``recall`` returns when the caller passes no ``top_k``."""
        ...

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a record and return its id."""
        ...

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        """Return up to ``top_k`` records, most similar first."""
        ...

    def reset(self) -> None:
        """Forget every record (stream teardown)."""
        ...

    def close(self) -> None:
        """Release files, connections and threads; later calls must fail clearly."""
        ...

    def tools(self) -> Sequence[Tool]:
        """The tools a ``tool_use`` agent is given (at least ``retain`` and ``recall``)."""
        ...


# --------------------------------------------------------------------------- optional capabilities
#
# A memory system may offer more than retain/recall. The runtime never calls these
# itself either: an agent that needs one (ExpRecent's recency window, ReMem's
# rewrite and delete tools) checks for it and says clearly when it is missing.


@runtime_checkable
class RecencyRecall(Protocol):
    """Optional capability: the records retained last, newest first.

    Why the memory and not the agent: agent state is reset after every task, and
    only the memory persists (and is snapshotted for resume), so "the k most recent
    experiences" must come from the store's own retain order (record ids).
    """

    def recent(self, limit: int | None = None) -> list[MemoryHit]:
        """Up to ``limit`` (default: ``default_top_k``) records, most recently retained
        first. ``score`` carries no similarity here (0.0)."""
        ...


@runtime_checkable
class SelectiveStore(Protocol):
    """Optional capability: a memory that may store nothing for a retain says how often.

    A library whose own LLM decides what to keep (Mem0 and LangMem with ``infer:
    true``) stores nothing when that LLM finds nothing new to keep in the text, or
    when its reply is not what the library parses (a stub or a small model): the
    retain succeeds and the store stays empty. The runtime reads the count around
    each turn (a response's ``memory_unstored``, a stream's in the summary) and says
    so once per stream, so an empty memory and a flat learning curve are explained.
    """

    #: Retains (and retain-role tool calls) so far that stored nothing; never decreases.
    unstored_retains: int


@runtime_checkable
class Forgetting(Protocol):
    """Optional capability: delete one record by the id ``retain``/``recall`` gave.

    With it, the standard tools can offer ``forget`` and ``update`` (a rewrite: the
    new text is retained under a new id, then the old record is forgotten), when the
    memory config asks for them (``editing_tools: true``).
    """

    def forget(self, record_id: str) -> bool:
        """Delete the record; False when no record has that id (nothing changes)."""
        ...


def supports_recency(memory: object) -> bool:
    """Whether ``memory`` (or the backend an observer wraps) offers ``recent``."""
    return isinstance(getattr(memory, "backend", memory), RecencyRecall)


def supports_forgetting(memory: object) -> bool:
    return isinstance(getattr(memory, "backend", memory), Forgetting)


@runtime_checkable
class Ingestible(Protocol):
    """Optional: a memory system that ingests a conversation by its own means.

    A static-memory benchmark (LoCoMo, ``ingest: memory``) hands it each session of
    a conversation in order, dates included, before the first question; what it
    stores, and how (one record per turn, per session, facts extracted by a model
    as Mem0's ``add(messages)`` does), is the memory system's own business.
    :func:`pytest_evomemory.memory.ingestion.ingest_turns` is the built-in
    backends' way: one record per turn, with the date and ``dia_id`` in metadata.
    """

    def ingest(self, session: ConversationSession) -> None:
        """Store what this memory keeps of one session (called once per session, in order)."""
        ...


@runtime_checkable
class SnapshotCapable(Protocol):
    """Optional MemorySystem capability: save and load the whole memory state.

    ``snapshot(directory)`` makes ``directory`` hold this memory's current state;
    the same directory is passed again later, so an implementation may update it
    incrementally, but it must stay loadable if the process is killed at any
    instant (write new files, then atomically replace a manifest). ``restore``
    is called once, on a freshly opened memory of the same stream and config,
    before the agent touches it, and must leave it exactly as it was when the
    snapshot was taken: same records, same ids, same next recalls.
    """

    def snapshot(self, directory: Path) -> None: ...

    def restore(self, directory: Path) -> None: ...


class ResumeRefused(MemoryBackendError):
    """A partly run stream cannot be resumed with the memory it had."""


class SnapshotDamaged(ResumeRefused):
    """A snapshot is missing, damaged or not this stream's: nothing was loaded from it.

    ``path`` is the slot (or snapshot directory), ``problem`` what is wrong with it.
    """

    def __init__(self, message: str = "", *, path: str | None = None, problem: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.problem = problem


#: Classes already known to implement :class:`SnapshotCapable`: a runtime protocol
#: check walks the class's attributes each time (tens of microseconds), and the
#: runtime asks once per episode. Only classes that offer both methods themselves
#: are remembered, for which the protocol check is a check of the class alone.
_CAPABLE_TYPES: set[type] = set()


def supports_snapshots(memory: object) -> TypeGuard[SnapshotCapable]:
    """Whether ``memory`` (a MemorySystem) implements :class:`SnapshotCapable`."""
    kind = type(memory)
    if kind in _CAPABLE_TYPES:
        return True
    if not isinstance(memory, SnapshotCapable):
        return False
    if all(callable(getattr(kind, name, None)) for name in ("snapshot", "restore")):
        _CAPABLE_TYPES.add(kind)
    return True


class RecordRejected(MemoryBackendError):
    """This one record cannot be stored (e.g. text the database cannot hold).

    The memory stays usable: a tool call that hits it is answered with a tool
    error, and the stream goes on. Any other MemoryBackendError means the memory
    itself is broken.
    """


def checked_hits(hits: object, limit: int, where: str) -> list[MemoryHit]:
    """``hits`` as ``recall`` (or ``recent``) must return them: a list of at most
    ``limit`` :class:`MemoryHit`, each with a text ``content``, an id, a finite
    number as ``score``, and no id twice. Anything else is the adapter's bug, named
    here as the memory's (``where``: which memory and call), not left to fail later
    in the agent's code, the isolation guard or the run's writer as someone else's."""
    ids: set[object] = set()

    def check(index: int, hit: object) -> str | None:
        if not isinstance(hit, MemoryHit):
            return f"returned {_shape(hit)} as record {index}; return pytest_evomemory.MemoryHit objects"
        if not isinstance(hit.content, str):
            return f"returned record {index} with content {_shape(hit.content)}; content must be text"
        if isinstance(hit.record_id, bool) or not isinstance(hit.record_id, str | int):
            return f"returned record {index} with record_id {_shape(hit.record_id)}; give the id retain returned"
        score = hit.score
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            return f"returned record {index} with score {score!r}; score must be a finite number"
        if hit.record_id in ids:
            return f"returned record {hit.record_id!r} twice; return each record once"
        ids.add(hit.record_id)
        return None

    problem: str | None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        problem = f"was asked for top_k={limit!r}, which is no number of records (check the memory's default_top_k)"
    else:
        problem = _first_problem(hits, "MemoryHit", check)
        if problem is None and len(cast("Sequence[MemoryHit]", hits)) > limit:
            problem = (f"returned {len(cast('Sequence[MemoryHit]', hits))} records for top_k={limit}; "
                       "return at most top_k, most similar first")
    if problem is not None:
        raise MemoryBackendError(f"{where} {problem} (docs/memory.md, 'Writing your own adapter')")
    return list(cast("Sequence[MemoryHit]", hits))


def checked_tools(tools: object, where: str) -> list[Tool]:
    """The tools a memory declares, as a ``tool_use`` turn offers them: a list of
    :class:`~..core.tools.Tool`, each name once and none called ``final_answer``
    (the turn's own tool, which a memory's tool of that name would replace)."""
    names: set[str] = set()

    def check(index: int, tool: object) -> str | None:
        if not isinstance(tool, Tool):
            return (f"returned {_shape(tool)} as tool {index}; return pytest_evomemory.Tool "
                    "(or pytest_evomemory.memory.MemoryTool) objects")
        if tool.name == FINAL_ANSWER_TOOL.name:
            return f"declares a tool named {tool.name!r}, which is the turn's own; give it another name"
        if tool.name in names:
            return f"declares two tools named {tool.name!r}; give each its own name"
        names.add(tool.name)
        return None

    problem = _first_problem(tools, "Tool", check)
    if problem is not None:
        raise MemoryBackendError(f"{where} {problem} (docs/memory.md, 'Tools: roles, not names')")
    return list(cast("Sequence[Tool]", tools))


def _first_problem(items: object, noun: str, check: Callable[[int, object], str | None]) -> str | None:
    """What is wrong with ``items``, a list whose every item must pass ``check``; None if nothing."""
    if not isinstance(items, list | tuple):
        return f"returned {_shape(items)}, not a list of {noun}"
    for index, item in enumerate(items):
        problem = check(index, item)
        if problem is not None:
            return problem
    return None


def checked_id(record_id: object, where: str) -> str:
    """The id ``retain`` returned, as text; ``None`` or another value that is no id is
    the adapter's bug, named as the memory's."""
    if isinstance(record_id, bool) or not isinstance(record_id, str | int):
        raise MemoryBackendError(
            f"{where} returned {_shape(record_id)} as the record's id; return the stored record's id as text "
            "(docs/memory.md, 'Writing your own adapter')"
        )
    return str(record_id)


def _shape(value: object) -> str:
    """A value as a message names it: ``None``, or its type."""
    return "None" if value is None else f"a {type(value).__name__}"


def unstorable_reason(text: str, *, nul_allowed: bool) -> str | None:
    """Why a database text column cannot hold ``text`` exactly, or None if it can."""
    if not nul_allowed and "\x00" in text:
        return "contains a NUL character (\\x00), which the database's text type cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"contains a lone surrogate ({error.object[error.start:error.end]!r}), which is not valid UTF-8"
    return None


class ModelMeter(Protocol):
    """An HTTP transport (``httpx2.BaseTransport``) that meters a library's chat
    requests under the session's cost cap (:class:`~..models.metering.MeteredTransport`)."""

    def raise_refusal(self) -> None:
        """Raise the cost cap's refusal a request met, if any (BudgetExhausted)."""
        ...


#: ``meter(pricing, max_tokens, what)``: the transport a library's chat client sends
#: through under the session's cost cap, or None without a cap.
MeterFactory = Callable[["Pricing | None", int, str], "ModelMeter | None"]


@dataclass(frozen=True)
class MemoryContext:
    """Where a memory system lives: its stream and the run's output directory.

    ``agent_model`` is the agent's model config: a memory library that calls a
    model of its own (Mem0's and LangMem's ``infer``) uses that endpoint unless
    its own settings name another. ``meter`` is how those calls are metered under
    ``--evomemory-max-cost`` (the runtime gives
    :func:`~..models.metering.session_meter`; None: not metered).
    """

    stream: str
    run_dir: Path
    run_name: str
    agent_model: ModelConfig | None = None
    meter: MeterFactory | None = None


MemoryOpener = Callable[["MemoryConfig", MemoryContext], MemorySystem]

#: ``check(memory_config, agent_model, source)``: raises ConfigError (naming the key)
#: for what the backend could not open later.
MemoryCheck = Callable[["MemoryConfig", "ModelConfig | None", str], None]


@dataclass(frozen=True)
class MemoryBackend:
    """A memory backend as configs name it (``memory: {backend: NAME}``).

    Declared once, beside the backend's code, and registered in
    :data:`pytest_evomemory.memory.factory.MEMORY_BACKENDS`: how to open it for a
    stream, the settings model of its own section (``sqlite: {...}``), the keys of
    the free-form ``memory.options`` it reads (any other is refused, never ignored),
    and the optional extra that provides its library (checked before any task).
    """

    name: str
    open: MemoryOpener
    options: type[BackendOptions] | None = None
    reads_options: frozenset[str] = frozenset()
    #: ``pip install 'pytest-evomemory[EXTRA]'`` provides it; ``requires`` are the
    #: modules that extra installs (their absence is one clear error up front).
    extra: str | None = None
    requires: tuple[str, ...] = ()
    #: Where a stream's state lives (files, tables), when the backend keeps it outside
    #: the process: two streams (or arms) naming one location would share a memory,
    #: so the session refuses that before any task.
    locations: Callable[[MemoryConfig, MemoryContext], Sequence[str]] | None = None
    #: What each of ``locations`` is on disk, when they are paths the backend creates
    #: ("file" or "directory"): the session refuses, before any task, a place that
    #: cannot be one (a directory where the file goes, a file on the way, read-only).
    location_kind: str | None = None
    #: What the backend refuses before any stream opens, beyond a missing extra: its
    #: settings against the agent's model (an endpoint ``infer`` needs, a key in an
    #: unset variable, an embedder that is not installed). Run once per arm by the
    #: session's preflight, with the memory config's source for messages.
    check: MemoryCheck | None = None
    #: ``own_model_calls(memory_config)``: the key (``mem0.infer``) that makes the backend
    #: call a chat model through its library's own client, or None. Those calls are
    #: outside the agent's figures (tokens, cost columns, ``max_connections``, the
    #: shared 429 backoff); ``--evomemory-max-cost`` meters them at the price
    #: ``own_model_price`` gives, and refuses the arm when it gives none.
    own_model_calls: Callable[[MemoryConfig], str | None] | None = None
    #: Whether one process may drive several of its instances at once (``evomemory run``
    #: runs chains side by side in threads): False for a library whose state or client
    #: is the process's, not the instance's; the session then runs its chains one at a
    #: time (docs/memory.md, "Chains at once").
    concurrent: bool = True
    #: ``own_model_price(memory_config, agent_model)``: the key of the price of those
    #: calls (``mem0.llm.pricing``) and the price, None when no price is known.
    own_model_price: Callable[[MemoryConfig, ModelConfig | None], tuple[str, Pricing | None]] | None = None
