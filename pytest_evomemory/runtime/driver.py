"""The stream driver: the side of a session where episodes run.

As pytest-xdist's ``WorkerInteractor`` runs the tests a controller hands it, a
:class:`StreamDriver` opens the streams and runs the episodes of the process it is
in: an xdist worker, the only pytest process, or ``evomemory run``'s chains
(:mod:`.serial`). It decides what becomes of a task that does not run
(:mod:`.notrun`): a stream that could not start is one failure, carried by its first
task, and its other tasks are not run; a stream that stopped runs no more tasks; a
stream whose first build refused the session runs none and stops the driver. It
hands every record to a sink (the pytest report of the phase, or the collector) and
writes nothing itself. In a worker it also stops itself at the max errors counted
across workers, or once the cost cap is reached (:meth:`StreamDriver.stop_here`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..core.errors import EvoMemoryError, SessionRefused
from ..core.types import BenchmarkSample
from ..memory.snapshot import ResumeRefused, supports_snapshots
from ..models.identity import factory_reference
from ..rundocs import records as record_documents
from ..rundocs import wire
from ..rundocs.base import build_validators
from .ahead import LoadAhead
from .arm import Arm
from .lines import memory_wait_line
from .notrun import FailedStream, NotRun, stopped
from .plan import SessionPlan
from .preflight import memory_check, restored_count
from .records import Record, error_record, refusal_record, stream_error_record, stream_started_record
from .run import AgentFactoryFn, MemoryFactoryFn
from .sessionstate import SessionState
from .stream import Episode, StreamRun

RecordSink = Callable[[Record], None]


def _build_record_validators() -> None:
    build_validators(record_documents, wire)


class StreamDriver:
    """Streams and episodes for the process that runs them (see the module docstring)."""

    def __init__(self, plan: SessionPlan, state: SessionState) -> None:
        self.plan = plan
        self.state = state
        self._arm_of_stream: dict[int, Arm] = {}
        self._failed_here: set[tuple[str, str, str | None]] = set()
        #: what the episodes load at their first use, loaded while the first calls wait
        self.ahead = LoadAhead()

    def open_stream(
        self, key: str, sink: RecordSink, *,
        agent_factory: AgentFactoryFn | None = None, memory_factory: MemoryFactoryFn | None = None,
        notice: Callable[[str], None] | None = None, factories_from: str | None = None,
    ) -> StreamRun:
        """A stream's fresh memory and agent. A stream that cannot start is one
        stream failure (recorded once); its tasks are not run. ``notice`` gets, every
        few seconds, the line saying that the memory factory has not returned yet
        (:func:`..memory.factory.open_with_timeout`): a driver shows it at once.

        What the preflight could not know refuses the whole session here, while it has
        recorded nothing (in a worker, always: its controller decides, :meth:`refuse`):
        a factory's result that is not an Agent or a MemorySystem (``factories_from``
        names who gave the factories, e.g. a conftest fixture), a resumed memory that
        cannot restore its snapshot. :class:`SessionRefused` is raised, nothing recorded."""
        arm, name = self.plan.streams_by_key[key]
        timeout_s = arm.run_config.memory.open_timeout_s

        def on_wait(elapsed_s: float, factory: str) -> None:
            if notice is not None:
                notice(memory_wait_line(key, elapsed_s, factory, timeout_s))

        try:
            run = arm.benchmark.open_stream(
                name, agent_factory=agent_factory, memory_factory=memory_factory, snapshots=self.plan.setup.writes
                or self.plan.setup.worker, on_wait=on_wait, factories_from=factories_from,
                check_memory=memory_check(
                    self.plan, arm, agent_factory is None, _given_by(memory_factory, factories_from)
                ),
            )
            self._check_restorable(arm, run)
        except (SessionRefused, ResumeRefused) as error:
            message = self.plan.said(
                f"{self.plan.flags('resume')} {arm.run_dir}: {error}" if isinstance(error, ResumeRefused) else error
            )
            if self.plan.setup.worker or not self.plan.started:
                self.state.refused = self.state.refused or message
                if self.plan.setup.worker:  # the controller decides (refuse)
                    sink(refusal_record(key, message))
                raise SessionRefused(message) from None
            reason = f"stream {name!r} could not start: {message}"
            self.state.failed_streams[key] = reason
            sink(stream_error_record(name, reason, phase="start").for_arm(arm.prefix))
            raise
        except EvoMemoryError as error:
            reason = self.plan.said(f"stream {name!r} could not start: {error}")
            self.state.failed_streams[key] = reason
            sink(stream_error_record(name, reason, phase="start").for_arm(arm.prefix))
            raise
        self._arm_of_stream[id(run)] = arm
        sink(stream_started_record(name, run.identity).for_arm(arm.prefix))
        self._load_ahead(run)
        return run

    def _load_ahead(self, run: StreamRun) -> None:
        """Queue what this stream's episodes will load at their first use: its memory
        backend's late imports, then the records' validators (:mod:`.ahead`)."""
        backend = run.memory.backend if run.memory is not None else None
        load = getattr(type(backend), "load_ahead", None)
        if callable(load):
            self.ahead.add(("memory", type(backend)), load)
        self.ahead.add("records", _build_record_validators)

    def start_stream(
        self, key: str, sink: RecordSink, *,
        agent_factory: AgentFactoryFn | None = None, memory_factory: MemoryFactoryFn | None = None,
        notice: Callable[[str], None] | None = None, factories_from: str | None = None,
    ) -> StreamRun | FailedStream:
        """:meth:`open_stream` for a driver, with the start-up heap paused: a stream
        that could not start (recorded once), or whose first build refused the session,
        comes back as a :class:`FailedStream`, whose tasks :meth:`start_task` does not run."""
        try:
            with self.plan.setup.heap.paused():
                return self.open_stream(
                    key, sink, agent_factory=agent_factory, memory_factory=memory_factory, notice=notice,
                    factories_from=factories_from,
                )
        except EvoMemoryError as error:
            failure = self.state.failed_streams.get(key)
            if failure is None:  # not recorded as this stream's failure: it refused the session
                return FailedStream(key, self.plan.said(error), refused=True)
            return FailedStream(key, failure)

    def start_task(
        self, live: StreamRun | FailedStream, sample: BenchmarkSample, sink: RecordSink,
        first_position: int | None = None,
    ) -> Episode | NotRun:
        """The episode of ``sample`` (:meth:`episode`), or why it does not run: its
        stream could not start, refused the session, or stopped (:mod:`.notrun`)."""
        if isinstance(live, FailedStream):
            return live.next_task(sample.stream)
        arm = self._arm_of_stream.get(id(live), self.plan.baseline)
        if arm.key(sample.stream) in self.state.failed_streams:
            return stopped(sample.stream)
        try:
            return self.episode(live, sample, sink, first_position)
        except EvoMemoryError as error:
            return stopped(sample.stream, self.plan.said(error))

    def _check_restorable(self, arm: Arm, run: StreamRun) -> None:
        """A resumed stream's memory, just built, must be able to restore its snapshot
        (snapshot/restore, the same memory system as the one that saved it)."""
        if run.memory is None or arm.run.resume is None:
            return
        stream = arm.benchmark.by_name[run.stream]
        snapshots = arm.benchmark.snapshots(run.stream)
        count = restored_count(stream, arm.run.completed_before(run.stream), snapshots)
        if count is None:
            return
        try:
            snapshots.restorable(run.memory.backend, count)
        except ResumeRefused:
            try:
                run.memory.close()  # never reset: the store is the interrupted run's
            except Exception:
                pass  # the refusal is what the user needs to hear
            raise

    def refuse(self, key: str, message: str) -> list[Record]:
        """A worker's stream refused the session at its first build (:meth:`open_stream`,
        its :class:`RefusalRecord`): the session is refused (nothing to record) while it
        has recorded nothing; once results are recorded, that stream could not start
        (its record is returned)."""
        if self.state.refused is not None or not self.plan.started:
            self.state.refused = self.state.refused or message
            return []
        found = self.plan.streams_by_key.get(key)
        arm, name = found if found is not None else (self.plan.baseline, key)
        reason = f"stream {name!r} could not start: {message}"
        self.state.failed_streams[key] = reason
        return [stream_error_record(name, reason, phase="start").for_arm(arm.prefix)]

    def close_stream(self, run: StreamRun | FailedStream, sink: RecordSink) -> None:
        """Stream teardown; a failure is charged to this stream (and arm), not to
        whichever task happens to be running when the stream is torn down."""
        if isinstance(run, FailedStream):
            return  # nothing was built
        arm = self._arm_of_stream.pop(id(run), self.plan.baseline)
        try:
            run.close()
        except EvoMemoryError as error:
            sink(stream_error_record(run.stream, self.plan.said(f"stream teardown failed: {error}")).for_arm(arm.prefix))

    def episode(
        self, run: StreamRun, sample: BenchmarkSample, sink: RecordSink, first_position: int | None = None
    ) -> Episode:
        """The episode of ``sample``; before the first one this process runs in the
        stream, the memory is prepared (emptied, or restored for a resumed or
        taken-over stream; a conversation stream ingests its conversation, or
        restores the snapshot that holds it). A memory that cannot be prepared
        stops the stream."""
        arm = self._arm_of_stream.get(id(run), self.plan.baseline)
        if not run.prepared:
            try:
                run.prepare_memory(  # a conversation's ingestion turns are recorded with this episode
                    self._completed_before(arm, run, sample, first_position),
                    lambda record: sink(record.for_arm(arm.prefix)),
                )
            except EvoMemoryError as error:
                run.broken = self.plan.said(error)
                reason = f"stream {sample.stream!r} cannot continue: {run.broken}"
                self.state.failed_streams[arm.key(sample.stream)] = reason
                sink(stream_error_record(sample.stream, reason, phase="start").for_arm(arm.prefix))
                raise
        return Episode(run, sample, lambda record: sink(record.for_arm(arm.prefix)))

    def _completed_before(
        self, arm: Arm, run: StreamRun, sample: BenchmarkSample, first_position: int | None
    ) -> int | None:
        """How many episodes of the stream precede the first one this process runs.

        ``None`` for a stream starting from its first selected task. On resume, the
        interrupted run's completed prefix. In an xdist worker that takes over a
        stream whose worker died (its first task here is not the stream's first),
        the latest memory snapshot saved at or before this task: the crashed task
        itself is a failed episode and its memory operations are gone with it.
        """
        resumed = arm.run.completed_before(sample.stream)
        taking_over = self.plan.setup.worker and first_position is not None and sample.position > first_position
        if not taking_over:
            return resumed
        if run.snapshots is None or run.memory is None or not supports_snapshots(run.memory.backend):
            return sample.position  # refused by prepare_memory: nothing to restore from
        saved = [count for count in run.snapshots.completed_prefixes() if count <= sample.position]
        return max(saved, default=0)

    def failed_task(self, key: str, sample: BenchmarkSample, reason: str) -> Record:
        """The record of a task that failed outside its episode (:meth:`setup_failed`, :meth:`.Collector.crashed`)."""
        found = self.plan.streams_by_key.get(key)
        arm = found[0] if found is not None else self.plan.baseline
        return error_record(sample, reason).for_arm(arm.prefix)

    def setup_failed(self, key: str, sample: BenchmarkSample, records: Sequence[Record], reason: str) -> list[Record]:
        """A task whose setup failed before its episode ran (pytest: a user's fixture)
        is a failed episode, unless ``records``, what the session recorded of it, say
        so already (its stream could not start, its episode failed)."""
        if any(getattr(record, "scored", None) is not None or record.failed_episode for record in records):
            return []
        return [self.failed_task(key, sample, reason or "its setup failed")]

    def stop_here(self, records: Sequence[Record], *, task_over: bool) -> str | None:
        """In a worker, why it stops itself, if it must: the controller's stop reaches
        a worker only after its whole stream ran. Its new failed episodes are added to
        the session's shared count, which reached the max errors; or, once a task is
        over, a process of the session refused a model call for the cost cap."""
        if self._count_failures_here(records):
            return f"failed episodes reached {self.plan.flags('max-errors')}"
        return self.state.cost_stop() if task_over else None

    def _count_failures_here(self, records: Sequence[Record]) -> bool:
        """Add this process's new failed episodes to the shared count; True once the
        total reaches the max errors."""
        if self.state.shared_errors is None or self.plan.max_errors is None:
            return False
        failed = {
            (record.arm or "", *episode) for record in records
            if (episode := record.failed_episode) is not None and episode[1] is not None
        } - self._failed_here
        self._failed_here |= failed
        total = self.state.shared_errors.add(len(failed)) if failed else self.state.shared_errors.read()
        return total >= self.plan.max_errors


def _given_by(memory_factory: MemoryFactoryFn | None, factories_from: str | None) -> str | None:
    """Who built a stream's memory when the memory config did not (a conftest fixture):
    a refusal names it instead of the memory config it did not come from."""
    if memory_factory is None:
        return None
    by = f" (from {factories_from})" if factories_from else ""
    return f"memory factory {factory_reference(memory_factory)}{by}"


__all__ = ["RecordSink", "StreamDriver"]
