"""Which stimulus a model call answers, for providers that need to know.

A real endpoint sees only the conversation. The dry-run model (:mod:`.mock`) can
answer from a file keyed by task id, which the conversation does not hold; the
runtime names the stimulus here around each agent turn
(:meth:`~pytest_evomemory.runtime.stream.StreamRun.deliver`), and the mock
reads it. A context variable, because a session drives several chains at once:
each turn runs in one thread, and a variable set there is seen only there.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass


@dataclass(frozen=True)
class StimulusRef:
    """The stimulus of the current turn: its stream, task id and kind
    (``task``, ``feedback`` or ``ingestion``), and the memory tools the turn offers
    as ``(name, role)`` pairs: a request carries only a tool's name, and a memory's
    tools may have any names (Mem0's ``add``/``search``, an adapter's ``jot``), so
    the dry-run model calls them by the role the memory declared."""

    stream: str
    task_id: str
    kind: str
    memory_tools: tuple[tuple[str, str], ...] = ()


_CURRENT: ContextVar[StimulusRef | None] = ContextVar("evomemory_current_stimulus", default=None)


class answering:  # named as the function it replaced: ``with answering(stimulus):``
    """Name ``stimulus`` as the one every model call in the block answers.

    A class rather than a ``contextlib.contextmanager`` generator, which costs several
    times as much to enter and leave, twice an episode on every chain."""

    __slots__ = ("_stimulus", "_token")

    def __init__(self, stimulus: StimulusRef) -> None:
        self._stimulus = stimulus
        self._token: Token[StimulusRef | None] | None = None

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self._stimulus)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


def current_stimulus() -> StimulusRef | None:
    """The stimulus of the turn under way in this thread, ``None`` outside a turn."""
    return _CURRENT.get()


__all__ = ["StimulusRef", "answering", "current_stimulus"]
