"""One run config's run: the loaded benchmark and its run directory.

:class:`BenchmarkRun` is the loaded benchmark (configs and streams) and opens each
stream; :class:`Run` is one run of it into one run directory, with a life cycle of
start (fresh or resume), record, finish (summary, thresholds, report). A
:class:`~pytest_evomemory.runtime.session.Session` owns one of each per arm, and
:class:`~pytest_evomemory.runtime.stream.Episode` drives every episode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents.base import Agent
from ..agents.factory import AGENTS, build_agent
from ..analysis.summary import StreamMetrics, ThresholdResult, check_thresholds
from ..config import AgentConfig, MemoryConfig, RunConfig
from ..config.pricing import Pricing
from ..configs.load import unread_agent_options, unread_memory_options
from ..core.errors import ConfigError, DataError, ReportError, SessionRefused, named
from ..core.factories import call_factory, check_protocol, check_signature, load_factory, returned
from ..evaluation import scorer_identity
from ..evaluation.evomemory import EvoMemoryEvaluator
from ..memory.base import MemoryContext, MemorySystem, ModelMeter
from ..memory.factory import WaitNotice, backend_spec, build_memory, missing_extra, open_with_timeout
from ..memory.guard import PartsLedger
from ..memory.snapshot import StreamSnapshots
from ..models import check_agent_environment
from ..models.identity import component, factory_reference, ran_model
from ..rundir import (
    ResumeState,
    RunDirError,
    RunLock,
    RunWriter,
    check_resume_data,
    move_previous_run_aside,
    package_versions,
    utc_now,
)
from ..rundocs import SCHEMA_VERSION, Replicate, Resumed, RunFile, ShardRecord, StreamEntry
from ..rundocs.base import build_validators
from ..streams import Stream, load_benchmark
from ..util.text import shorten
from .ingestion import check_conversation_options
from .memory import IsolationGuard, ObservedMemory, observe
from .order import check_resume_order, order_streams
from .records import Record, ResultCollector
from .reports import Reports
from .stream import StreamRun

if TYPE_CHECKING:
    from ..rundocs.summary import Completion, Summary

AgentFactoryFn = Callable[[AgentConfig, MemorySystem | None], Agent]
MemoryFactoryFn = Callable[[MemoryConfig, MemoryContext], MemorySystem]


#: Where a run's config files were, not what they set: a moved checkout may resume.
#: Not settings of the run: where the files were, where their paths resolved
#: (``paths``; the config holds each as written, :mod:`..config.paths`), and which of
#: the settings came from the command line (the effective limit and streams are in
#: ``benchmark``).
_LOCATION_KEYS = ("path", "sources", "paths", "selection")
#: Settings that decide how fast a run goes, never what it scores (dotted keys of the
#: resolved config): how many requests one process, or the whole session, has in
#: flight. They are not part of the config identity, so a resume with another
#: concurrency continues the run; so does a run recorded while they were, e.g. under
#: ``model.max_concurrency``'s former default of 4 (:func:`same_run`).
THROUGHPUT_KEYS = ("agent.model.max_concurrency", "agent.model.max_connections")


def _without_location(document: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in _LOCATION_KEYS}


def _with_throughput(document: Mapping[str, Any], recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    """``document`` with each of :data:`THROUGHPUT_KEYS` taken from ``recorded`` (left
    out where ``recorded`` is None or lacks it); copies only the dicts on the path."""
    result = dict(document)
    for dotted in THROUGHPUT_KEYS:
        *parents, last = dotted.split(".")
        target, source = result, recorded
        for part in parents:
            inner = target.get(part)
            if not isinstance(inner, Mapping):
                break
            target[part] = target = dict(inner)
            source = source.get(part) if isinstance(source, Mapping) else None
        else:
            target.pop(last, None)
            if isinstance(source, Mapping) and last in source:
                target[last] = source[last]
    return result


def _digest(document: Mapping[str, Any]) -> str:
    text = json.dumps(document, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def config_fingerprint(config: RunConfig) -> str:
    """What must be equal for a resume to continue the same run: every resolved
    setting, but not where the files were (:data:`_LOCATION_KEYS`) nor how fast the
    run goes (:data:`THROUGHPUT_KEYS`, whether set in a file or with ``--set``)."""
    document = _with_throughput(_without_location(config.to_dict()), None)
    document["overrides"] = [
        item for item in config.overrides if item.partition("=")[0].strip() not in THROUGHPUT_KEYS
    ]
    return _digest(document)


def same_run(recorded: str, recorded_config: Mapping[str, Any], config: RunConfig) -> bool:
    """Whether ``config`` continues the run whose run.json recorded the fingerprint
    ``recorded`` and the resolved config ``recorded_config``: the one decision a resume
    makes. Equal fingerprints, or a run recorded before :data:`THROUGHPUT_KEYS` left
    the fingerprint (it hashed them, as they were then): equal once they are put back
    as that run recorded them, whatever they are now."""
    if recorded == config_fingerprint(config):
        return True
    return recorded == _digest(_with_throughput(_without_location(config.to_dict()), recorded_config))


def config_differences(was: Mapping[str, Any], now: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key (was X, now Y)`` for each setting that differs, dotted, in key order; the
    keys :func:`config_fingerprint` ignores are left out. Says what a refused resume changed."""
    changes: list[str] = []
    for key in sorted(set(was) | set(now)):
        if (not prefix and key in _LOCATION_KEYS) or f"{prefix}{key}" in THROUGHPUT_KEYS:
            continue
        old, new = was.get(key), now.get(key)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            changes += config_differences(old, new, f"{prefix}{key}.")
        elif json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
            changes.append(f"{prefix}{key} (was {_shown(old)}, now {_shown(new)})")
    return changes


def _shown(value: Any) -> str:
    return shorten(json.dumps(value, sort_keys=True, default=str), 60)


def _selected_by(config: RunConfig) -> str | None:
    """The option that selected the streams, when the command line did (by identity:
    the door spells it)."""
    return named("stream") if "streams" in config.selection else None


def _session_meter(pricing: Pricing | None, max_tokens: int, what: str) -> ModelMeter | None:
    """:func:`..models.metering.session_meter`, imported when a memory library asks for
    its meter: the metering transport is an ``httpx2`` one, and a process whose memory
    makes no model calls of its own (every built-in backend, and the xdist controller,
    which opens no stream) never imports ``httpx2``."""
    from ..models.metering import session_meter

    return session_meter(pricing, max_tokens, what)


class BenchmarkRun:
    """The loaded streams of a run and the means to open each of them."""

    def __init__(self, config: RunConfig, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        _check_factory_references(config)
        check_agent_environment(config.agent)  # once, before any stream or model call
        source = config.sources.get("benchmark", "benchmark config")
        try:
            self.streams: list[Stream] = order_streams(
                load_benchmark(config.benchmark, config.base_dir, source, _selected_by(config)),
                config.benchmark, config.base_dir, source,
            )
        except (ConfigError, DataError) as error:
            if source in str(error):
                raise
            raise type(error)(f"{source}: {error}") from error
        #: every stream the config selects; :attr:`streams` is the share this session runs
        #: (all of them, unless the session is a shard: :meth:`keep`)
        self.planned_streams: list[Stream] = list(self.streams)
        self.by_name = {stream.name: stream for stream in self.streams}
        check_conversation_options(config.agent.full_context, self.streams, config.sources.get("agent", "agent config"))
        #: Sees every stream this run opens in this process (see runtime/memory.py).
        self.isolation_guard = IsolationGuard()
        #: Which stream was given which agent and memory object (never two streams one).
        self.parts = PartsLedger()

    def keep(self, names: Sequence[str]) -> None:
        """Run only the streams ``names`` (a shard's cells, :mod:`.shards`), in stream order."""
        wanted = set(names)
        self.streams = [stream for stream in self.planned_streams if stream.name in wanted]
        self.by_name = {stream.name: stream for stream in self.streams}

    @cached_property
    def fingerprint(self) -> str:
        """This run config's :func:`config_fingerprint` (run.json's ``config_fingerprint``),
        or the one a resumed run was recorded under (:meth:`continue_as`)."""
        return config_fingerprint(self.config)

    def continue_as(self, recorded: str) -> None:
        """Go on under the fingerprint the resumed run recorded (:func:`same_run` found
        it the same run): its memory snapshots are labelled with it, and its run.json
        and summary keep it, even where it was taken before :data:`THROUGHPUT_KEYS`
        left the fingerprint."""
        self.__dict__["fingerprint"] = recorded

    def snapshots(self, stream: str) -> StreamSnapshots:
        """The memory snapshots of ``stream`` in this run's directory, labelled with this
        run config's fingerprint: every save and restore of the run goes through here, so
        a slot another run's config wrote is never restored (:mod:`..memory.snapshot`)."""
        return StreamSnapshots.for_stream(self.run_dir, stream, self.fingerprint)

    @property
    def stream_order(self) -> list[str]:
        return [stream.name for stream in self.streams]

    @property
    def planned_stream_order(self) -> list[str]:
        """Every stream the config selects, whichever share of them this session runs."""
        return [stream.name for stream in self.planned_streams]

    @property
    def memory_strategy(self) -> str:
        """The one place that decides whether, and how, a stream gets a memory system."""
        return self.config.agent.memory_strategy

    @property
    def independent_streams(self) -> frozenset[str]:
        """Streams whose tasks do not depend on each other: without a memory system
        nothing survives the reset, so they may run in any order, in parallel."""
        return frozenset(self.stream_order) if self.memory_strategy == "none" else frozenset()

    def open_stream(
        self,
        name: str,
        *,
        agent_factory: AgentFactoryFn | None = None,
        memory_factory: MemoryFactoryFn | None = None,
        snapshots: bool = True,
        on_wait: WaitNotice | None = None,
        factories_from: str | None = None,
        check_memory: Callable[[MemorySystem], None] | None = None,
    ) -> StreamRun:
        """A fresh memory system and agent for stream ``name``.

        With ``snapshots``, the memory is saved into the run directory after every
        completed episode (when it offers snapshot/restore), which is what resume
        and xdist crash recovery restore from (:meth:`StreamRun.prepare_memory`).
        ``on_wait`` hears, every few seconds, that the memory factory has not
        returned yet (:func:`..memory.factory.open_with_timeout`). A factory given
        here (``factories_from`` says by whom, e.g. a conftest fixture) whose result is
        not an Agent or a MemorySystem raises :class:`~..core.errors.SessionRefused`.
        ``check_memory`` sees the memory just built, before the agent is (the
        session's check of what it will ask of it, :mod:`.capabilities`).
        """
        context = MemoryContext(
            # a replicate's label: replicates of one run never share a store named after it
            stream=name, run_dir=self.run_dir, run_name=self.config.label, agent_model=self.config.agent.model,
            meter=_session_meter,  # a memory library's own model calls, under the session's cost cap
        )
        strategy = self.memory_strategy
        memory: ObservedMemory | None = None
        memory_name = self.config.memory.backend if memory_factory is None else factory_reference(memory_factory)
        agent_name = self.config.agent.kind if agent_factory is None else factory_reference(agent_factory)
        if strategy != "none":
            factory = memory_factory or build_memory
            backend = open_with_timeout(
                lambda: call_factory(factory, (self.config.memory, context), "memory system"),
                self.config.memory.open_timeout_s,
                _factory_name(factory, self.config.memory.backend),
                on_wait,
            )
            if memory_factory is not None:
                _check_given(backend, MemorySystem, "memory", memory_factory, factories_from)
            _refuse_shared(self.parts, backend, name, "memory system", memory_name)
            if check_memory is not None:
                try:
                    check_memory(backend)
                except BaseException:
                    with contextlib.suppress(Exception):  # the refusal is what the user must see
                        backend.close()
                    raise
            memory = observe(backend, name, self.isolation_guard)
        try:
            agent = call_factory(
                agent_factory or build_agent,
                (self.config.agent, memory if strategy == "deterministic_recall" else None),
                "agent", name=agent_name,
            )
            if agent_factory is not None:
                _check_given(agent, Agent, "agent", agent_factory, factories_from)
            _refuse_shared(self.parts, agent, name, "agent", agent_name)
        except BaseException:
            if memory is not None:
                memory.close()
            raise
        identity = self.identity(agent, memory, agent_factory, memory_factory)
        stream = self.by_name[name]
        return StreamRun(
            # conversation streams (runtime/ingestion.py)
            feedback=stream.feedback,
            sessions=stream.sessions,
            ingest=stream.ingest,
            full_context=self.config.agent.full_context,
            identity=identity,
            stream=name,
            agent=agent,
            memory=memory,
            evaluator=EvoMemoryEvaluator(),
            memory_strategy=strategy,
            max_steps=self.config.agent.max_steps,
            snapshots=self.snapshots(name) if snapshots and memory is not None else None,
            quote_answer=stream.quote_answer,
            pricing=_pricing(self.config.agent),
        )

    def identity(
        self,
        agent: Agent,
        memory: ObservedMemory | None,
        agent_factory: AgentFactoryFn | None,
        memory_factory: MemoryFactoryFn | None,
    ) -> dict[str, Any]:
        """What a stream built: the ``stream_started`` record's, from which every
        artefact names what ran (:mod:`..models.identity`). A part a conftest factory built
        is named by that factory, not by the config's kind or backend."""
        agent_config, memory_config = self.config.agent, self.config.memory
        return {
            "agent": component(
                agent, agent_factory or build_agent,
                kind=agent_config.kind if agent_factory is None else factory_reference(agent_factory),
                memory_strategy=agent_config.memory_strategy, options=dict(agent_config.options),
                # LoCoMo's full-context arm, told apart from the control arm (both without memory)
                full_context=True if agent_config.full_context else None,
            ),
            "memory": component(
                memory.backend if memory is not None else None, memory_factory or build_memory,
                backend=memory_config.backend if memory_factory is None else factory_reference(memory_factory),
            ),
            "model": ran_model(
                agent, agent_config.model, self.config.base_dir,
                builtin_agent=agent_factory is None and AGENTS.is_builtin(agent_config.kind),
            ),
        }

    def run_document(self, started: str, argv: Sequence[str] | None = None) -> RunFile:
        return RunFile.model_validate({
            "run": self.config.to_dict(),
            "config_fingerprint": self.fingerprint,
            "streams": [
                StreamEntry(
                    name=s.name, tasks=len(s), match_mode=s.match_mode, description=s.description,
                    breakdown=s.breakdown, provenance=dict(s.provenance), order=s.order,
                    scorers=[scorer_identity(mode) for mode in sorted({x.match_mode for x in s.samples})],
                )
                for s in self.streams
            ],
            "versions": package_versions(),
            "started": started,
            "command_line": list(sys.argv if argv is None else argv),
            "replicate": self.replicate,
        })

    @property
    def replicate(self) -> Replicate | None:
        """``replicate`` (index, count, seed) for run.json and summary.json, when repeated."""
        replicate = self.config.replicate
        return None if replicate is None else Replicate.model_validate(replicate.to_dict())

    @property
    def planned_tasks(self) -> int:
        return sum(len(stream) for stream in self.streams)


def _pricing(agent: AgentConfig) -> Pricing | None:
    """The agent's model prices (a loaded config has read a pricing file already)."""
    pricing = agent.model.pricing if agent.model is not None else None
    return pricing if isinstance(pricing, Pricing) else None


def _check_given(value: object, protocol: type, what: str, factory: Any, given_by: str | None) -> None:
    """Refuse the result of a factory the driver was given (a conftest fixture's)
    that is not a ``protocol``; the object is closed if it can be."""
    by = f" (from {given_by})" if given_by else ""
    try:
        check_protocol(value, protocol, f"{what} factory {factory_reference(factory)}{by}")
    except SessionRefused:
        close = getattr(value, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass  # not a memory system: nothing more to do for it
        raise


def _refuse_shared(ledger: PartsLedger, part: object, stream: str, what: str, factory: str) -> None:
    """Refuse a factory's result that another stream of the run was given too (the
    object itself): the two streams would share its state (:class:`PartsLedger`)."""
    other = ledger.claim(part, stream)
    if other is None:
        return
    kind = returned(part).removeprefix("a ")
    raise SessionRefused(
        f"{what} factory {factory!r} returned for stream {stream!r} the same {kind} object it returned "
        f"for stream {other!r}; each stream needs its own {what} (a conversation, and the memory it was built "
        f"with, would be shared and leak between streams): build a new one on every call"
    )


def _factory_name(factory: Any, backend: str) -> str:
    if factory is build_memory:
        return f"memory backend {backend!r}"
    module = getattr(factory, "__module__", None) or "?"
    return f"memory factory {module}:{getattr(factory, '__qualname__', repr(factory))}"


def check_builtin_parts(config: RunConfig, *, builtin_agent: bool, builtin_memory: bool) -> None:
    """Refuse, before any stream starts, what the built-in agent or memory would
    fail on or silently ignore (``builtin_*``: the run builds that part itself, with
    no factory of the user's): options it never reads, a backend whose optional
    library is not installed."""
    if builtin_agent and (problem := unread_agent_options(config.agent)):
        raise ConfigError(f"{config.sources.get('agent', 'agent config')}: key 'options': {problem}")
    if not builtin_memory or config.agent.memory_strategy == "none":
        return
    where = config.sources.get("memory", "memory config")
    if problem := unread_memory_options(config.memory):
        raise ConfigError(f"{where}: key 'options': {problem}")
    spec = backend_spec(config.memory.backend)
    if spec is not None and (problem := missing_extra(spec)):
        raise ConfigError(f"{where}: key 'backend': {problem}")
    if spec is not None and spec.check is not None:  # e.g. a model endpoint the memory's infer needs
        spec.check(config.memory, config.agent.model, where)


def _check_factory_references(config: RunConfig) -> None:
    """Import ``module:factory`` agents and backends now, so a typo stops the run
    before any task instead of failing every task of every stream."""
    if ":" in config.agent.kind:
        where = f"{config.sources.get('agent', 'agent config')}: key 'kind': agent"
        check_signature(load_factory(config.agent.kind, where), ("agent_config", "memory"),
                        f"{where} factory {config.agent.kind!r}")
    if ":" in config.memory.backend:
        where = f"{config.sources.get('memory', 'memory config')}: key 'backend': memory"
        check_signature(load_factory(config.memory.backend, where), ("memory_config", "context"),
                        f"{where} factory {config.memory.backend!r}")


def effective_thresholds(
    config: RunConfig,
    overall_override: float | None = None,
    stream_overrides: Mapping[str, float] | None = None,
) -> tuple[float | None, dict[str, float]]:
    """The minimums a run is gated on: the benchmark config's thresholds, with
    command-line values taking precedence (``(overall, per stream)``)."""
    thresholds = config.benchmark.thresholds
    overall = overall_override if overall_override is not None else thresholds.overall
    return overall, {**thresholds.streams, **(stream_overrides or {})}


def evaluate_thresholds(
    config: RunConfig,
    metrics: Mapping[str, StreamMetrics],
    overall_override: float | None = None,
    stream_overrides: Mapping[str, float] | None = None,
    streams: Sequence[str] | None = None,
) -> list[ThresholdResult]:
    """The run's gates (:func:`effective_thresholds`) on its metrics; ``streams``: the
    streams this session runs, when a shard runs a share of them (a stream's gate is
    then judged by the shard that runs it, and by the merged run; a shard that runs
    none of the arm's streams judges no overall gate either: only the merge can)."""
    overall, per_stream = effective_thresholds(config, overall_override, stream_overrides)
    if streams is not None:
        per_stream = {name: minimum for name, minimum in per_stream.items() if name in streams}
        overall = overall if streams else None
    return check_thresholds(metrics, overall, per_stream)


@dataclass
class RunResult:
    """How a run ended: what the entry point prints and turns into its exit status."""

    summary: Summary
    metrics: dict[str, StreamMetrics]
    thresholds: list[ThresholdResult]
    complete: bool
    write_failure: str | None
    report_error: str | None = None

    @property
    def thresholds_met(self) -> bool:
        return self.summary.thresholds_met

    @property
    def artefacts_lost(self) -> str | None:
        """Why an artefact of the run is missing (a write failed, or report.html could
        not be written), else None: a lost result fails the run, it never exits 0."""
        return self.write_failure or (
            f"the HTML report could not be written: {self.report_error}" if self.report_error else None
        )


@dataclass
class Run:
    """One run of a benchmark into one run directory.

    ``start`` locks the directory, moves an earlier run's files aside (or, on
    resume, keeps the completed episodes), and writes run.json; ``record`` takes
    each episode record as it arrives (from this process or an xdist worker);
    ``finish`` writes the summary, evaluates the thresholds and renders the report.
    """

    benchmark: BenchmarkRun
    run_dir: Path
    resume: ResumeState | None = None
    command: Sequence[str] = ()
    write: bool = True
    #: The session this run belongs to (run.json and arms.json record it, so a
    #: resumed session never adopts an arm's results from another session).
    session_id: str | None = None
    started: str = field(default_factory=utc_now)
    collector: ResultCollector = field(init=False)
    writer: RunWriter | None = field(default=None, init=False)
    stop_reason: str | None = None
    #: further summary fields the driver knows (e.g. the in-process driver's wall time)
    extra: dict[str, Any] = field(default_factory=dict, init=False)
    #: run.json's ``shard`` when the session is one shard of several (:mod:`.shards`)
    shard: ShardRecord | None = field(default=None, init=False)
    #: run.json as :meth:`start` wrote it; until then an empty one, made without
    #: building run.json's validator (about 9 ms of CPU), which an xdist worker, that
    #: writes no run.json, never needs
    document: RunFile = field(default_factory=RunFile.model_construct, init=False)
    _lock: RunLock | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.collector = ResultCollector(self.benchmark.stream_order)

    @classmethod
    def resuming(
        cls, benchmark: BenchmarkRun, state: ResumeState, run_dir: Path, *, command: Sequence[str] = (),
        session_id: str | None = None,
    ) -> Run:
        """A run that continues the interrupted run in ``run_dir`` (its ``state``) with
        the same config."""
        recorded = state.document.config_fingerprint if "config_fingerprint" in state.document.model_fields_set else None
        was = state.document.run
        if recorded is not None and not same_run(recorded, was.written(), benchmark.config):
            changed = config_differences(was.written(), benchmark.config.to_dict())
            where = f" at {'; '.join(changed[:3])}{' ...' if len(changed) > 3 else ''}" if changed else ""
            path = was.path if isinstance(was.path, str) else "its run.json"
            raise RunDirError(
                f"{named('resume')} {run_dir}: the run config differs from the interrupted run's{where} "
                f"({path}); resume with the same config and options, or start a new run in another "
                "output directory",
                option="resume",
            )
        if recorded is not None:
            benchmark.continue_as(recorded)
        check_resume_order(state.document, benchmark.streams, run_dir)
        check_resume_data(state.document, benchmark.streams, run_dir)
        return cls(benchmark, run_dir, resume=state, command=command, session_id=session_id)

    def lock(self) -> None:
        if self.write and self._lock is None:
            lock = RunLock(self.run_dir)
            lock.acquire(self.command)
            self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def start(self) -> None:
        self.lock()
        if self.write:
            if self.resume is None:
                move_previous_run_aside(self.run_dir)
            self.writer = RunWriter(self.run_dir)
            self.collector.writer = self.writer
        document = self.benchmark.run_document(self.started, self.command or None)
        document.session = self.session_id
        document.shard = self.shard
        if self.resume is not None:
            if self.writer is not None:
                self.writer.restart_from(self.resume)
            earlier = self.resume.document
            self.collector.preload(self.resume.responses, self.resume.scores, self.resume.events, earlier.ran)
            # the run is the interrupted one, continued: its start and command stay its own
            document.started = earlier.started or self.started
            if "command_line" in earlier.model_fields_set:
                document.command_line = earlier.command_line
            document.resumed = [
                *(earlier.resumed or []),
                Resumed(at=self.started, completed_tasks=dict(self.resume.done),
                        command_line=list(self.command or sys.argv)),
            ]
        self.document = document
        if self.writer is not None:
            self.writer.write_run(document)

    def completed_before(self, stream: str) -> int | None:
        """Episodes of ``stream`` an interrupted run completed (resume), else None."""
        return self.resume.done.get(stream, 0) if self.resume is not None else None

    def record(self, record: Record) -> None:
        self.collector.add(record)

    @property
    def errors(self) -> int:
        """Failed episodes (a task whose task and feedback turns both failed is one)."""
        return self.collector.failed_episode_count

    def completion(self) -> Completion:
        from ..rundocs.summary import Completion  # summary.json's: imported where a run finishes

        planned = self.benchmark.planned_tasks
        ran = len(self.collector.scores)
        complete = ran >= planned and self.stop_reason is None
        reason = self.stop_reason
        if reason is None and not complete:
            reason = f"only {ran} of {planned} planned tasks ran"
        return Completion(complete=complete, tasks_planned=planned, tasks_run=ran, reason=reason)

    def finish(
        self,
        *,
        reports: Reports | None,
        min_overall: float | None = None,
        min_streams: Mapping[str, float] | None = None,
        extra: Mapping[str, Any] | None = None,
        compared: bool = False,
    ) -> RunResult:
        """Write the summary, evaluate the thresholds and, with ``reports`` (the
        renderers the entry point handed the session; None: no page), write report.html
        (``compared``: a comparison of this run follows in this process,
        :meth:`.reports.Reports.run_report`)."""
        try:
            metrics = self.collector.metrics()
            thresholds = evaluate_thresholds(
                self.benchmark.config, metrics, min_overall, min_streams,
                self.benchmark.stream_order if self.shard is not None else None,
            )
            completion = self.completion()
            summary = self.collector.summary(
                thresholds, self.started, utc_now(), completion, {
                    "run": self.benchmark.config.name,
                    # what a dashboard needs to tell runs apart, without reading run.json
                    "config_fingerprint": self.benchmark.fingerprint,
                    "versions": self.document.versions if "versions" in self.document.model_fields_set
                    else package_versions(),
                    "replicate": self.benchmark.replicate,
                    **self.extra,
                    **(extra or {}),
                },
                metrics,
            )
            report_error: str | None = None
            if self.writer is not None:
                ran = summary.ran  # what_ran(), made once (its models validated once)
                if ran:  # what actually ran, known once streams opened (or from the run resumed)
                    self.writer.write_run(self.document.model_copy(update={"ran": ran}))
                self.writer.finalize_scores(self.collector.scores, self.benchmark.stream_order)
                self.writer.finalize_streams(self.benchmark.stream_order)
                if self.writer.failure is not None:
                    # results are missing from the directory: the run cannot pass
                    summary = summary.model_copy(update={"passed": False, "write_failure": self.writer.failure})
                self.writer.write_summary(summary.model_copy(update={"schema_version": SCHEMA_VERSION}))
                if reports is not None and self.writer.failure is None:
                    report_error = _write_report(reports, self.run_dir, compared)
            return RunResult(
                summary=summary,
                metrics=metrics,
                thresholds=thresholds,
                complete=completion.complete,
                write_failure=self.writer.failure if self.writer else None,
                report_error=report_error,
            )
        finally:
            self.release()


def prepare_finish(reports: Reports | None) -> None:
    """Load what finishing a run needs (its summary's document models and, with
    ``reports``, the pages' modules and models), ahead of it: the serial driver calls
    it on a thread of its own while its chains wait on the network, so that none of
    it falls between the last model reply and the end of the session. Finishing
    loads the same on its own when this did not run, or failed."""
    from ..rundocs import identity as identity_documents
    from ..rundocs import records as record_documents
    from ..rundocs import summary as summary_documents  # imported here: a worker never summarizes

    # records: the transcripts the report reads
    build_validators(summary_documents, identity_documents, record_documents)
    if reports is not None:
        reports.prepare()


def _write_report(reports: Reports, run_dir: Path, compared: bool = False) -> str | None:
    try:
        reports.run_report(run_dir, compared=compared)
    except ReportError as error:
        return str(error)
    except (OSError, ValueError) as error:
        # The results are written; a report that cannot be rendered (a full disk,
        # text HTML cannot hold) must not end the run with a traceback.
        return f"{type(error).__name__}: {error}; the results in {run_dir} are complete"
    return None


__all__ = [
    "THROUGHPUT_KEYS",
    "AgentFactoryFn",
    "BenchmarkRun",
    "MemoryFactoryFn",
    "Run",
    "RunResult",
    "check_builtin_parts",
    "config_differences",
    "config_fingerprint",
    "effective_thresholds",
    "evaluate_thresholds",
    "prepare_finish",
]
