"""What a session refuses before its first task, beyond what its plan refused.

The plan (:mod:`.plan`) refuses what the command line and the configs contradict;
here, before any task and before the run directories are taken, what would fail
every stream or be silently ignored: options the built-in agent or memory never
read, a backend whose optional library is missing, a memory that cannot do what
the session will ask of it (:mod:`.capabilities`), two arms or streams sharing one
memory store, a capped memory library's model without a price, a resumed stream
whose memory snapshot is missing or damaged. The controller runs it
(:meth:`.Collector.preflight`); the stream driver checks the memory a stream just
built with :func:`memory_check` and :func:`restored_count`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..core.errors import ConfigError, SessionRefused
from ..core.factories import load_factory
from ..memory.base import MemoryContext
from ..memory.factory import backend_spec
from ..memory.snapshot import ResumeRefused, StreamSnapshots
from ..rundir import place_problem
from ..streams import Stream
from . import ingestion
from .arm import Arm
from .capabilities import Need, declared_class, memory_needs, missing
from .chains import chains_in_flight, check_descriptors
from .plan import SessionPlan
from .run import check_builtin_parts


def check_before_tasks(plan: SessionPlan, *, builtin_agent: bool = True, builtin_memory: bool = True) -> None:
    """Refuse, before any task, what would fail every stream or be silently
    ignored: options the built-in agent or memory never read, a backend whose
    optional library is missing, two arms (or streams) sharing one memory store.
    ``builtin_*``: whether the built-in factory builds that part (a user's own
    factory may read any option and put its state anywhere)."""
    if builtin_memory and plan.max_cost is not None:
        check_metered_memory(plan)
    for arm in plan.arms:
        check_builtin_parts(arm.run_config, builtin_agent=builtin_agent, builtin_memory=builtin_memory)
        if builtin_memory:
            _check_capabilities(plan, arm, builtin_agent)
    if builtin_memory:
        _check_shared_stores(plan)
    for arm in plan.arms:
        _check_cache_dir(arm)
        _check_resumed_snapshots(plan, arm)
    _check_descriptors(plan)


def _check_descriptors(plan: SessionPlan) -> None:
    """Open files for the chains this process runs at once: at most the chains option
    (or its default) and the session's chains; one for pytest's processes, each of
    which runs one stream at a time (:func:`.chains.check_descriptors`)."""
    chains = sum(len(arm.benchmark.streams) for arm in plan.arms)
    in_flight = 1 if plan.flags.entry == "pytest" else chains_in_flight(plan.options.chains, chains)
    check_descriptors(in_flight, plan.flags("chains"))


def _check_cache_dir(arm: Arm) -> None:
    """A response cache that cannot be a directory (a file where it, or a folder on
    its way, should be; a read-only place) is refused: the cache drops what it cannot
    write so a run never fails on it, and a re-run would then pay again for every
    reply the user believes is cached."""
    model = arm.run_config.agent.model
    if model is None or model.provider == "mock" or not model.cache_enabled:
        return
    from ..models.cache import CACHE_DIR_ENV, default_cache_dir

    directory = default_cache_dir(model)
    problem = place_problem(directory, "directory")
    if problem is None:
        return
    if os.environ.get(CACHE_DIR_ENV):
        raise ConfigError(
            f"the environment variable {CACHE_DIR_ENV} names the response cache {directory}, but {problem}; "
            f"point it at a directory that can be written, or unset it",
        )
    source = arm.run_config.sources.get("agent", "agent config")
    where = "key 'model.cache_dir'" if model.cache_dir else "the default response cache"
    raise ConfigError(
        f"{source}: {where}: {problem}; give model.cache_dir a directory that can be written, "
        "or set model.cache: false",
        source=source, key="model.cache_dir",
    )


def _memory_needs(plan: SessionPlan, arm: Arm, builtin_agent: bool) -> list[Need]:
    resuming = arm.run.resume is not None and any(
        arm.run.completed_before(stream) for stream in arm.benchmark.stream_order
    )
    return memory_needs(arm.run_config, arm.benchmark.streams, resuming=resuming, builtin_agent=builtin_agent)


def _where_memory(plan: SessionPlan, arm: Arm) -> str:
    where = str(arm.run_config.sources.get("memory", "memory config"))
    return f"arm {arm.name!r}: {where}" if plan.several else where


def _check_capabilities(plan: SessionPlan, arm: Arm, builtin_agent: bool) -> None:
    """Everything the session will ask of the arm's memory, asked of the class its
    factory declares (:mod:`.capabilities`): refused once, before any task."""
    needs = _memory_needs(plan, arm, builtin_agent)
    backend = arm.run_config.memory.backend
    spec = backend_spec(backend)
    factory = spec.open if spec is not None else (load_factory(backend, "memory") if ":" in backend else None)
    declared = declared_class(factory)
    if needs and declared is not None and (problem := missing(declared, needs, _where_memory(plan, arm))):
        raise SessionRefused(problem)


def memory_check(
    plan: SessionPlan, arm: Arm, builtin_agent: bool, given_by: str | None = None
) -> Callable[[object], None]:
    """The same check of the instance a stream just built (a conftest factory
    declares no class): :class:`SessionRefused` before anything is recorded.
    ``given_by`` names the factory that built it when the memory config did not."""
    needs = _memory_needs(plan, arm, builtin_agent)
    where = given_by or _where_memory(plan, arm)

    def check(memory: object) -> None:
        if needs and (problem := missing(memory, needs, where)):
            raise SessionRefused(problem)

    return check


def _check_resumed_snapshots(plan: SessionPlan, arm: Arm) -> None:
    """A resumed stream's memory continues from its snapshot: one that is missing
    or damaged (or a memory that never kept any) is refused now, not when the
    stream starts (whether the memory built can restore it, only its first build
    tells: :meth:`.StreamDriver.open_stream`)."""
    if arm.run.resume is None or arm.benchmark.memory_strategy == "none":
        return
    for stream in arm.benchmark.streams:
        snapshots = arm.benchmark.snapshots(stream.name)
        count = restored_count(stream, arm.run.completed_before(stream.name), snapshots)
        if count is None:
            continue
        if not snapshots.directory.exists():
            raise ResumeRefused(
                f"{plan.flags('resume')} {arm.run_dir}: stream {stream.name!r}: {count} episode(s) were "
                "completed, but the interrupted run kept no memory snapshot of it (its memory system "
                "cannot be resumed: it does not implement snapshot(directory) and restore(directory), "
                f"docs/memory.md; or the snapshots were removed); run again without {plan.flags('resume')}"
            )
        snapshots.verify(count)


def _check_shared_stores(plan: SessionPlan) -> None:
    owners: dict[str, str] = {}
    for arm in plan.arms:
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
                where = f"arm {arm.name!r}, stream {stream!r}" if len(plan.arms) > 1 else f"stream {stream!r}"
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


def check_metered_memory(plan: SessionPlan) -> None:
    """A memory library calling its own model (Mem0's fact extraction, LangMem's
    memory manager) through its own client is metered by the cost cap through that
    client's HTTP transport (:mod:`..models.metering`), at the price of the
    library's model: an arm whose library model has no price is refused before any task."""
    for arm in plan.arms:
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
                f"{where}: key '{price_key}': {plan.flags('max-cost')} meters the calls memory backend "
                f"{config.memory.backend!r} makes to its own chat model ({key}: true) in arm {arm.name!r}, and "
                f"needs that model's price; add {price_key}: {{input_per_million: ..., output_per_million: ...}} "
                f"(0 and 0 for a model that costs nothing), or set {key}: false (e.g. {plan.flags('set')} "
                f"memory.{key}=false)",
                source=where, key=price_key,
            )


def restored_count(stream: Stream, completed: int | None, snapshots: StreamSnapshots) -> int | None:
    """After how many episodes the snapshot is that a resumed stream restores (a
    conversation stream: 0 when it holds the ingested conversation), or ``None``."""
    if stream.sessions:
        saved = completed is not None and 0 in snapshots.completed_prefixes()
        return completed if ingestion.plan(completed, saved) == "restore" else None
    return completed or None


__all__ = ["check_before_tasks", "check_metered_memory", "memory_check", "restored_count"]
