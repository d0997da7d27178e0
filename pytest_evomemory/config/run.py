"""A resolved run: its three parts, where each came from, and its replicate."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .agent import AgentConfig
from .benchmark import BenchmarkConfig
from .memory import MemoryConfig

#: What joins an arm's name and its replicate in the arm's label (``memory@r2``): a
#: character no run name may hold, so a replicate's label is never another arm's name.
REPLICATE_SEPARATOR = "@"


def replicate_tag(index: int) -> str:
    """Replicate ``index``'s tag (``r2``): its directory under its arm's, its label's end."""
    return f"r{index}"


def arm_label(name: str, replicate: int | None = None) -> str:
    """An arm's label: its run name, with its replicate's tag (``memory@r2``) when repeated."""
    return name if replicate is None else f"{name}{REPLICATE_SEPARATOR}{replicate_tag(replicate)}"


#: A replicate's tag at the end of an arm's label, exactly as :func:`arm_label` forms
#: it: ``@r`` and the replicate's number (1 to 999999, no leading zero).
_REPLICATE_LABEL = re.compile(rf"{re.escape(REPLICATE_SEPARATOR)}r([1-9][0-9]{{0,5}})$")


def split_label(label: str) -> tuple[str, int | None]:
    """``(run name, replicate)`` of an arm's label (``memory@r2``: ``("memory", 2)``;
    ``memory``: ``("memory", None)``). The one parser of a label: strict, so a label
    read back from an artefact (``memory@r01``, ``memory@r``, ``memory@rx``,
    ``memory@r1234567``) is no replicate's, and names itself whole."""
    match = _REPLICATE_LABEL.search(label)
    return (label[: match.start()], int(match.group(1))) if match else (label, None)


def arm_name(label: str) -> str:
    """The run name in an arm's label (``memory@r2``: ``memory``)."""
    return split_label(label)[0]


def replicate_of(label: str) -> int | None:
    """The replicate an arm's label names (``memory@r2``: 2; ``memory``: None)."""
    return split_label(label)[1]


@dataclass(frozen=True)
class Replicate:
    """Which replicate of a repeated run a run config is (:mod:`..runtime.replicates`):
    ``index`` from 1 of ``count``, and the seed it runs with."""

    index: int
    count: int
    seed: int

    @property
    def tag(self) -> str:
        """The replicate's directory name under its arm's (``r2``)."""
        return replicate_tag(self.index)

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count, "seed": self.seed}


@dataclass(frozen=True)
class RunConfig:
    """A fully resolved run: the three parts, and where each came from."""

    name: str
    path: Path
    benchmark: BenchmarkConfig
    agent: AgentConfig
    memory: MemoryConfig
    output_dir: str | None
    sources: Mapping[str, str]
    #: The ``--evomemory-set KEY=VALUE`` settings applied on top of the files.
    overrides: tuple[str, ...] = ()
    #: The command line's ``limit`` and ``streams`` (only those it gave): a resume
    #: applies them again, and never a limit the config file itself set.
    selection: Mapping[str, Any] = field(default_factory=dict)
    #: Set when the session runs this config as one of several replicates.
    replicate: Replicate | None = None
    #: Each path-valued key the loader made absolute (dotted, ``benchmark.order_from``,
    #: ``benchmark.files.0.path``): its value as written, and where it resolved
    #: (:mod:`.paths`). run.json records the first in the config (a moved checkout
    #: or another machine's shard is the same run) and the second under ``paths``.
    spelled: Mapping[str, Any] = field(default_factory=dict)
    located: Mapping[str, str] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def label(self) -> str:
        """The arm's label: the run name, with its replicate (``memory@r2``) when repeated."""
        return arm_label(self.name, None if self.replicate is None else self.replicate.index)

    def with_overrides(
        self, *, limit: int | None = None, streams: Sequence[str] | None = None
    ) -> RunConfig:
        """Apply the command line's limit and stream selection (checked by the options)."""
        update: dict[str, Any] = {}
        if limit is not None:
            update["limit"] = limit
        if streams:
            update["streams"] = list(dict.fromkeys(streams))
        if not update:
            return self
        return replace(self, benchmark=self.benchmark.model_copy(update=update), selection=update)

    def to_dict(self) -> dict[str, Any]:
        """The resolved configuration for ``run.json``. Holds no secret values:
        configs only ever name the environment variables that hold them."""
        document = {
            "name": self.name,
            "path": str(self.path),
            "sources": dict(self.sources),
            "benchmark": _benchmark_dump(self.benchmark),
            "agent": self.agent.model_dump(mode="json"),
            "memory": self.memory.model_dump(mode="json"),
            "overrides": list(self.overrides),
            "selection": dict(self.selection),
        }
        for key, value in self.spelled.items():
            _put(document, key.split("."), value)
        if self.located:
            document["paths"] = dict(self.located)
        return document


def base_configs(run_configs: Sequence[RunConfig]) -> list[RunConfig]:
    """One config per arm (its first replicate when repeated): what names the arms."""
    return [config for config in run_configs if config.replicate is None or config.replicate.index == 1]


def _put(document: dict[str, Any], key: Sequence[str], value: Any) -> None:
    """Set the dotted ``key`` (a digit indexes a list) of ``document`` back to ``value``
    where it still holds a path (a pricing file is recorded as the prices it gave)."""
    target: Any = document
    for part in key[:-1]:
        if isinstance(target, list):
            target = target[int(part)] if part.isdigit() and int(part) < len(target) else None
        else:
            target = target.get(part)
        if not isinstance(target, dict | list):
            return
    if isinstance(target, dict) and isinstance(target.get(key[-1]), str | list):
        target[key[-1]] = value


def _benchmark_dump(benchmark: BenchmarkConfig) -> dict[str, Any]:
    """The benchmark config as run.json records it: ``repeats`` and ``seeds`` only when
    set (a replicate's own config has neither), so the config fingerprint of a run
    that repeats nothing is the one it had before repeats existed (a resume goes on)."""
    dumped = benchmark.model_dump(mode="json")
    for key in ("repeats", "seeds"):
        if dumped.get(key) is None:
            dumped.pop(key, None)
    return dumped
