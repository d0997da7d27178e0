"""The plan of a benchmark session: what runs where, decided when the session opens.

As pytest-xdist's scheduler knows which worker runs what before any test runs, a
:class:`SessionPlan` knows, from the command line and the run configs alone:

* which arms run (one per run config; a resumed session's own), from which
  configs, with which overrides, into which run directories (the placement
  functions at the end of this module);
* the resume plan (what each arm's interrupted run completed, and the memory
  snapshot each resumed stream continues from);
* which share of the streams a shard runs (``shard`` I/N, :mod:`.shards`: each
  arm's run of a stream stays in one shard; with ``shard-by`` stream, every arm's
  run of it) and the plan it records;
* repeats: each run config as N replicates, arms of their own that differ only in
  their seed (:mod:`.replicates`);
* the tasks, their stream keys and order, the run compared with (``compare``) and
  the gain gates (``min-gain``).

What is refused here is refused before anything is written (exit 4): unknown arms,
a resume of another config, a shard of another plan, options that contradict each
other. The plan does not change once built, but for the arms' runs, which the
session's records fill (:mod:`.collector`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import RunConfig
from ..configs import resolve_run_config
from ..configs.load import load_run_config
from ..core.errors import ConfigError, ReportError, named
from ..core.types import BenchmarkSample
from ..options import SHARD_UNITS, Flags, SessionOptions, render
from ..rundir import (
    RUN_DOCUMENT,
    Placement,
    ResumeSource,
    ResumeState,
    RunDirError,
    load_resume_state,
    place_problem,
    read_resume_source,
    started_by,
    with_recorded,
)
from ..rundocs import Score, ShardThresholds, StreamMinimum
from ..streams.jsonl import shared_reads
from ..util.heap import StartupHeap
from .arm import Arm, check_arm_names
from .gates import thresholds_for_arms
from .lines import snapshot_fallback_line
from .replicates import base_configs, expand_replicates, replicate_seeds
from .reports import Reports
from .run import BenchmarkRun, Run, effective_thresholds

if TYPE_CHECKING:
    from ..analysis.gain import GainThreshold
    from .shards import ShardPlan


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
    #: this process's garbage collector at start-up (:mod:`..util.heap`): a stream's parts
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


class SessionPlan:
    """What a session runs where (see the module docstring). Build it with :meth:`open`."""

    def __init__(
        self,
        setup: SessionSetup,
        run_configs: Sequence[RunConfig],
        run_dirs: Sequence[Path],
        resume: ResumeSource | None = None,
        *,
        reports: Reports,
    ) -> None:
        self.setup = setup
        self.flags = setup.flags
        self.options = setup.options
        self.resume_source = resume
        #: who writes the pages the session makes of its runs (the door's renderers, :mod:`.reports`)
        self.reports = reports
        self.session_id = (resume.session if resume is not None else None) or uuid.uuid4().hex
        labelled = len(run_configs) > 1
        bases = self.bases = base_configs(run_configs)
        #: replicates per arm (None: the arms are not repeated, :mod:`.replicates`)
        self.replicates: int | None = run_configs[0].replicate.count if run_configs[0].replicate else None
        if labelled:
            check_arm_names(bases, self.comparison_dir)
        minimums = thresholds_for_arms(
            self.options.min_accuracy, [config.name for config in bases]
        )
        with shared_reads():  # a grid's arms read the same stream files: once
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
        self.max_cost = self.options.max_cost

    # ----- opening

    @classmethod
    def open(cls, setup: SessionSetup, configs: Sequence[str], reports: Reports) -> SessionPlan:
        """Resolve, load and check everything the command line names (``configs``:
        the run configs a driver adds itself, resolved, used when the options name
        none). Raises :class:`ConfigError` for anything the user must fix."""
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
            raise ConfigError(
                f"no run config: give {flags('config')}=PATH (or a built-in config's name), or set "
                "evomemory_config in your pytest settings ([tool.pytest.ini_options] of pyproject.toml)"
            )
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
        return cls(setup, run_configs, run_dirs, resume, reports=reports)

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
            self.reports.check_run(compare_dir)
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
        if len(self.bases) < 2:  # a session of replicates judges each arm's mean gain across them
            raise ConfigError(
                f"{flag} gates the gain of an arm over the baseline: give two run configs, e.g. "
                f"{self.flags('config')}=CONTROL.yaml {self.flags('config')}=MEMORY.yaml (the first is the baseline)"
            )
        streams = list(dict.fromkeys(name for arm in self.arms for name in arm.benchmark.stream_order))
        # the gates' module reads the comparison's documents (about 20 ms of CPU to
        # define): it loads when a session has a gate, not in every process that plans one
        from ..analysis.gain import parse_min_gain

        return parse_min_gain(values, streams, requires=self.options.min_gain_by)

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
        # a sharded run's only
        from .shards import check_shard_dir, plan_shards, session_cells, session_fingerprint

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
        return placement(self.setup).arms_dir(self.bases, self.replicates is not None)

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

    def said(self, text: object) -> str:
        """Engine text (an error, a reason) with the options it names spelled as this
        session's door takes them (:func:`..options.render`): before it is recorded or shown."""
        return render(str(text), self.flags.entry)

    @property
    def baseline_arms(self) -> list[Arm]:
        """One arm per run config (its first replicate when repeated)."""
        return [arm for arm in self.arms if arm.replicate is None or arm.replicate.index == 1]


# ----- where the runs go (rundir.Placement decides), and where a resumed stream continues


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
        # a file where the stream's snapshot folder goes: the resumed episodes would
        # run, then every snapshot write fail; refused first, as the run's own folders are
        in_the_way = place_problem(snapshots.directory, "directory")
        if in_the_way is not None:
            raise RunDirError(
                f"{named('resume')} {snapshots.directory.parent.parent}: {in_the_way}; remove it, or run again "
                f"without {named('resume')}",
                option="resume",
            )
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


__all__ = ["SessionPlan", "SessionSetup", "Task", "placement"]
