"""Repeats: each arm run as N independent replicates within one session.

``benchmark.repeats: N`` (seeds ``seed .. seed + N - 1``), ``benchmark.seeds: [...]``
or ``--evomemory-repeats N`` (``evomemory run --repeats N``, which replaces the
configs' own) turn each run config into N run configs, one per replicate. What
differs between replicates is the seed, and only the seed: replicate ``i`` runs
with ``benchmark.seed`` (so ``order: shuffle`` draws another permutation, unless
``order_seed`` pins one) and ``agent.model.seed`` (unless the model config sends
none, ``seed: null``) set to its seed. Replicate 1 of ``repeats: N`` is therefore
the run the config makes without repeats.

Each replicate is an arm of its own (its label ``<arm>@r<i>``: item ids
``<arm>@r<i>:<stream>/<task>``, its own run directory ``<arm dir>/r<i>``, its own
memory per stream), so pytest, xdist and ``evomemory run`` schedule, resume and
report it as any arm. The comparison (:mod:`..reporting.replicates`) averages each
task over its replicates and pairs the arms by task (the task is the unit of
sampling, the replicates repeated measurements of it: :mod:`..analysis.clustered`),
beside each replicate's own paired test. The arms of one session must run the same
seeds: replicate ``i`` of each arm is paired with the others' replicate ``i``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from ..config import Replicate, RunConfig, base_configs
from ..core.errors import ConfigError, named


def replicate_seeds(config: RunConfig, repeats: int | None) -> tuple[int, ...] | None:
    """The seeds ``config`` runs its replicates with (``repeats`` is the command line's
    count, which wins), or None when it is not repeated."""
    benchmark = config.benchmark
    if repeats is not None:
        return tuple(benchmark.seed + index for index in range(repeats))
    if benchmark.seeds is not None:
        return tuple(benchmark.seeds)
    if benchmark.repeats is not None:
        return tuple(benchmark.seed + index for index in range(benchmark.repeats))
    return None


def expand_replicates(run_configs: Sequence[RunConfig], repeats: int | None) -> list[RunConfig]:
    """Each config as its replicates (arm by arm, replicate 1 first), or the configs
    as given when none is repeated. Refused (before anything is written): arms that
    would run different seeds, which could not be paired replicate by replicate."""
    seeds = [replicate_seeds(config, repeats) for config in run_configs]
    if all(found is None for found in seeds):
        return list(run_configs)
    first = seeds[0]
    for config, found in zip(run_configs, seeds, strict=True):
        if found != first:
            raise ConfigError(
                f"{config.path}: arm {config.name!r} runs {_described(found)}, but arm {run_configs[0].name!r} runs "
                f"{_described(first)}; the arms' replicates pair by seed, so give every run config the same "
                f"benchmark.repeats or benchmark.seeds (and benchmark.seed), or use {named('repeats')}=N for all",
                source=str(config.path), key="benchmark.repeats",
            )
    assert first is not None
    return [replicate_config(config, index, first) for config in run_configs for index in range(1, len(first) + 1)]


def _described(seeds: tuple[int, ...] | None) -> str:
    if seeds is None:
        return "no replicates"
    return f"{len(seeds)} replicate(s), seeds {', '.join(map(str, seeds))}"


def replicate_config(config: RunConfig, index: int, seeds: Sequence[int]) -> RunConfig:
    """Replicate ``index`` (from 1) of ``config``: its seed as ``benchmark.seed`` and
    ``agent.model.seed`` (a model that sends no seed keeps sending none). The
    replicate's own config says no more repeats: it is one run."""
    seed = seeds[index - 1]
    benchmark = config.benchmark.model_copy(update={"seed": seed, "repeats": None, "seeds": None})
    agent = config.agent
    if agent.model is not None and agent.model.seed is not None:
        agent = agent.model_copy(update={"model": agent.model.model_copy(update={"seed": seed})})
    return replace(
        config, benchmark=benchmark, agent=agent, replicate=Replicate(index=index, count=len(seeds), seed=seed)
    )


def replicate_groups(runs: Iterable[tuple[str, Path]]) -> list[tuple[str, list[Path]]]:
    """The replicates' run directories ``(run name, run directory)``, in replicate
    order, grouped by run config (its name): what the comparison across replicates
    reads, in a session and in the merge of its shards."""
    groups: dict[str, list[Path]] = {}
    for name, run_dir in runs:
        groups.setdefault(name, []).append(run_dir)
    return list(groups.items())


__all__ = ["base_configs", "expand_replicates", "replicate_config", "replicate_groups", "replicate_seeds"]
