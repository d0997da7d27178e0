"""run.json (what ran: the resolved configs, the streams, versions, the shard plan)
and arms.json (a session's arms, for resuming it whole).

The resolved run config (``run``) is the config's own dump: its model section is
declared here only as far as a reader needs it (a model section holds only its
provider's keys); the rest is the config's (docs/configuration.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import Field

from .base import RunDoc, SchemaVersion
from .fields import Count, Number, Scalar, Sha256, Text
from .identity import Replicate, StreamRan, Versions

#: The config's model section (run.json's ``run.agent.model``): a mapping naming its
#: provider, or null. Which providers there are and which keys each one's section holds
#: are the agent config's decision (``config.agent.PROVIDER_KEYS``); the schema
#: generator fills them in here (``schema/generate.py``), as this layer reads no config.
_CONFIG_MODEL = {"anyOf": [
    {"type": "object", "properties": {"provider": {"type": "string"}}, "required": ["provider"]},
    {"type": "null"},
]}


class ConfiguredAgent(RunDoc):
    """The resolved agent config (what the reports read of it)."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset()
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {"model": _CONFIG_MODEL}}

    kind: Scalar = None
    memory_strategy: Scalar = None
    model: dict[str, Any] | None = None


class ConfiguredMemory(RunDoc):
    """The resolved memory config (what the reports read of it)."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset()
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {}}

    backend: Scalar = None


class ConfiguredRun(RunDoc):
    """The resolved run config (see docs/configuration.md); a model section holds only its provider's keys."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"name", "benchmark", "agent", "memory"})
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        "name": {"type": "string"}, "path": {"type": "string"},
        "sources": {"type": "object", "additionalProperties": {"type": "string"}},
        "benchmark": {"type": "object"}, "memory": {"type": "object"},
        "output_dir": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "overrides": {"type": "array", "items": {"type": "string"}},
        "agent": {"type": "object", "properties": {"model": _CONFIG_MODEL}},
        "paths": {
            "description": "Where each path-valued key of the config resolved (dotted key, e.g. benchmark.order_from; a "
            "list's entries as .0, .1): relative to the config file that wrote it, or to the working directory for "
            "--evomemory-set / --set. The config above holds each path as written.",
            "type": "object", "additionalProperties": {"type": "string"},
        },
    }}

    name: Scalar = None
    #: the run config's path (checked where it is used: a damaged one is named so)
    path: Any = None
    #: the ``--set`` overrides (KEY=VALUE strings; checked where they are used)
    overrides: Any = None
    #: the command line's limit and stream selection
    selection: Any = None
    benchmark: dict[str, Any] = Field(default_factory=dict)
    agent: ConfiguredAgent = Field(default_factory=ConfiguredAgent)
    memory: ConfiguredMemory = Field(default_factory=ConfiguredMemory)


class StreamOrder(RunDoc):
    """The stream's task order (docs/configuration.md, "Task order"): kind, seed or difficulty, tasks_sha256."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset()

    kind: Literal["given", "shuffle", "easy_to_hard", "hard_to_easy"] | None = None
    tasks_sha256: str | None = None
    seed: int | None = Field(default=None, description="The seed of a shuffle.")
    difficulty: str | None = Field(
        default=None, description="Where an easy_to_hard or hard_to_easy order's task difficulties came from."
    )

    @property
    def named(self) -> str:
        """The kind, ``given`` when none was recorded (a run.json from before orders were recorded)."""
        return self.kind or "given"


def task_order_digest(task_ids: Iterable[object]) -> str:
    """SHA-256 of the task ids in order (one per line): equal digests, equal orders
    (:attr:`StreamOrder.tasks_sha256`; a reader checks a finished stream's scores by it)."""
    digest = hashlib.sha256()
    for task_id in task_ids:
        digest.update(str(task_id).encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()


class StreamEntry(RunDoc):
    """One stream of the run: its tasks, match mode, provenance, order and scorers."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"name", "tasks", "match_mode", "provenance", "scorers"})
    CLOSED = True

    name: Text = ""
    tasks: Count = 0
    match_mode: Text = ""
    description: str | None = None
    breakdown: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    order: StreamOrder = Field(default_factory=StreamOrder)
    scorers: list[dict[str, Any]] = Field(default_factory=list)


class StreamMinimum(RunDoc):
    """A stream's minimum headline figure."""

    CLOSED = True

    stream: Text = ""
    minimum: Number = 0.0


class ShardThresholds(RunDoc):
    """The gates of the whole run, judged again by evomemory merge."""

    CLOSED = True

    overall: Number | None = None
    streams: list[StreamMinimum] = Field(default_factory=list)


_SHARD_DESCRIPTIONS = {
    "count": "N: how many shards the session was split into.",
    "config_fingerprint": "The session's fingerprint: every arm's name and config fingerprint, in order (shards of "
    "one plan agree on it).",
    "unit": "What a cell is (--evomemory-shard-by): 'stream', a stream with every arm's run of it; 'arm', one arm's "
    "run of one stream. Absent in a record written before the arm unit: 'stream'.",
    "streams": "Every stream of the session's cells, in the session's stream order.",
    "cells": "Per shard (the first is shard 1), its cells: stream names (the stream unit, in stream order) or "
    "'arm:stream' (the arm unit, in stream order and within a stream in arm order).",
    "calls": "Per shard, its cells' expected model calls (what the plan balances).",
}


class _ShardPlan(RunDoc):
    """The plan of a session's shards, as every shard computes it (run.json's ``shard``
    and, after a merge, its ``merged``)."""

    NOT_REQUIRED = frozenset({"unit"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        "count": {"type": "integer", "minimum": 1, "description": _SHARD_DESCRIPTIONS["count"]},
    }}

    count: Count = 1
    config_fingerprint: Sha256 = Field(default="", description=_SHARD_DESCRIPTIONS["config_fingerprint"])
    unit: Literal["stream", "arm"] = Field(default="stream", description=_SHARD_DESCRIPTIONS["unit"])
    arms: list[Text] = Field(default_factory=list)
    streams: list[Text] = Field(default_factory=list, description=_SHARD_DESCRIPTIONS["streams"])
    cells: list[list[Text]] = Field(default_factory=list, description=_SHARD_DESCRIPTIONS["cells"])
    calls: list[Count] = Field(default_factory=list, description=_SHARD_DESCRIPTIONS["calls"])


class ShardRecord(_ShardPlan):
    """This run is shard index/count of a session (--evomemory-shard=I/N, docs/scale.md): the plan every shard computes from the configs and options, and the gates of the whole run, judged again by evomemory merge."""

    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        **_ShardPlan.SCHEMA_EXTRA["properties"], "index": {"type": "integer", "minimum": 1},
    }}

    index: Count = 1
    thresholds: ShardThresholds = Field(default_factory=ShardThresholds)


class MergedRecord(_ShardPlan):
    """This run was merged from the output directories of a session's shards (evomemory merge): their plan and where they were."""

    shards: list[Text] = Field(
        default_factory=list, description="The shards' directories as given to evomemory merge, in shard order."
    )


class Resumed(RunDoc):
    """One resume of the run: when, what was complete, the command line."""

    at: str | None = None
    completed_tasks: dict[str, int] = Field(default_factory=dict)
    command_line: list[str] = Field(default_factory=list)


class RunFile(RunDoc):
    """run.json: the resolved configs, the streams, package versions, what ran."""

    OMIT_NONE = frozenset({"ran", "replicate", "shard", "resumed", "merged"})
    NOT_REQUIRED = frozenset({"session"})
    CLOSED = True

    schema_version: SchemaVersion = 2
    run: ConfiguredRun = Field(default_factory=ConfiguredRun)
    config_fingerprint: Sha256 = ""
    streams: list[StreamEntry] = Field(default_factory=list)
    versions: Versions = Field(default_factory=Versions)
    started: Text = ""
    command_line: list[Text] = Field(default_factory=list)
    session: str | None = None
    resumed: list[Resumed] | None = None
    ran: dict[str, StreamRan] | None = Field(default=None, description="stream -> what ran for it.")
    replicate: Replicate | None = None
    shard: ShardRecord | None = None
    merged: MergedRecord | None = None


class ArmEntryDoc(RunDoc):
    """One arm of a session: its name, its run directory (relative to arms.json's directory when inside it) and its run config."""

    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        "name": {"type": "string"}, "run_dir": {"type": "string"}, "config": {"type": "string"},
    }}

    name: Scalar = None
    #: checked where it is used (:func:`..rundir.paths.recorded_arm_dir`): a damaged one is named so
    run_dir: Any = None
    #: checked where it is used (:func:`..rundir.paths.recorded_config_path`)
    config: Any = None


#: arms.json's own version (it has changed apart from the run documents').
ARMS_SCHEMA_VERSION = 1


class ArmsFile(RunDoc):
    """arms.json: a session's arms in order (the first is the baseline), for resuming it whole."""

    OMIT_NONE = frozenset({"repeats"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        "schema_version": {"const": ARMS_SCHEMA_VERSION},
        "session": {"type": "string"}, "baseline": {"type": "string"},
        "overrides": {"type": "array", "items": {"type": "string"}},
        "repeats": {"type": "integer", "minimum": 1, "maximum": 100,
                    "description": "The command line's replicates per arm (--evomemory-repeats), re-applied on resume."},
    }}

    schema_version: Count = ARMS_SCHEMA_VERSION
    session: Scalar = None
    baseline: Scalar = None
    overrides: list[Any] = Field(default_factory=list)
    repeats: Any = None
    arms: list[ArmEntryDoc] = Field(default_factory=list, min_length=2)


__all__ = [
    "ARMS_SCHEMA_VERSION", "ArmEntryDoc", "ArmsFile", "ConfiguredAgent", "ConfiguredMemory", "ConfiguredRun",
    "MergedRecord",
    "Resumed", "RunFile", "ShardRecord", "ShardThresholds", "StreamEntry", "StreamMinimum", "StreamOrder",
]
