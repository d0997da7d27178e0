"""What a session says on the terminal, as lines both entry points print alike.

The session composes its end-of-run report once (:class:`Line` objects with a
style); pytest writes them through its terminal reporter (colours, sections), the
``evomemory`` command prints them. Text that came from a model, a server or a data
file is made inert on the way (escape and control characters shown, not obeyed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..redaction import shown

Style = Literal["plain", "red", "green", "yellow"]


@dataclass(frozen=True)
class Line:
    text: str
    style: Style = "plain"
    bold: bool = False
    #: a section title (pytest draws it as ``=== title ===``), not a line of text
    section: bool = False

    @classmethod
    def of(cls, text: str, style: Style = "plain", *, bold: bool = False) -> Line:
        """A line of text that may quote what a model, server or file said."""
        return cls(shown(text), style, bold)


def memory_wait_line(stream: str, elapsed_s: float, factory: str, timeout_s: float) -> str:
    """What a driver shows while stream ``stream``'s memory factory has not returned
    (:func:`..memory.factory.open_with_timeout`'s ``on_wait``)."""
    return shown(
        f"evomemory: stream {stream!r}: still waiting for {factory} to open its memory ({elapsed_s:.0f} s; "
        f"given up at {timeout_s:g} s, the memory config's open_timeout_s)",
        one_line=True,
    )


def snapshot_fallback_line(stream: str, completed: int, newest: int, why: str) -> str:
    """What a resume says when stream ``stream``'s snapshot after ``completed``
    episodes is not trusted (``why``: its slot and what is wrong) and it continues
    from the newest intact one, after ``newest`` episodes (0: the stream's start)."""
    again = (
        f"episodes {newest + 1}-{completed} run again and replace their" if completed > newest + 1
        else f"episode {completed} runs again and replaces its"
    )
    start = f"the newest intact snapshot, after episode {newest}" if newest else "the stream's first task"
    return shown(
        f"evomemory: stream {stream!r}: the memory snapshot after episode {completed} is not restored "
        f"({why or 'it is missing'}); resuming from {start}: {again} earlier results",
        one_line=True,
    )


__all__ = ["Line", "Style", "memory_wait_line", "snapshot_fallback_line"]
