"""The collector: the side of a session where results are written.

As pytest-xdist's ``DSession`` receives every report on the controller, a
:class:`Collector` is where a session's records arrive (from a pytest report, a
worker's included, or straight from ``evomemory run``'s chains): before any task it
refuses what would fail every stream (:mod:`.preflight`) and takes the run
directories; then it routes each record to its arm's run, turns a record that never
came into a failed episode (a task whose process died), says when to stop (max
errors, a run directory that can no longer be written, the cost cap reached, the
driver's own stop, an interrupt), and finishes the session: each arm's summary,
thresholds and report, the comparison of the arms (written by the door's
:class:`~.reports.Reports`), the gain gates, and the :class:`~.outcome.Outcome`.
What the terminal shows of it the doors render (:mod:`..reporting.sessionlines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ReportError
from ..rundir import RunDirError, remove_claims, write_arms_manifest
from ..rundocs.records import CRASHED
from .arm import Arm
from .driver import StreamDriver
from .outcome import Outcome
from .plan import SessionPlan
from .preflight import check_before_tasks
from .records import Record, RefusalRecord
from .replicates import replicate_groups
from .sessionstate import SessionState
from .signals import shield_interrupts

if TYPE_CHECKING:
    from ..analysis.gain import GainResult
    from ..rundocs.compare import Comparison


class Collector:
    """Records in, stops and the end, for the process that writes (see the module docstring)."""

    def __init__(self, plan: SessionPlan, state: SessionState, driver: StreamDriver) -> None:
        self.plan = plan
        self.state = state
        #: the refusals and crashed tasks a worker's records report are the stream driver's to word
        self.driver = driver
        self.comparison: dict[str, Any] | None = None
        #: :attr:`comparison` as its model (the terminal's lines and the gain gates read it)
        self.comparison_model: Comparison | None = None
        self.comparison_files: tuple[Path, Path] | None = None
        self.comparison_error: str | None = None
        #: a repeated session's comparison across replicates (replicates.json)
        self.replicate_comparison: dict[str, Any] | None = None
        self.replicate_files: list[Path] = []
        self.gain_results: list[GainResult] = []
        self._manifest_written = False
        self._created_dirs: list[Path] = []
        #: each arm by the name its records carry (a record without one is the baseline's)
        self._arms_by_name = {arm.name: arm for arm in plan.arms}
        self._arm_order = {arm.name: index for index, arm in enumerate(plan.arms)}
        #: the session's failed episodes, every arm's, and the arms whose writer failed
        #: (in arm order), kept as each arm's records are written: the stop is checked
        #: after every record, and summing every arm's count then cost O(arms) a record
        self._errors = 0
        self._arm_errors: dict[str, int] = {}
        self._failed_writers: list[Arm] = []

    # ----- before any task

    def preflight(self, *, builtin_agent: bool = True, builtin_memory: bool = True) -> None:
        """Refuse, before any task, what would fail every stream or be silently
        ignored (:func:`.preflight.check_before_tasks`); then take the run directories.
        ``builtin_*``: whether the built-in factory builds that part (a user's own
        factory may read any option and put its state anywhere)."""
        check_before_tasks(self.plan, builtin_agent=builtin_agent, builtin_memory=builtin_memory)
        self._claim()

    def _claim(self) -> None:
        """Take the run directories for this session: only once every check passed,
        so a refused session leaves nothing behind (not even an empty directory)."""
        if not self.plan.setup.writes:
            return
        for arm in self.plan.arms:
            # the directories the lock will create, innermost first
            self._created_dirs += [path for path in (arm.run_dir, *arm.run_dir.parents) if not path.exists()]
            arm.run.lock()
        if self.state.shared_errors is not None:
            self.state.shared_errors.clear()  # before any worker starts

    @property
    def refused(self) -> str | None:
        """Why the session was refused at a stream's first build (nothing was written)."""
        return self.state.refused

    # ----- records (the process that writes)

    def crashed(self, key: str, task_id: str, details: str) -> list[Record]:
        """A task whose process died while it ran (an xdist worker crash: the driver
        received no record of it) is a failed episode, named by the last line of the
        driver's ``details``; nothing for a task this session does not have."""
        found = self.plan.sample_of(key, task_id)
        if found is None:
            return []
        lines = [line.strip() for line in details.strip().splitlines() if line.strip()]
        return [self.driver.failed_task(key, found[1], f"{CRASHED}: {lines[-1] if lines else 'no details'}")]

    def add_records(self, records: Sequence[Record]) -> str | None:
        """Route records to their arms' runs; the reason to stop the session, if any
        (max errors reached, a run directory that can no longer be written, the cost
        cap reached by any process of the session). A worker's refusal refuses the
        session or fails its stream (:meth:`.StreamDriver.refuse`); a refused session records nothing.
        Thread-safe: ``evomemory run``'s chains hand their records in from their own
        threads. The session's decisions (the refusal, the manifest, the stops and
        their counts) are taken under the session's small lock (``state.intake``);
        the writing of an arm's records under that arm's own lock only
        (:attr:`.Arm.lock`), so chains of different arms write at once, and the
        records of one stream, handed in by its one chain in order, stay in order."""
        with self.state.intake:
            if self.state.intake_closed:
                return self.state.stop_reason or "the session is over"
            records = self._received(records)
            if self.state.refused is not None:
                return "the session is refused"
            if not records:  # a call refused for the cost cap leaves no record (its task runs on resume)
                return self.state.cost_stop()
            if not self._manifest_written and self.plan.several:
                with self.state.termination.critical():
                    refused = self._write_manifest()
                if refused is not None:  # before the first record: the session records nothing
                    self.state.refused = self.state.refused or refused
                    return "the session is refused"
            self.state.writes_begin()
        written: list[Arm] = []
        try:
            with self.state.termination.critical():
                for arm, mine in self._by_arm(records):
                    with arm.lock:
                        try:
                            arm.add(mine)
                        finally:
                            written.append(arm)
        finally:
            with self.state.intake:
                self.state.writes_end()
                self._count(written)
                stop = self._check_stop()
        return stop

    def _by_arm(self, records: Sequence[Record]) -> list[tuple[Arm, list[Record]]]:
        """``records`` grouped by the arm they name (one without a name is the
        baseline's; one naming no arm of the session is dropped), in arm order, each
        arm's in the order given; looked up by name, not by asking every arm."""
        baseline = self.plan.baseline.name
        mine: dict[str, list[Record]] = {}
        for record in records:
            name = record.arm or baseline
            if name in self._arms_by_name:
                mine.setdefault(name, []).append(record)
        return [(self._arms_by_name[name], mine[name]) for name in sorted(mine, key=self._arm_order.__getitem__)]

    def _count(self, written: Sequence[Arm]) -> None:
        """Bring the session's failed-episode count and failed writers up to date with
        the arms whose records were just written (``intake`` held): an arm's count and
        its writer change only while its records are written (its run starts then
        too, a resumed one with its earlier failures)."""
        for arm in written:
            errors = arm.run.errors
            self._errors += errors - self._arm_errors.get(arm.name, 0)
            self._arm_errors[arm.name] = errors
            writer = arm.run.writer
            if writer is not None and writer.failure is not None and arm not in self._failed_writers:
                self._failed_writers.append(arm)
                self._failed_writers.sort(key=lambda failed: self._arm_order[failed.name])

    def _received(self, records: Sequence[Record]) -> list[Record]:
        """The records to write: a worker's refusal becomes what the driver makes of it."""
        received: list[Record] = []
        for record in records:
            if isinstance(record, RefusalRecord):
                received += self.driver.refuse(record.refusal.key, record.refusal.message)
            else:
                received.append(record)
        return received

    def _check_stop(self) -> str | None:
        """The reason to stop after a call's records (``intake`` held): O(1) in the
        arms, from the counts :meth:`_count` keeps."""
        for arm in self._failed_writers:
            writer = arm.run.writer
            # a finished arm's failure is its own (its summary says so), not the session's stop
            if writer is not None and writer.failure is not None and not arm.finished:
                self.state.stop_reason = self.state.stop_reason or f"the results could not be written: {writer.failure}"
                return self.state.stop_reason
        if self.state.cost_stop() is not None:
            return self.state.stop_reason
        if self.plan.max_errors is None:
            return None
        errors = self._errors
        if errors >= self.plan.max_errors:
            self.state.stop_reason = f"{errors} failed episodes reached {self.plan.flags('max-errors')}"
            return self.state.stop_reason
        return None

    def _write_manifest(self) -> str | None:
        """Before the first record: an interrupted session can then be resumed whole.
        The line saying why it could not be written (a full disk, a read-only or
        vanished directory), or None."""
        self._manifest_written = True
        try:
            write_arms_manifest(
                self.plan.comparison_dir,
                [(arm.name, arm.run_dir, str(arm.run_config.path)) for arm in self.plan.arms],
                self.plan.options.settings,
                self.plan.session_id,
                repeats=self.plan.options.repeats,
            )
        except RunDirError as error:
            return str(error)
        return None

    def stop(self, reason: str) -> None:
        """The driver's own reason to stop (pytest's ``-x``, a ``shouldstop``)."""
        self.state.stop(reason)

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM reached the driver: no chain starts another task."""
        self.state.interrupting = True

    def close_intake(self) -> None:
        """The driver stopped waiting for its chains (a second Ctrl-C): a record that
        arrives later is not taken (its task runs again on resume), so nothing is
        written while the session finishes."""
        with self.state.intake:
            self.state.intake_closed = True
        self.state.wait_for_writes()

    # ----- the end

    def finish_early(self, arm: Arm, wall_seconds: float) -> bool:
        """Finish ``arm`` now, on a chain's thread once its last chain ended
        (``evomemory run``'s chains at once), while other arms' chains still run:
        whether it did. Only what :meth:`finish` would write for it at the session's
        end: one of several arms (its summary never takes the session's stop: the
        arm is complete), every planned task of it run, and nothing stopping,
        interrupting or refusing the session. ``wall_seconds``: the time from the
        session's first chain to the end of this arm's last (summary.json's
        ``wall_seconds``). Never on the main thread: Ctrl-C would cut it, where the
        session's own finish shields it (:func:`.signals.shield_interrupts`)."""
        state = self.state
        with state.intake:
            if (
                arm.prefix is None or not arm.started or state.refused is not None or state.stop_reason
                or state.interrupting or state.intake_closed or state.termination.finishing
            ):
                return False
        with state.termination.critical(), arm.lock:  # a SIGTERM now is raised once the summary is written
            if arm.finished or not arm.run.completion().complete:
                return False
            arm.run.extra["wall_seconds"] = wall_seconds
            arm.finish(None, self.plan.reports, compared=self._compares)
        return True

    @property
    def _compares(self) -> bool:
        """Whether this session compares its arms at its end (a shard leaves it to the merge)."""
        return self.plan.several and not self.plan.deferred_comparison

    def finish(self, *, interrupted: bool = False) -> Outcome:
        """Every arm's summary, thresholds and report, the comparison and its gates;
        for a refused session, nothing (it wrote nothing, and exits 4). From here on
        Ctrl-C and SIGTERM are ignored until the driver has printed everything
        (:func:`.signals.shield_interrupts`): the summary is never cut in half."""
        self.state.termination.finishing = True
        shield_interrupts()
        self.state.wait_for_writes()  # an arm's records still being written (by a chain given up on)
        if self.state.refused is not None:
            return Outcome(interrupted=interrupted, refused=self.state.refused)
        stop_reason = self.state.stop_reason
        if interrupted and stop_reason is None:
            stop_reason = "terminated by SIGTERM" if self.state.termination.terminated else "interrupted (Ctrl-C)"
        for arm in self.plan.arms:
            with arm.lock:  # an arm finishing early on a chain's thread ends first
                if not arm.finished:
                    arm.finish(stop_reason, self.plan.reports, compared=self._compares)
        failed = any(arm.failed for arm in self.plan.arms)
        result = self.plan.baseline.result
        if self.plan.compare_dir is not None and result is not None and result.write_failure is None:
            try:
                self.plan.reports.comparison(
                    [self.plan.compare_dir, self.plan.run_dir], self.plan.run_dir / "compare.html"
                )
            except ReportError as error:
                result.report_error = str(error)
                failed = True
        if self.plan.several and self.plan.started and (deferred := self.plan.deferred_comparison):
            # the merge compares; the arms' manifest still says what the merge reads
            self.comparison_error = f"no comparison here: {deferred}; 'evomemory merge' of the shards compares the arms"
            if not self._manifest_written and self.plan.setup.writes:
                unwritten = self._write_manifest()
                if unwritten is not None:  # the arms' runs are written: the merge lacks their list
                    self.comparison_error = unwritten
                    failed = True
        elif self.plan.several and self.plan.started:
            failed = self._compare() or failed
        if self.state.shared_errors is not None and self.plan.setup.writes:
            self.state.shared_errors.clear()
        return Outcome(
            failed=failed or any(arm.cut_short for arm in self.plan.arms),
            interrupted=interrupted,
            stopped=stop_reason,
            ran=self.plan.started,
            complete_when_empty=self.plan.started and (self.plan.resuming or self.plan.empty_shard),
        )

    def _compare(self) -> bool:
        """Write the arms' comparison and judge the gain gates on it; True when the
        session fails. A repeated session compares across its replicates: replicate by
        replicate, the arms' paired comparison (``compare-r<i>.html`` / ``.json``, when
        there are several arms), and each arm's mean figure and mean paired difference
        with their intervals (``replicates.json``)."""
        reports = self.plan.reports
        ran = [arm for arm in self.plan.arms if arm.result is not None and arm.result.write_failure is None]
        if len(ran) < len(self.plan.arms):
            missing = ", ".join(arm.name for arm in self.plan.arms if arm not in ran)
            self.comparison_error = f"no comparison: arm(s) {missing} ran no task or could not write their results"
            return bool(self.plan.gains)
        model: Comparison | None = None  # a single comparison's, built before it was written
        try:
            if self.plan.replicates is not None:
                replicates = reports.replicate_comparison(
                    replicate_groups((arm.run_config.name, arm.run_dir) for arm in ran), self.plan.comparison_dir
                )
                document = self.replicate_comparison = dict(replicates.document)
                self.replicate_files = list(replicates.paths)
            else:
                files = reports.comparison(
                    [arm.run_dir for arm in ran], self.plan.comparison_dir / "compare.html", [arm.name for arm in ran]
                )
                document = self.comparison = dict(files.document)
                model = self.comparison_model = files.model
                self.comparison_files = (files.html, files.json)
        except (ReportError, OSError) as error:
            self.comparison_error = f"the comparison could not be written: {error}"
            return True
        if not self.plan.gains:
            return False  # no gate: the document just written is not read again
        complete = all(arm.result is not None and arm.result.complete for arm in ran)
        # the gates (and the comparison's documents they read) load here, at the end:
        # every process that runs streams imports this module before its first call
        from ..analysis.gain import check_gains, check_replicate_gains

        if model is None:
            self.gain_results = check_replicate_gains(document, self.plan.gains, complete=complete)
        else:  # the model the comparison was built as: not validated again from its document
            self.gain_results = check_gains(model, self.plan.gains, complete=complete)
        return any(not result.met for result in self.gain_results)

    def release(self) -> None:
        """Unlock every run directory and close the shared directory and cost cap
        this process opened (the end of the process's part in the session)."""
        for arm in self.plan.arms:
            arm.run.release()
        if self.state.refused is not None:
            remove_claims(self._created_dirs)
        self.state.model.close()


__all__ = ["Collector"]
