"""The benchmark session: everything a session decides, for every entry point.

``pytest --evomemory-config ...`` and ``evomemory run --config ...`` are two
drivers of one :class:`Session`; they behave alike, flag for flag, because every
decision is made here:

* which arms run (one per run config; a resumed session's own), from which
  configs, with which overrides, into which run directories;
* the resume plan (what each arm's interrupted run completed, and the memory
  snapshot each resumed stream continues from);
* which share of the streams a shard runs (``shard`` I/N, :mod:`.shards`: each
  arm's run of a stream stays in one shard; with ``shard-by`` stream, every arm's
  run of it) and the plan it records;
* what is refused before the first task (exit 4, nothing written): unknown arms,
  options nothing reads, a missing optional library, two arms sharing one memory
  store, a resume of another config, a resume whose memory snapshot is missing or
  damaged; and, when a stream's parts are first built (before any result is
  recorded), a factory whose result is not an Agent or a MemorySystem and a resumed
  memory that cannot restore (:class:`~..errors.SessionRefused`);
* the model side every process shares: the session directory of the endpoints'
  connection slots and 429 backoff, and the cost cap (``max-cost``) with its stop;
* repeats: each run config as N replicates, arms of their own that differ only in
  their seed (:mod:`.replicates`), compared across replicates at the end;
* where each record goes (its arm's run), the max-errors stop, a write failure's
  stop, and how the session ended: each arm's summary, thresholds and report, the
  comparison of the arms and its gain gates, the terminal lines, the JSON block a
  dashboard reads and the exit status.

The pytest plugin maps this onto pytest's life cycle (items, fixtures, reports,
xdist); :mod:`.serial` runs it in one process. The session never imports pytest.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import RunConfig
from ..configload import load_run_config
from ..configs import resolve_run_config
from ..errors import ConfigError, EvoMemoryError, SessionRefused
from ..factories import load_factory
from ..heap import StartupHeap
from ..identity import configured_model, describe_model, factory_reference, run_identity
from ..memory.base import MemoryContext
from ..memory.factory import backend_spec
from ..memory.snapshot import ResumeRefused, StreamSnapshots, supports_snapshots
from ..models.budget import (
    CostGuard,
    activate_cost_guard,
    active_cost_guard,
    close_spend_file,
    inherited_spend_file,
    open_spend_file,
)
from ..models.limits import close_session_directory, open_session_directory, session_directory
from ..options import SHARD_UNITS, Flags, SessionOptions, render
from ..redaction import redact_strings
from ..rundir import (
    RUN_DOCUMENT,
    SCHEMA_VERSION,
    SIDE_RUN,
    Placement,
    ResumeSource,
    ResumeState,
    SharedErrorCount,
    load_resume_state,
    place_problem,
    read_resume_source,
    remove_claims,
    started_by,
    with_recorded,
    write_arms_manifest,
)
from ..rundocs import Score, ShardThresholds, StreamMinimum, Summary
from ..rundocs.compare import as_comparison, as_replicates
from ..rundocs.report import JsonReport, ReportArm, ReportIdentity
from ..rundocs.summary import Replicate
from ..streams import Stream
from ..streams.provenance import provenance_line
from ..text import inert
from ..types import BenchmarkSample
from . import ingestion
from .arm import Arm, check_arm_names
from .capabilities import Need, declared_class, memory_needs, missing
from .gates import thresholds_for_arms
from .lines import Line, memory_wait_line, snapshot_fallback_line
from .notrun import FailedStream, NotRun, stopped
from .records import (
    Record,
    RefusalRecord,
    StreamErrorRecord,
    error_record,
    refusal_record,
    stream_error_record,
    stream_started_record,
)
from .replicates import base_configs, expand_replicates, replicate_groups, replicate_seeds
from .run import (
    AgentFactoryFn,
    BenchmarkRun,
    MemoryFactoryFn,
    Run,
    check_builtin_parts,
    effective_thresholds,
)
from .shards import ShardPlan, check_shard_dir, plan_shards, session_cells, session_fingerprint
from .signals import Termination, shield_interrupts
from .stream import Episode, StreamRun

if TYPE_CHECKING:
    from ..analysis.gain import GainResult, GainThreshold

RecordSink = Callable[[Record], None]

#: Exit statuses, pytest's: the CLI returns them, and the plugin sets them on pytest's
#: session where the benchmark's verdict differs from pytest's own (:meth:`Outcome.exit_status`).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 2
EXIT_USAGE = 4
#: pytest's "no tests collected"; a run with nothing left to run may still be complete.
EXIT_NO_TASKS = 5


@dataclass(frozen=True)
class SessionSetup:
    """What a driver tells a session about itself."""

    options: SessionOptions
    flags: Flags
    #: relative paths on the command line are relative to this directory
    invocation_dir: Path
    command: tuple[str, ...] = ()
    #: the process that writes the run directories (not an xdist worker, not --collect-only)
    writes: bool = True
    #: an xdist worker: runs episodes of streams a controller hands it
    worker: bool = False
    #: how the user picked tasks by hand (``"node ids"``, ``"-k"``), if they did: such a
    #: side run goes to ``<run dir>/side-run/`` and the full run stays the one readers find
    hand_picked: str | None = None
    #: this process's garbage collector at start-up (:mod:`..heap`): a stream's parts
    #: (agent, model client, memory) are start-up too, built with it paused
    heap: StartupHeap = field(default_factory=lambda: StartupHeap(may_freeze=False))


@dataclass(frozen=True)
class Task:
    """One task of the session: its arm, its sample and the stream key items use."""

    arm: Arm
    sample: BenchmarkSample
    key: str

    @property
    def item_id(self) -> str:
        return f"{self.key}/{self.sample.task_id}"


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


class Session:
    """One benchmark session (see the module docstring). Build it with :meth:`open`."""

    def __init__(
        self,
        setup: SessionSetup,
        run_configs: Sequence[RunConfig],
        run_dirs: Sequence[Path],
        resume: ResumeSource | None = None,
    ) -> None:
        self.setup = setup
        self.flags = setup.flags
        self.options = setup.options
        self.resume_source = resume
        self.session_id = (resume.session if resume is not None else None) or uuid.uuid4().hex
        labelled = len(run_configs) > 1
        bases = self._bases = base_configs(run_configs)
        #: replicates per arm (None: the arms are not repeated, :mod:`.replicates`)
        self.replicates: int | None = run_configs[0].replicate.count if run_configs[0].replicate else None
        if labelled:
            check_arm_names(bases, self.comparison_dir)
        minimums = thresholds_for_arms(
            self.options.min_accuracy, [config.name for config in bases]
        )
        benchmarks = [BenchmarkRun(config, run_dir) for config, run_dir in zip(run_configs, run_dirs, strict=True)]
        #: the plan of shards and this session's shard (1-based) when it runs one of several
        self.shard_plan, self.shard_index = self._plan_shard(benchmarks, run_dirs)
        self.arms: list[Arm] = []
        for run_config, run_dir, benchmark in zip(run_configs, run_dirs, benchmarks, strict=True):
            arm = Arm(
                run_config, run_dir, self._run(benchmark, run_dir, labelled), benchmark,
                labelled=labelled, min_accuracy=minimums[run_config.name],
            )
            if self.shard_plan is not None:
                overall, streams = effective_thresholds(run_config, arm.min_overall, arm.min_streams)
                # the gates of the whole run, judged again on the merged records
                arm.run.shard = self.shard_plan.record(self.shard_index, ShardThresholds(
                    overall=overall,
                    streams=[StreamMinimum(stream=name, minimum=minimum) for name, minimum in streams.items()],
                ))
            self.arms.append(arm)
        self.by_name = {arm.name: arm for arm in self.arms}
        #: stream key (``<stream>``, or ``<arm>:<stream>`` with several arms) -> (arm, stream)
        self.streams_by_key = {arm.key(name): (arm, name) for arm in self.arms for name in arm.benchmark.stream_order}
        self.max_errors = self.options.max_errors
        if self.options.chains is not None and self.flags.entry == "pytest":
            raise ConfigError(
                f"{self.flags('chains')}: pytest runs one chain per xdist worker, so the chains in flight are "
                f"its -n N (pytest-xdist); or run the session with 'evomemory run --chains N', which runs "
                "them in one process (docs/scale.md)"
            )
        self.compare_dir = self._compare_dir(self.options.compare)
        self.gains = self._gains(self.options.min_gain)
        self.termination = Termination()
        self.stop_reason: str | None = None
        #: where records enter the session (:meth:`add_records`), from any thread
        self._intake = threading.RLock()
        self._intake_closed = False
        #: Ctrl-C or SIGTERM reached the driver (:meth:`interrupt`)
        self.interrupting = False
        self.comparison: dict[str, Any] | None = None
        self.comparison_files: tuple[Path, Path] | None = None
        self.comparison_error: str | None = None
        #: a repeated session's comparison across replicates (replicates.json)
        self.replicate_comparison: dict[str, Any] | None = None
        self.replicate_files: list[Path] = []
        self.gain_results: list[GainResult] = []
        self._manifest_written = False
        self._arm_of_stream: dict[int, Arm] = {}
        #: stream keys that could not start: their remaining tasks are not run
        self.failed_streams: dict[str, str] = {}
        #: why the whole session was refused at a stream's first build (exit 4, nothing written)
        self.refused: str | None = None
        self._created_dirs: list[Path] = []
        self.shared_errors = SharedErrorCount(self.run_dir) if self.max_errors is not None else None
        self._failed_here: set[tuple[str, str, str | None]] = set()
        self.max_cost = self.options.max_cost
        if self.max_cost is not None:
            self._check_priced()
        self._open_model_side()

    # ----- shards: one machine's share of the session (runtime/shards.py)

    def _plan_shard(self, benchmarks: Sequence[BenchmarkRun], run_dirs: Sequence[Path]) -> tuple[ShardPlan | None, int]:
        """With ``shard`` I/N: the plan of every shard's cells, from the configs and
        options alone (every machine computes the same), and each arm kept to shard
        I's streams (its own, with the arm unit). Refused before any task: a unit
        without shards, a gain gate (it judges the comparison of every stream: the
        merge's), a run directory holding another plan's shard."""
        if self.options.shard is None:
            if "shard_by" in self.options.given:
                raise ConfigError(
                    f"{self.flags('shard-by')} chooses what a shard's cell is; give {self.flags('shard')}=I/N too, "
                    f"or leave {self.flags('shard-by')} out"
                )
            return None, 0
        index, count = self.options.shard
        if self.options.min_gain:
            raise ConfigError(
                f"{self.flags('min-gain')} judges the comparison of every stream, and a shard holds only some: "
                f"give it to 'evomemory merge' of the shards (merge --min-gain) instead of {self.flags('shard')}"
            )
        # arms by label: a replicate (``memory@r2``) is an arm of its own, with its own calls
        fingerprint = session_fingerprint([(b.config.label, b.fingerprint) for b in benchmarks])
        plan = plan_shards(
            session_cells([(b.config.label, b.planned_streams) for b in benchmarks], self.options.shard_by),
            count, fingerprint, [b.config.label for b in benchmarks],
        )
        for benchmark in benchmarks:
            benchmark.keep(plan.streams_of(index, benchmark.config.label))
        if self.setup.writes:
            for run_dir in run_dirs:
                check_shard_dir(run_dir, plan, index)
        return plan, index

    @property
    def empty_shard(self) -> bool:
        """A shard that holds no cell (more shards than cells): it runs nothing, and
        its run is complete."""
        return self.shard_plan is not None and not self.shard_plan.cells_of(self.shard_index)

    @property
    def deferred_comparison(self) -> str | None:
        """Why this shard writes no comparison of its arms (the merge compares them),
        else None: it holds no cell, or its cells are arms' runs (it may hold one arm
        of a pair on a stream, and a comparison of a part would mislead)."""
        if self.shard_plan is None:
            return None
        if self.empty_shard:
            return "this shard holds no cell"
        if self.shard_plan.unit != SHARD_UNITS[0]:
            return (f"with {self.flags('shard-by')}={self.shard_plan.unit} a shard may hold one arm of a pair on a "
                    "stream")
        return None

    # ----- the model side: what every process of the session shares about its endpoints

    def _check_priced(self) -> None:
        """A cost cap needs the price of every model it caps: refused before any task."""
        unpriced = [arm.name for arm in self.arms
                    if (model := arm.run_config.agent.model) is not None and model.pricing is None]
        if unpriced:
            raise ConfigError(
                f"{self.flags('max-cost')} needs the price of every model it caps; the agent config of "
                f"{', '.join(map(repr, unpriced))} has no 'model.pricing': add pricing: "
                "{input_per_million: ..., output_per_million: ...} (0 and 0 for a model that costs nothing)",
                key="model.pricing",
            )

    def _check_metered_memory(self) -> None:
        """A memory library calling its own model (Mem0's fact extraction, LangMem's
        memory manager) through its own client is metered by the cost cap through that
        client's HTTP transport (:mod:`..models.metering`), at the price of the
        library's model: an arm whose library model has no price is refused before any task."""
        for arm in self.arms:
            config = arm.run_config
            if config.agent.memory_strategy == "none":
                continue
            spec = backend_spec(config.memory.backend)
            key = spec.own_model_calls(config.memory) if spec is not None and spec.own_model_calls else None
            if key is None or spec is None:
                continue
            where = config.sources.get("memory", "memory config")
            price_key, price = (
                spec.own_model_price(config.memory, config.agent.model) if spec.own_model_price else (key, None)
            )
            if price is None:
                raise ConfigError(
                    f"{where}: key '{price_key}': {self.flags('max-cost')} meters the calls memory backend "
                    f"{config.memory.backend!r} makes to its own chat model ({key}: true) in arm {arm.name!r}, and "
                    f"needs that model's price; add {price_key}: {{input_per_million: ..., output_per_million: ...}} "
                    f"(0 and 0 for a model that costs nothing), or set {key}: false (e.g. {self.flags('set')} "
                    f"memory.{key}=false)",
                    source=where, key=price_key,
                )

    def _open_model_side(self) -> None:
        """The session's shared directory and its cost cap, in this process.

        The driver (the only process, the CLI, or the xdist controller before it starts
        its workers, which inherit :data:`~..models.limits.SESSION_DIR_ENV`) opens the
        directory where every process keeps the endpoints' connection slots and 429
        backoff (:mod:`..models.limits`) and the spend of the cost cap
        (:mod:`..models.budget`); a worker uses the one it inherited. With a cap, every
        model client built in this process consults the shared guard."""
        self._shared_dir: Path | None = None
        self._spend_file: tuple[Path, str | None] | None = None
        if not self.setup.worker:
            directory, created = open_session_directory()
            self._shared_dir = directory if created else None
        self.cost_guard: CostGuard | None = None
        if self.max_cost is not None:
            if self.setup.worker:
                spend = inherited_spend_file(session_directory())
            else:  # a spend of this session's own, even in a directory other sessions share
                self._spend_file = open_spend_file(session_directory())
                spend = self._spend_file[0]
            self.cost_guard = CostGuard(spend, self.max_cost)
            activate_cost_guard(self.cost_guard)

    def _close_model_side(self) -> None:
        if self.cost_guard is not None and active_cost_guard() is self.cost_guard:
            activate_cost_guard(None)
        if self._spend_file is not None:
            close_spend_file(*self._spend_file)
            self._spend_file = None
        if self._shared_dir is not None:
            close_session_directory(self._shared_dir, True)
            self._shared_dir = None

    def cost_stop(self) -> str | None:
        """Once any process of the session refused a model call for the cost cap, why
        (kept as the session's stop reason: the run ends incomplete and resumable)."""
        if self.cost_guard is None:
            return None
        reason = self.cost_guard.stop_reason
        if reason is not None:
            reason = self.said(reason)
            self.stop(reason)
        return reason

    # ----- opening

    @classmethod
    def open(cls, setup: SessionSetup, configs: Sequence[str] = (), configs_base: Path | None = None) -> Session:
        """Resolve, load and check everything the command line names.

        ``configs`` are run configs a driver adds itself (the ``evomemory_config`` ini
        option, paths relative to ``configs_base``, the rootdir, or built-in names),
        used when the options name none. Raises :class:`ConfigError` for anything the user
        must fix (one line naming the file, key or option), before anything is written:
        a path the system refuses (too long, an I/O error) included.
        """
        try:
            return cls._open(setup, [str(resolve_run_config(path, configs_base or setup.invocation_dir)) for path in configs])
        except OSError as error:
            where = str(error.filename)[:200] if error.filename else "a path of the run"
            raise ConfigError(
                f"{where!r}: {error.strerror or error}; check the paths given in the options and the run "
                f"config (output directory, {setup.flags('compare')}, {setup.flags('resume')})"
            ) from None

    @classmethod
    def _open(cls, setup: SessionSetup, configs: Sequence[str]) -> Session:
        options, flags, here = setup.options, setup.flags, setup.invocation_dir
        resume = None
        if options.resume:
            if len(options.configs) > 1:
                raise ConfigError(
                    f"{flags('resume')}=DIR continues an interrupted session as it was: a session of several "
                    f"arms reads them from DIR/arms.json, so give {flags('resume')} alone"
                )
            resume = read_resume_source(here / options.resume)
            options = with_recorded(options, resume)
            setup = replace(setup, options=options)
        paths = [str(resolve_run_config(path, here)) for path in options.configs] if options.configs else (
            list(resume.arm_configs) if resume is not None else list(configs)
        )
        if not paths:
            raise ConfigError(f"no run config: give {flags('config')}=PATH (or a built-in config's name)")
        run_configs = [
            load_run_config(path, options.settings).with_overrides(
                limit=options.limit, streams=options.streams
            )
            for path in paths
        ]
        replicated = any(replicate_seeds(config, options.repeats) is not None for config in run_configs)
        if len(run_configs) > 1:  # before placing the arms: a clash of names says so, not a clash of directories
            check_arm_names(run_configs, placement(setup).arms_dir(run_configs, replicated))
        run_configs = expand_replicates(run_configs, options.repeats)
        run_dirs = placement(setup).run_dirs(run_configs, resume)
        return cls(setup, run_configs, run_dirs, resume)

    def _run(self, benchmark: BenchmarkRun, run_dir: Path, labelled: bool) -> Run:
        """A fresh run, or the continuation of the one this session was interrupted in."""
        resume = self.resume_source
        command = self.setup.command
        writes = self.setup.writes
        if resume is None or not (run_dir / RUN_DOCUMENT).exists():
            return Run(benchmark, run_dir, command=command, write=writes, session_id=self.session_id)
        if labelled and started_by(run_dir) != resume.session:
            # another session's results (the same arms run again, interrupted in an
            # earlier arm): this session never started the arm, so it starts afresh
            return Run(benchmark, run_dir, command=command, write=writes, session_id=self.session_id)
        state = load_resume_state(run_dir, benchmark.streams)
        # the config first: snapshots of another config are that refusal's to explain
        run = Run.resuming(
            benchmark, state, run_dir, command=command, session_id=self.session_id
        )
        _fall_back_to_snapshots(state, benchmark)
        return run

    def _compare_dir(self, other: str | None) -> Path | None:
        if not other:
            return None
        from ..reporting.rundata import ReportError, load_run  # the reporting modules load when used

        flag = self.flags("compare")
        if len(self.arms) > 1:
            raise ConfigError(
                f"{flag} compares this run with an earlier one; a session with several arms compares them "
                "by itself (compare.html beside the arms)"
            )
        compare_dir = (self.setup.invocation_dir / other).resolve()
        if compare_dir == self.run_dir.resolve():
            raise ConfigError(f"{flag} must name another run's directory")

        try:
            load_run(compare_dir)
        except ReportError as error:
            raise ConfigError(f"{flag}: {error}") from None
        return compare_dir

    def _gains(self, values: Sequence[str]) -> list[GainThreshold]:
        if not values:
            if "min_gain_by" in self.options.given:
                raise ConfigError(
                    f"{self.flags('min-gain-by')} says what {self.flags('min-gain')} requires, but no "
                    f"{self.flags('min-gain')} is given; add one (e.g. {self.flags('min-gain')}=5) or leave it out"
                )
            return []
        flag = self.flags("min-gain")
        if len(self._bases) < 2:  # a session of replicates judges each arm's mean gain across them
            raise ConfigError(
                f"{flag} gates the gain of an arm over the baseline: give two run configs, e.g. "
                f"{self.flags('config')}=CONTROL.yaml {self.flags('config')}=MEMORY.yaml (the first is the baseline)"
            )
        streams = list(dict.fromkeys(name for arm in self.arms for name in arm.benchmark.stream_order))
        from ..analysis.gain import parse_min_gain

        return parse_min_gain(values, streams, requires=self.options.min_gain_by)

    def preflight(self, *, builtin_agent: bool = True, builtin_memory: bool = True) -> None:
        """Refuse, before any task, what would fail every stream or be silently
        ignored: options the built-in agent or memory never read, a backend whose
        optional library is missing, two arms (or streams) sharing one memory store.
        ``builtin_*``: whether the built-in factory builds that part (a user's own
        factory may read any option and put its state anywhere)."""
        if builtin_memory and self.max_cost is not None:
            self._check_metered_memory()
        for arm in self.arms:
            check_builtin_parts(arm.run_config, builtin_agent=builtin_agent, builtin_memory=builtin_memory)
            if builtin_memory:
                self._check_capabilities(arm, builtin_agent)
        if builtin_memory:
            self._check_shared_stores()
        for arm in self.arms:
            self._check_resumed_snapshots(arm)
        self._claim()

    def _memory_needs(self, arm: Arm, builtin_agent: bool) -> list[Need]:
        resuming = arm.run.resume is not None and any(
            arm.run.completed_before(stream) for stream in arm.benchmark.stream_order
        )
        return memory_needs(arm.run_config, arm.benchmark.streams, resuming=resuming, builtin_agent=builtin_agent)

    def _where_memory(self, arm: Arm) -> str:
        where = str(arm.run_config.sources.get("memory", "memory config"))
        return f"arm {arm.name!r}: {where}" if self.several else where

    def _check_capabilities(self, arm: Arm, builtin_agent: bool) -> None:
        """Everything the session will ask of the arm's memory, asked of the class its
        factory declares (:mod:`.capabilities`): refused once, before any task."""
        needs = self._memory_needs(arm, builtin_agent)
        backend = arm.run_config.memory.backend
        spec = backend_spec(backend)
        factory = spec.open if spec is not None else (load_factory(backend, "memory") if ":" in backend else None)
        declared = declared_class(factory)
        if needs and declared is not None and (problem := missing(declared, needs, self._where_memory(arm))):
            raise SessionRefused(problem)

    def _memory_check(self, arm: Arm, builtin_agent: bool, given_by: str | None = None) -> Callable[[object], None]:
        """The same check of the instance a stream just built (a conftest factory
        declares no class): :class:`SessionRefused` before anything is recorded.
        ``given_by`` names the factory that built it when the memory config did not."""
        needs = self._memory_needs(arm, builtin_agent)
        where = given_by or self._where_memory(arm)

        def check(memory: object) -> None:
            if needs and (problem := missing(memory, needs, where)):
                raise SessionRefused(problem)

        return check

    def _check_resumed_snapshots(self, arm: Arm) -> None:
        """A resumed stream's memory continues from its snapshot: one that is missing
        or damaged (or a memory that never kept any) is refused now, not when the
        stream starts (whether the memory built can restore it, only its first build
        tells: :meth:`open_stream`)."""
        if arm.run.resume is None or arm.benchmark.memory_strategy == "none":
            return
        for stream in arm.benchmark.streams:
            snapshots = arm.benchmark.snapshots(stream.name)
            count = _restored_count(stream, arm.run.completed_before(stream.name), snapshots)
            if count is None:
                continue
            if not snapshots.directory.exists():
                raise ResumeRefused(
                    f"{self.flags('resume')} {arm.run_dir}: stream {stream.name!r}: {count} episode(s) were "
                    "completed, but the interrupted run kept no memory snapshot of it (its memory system "
                    "cannot be resumed: it does not implement snapshot(directory) and restore(directory), "
                    f"docs/memory.md; or the snapshots were removed); run again without {self.flags('resume')}"
                )
            snapshots.verify(count)

    def _claim(self) -> None:
        """Take the run directories for this session: only once every check passed,
        so a refused session leaves nothing behind (not even an empty directory)."""
        if not self.setup.writes:
            return
        for arm in self.arms:
            # the directories the lock will create, innermost first
            self._created_dirs += [path for path in (arm.run_dir, *arm.run_dir.parents) if not path.exists()]
            arm.run.lock()
        if self.shared_errors is not None:
            self.shared_errors.clear()  # before any worker starts

    def _check_shared_stores(self) -> None:
        owners: dict[str, str] = {}
        for arm in self.arms:
            if arm.benchmark.memory_strategy == "none":
                continue
            spec = backend_spec(arm.run_config.memory.backend)
            if spec is None or spec.locations is None:
                continue
            for stream in arm.benchmark.stream_order:
                context = MemoryContext(
                    stream=stream, run_dir=arm.run_dir, run_name=arm.run_config.label,
                    agent_model=arm.run_config.agent.model,
                )
                for location in spec.locations(arm.run_config.memory, context):
                    where = f"arm {arm.name!r}, stream {stream!r}" if len(self.arms) > 1 else f"stream {stream!r}"
                    if location in owners:
                        raise ConfigError(
                            f"{arm.run_config.sources.get('memory', 'memory config')}: {where} would keep its memory "
                            f"in {location}, which {owners[location]} uses too (one stream's records would be "
                            "recalled in another); give each arm its own location (e.g. a path with {run_name})",
                            key="memory",
                        )
                    owners[location] = where
                    problem = place_problem(Path(location), spec.location_kind) if spec.location_kind else None
                    if problem is not None:
                        raise ConfigError(
                            f"{arm.run_config.sources.get('memory', 'memory config')}: {where} would keep its memory "
                            f"in {location}, but {problem}; remove it or point the memory's path elsewhere",
                            key="memory",
                        )

    # ----- the baseline arm, for what reads one run (fixtures, a single-run session)

    @property
    def baseline(self) -> Arm:
        return self.arms[0]

    @property
    def run_dir(self) -> Path:
        return self.baseline.run_dir

    @property
    def started(self) -> bool:
        return any(arm.started for arm in self.arms)

    @property
    def several(self) -> bool:
        return len(self.arms) > 1

    @property
    def comparison_dir(self) -> Path:
        """Where a session of several arms writes compare.html, compare.json and its
        arms manifest (a resumed session: where the interrupted one wrote them); a
        repeated single run: the directory holding its replicates."""
        return placement(self.setup).arms_dir(self._bases, self.replicates is not None)

    # ----- tasks

    def tasks(self) -> Iterator[Task]:
        """Every task, in arm and stream order."""
        for arm in self.arms:
            for stream in arm.benchmark.streams:
                key = arm.key(stream.name)
                for sample in stream.samples:
                    yield Task(arm, sample, key)

    def task_ids(self) -> set[str]:
        return {task.item_id for task in self.tasks()}

    @property
    def independent_streams(self) -> frozenset[str]:
        """Stream keys whose tasks may run anywhere, in any order (no memory between them)."""
        return frozenset(arm.key(name) for arm in self.arms for name in arm.benchmark.independent_streams)

    def is_done(self, key: str, sample: BenchmarkSample) -> bool:
        """Whether the interrupted run of the stream's arm completed this episode."""
        found = self.streams_by_key.get(key)
        resume = found[0].run.resume if found is not None else None
        return resume is not None and resume.is_done(sample.stream, sample.position)

    def completed_scores(self, key: str) -> list[Score]:
        """The scores the interrupted run of stream ``key``'s arm recorded for it."""
        found = self.streams_by_key.get(key)
        resume = found[0].run.resume if found is not None else None
        if resume is None or found is None:
            return []
        return [scored for scored in resume.scores if scored.stream == found[1]]

    @property
    def resuming(self) -> bool:
        return any(arm.run.resume is not None for arm in self.arms)

    def arm_label(self, key: str) -> str | None:
        """The arm of stream ``key`` (None for a key the session does not have)."""
        found = self.streams_by_key.get(key)
        return found[0].name if found is not None else None

    def sample_of(self, key: str, task_id: str) -> tuple[Arm, BenchmarkSample] | None:
        found = self.streams_by_key.get(key)
        if found is None:
            return None
        arm, stream = found
        for sample in arm.benchmark.by_name[stream].samples:
            if sample.task_id == task_id:
                return arm, sample
        return None

    # ----- running a stream (the process that runs episodes)

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
        arm, name = self.streams_by_key[key]
        timeout_s = arm.run_config.memory.open_timeout_s

        def on_wait(elapsed_s: float, factory: str) -> None:
            if notice is not None:
                notice(memory_wait_line(key, elapsed_s, factory, timeout_s))

        try:
            run = arm.benchmark.open_stream(
                name, agent_factory=agent_factory, memory_factory=memory_factory, snapshots=self.setup.writes
                or self.setup.worker, on_wait=on_wait, factories_from=factories_from,
                check_memory=self._memory_check(arm, agent_factory is None, _given_by(memory_factory, factories_from)),
            )
            self._check_restorable(arm, run)
        except (SessionRefused, ResumeRefused) as error:
            message = self.said(f"{self.flags('resume')} {arm.run_dir}: {error}" if isinstance(error, ResumeRefused) else error)
            if self.setup.worker or not self.started:
                self.refused = self.refused or message
                if self.setup.worker:  # the controller decides (refuse)
                    sink(refusal_record(key, message))
                raise SessionRefused(message) from None
            reason = f"stream {name!r} could not start: {message}"
            self.failed_streams[key] = reason
            sink(stream_error_record(name, reason, phase="start").for_arm(arm.prefix))
            raise
        except EvoMemoryError as error:
            reason = self.said(f"stream {name!r} could not start: {error}")
            self.failed_streams[key] = reason
            sink(stream_error_record(name, reason, phase="start").for_arm(arm.prefix))
            raise
        self._arm_of_stream[id(run)] = arm
        sink(stream_started_record(name, run.identity).for_arm(arm.prefix))
        return run

    def start_stream(
        self, key: str, sink: RecordSink, *,
        agent_factory: AgentFactoryFn | None = None, memory_factory: MemoryFactoryFn | None = None,
        notice: Callable[[str], None] | None = None, factories_from: str | None = None,
    ) -> StreamRun | FailedStream:
        """:meth:`open_stream` for a driver, with the start-up heap paused: a stream
        that could not start (recorded once), or whose first build refused the session,
        comes back as a :class:`FailedStream`, whose tasks :meth:`start_task` does not run."""
        try:
            with self.setup.heap.paused():
                return self.open_stream(
                    key, sink, agent_factory=agent_factory, memory_factory=memory_factory, notice=notice,
                    factories_from=factories_from,
                )
        except EvoMemoryError as error:
            failure = self.failed_streams.get(key)
            if failure is None:  # not recorded as this stream's failure: it refused the session
                return FailedStream(key, self.said(error), refused=True)
            return FailedStream(key, failure)

    def start_task(
        self, live: StreamRun | FailedStream, sample: BenchmarkSample, sink: RecordSink,
        first_position: int | None = None,
    ) -> Episode | NotRun:
        """The episode of ``sample`` (:meth:`episode`), or why it does not run: its
        stream could not start, refused the session, or stopped (:mod:`.notrun`)."""
        if isinstance(live, FailedStream):
            return live.next_task(sample.stream)
        arm = self._arm_of_stream.get(id(live), self.baseline)
        if arm.key(sample.stream) in self.failed_streams:
            return stopped(sample.stream)
        try:
            return self.episode(live, sample, sink, first_position)
        except EvoMemoryError as error:
            return stopped(sample.stream, self.said(error))

    def _check_restorable(self, arm: Arm, run: StreamRun) -> None:
        """A resumed stream's memory, just built, must be able to restore its snapshot
        (snapshot/restore, the same memory system as the one that saved it)."""
        if run.memory is None or arm.run.resume is None:
            return
        stream = arm.benchmark.by_name[run.stream]
        snapshots = arm.benchmark.snapshots(run.stream)
        count = _restored_count(stream, arm.run.completed_before(run.stream), snapshots)
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
        if self.refused is not None or not self.started:
            self.refused = self.refused or message
            return []
        found = self.streams_by_key.get(key)
        arm, name = found if found is not None else (self.baseline, key)
        reason = f"stream {name!r} could not start: {message}"
        self.failed_streams[key] = reason
        return [stream_error_record(name, reason, phase="start").for_arm(arm.prefix)]

    def close_stream(self, run: StreamRun | FailedStream, sink: RecordSink) -> None:
        """Stream teardown; a failure is charged to this stream (and arm), not to
        whichever task happens to be running when the stream is torn down."""
        if isinstance(run, FailedStream):
            return  # nothing was built
        arm = self._arm_of_stream.pop(id(run), self.baseline)
        try:
            run.close()
        except EvoMemoryError as error:
            sink(stream_error_record(run.stream, self.said(f"stream teardown failed: {error}")).for_arm(arm.prefix))

    def episode(
        self, run: StreamRun, sample: BenchmarkSample, sink: RecordSink, first_position: int | None = None
    ) -> Episode:
        """The episode of ``sample``; before the first one this process runs in the
        stream, the memory is prepared (emptied, or restored for a resumed or
        taken-over stream; a conversation stream ingests its conversation, or
        restores the snapshot that holds it). A memory that cannot be prepared
        stops the stream."""
        arm = self._arm_of_stream.get(id(run), self.baseline)
        if not run.prepared:
            try:
                run.prepare_memory(  # a conversation's ingestion turns are recorded with this episode
                    self._completed_before(arm, run, sample, first_position),
                    lambda record: sink(record.for_arm(arm.prefix)),
                )
            except EvoMemoryError as error:
                run.broken = self.said(error)
                reason = f"stream {sample.stream!r} cannot continue: {run.broken}"
                self.failed_streams[arm.key(sample.stream)] = reason
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
        taking_over = self.setup.worker and first_position is not None and sample.position > first_position
        if not taking_over:
            return resumed
        if run.snapshots is None or run.memory is None or not supports_snapshots(run.memory.backend):
            return sample.position  # refused by prepare_memory: nothing to restore from
        saved = [count for count in run.snapshots.completed_prefixes() if count <= sample.position]
        return max(saved, default=0)

    def failed_task(self, key: str, sample: BenchmarkSample, reason: str) -> Record:
        """The record of a task that failed outside its episode (:meth:`setup_failed`, :meth:`crashed`)."""
        found = self.streams_by_key.get(key)
        arm = found[0] if found is not None else self.baseline
        return error_record(sample, reason).for_arm(arm.prefix)

    def setup_failed(self, key: str, sample: BenchmarkSample, records: Sequence[Record], reason: str) -> list[Record]:
        """A task whose setup failed before its episode ran (pytest: a user's fixture)
        is a failed episode, unless ``records``, what the session recorded of it, say
        so already (its stream could not start, its episode failed)."""
        if any(getattr(record, "scored", None) is not None or record.failed_episode for record in records):
            return []
        return [self.failed_task(key, sample, reason or "its setup failed")]

    def crashed(self, key: str, task_id: str, details: str) -> list[Record]:
        """A task whose process died while it ran (an xdist worker crash: the driver
        received no record of it) is a failed episode, named by the last line of the
        driver's ``details``; nothing for a task this session does not have."""
        found = self.sample_of(key, task_id)
        if found is None:
            return []
        lines = [line.strip() for line in details.strip().splitlines() if line.strip()]
        return [self.failed_task(key, found[1], f"the test process crashed: {lines[-1] if lines else 'no details'}")]

    # ----- records (the process that writes)

    def add_records(self, records: Sequence[Record]) -> str | None:
        """Route records to their arms' runs; the reason to stop the session, if any
        (max errors reached, a run directory that can no longer be written, the cost
        cap reached by any process of the session). A worker's refusal refuses the
        session or fails its stream (:meth:`refuse`); a refused session records nothing.
        Thread-safe: ``evomemory run``'s chains hand their records in from their own
        threads, one call at a time enters (the writer, the counts, the stops)."""
        with self._intake:
            if self._intake_closed:
                return self.stop_reason or "the session is over"
            return self._add_records(records)

    def _add_records(self, records: Sequence[Record]) -> str | None:
        received: list[Record] = []
        for record in records:
            if isinstance(record, RefusalRecord):
                received += self.refuse(record.refusal.key, record.refusal.message)
            else:
                received.append(record)
        records = received
        if self.refused is not None:
            return "the session is refused"
        if records:
            with self.termination.critical():
                if not self._manifest_written and self.several:
                    self._write_manifest()
                for arm in self.arms:
                    mine = [record for record in records if (record.arm or self.baseline.name) == arm.name
                            or (record.arm is None and arm is self.baseline)]
                    arm.add(mine)
        # a call refused for the cost cap leaves no record (its task runs on resume)
        return self._check_stop() if records else self.cost_stop()

    def _check_stop(self) -> str | None:
        for arm in self.arms:
            writer = arm.run.writer
            if writer is not None and writer.failure is not None:
                self.stop_reason = self.stop_reason or f"the results could not be written: {writer.failure}"
                return self.stop_reason
        if self.cost_stop() is not None:
            return self.stop_reason
        if self.max_errors is None:
            return None
        errors = sum(arm.run.errors for arm in self.arms)
        if errors >= self.max_errors:
            self.stop_reason = f"{errors} failed episodes reached {self.flags('max-errors')}"
            return self.stop_reason
        return None

    def stop_here(self, records: Sequence[Record], *, task_over: bool) -> str | None:
        """In a worker, why it stops itself, if it must: the controller's stop reaches
        a worker only after its whole stream ran. Its new failed episodes are added to
        the session's shared count, which reached the max errors; or, once a task is
        over, a process of the session refused a model call for the cost cap."""
        if self._count_failures_here(records):
            return f"failed episodes reached {self.flags('max-errors')}"
        return self.cost_stop() if task_over else None

    def _count_failures_here(self, records: Sequence[Record]) -> bool:
        """Add this process's new failed episodes to the shared count; True once the
        total reaches the max errors."""
        if self.shared_errors is None or self.max_errors is None:
            return False
        failed = {
            (record.arm or "", *episode) for record in records
            if (episode := record.failed_episode) is not None and episode[1] is not None
        } - self._failed_here
        self._failed_here |= failed
        total = self.shared_errors.add(len(failed)) if failed else self.shared_errors.read()
        return total >= self.max_errors

    def _write_manifest(self) -> None:
        """Before the first record: an interrupted session can then be resumed whole."""
        self._manifest_written = True
        write_arms_manifest(
            self.comparison_dir,
            [(arm.name, arm.run_dir, str(arm.run_config.path)) for arm in self.arms],
            self.options.settings,
            self.session_id,
            repeats=self.options.repeats,
        )

    def stop(self, reason: str) -> None:
        with self._intake:
            self.stop_reason = self.stop_reason or reason

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM reached the driver: no chain starts another task."""
        self.interrupting = True

    def close_intake(self) -> None:
        """The driver stopped waiting for its chains (a second Ctrl-C): a record that
        arrives later is not taken (its task runs again on resume), so nothing is
        written while the session finishes."""
        with self._intake:
            self._intake_closed = True

    # ----- the end

    def finish(self, *, interrupted: bool = False) -> Outcome:
        """Every arm's summary, thresholds and report, the comparison and its gates;
        for a refused session, nothing (it wrote nothing, and exits 4). From here on
        Ctrl-C and SIGTERM are ignored until the driver has printed everything
        (:func:`.signals.shield_interrupts`): the summary is never cut in half."""
        # the reporting modules load at the session's end, not at every process's start-up
        from ..reporting.html import ReportError, write_comparison_report
        from ..reporting.reports import REPORTS
        self.termination.finishing = True
        shield_interrupts()
        if self.refused is not None:
            return Outcome(interrupted=interrupted, refused=self.refused)
        stop_reason = self.stop_reason
        if interrupted and stop_reason is None:
            stop_reason = "terminated by SIGTERM" if self.termination.terminated else "interrupted (Ctrl-C)"
        for arm in self.arms:
            arm.finish(stop_reason, REPORTS)
        failed = any(arm.failed for arm in self.arms)
        result = self.baseline.result
        if self.compare_dir is not None and result is not None and result.write_failure is None:

            try:
                write_comparison_report([self.compare_dir, self.run_dir], self.run_dir / "compare.html")
            except ReportError as error:
                result.report_error = str(error)
                failed = True
        if self.several and self.started and (deferred := self.deferred_comparison):
            # the merge compares; the arms' manifest still says what the merge reads
            self.comparison_error = f"no comparison here: {deferred}; 'evomemory merge' of the shards compares the arms"
            if not self._manifest_written and self.setup.writes:
                self._write_manifest()
        elif self.several and self.started:
            failed = self._compare() or failed
        if self.shared_errors is not None and self.setup.writes:
            self.shared_errors.clear()
        return Outcome(
            failed=failed or any(arm.cut_short for arm in self.arms),
            interrupted=interrupted,
            stopped=stop_reason,
            ran=self.started,
            complete_when_empty=self.started and (self.resuming or self.empty_shard),
        )

    def _compare(self) -> bool:
        """Write the arms' comparison and judge the gain gates on it; True when the
        session fails. A repeated session compares across its replicates: replicate by
        replicate, the arms' paired comparison (``compare-r<i>.html`` / ``.json``, when
        there are several arms), and each arm's mean figure and mean paired difference
        with their intervals (``replicates.json``)."""
        from ..analysis.gain import check_gains, check_replicate_gains
        from ..reporting.html import ReportError, write_comparison
        from ..reporting.replicates import write_replicate_comparison
        ran = [arm for arm in self.arms if arm.result is not None and arm.result.write_failure is None]
        if len(ran) < len(self.arms):
            missing = ", ".join(arm.name for arm in self.arms if arm not in ran)
            self.comparison_error = f"no comparison: arm(s) {missing} ran no task or could not write their results"
            return bool(self.gains)
        try:
            if self.replicates is not None:
                replicates = write_replicate_comparison(
                    replicate_groups((arm.run_config.name, arm.run_dir) for arm in ran), self.comparison_dir
                )
                document = self.replicate_comparison = dict(replicates.document)
                self.replicate_files = list(replicates.paths)
            else:
                files = write_comparison(
                    [arm.run_dir for arm in ran], self.comparison_dir / "compare.html", [arm.name for arm in ran]
                )
                document = self.comparison = dict(files.document)
                self.comparison_files = (files.html, files.json)
        except (ReportError, OSError) as error:
            self.comparison_error = f"the comparison could not be written: {error}"
            return True
        complete = all(arm.result is not None and arm.result.complete for arm in ran)
        check = check_replicate_gains if self.replicates is not None else check_gains
        self.gain_results = check(document, self.gains, complete=complete)
        return any(not result.met for result in self.gain_results)

    def release(self) -> None:
        """Unlock every run directory and close the shared directory and cost cap
        this process opened (the end of the process's part in the session)."""
        for arm in self.arms:
            arm.run.release()
        if self.refused is not None:
            remove_claims(self._created_dirs)
        self._close_model_side()

    # ----- what the terminal shows

    def resume_notes(self) -> list[str]:
        """What a resumed session tells before it runs: the streams whose newest
        memory snapshot was not trusted, and from where they continue."""
        notes = []
        for arm in self.arms:
            resume = arm.run.resume
            for note in resume.notes if resume is not None else ():
                notes.append(note.replace("evomemory: ", f"evomemory: [{arm.name}] ", 1) if self.several else note)
        return notes

    def header(self) -> list[str]:
        """What the session is about to run (pytest prints it in its header)."""

        lines = []
        if self.replicates is not None and self.several:
            seeds = ", ".join(str(arm.replicate.seed) for arm in self.arms[: self.replicates] if arm.replicate)
            lines.append(
                f"evomemory: {len(self._bases)} arm(s) x {self.replicates} replicates (seeds {seeds}), "
                f"baseline {self.baseline.name!r}"
            )
        elif self.several:
            lines.append(f"evomemory: {len(self.arms)} arms, baseline {self.baseline.name!r}")
        for arm in self.arms:
            prefix = f"evomemory: [{arm.name}] " if self.several else "evomemory: "
            streams = ", ".join(f"{s.name} ({len(s)})" for s in arm.benchmark.streams)
            agent = arm.run_config.agent
            lines += [
                f"{prefix}run {arm.run_config.name!r} from {arm.run_config.path}",
                f"{prefix}streams {streams}",
                *(f"{prefix}data {provenance_line(s)}" for s in arm.benchmark.streams if s.provenance.get("repository")),
                f"{prefix}agent {agent.kind} ({agent.memory_strategy}), memory {arm.run_config.memory.backend} "
                "(as configured; a conftest fixture may override them: the summary says what ran)",
                f"{prefix}model {describe_model(configured_model(agent.model, arm.run_config.base_dir))}",
                f"{prefix}results -> {arm.run_dir}" + (
                    f" (a side run of tasks picked by {self.setup.hand_picked}: the full run in "
                    f"{arm.run_dir.parent} stays as it is)" if arm.run_dir.name == SIDE_RUN else ""
                ),
            ]
        # names and data provenance come from files; the notes are made inert where they are made
        return [inert(line) for line in lines] + self.shard_lines() + self.resume_notes()

    def shard_lines(self) -> list[str]:
        """This shard's cells and the whole plan (a shard's header; ``evomemory run``
        prints them before it runs)."""
        if self.shard_plan is None:
            return []
        return [inert(line) for line in self.shard_plan.describe(self.shard_index)]

    def report(self, resume_command: str) -> list[Line]:
        """The end-of-session lines: each arm's, the comparison's, what to do next.
        ``resume_command`` is how this entry point continues (``pytest``, ``evomemory run``).
        A refused session says why, and nothing else."""
        if self.refused is not None:
            return [Line.of(f"evomemory: error: {self.refused}", "red", bold=True)]
        from ..reporting.reports import REPORTS

        lines: list[Line] = []
        for arm in self.arms:
            if arm.result is None:
                if not arm.started:
                    which = "" if not self.several else f" of arm {arm.name!r}"
                    unchecked = "; no threshold was checked" if arm.gated or self.gains else ""
                    lines.append(Line.of(
                        f"evomemory: no benchmark task{which} ran; {arm.run_dir} was left as it was{unchecked}"
                    ))
                continue
            lines.append(Line(f"evomemory: {arm.name}", section=True))
            lines += arm.report(REPORTS, self.compare_dir)
        if self.several and self.started:
            lines += self._replicate_lines() if self.replicates is not None else self._comparison_lines()
        if any(arm.cut_short for arm in self.arms):
            where = self.comparison_dir if self.several else self.baseline.run_dir
            lines.append(Line(
                f"evomemory: to continue where it stopped: {resume_command} {self.flags('resume')}={self.shown(where)}",
                "yellow", bold=True,
            ))
        return lines

    def said(self, text: object) -> str:
        """Engine text (an error, a reason) with the options it names spelled as this
        session's door takes them (:func:`..options.render`): before it is recorded or shown."""
        return render(str(text), self.flags.entry)

    def shown(self, path: Path) -> str:
        """``path`` as the user would type it: relative to where the session started, if inside."""
        try:
            return str(path.relative_to(self.setup.invocation_dir.resolve()))
        except ValueError:
            return str(path)

    def _comparison_lines(self) -> list[Line]:
        from ..reporting.terminal import format_comparison

        lines = [Line(f"evomemory: {' vs '.join(arm.name for arm in self.arms)}", section=True)]
        if self.comparison is None:
            deferred = self.deferred_comparison is not None  # not a failure: the merge's
            lines.append(Line.of(f"evomemory: {self.comparison_error}", "plain" if deferred else "red", bold=not deferred))
            return lines + self._gain_lines()
        lines += [Line.of(line) for line in format_comparison(self.comparison)]
        lines += self._gain_lines()
        if self.comparison_files is not None:
            html, json_path = self.comparison_files
            lines += [Line.of(f"comparison: {html}"), Line.of(f"comparison data: {json_path}")]
        return lines

    def _replicate_lines(self) -> list[Line]:
        from ..reporting.terminal import format_replicates
        names = " vs ".join(arm.run_config.name for arm in self.baseline_arms)
        lines = [Line(f"evomemory: {names}, {self.replicates} replicate(s)", section=True)]
        if self.replicate_comparison is None:
            lines.append(Line.of(f"evomemory: {self.comparison_error}", "red", bold=True))
            return lines + self._gain_lines()
        lines += [Line.of(line) for line in format_replicates(self.replicate_comparison)]
        lines += self._gain_lines()
        lines += [Line.of(f"comparison: {path}") for path in self.replicate_files]
        return lines

    def _gain_lines(self) -> list[Line]:
        """The gain gates' verdicts, and why the session fails when one is missed."""
        if self.gains and not self.gain_results:
            return [Line(
                f"evomemory: the {self.flags('min-gain')} gate is not passed without a comparison; the session fails",
                "red", bold=True,
            )]
        lines = [Line.of(result.describe(), "red" if not result.met else "green") for result in self.gain_results]
        if any(not result.complete for result in self.gain_results):
            lines.append(Line("evomemory: gain gates are not passed by an incomplete run; the session fails",
                              "red", bold=True))
        elif any(not result.met for result in self.gain_results):
            lines.append(Line(
                f"evomemory: {sum(not r.met for r in self.gain_results)} gain gate(s) missed; the session fails",
                "red", bold=True,
            ))
        return lines

    @property
    def baseline_arms(self) -> list[Arm]:
        """One arm per run config (its first replicate when repeated)."""
        return [arm for arm in self.arms if arm.replicate is None or arm.replicate.index == 1]

    def json_report(self) -> dict[str, Any] | None:
        """The block a dashboard reads (pytest-json-report's ``evomemory`` key): one
        shape for one arm and for several (docs/artefacts.md), redacted and strict JSON
        (no bare NaN) as the run directory writes it."""
        if not self.started:
            return None
        report = JsonReport(
            schema_version=SCHEMA_VERSION,
            baseline=self.baseline.name,
            arms=[
                ReportArm(
                    name=arm.name,
                    replicate=None if arm.replicate is None else Replicate.model_validate(arm.replicate.to_dict()),
                    run_dir=str(arm.run_dir),
                    identity=ReportIdentity.model_validate(run_identity(arm.run_config, _ran(arm.summary))),
                    summary=arm.summary,
                )
                for arm in self.arms
            ],
            comparison=None if self.comparison is None else as_comparison(self.comparison),
            gains=[result.document() for result in self.gain_results],
        )
        if self.replicates is not None:  # a repeated session says so, null or not
            report.replicates = None if self.replicate_comparison is None else as_replicates(self.replicate_comparison)
        block: dict[str, Any] = redact_strings(report.written())
        return block


def _given_by(memory_factory: MemoryFactoryFn | None, factories_from: str | None) -> str | None:
    """Who built a stream's memory when the memory config did not (a conftest fixture):
    a refusal names it instead of the memory config it did not come from."""
    if memory_factory is None:
        return None
    by = f" (from {factories_from})" if factories_from else ""
    return f"memory factory {factory_reference(memory_factory)}{by}"


def _ran(summary: Summary | None) -> dict[str, Any] | None:
    """What ran per stream, as the JSON report's identity reads it."""
    return None if summary is None else {stream: ran.written() for stream, ran in summary.ran.items()}


def placement(setup: SessionSetup) -> Placement:
    """Where this session's runs go: :class:`..rundir.Placement` decides, from what the driver said."""
    return Placement(setup.options, setup.flags, setup.invocation_dir, setup.hand_picked is not None, setup.writes)


def _fall_back_to_snapshots(state: ResumeState, benchmark: BenchmarkRun) -> None:
    """Resume each stream from the newest memory snapshot the interrupted run left
    at or before its completed prefix: the episodes after it run again (their
    records replaced), so the rest of the stream never sees a memory other than
    the one its scores came from. A stream without memory needs none; a memory that
    never saved a snapshot is left to refuse the resume when its stream starts. A
    conversation stream left with no snapshot of its ingested memory (none at all
    included) ingests it again, so its earlier ingestion turns are dropped rather
    than counted twice. Each stream whose newest snapshot was passed over gets a
    note saying which slot and why (:attr:`ResumeState.notes`). A stream that would
    restore from a directory holding another run config's snapshots (copied in from
    another run: they verify, but are no memory this run built) refuses the resume,
    before any task (:meth:`StreamSnapshots.refuse_foreign`)."""
    if benchmark.memory_strategy == "none":
        return
    for stream in benchmark.streams:
        done = state.done.get(stream.name, 0)
        snapshots = benchmark.snapshots(stream.name)
        if done or state.ingested(stream.name):
            snapshots.refuse_foreign()
        # No snapshot directory: the memory keeps no snapshots, and the stream's start
        # says it cannot resume; but a conversation stream (which saves its ingested
        # memory as slot 0) lost them, and starts again with its ingestion.
        # Verified, not only labelled: a slot a power cut or an edit damaged is passed
        # over here, before any task, rather than refused when its stream starts.
        if done and (snapshots.directory.exists() or stream.sessions):
            newest = snapshots.newest_intact(done)
            if newest < done:
                if snapshots.directory.exists():
                    state.notes.append(snapshot_fallback_line(stream.name, done, newest, snapshots.distrusted(done)))
                state.truncate(stream.name, newest, {sample.task_id: sample.position for sample in stream.samples})
        if stream.sessions and state.done.get(stream.name, 0) == 0 and not snapshots.intact(0):
            # no snapshot holds the ingested conversation: it is ingested again
            state.forget_ingestion(stream.name, stream.ingestion_ids)


def _restored_count(stream: Stream, completed: int | None, snapshots: StreamSnapshots) -> int | None:
    """After how many episodes the snapshot is that a resumed stream restores (a
    conversation stream: 0 when it holds the ingested conversation), or ``None``."""
    if stream.sessions:
        saved = completed is not None and 0 in snapshots.completed_prefixes()
        return completed if ingestion.plan(completed, saved) == "restore" else None
    return completed or None


def stream_start_failure(record: Record) -> bool:
    """Whether ``record`` says a stream could not start."""
    return isinstance(record, StreamErrorRecord) and record.failure.phase == "start"


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_TASKS",
    "EXIT_OK",
    "EXIT_USAGE",
    "Outcome",
    "RecordSink",
    "Session",
    "SessionSetup",
    "Task",
]
