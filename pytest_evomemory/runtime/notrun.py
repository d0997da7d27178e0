"""Tasks that do not run, and why: one decision for both drivers.

A stream that cannot start is one failure, recorded once by the session
(:meth:`~.driver.StreamDriver.open_stream`), not one per task: its first task carries the
failure (pytest fails that test with the reason, so a test run shows the failure
where it happened; ``evomemory run`` has no test to fail) and its other tasks are not
run, saying why. A stream whose memory cannot be prepared stops the same way, at the
task where it did. A stream whose first build refused the whole session
(:class:`~..core.errors.SessionRefused`, before any result is recorded) runs no task and
fails none: the driver stops and the session is refused (exit 4).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotRun:
    """A task that does not run (:meth:`~.driver.StreamDriver.start_task`)."""

    #: why, in the words of a task that is not run (pytest's skip reason)
    reason: str
    #: the failure this task carries for its stream (the first of its tasks not to run
    #: in this process); None for the others
    failure: str | None = None
    #: the whole session is refused: the driver stops; ``failure`` is the refusal
    refused: bool = False


@dataclass
class FailedStream:
    """A stream that could not start, in place of its run (:meth:`~.driver.StreamDriver.start_stream`)."""

    key: str
    #: the stream's failure as recorded, or the refusal
    reason: str
    refused: bool = False
    #: a task of this stream carried its failure already (in this process)
    carried: bool = False

    def next_task(self, stream: str) -> NotRun:
        """What becomes of this stream's next task: the first carries the failure."""
        failure, self.carried = (None if self.carried else self.reason), True
        if self.refused:
            return NotRun("not run: the evomemory session is refused (see its error)", failure, refused=True)
        return NotRun(f"not run: stream {stream!r} could not start (see its first task)", failure)


def stopped(stream: str, failure: str | None = None) -> NotRun:
    """A task of a stream that stopped (its memory could not be prepared): the task
    where it did carries ``failure``, the others are not run."""
    return NotRun(f"not run: stream {stream!r} stopped (see the task where it did)", failure)


__all__ = ["FailedStream", "NotRun", "stopped"]
