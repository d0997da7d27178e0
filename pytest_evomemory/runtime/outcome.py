"""How a session ended, and the exit status that means for either driver."""

from __future__ import annotations

from dataclasses import dataclass

#: Exit statuses, pytest's: the CLI returns them, and the plugin sets them on pytest's
#: session where the benchmark's verdict differs from pytest's own (:meth:`Outcome.exit_status`).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 2
EXIT_USAGE = 4
#: pytest's "no tests collected"; a run with nothing left to run may still be complete.
EXIT_NO_TASKS = 5


@dataclass
class Outcome:
    """How a session ended, and the exit status that means for either driver."""

    failed: bool = False
    interrupted: bool = False
    stopped: str | None = None
    ran: bool = False
    #: running nothing completes the run: a resume of a run whose every task is done,
    #: a shard that holds no cell (its empty run is complete)
    complete_when_empty: bool = False
    #: why the session was refused at a stream's first build (nothing was written)
    refused: str | None = None

    def exit_status(self, driver: int = EXIT_OK) -> int:
        """The exit status of the session, given the driver's own: pytest's (its tests
        failed, it was interrupted, it collected nothing), or ``EXIT_OK`` for
        ``evomemory run``, which has none. The driver's failure stands; otherwise an
        interrupted or stopped session is resumable (2), a failed one (a gate missed, a
        failed episode) is 1, and a run with nothing left to run exits as that run. A
        refused session is a usage error (4), whatever the driver says."""
        if self.refused is not None:
            return EXIT_USAGE
        if driver not in (EXIT_OK, EXIT_NO_TASKS):
            return driver
        if self.interrupted or self.stopped:
            return EXIT_INTERRUPTED
        if self.failed:
            return EXIT_FAILED
        return EXIT_OK if driver == EXIT_NO_TASKS and self.complete_when_empty else driver


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NO_TASKS", "EXIT_OK", "EXIT_USAGE", "Outcome"]
