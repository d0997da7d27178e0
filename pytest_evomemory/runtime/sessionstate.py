"""What both sides of a running session change: its stops and its refusal.

The stream driver (:mod:`.driver`, where episodes run) and the collector
(:mod:`.collector`, where records are written) are one process's two halves in a
serial run or a pytest run without xdist, and each other's only link there: a
stream that could not start is not run again, a stop reason ends every chain, a
refusal at a stream's first build refuses the session. In an xdist run each process
has its own state, and records carry what the controller must know.
"""

from __future__ import annotations

import threading

from ..rundir import SharedErrorCount
from .modelside import ModelSide
from .plan import SessionPlan
from .signals import Termination


class SessionState:
    """The session's stops, its refusal and its failed streams, shared by its sides."""

    def __init__(self, plan: SessionPlan, model: ModelSide) -> None:
        self.plan = plan
        self.model = model
        #: SIGTERM's handling while the session runs (the drivers install it)
        self.termination = Termination()
        self.stop_reason: str | None = None
        #: where records enter the session (:meth:`.Collector.add_records`), from any thread
        self.intake = threading.RLock()
        self.intake_closed = False
        #: records being written now, each under its arm's lock (outside ``intake``)
        self._writing = 0
        self._written = threading.Condition(self.intake)
        #: Ctrl-C or SIGTERM reached the driver (:meth:`.Collector.interrupt`)
        self.interrupting = False
        #: stream keys that could not start: their remaining tasks are not run
        self.failed_streams: dict[str, str] = {}
        #: why the whole session was refused at a stream's first build (exit 4, nothing written)
        self.refused: str | None = None
        #: failed episodes counted across xdist workers (with max errors)
        self.shared_errors = SharedErrorCount(plan.run_dir) if plan.max_errors is not None else None

    def stop(self, reason: str) -> None:
        """Keep the first reason to stop the session."""
        with self.intake:
            self.stop_reason = self.stop_reason or reason

    def writes_begin(self) -> None:
        """A call of :meth:`.Collector.add_records` starts writing (``intake`` held)."""
        self._writing += 1

    def writes_end(self) -> None:
        """That call's writing is over (``intake`` held)."""
        self._writing -= 1
        if not self._writing:
            self._written.notify_all()

    def wait_for_writes(self) -> None:
        """Until no record is being written: the intake closes, or the session
        finishes, only once every write in progress is whole."""
        with self.intake:
            self._written.wait_for(lambda: not self._writing)

    def cost_stop(self) -> str | None:
        """Once any process of the session refused a model call for the cost cap, why
        (kept as the session's stop reason: the run ends incomplete and resumable)."""
        reason = self.model.stop_reason
        if reason is not None:
            reason = self.plan.said(reason)
            self.stop(reason)
        return reason


__all__ = ["SessionState"]
