"""The lines the engine says while a session runs, as both entry points print them.

A memory factory that has not returned yet, a resumed stream whose newest memory
snapshot is not trusted: one line each, redacted and inert, worded here once. The
session's other lines (its header, its end) are rendered by the doors
(:mod:`..reporting.sessionlines`).
"""

from __future__ import annotations

from ..util.redaction import shown


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


__all__ = ["memory_wait_line", "snapshot_fallback_line"]
