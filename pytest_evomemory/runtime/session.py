"""The benchmark session: one engine, in parts, for every entry point.

``pytest --evomemory-config ...`` and ``evomemory run --config ...`` are two
drivers of one :class:`Session`; they behave alike, flag for flag, because every
decision is made by its parts, split as pytest-xdist splits its ``DSession``,
``WorkerInteractor`` and ``TerminalDistReporter``:

* the **plan** (:mod:`.plan`, :class:`~.plan.SessionPlan`): what runs where, built
  when the session opens: arms, run configs and their run directories, the resume
  plan, the shard, the replicates, the tasks and their order, the gain gates;
* the **stream driver** (:mod:`.driver`, :class:`~.driver.StreamDriver`): the side
  where episodes run (an xdist worker, the only pytest process, ``evomemory run``'s
  chains): streams, episodes, what becomes of a task that does not run, a worker's
  own stop;
* the **collector** (:mod:`.collector`, :class:`~.collector.Collector`): the side
  where results are written: the preflight (:mod:`.preflight`), records in, the
  stops, the end (summaries, comparison, gain gates, the :class:`~.outcome.Outcome`);
* what both sides change while the session runs (:mod:`.sessionstate`), and the
  model side every process shares: the endpoints' session directory and the cost
  cap (:mod:`.modelside`).

The terminal lines and the JSON report's block are rendered by the doors
(:mod:`..reporting.sessionlines`); the files made of the runs at the end are
written by the renderers a door passes in (:mod:`.reports`). The pytest plugin maps
this onto pytest's life cycle (items, fixtures, reports, xdist); :mod:`.serial`
runs it in one process. The session never imports pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..configs import resolve_run_config
from ..core.errors import ConfigError
from .collector import Collector
from .driver import RecordSink, StreamDriver
from .modelside import ModelSide
from .outcome import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_TASKS, EXIT_OK, EXIT_USAGE, Outcome
from .plan import SessionPlan, SessionSetup, Task
from .reports import Reports
from .run import prepare_finish
from .sessionstate import SessionState


class Session:
    """One benchmark session: its plan, its two sides and what they share. Build it
    with :meth:`open`; a driver uses :attr:`driver` where episodes run and
    :attr:`collector` where results are written (in one process, both)."""

    def __init__(self, plan: SessionPlan) -> None:
        self.plan = plan
        self.model = ModelSide(plan)
        self.state = SessionState(plan, self.model)
        self.driver = StreamDriver(plan, self.state)
        self.collector = Collector(plan, self.state, self.driver)

    @classmethod
    def open(
        cls, setup: SessionSetup, configs: Sequence[str] = (), configs_base: Path | None = None,
        *, reports: Reports,
    ) -> Session:
        """Resolve, load and check everything the command line names.

        ``configs`` are run configs a driver adds itself (the ``evomemory_config`` ini
        option, paths relative to ``configs_base``, the rootdir, or built-in names),
        used when the options name none. ``reports`` writes the pages the session
        makes of its runs (:mod:`.reports`; a door passes
        :data:`~..reporting.reports.REPORTS`). Raises :class:`ConfigError`
        for anything the user must fix (one line naming the file, key or option),
        before anything is written: a path the system refuses (too long, an I/O error)
        included.
        """
        try:
            resolved = [str(resolve_run_config(path, configs_base or setup.invocation_dir)) for path in configs]
            return cls(SessionPlan.open(setup, resolved, reports))
        except OSError as error:
            where = str(error.filename)[:200] if error.filename else "a path of the run"
            raise ConfigError(
                f"{where!r}: {error.strerror or error}; check the paths given in the options and the run "
                f"config (output directory, {setup.flags('compare')}, {setup.flags('resume')})"
            ) from None

    def load_finish_ahead(self) -> None:
        """Queue what the session's end needs (:func:`.run.prepare_finish`: the
        summary's and the comparison's models, the pages' modules) on the driver's
        load-ahead thread, behind what the episodes queued (:mod:`.ahead`). A driver
        calls it once its chains are under way and wait on the network: earlier, on
        two cores, it would take CPU from the start-up of the processes that run them
        (xdist's workers); left to the end, it falls between the last model reply and
        the session's end."""
        reports = self.plan.reports
        self.driver.ahead.add("finish", lambda: prepare_finish(reports))

    def release(self) -> None:
        """Unlock every run directory and close the shared directory and cost cap
        this process opened (the end of the process's part in the session)."""
        self.collector.release()


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_TASKS",
    "EXIT_OK",
    "EXIT_USAGE",
    "Outcome",
    "RecordSink",
    "Session",
    "SessionPlan",
    "SessionSetup",
    "Task",
]
