"""Shards: one machine's deterministic share of a session too large for one.

``--evomemory-shard=I/N`` (``evomemory run --shard I/N``) runs shard I of N. The
unit of the share is a *cell*, of the kind ``shard-by`` chooses (:data:`..options.SHARD_UNITS`):

* ``stream`` (the default): one stream with every arm's run of it, so the paired
  comparison of two arms on a stream never spans machines and each shard's
  comparison is complete on its own;
* ``arm``: one arm's run of one stream (named ``arm:stream``), so a stream that
  dominates the session (MMLU-Pro: 85 % of Evo-Memory's calls) spreads its arms
  over several shards; the comparison is then the merge's alone.

Either way a memory stream (a serial chain of episodes) is never split. Cells are assigned
to shards by greedy longest-processing-time on their expected model calls
(:func:`expected_calls`; the biggest cell first, each to the shard with the
least work so far, ties to the lower shard, then in stream order), so the
shares are balanced by work, not by the number of cells, and every machine
computes the same plan from the same configs and options alone.

The plan (every shard's cells and expected calls, the session's config
fingerprint) is printed in the header and recorded in each shard's run.json
(:meth:`ShardPlan.record`); ``evomemory merge`` (:mod:`.merge`) joins the
shards' run directories back into the one run of the whole session and
refuses shards of different plans. A shard refuses a run directory that holds a
run of another plan, or another shard's run of its plan (:func:`check_shard_dir`):
its files would otherwise move to ``history/`` under a sibling's results.
A shard with no cell (more shards than cells) runs nothing, and its run is
complete: a fixed-size CI matrix still merges.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..core.errors import named
from ..options import SHARD_UNITS
from ..rundir import RunDirError, RunReader
from ..rundocs import ShardRecord, ShardThresholds
from ..streams import Stream

#: run.json's key for the shard record.
SHARD_FIELD = "shard"

#: Between an arm's name and a stream's in an ``arm``-unit cell's name (an arm's
#: name never holds it: :func:`..runtime.arm.check_arm_names`).
CELL_SEPARATOR = ":"


def expected_calls(stream: Stream) -> int:
    """The model calls a stream is expected to make in one arm: a task turn per task,
    a feedback turn after each (a stream with feedback), and an ingestion turn per
    conversation session when the agent ingests them. Tool steps within a turn are
    not known in advance; the proxy only has to rank and balance streams."""
    per_task = 2 if stream.feedback else 1
    ingestion = len(stream.sessions) if stream.sessions and stream.ingest == "agent" else 0
    return per_task * len(stream.samples) + ingestion


@dataclass(frozen=True)
class Cell:
    """One stream with every arm's run of it (``arm`` None), or one arm's run of it,
    and the calls they are expected to make."""

    stream: str
    calls: int
    arm: str | None = None

    @property
    def name(self) -> str:
        """The cell as the plan records it: ``stream``, or ``arm:stream``."""
        return self.stream if self.arm is None else f"{self.arm}{CELL_SEPARATOR}{self.stream}"


def cell_stream(name: str, unit: str) -> tuple[str | None, str]:
    """``(arm, stream)`` of a recorded cell name (arm None: the stream unit)."""
    if unit == SHARD_UNITS[0]:
        return None, name
    arm, _, stream = name.partition(CELL_SEPARATOR)
    return arm, stream


def session_fingerprint(arms: Sequence[tuple[str, str]]) -> str:
    """The fingerprint of a session: its arms ``(name, config fingerprint)``, in order.
    Shards of one plan agree on it; a changed config, option or arm changes it."""
    text = json.dumps([list(arm) for arm in arms], ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class ShardPlan:
    """Which cells each of ``count`` shards holds (index 0 is shard 1)."""

    count: int
    fingerprint: str
    arms: tuple[str, ...]
    #: every cell's stream, in the session's stream order
    streams: tuple[str, ...]
    #: per shard, its cells' names (:attr:`Cell.name`) in plan order
    cells: tuple[tuple[str, ...], ...]
    #: per shard, its cells' expected model calls
    calls: tuple[int, ...]
    #: what a cell is (:data:`..options.SHARD_UNITS`)
    unit: str = SHARD_UNITS[0]

    def cells_of(self, index: int) -> tuple[str, ...]:
        """The cells of shard ``index`` (1-based, as the user types it)."""
        return self.cells[index - 1]

    def streams_of(self, index: int, arm: str) -> tuple[str, ...]:
        """The streams ``arm`` runs in shard ``index``, in stream order."""
        held = [cell_stream(cell, self.unit) for cell in self.cells_of(index)]
        return tuple(stream for owner, stream in held if owner in (None, arm))

    def owners(self, arm: str) -> dict[str, int]:
        """Each stream ``arm`` runs -> the shard (1-based) that runs it."""
        return {stream: index for index in range(1, self.count + 1) for stream in self.streams_of(index, arm)}

    def same_plan(self, other: ShardPlan) -> bool:
        return not self.difference(other)

    def difference(self, other: ShardPlan) -> str:
        """What makes ``other`` another plan, in words (empty when it is this one)."""
        if self.fingerprint != other.fingerprint:
            return (f"another config or options (config fingerprint {other.fingerprint[:12]}, "
                    f"this one's {self.fingerprint[:12]})")
        if self.unit != other.unit:
            return f"cells by {other.unit}, not by {self.unit} (the shard-by option)"
        if self.count != other.count:
            return f"{other.count} shards, not {self.count}"
        if self.cells != other.cells:
            return "other cells per shard (another version of the planner)"
        return ""

    def record(self, index: int, thresholds: ShardThresholds | None = None) -> ShardRecord:
        """run.json's ``shard``: this shard, the whole plan and the whole run's gates
        (docs/artefacts.md)."""
        return ShardRecord(
            index=index, count=self.count, config_fingerprint=self.fingerprint, unit=self.unit,  # type: ignore[arg-type]
            arms=list(self.arms), streams=list(self.streams), cells=[list(cells) for cells in self.cells],
            calls=list(self.calls), thresholds=thresholds or ShardThresholds(),
        )

    @classmethod
    def from_record(cls, value: ShardRecord | object) -> tuple[int, ShardPlan]:
        """``(index, plan)`` from a run.json's ``shard``; :class:`ValueError` when damaged."""
        try:
            record = ShardRecord.model_validate(value)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise ValueError(f"the shard record is damaged ({where + ': ' if where else ''}{first['msg']})") from None
        missing = {"index", "count", "config_fingerprint", "arms", "streams", "cells", "calls"} - record.model_fields_set
        if missing:
            raise ValueError(f"the shard record is damaged ({', '.join(sorted(missing))} missing)")
        index, count, cells, unit = record.index, record.count, tuple(map(tuple, record.cells)), record.unit
        if unit != SHARD_UNITS[0] and any(CELL_SEPARATOR not in name for names in cells for name in names):
            raise ValueError(
                f"the shard record is damaged (a cell of the {unit} unit does not name its arm (arm{CELL_SEPARATOR}stream))"
            )
        plan = cls(
            count=count, fingerprint=record.config_fingerprint, arms=tuple(record.arms), streams=tuple(record.streams),
            cells=cells, calls=tuple(record.calls), unit=unit,
        )
        if not 1 <= index <= count or len(cells) != count or len(plan.calls) != count:
            raise ValueError(f"the shard record is damaged (shard {index} of {count}, {len(cells)} shares)")
        return index, plan

    def describe(self, index: int) -> list[str]:
        """The header's lines: this shard's share, and the whole plan."""
        total = sum(self.calls)
        mine = self.cells_of(index)
        share = ", ".join(mine) if mine else "no cell (more shards than cells): nothing to run"
        plan = " | ".join(
            f"{number}: {', '.join(cells) or '-'} ({calls:,})"
            for number, (cells, calls) in enumerate(zip(self.cells, self.calls, strict=True), 1)
        )
        unit = "" if self.unit == SHARD_UNITS[0] else f", cells arm{CELL_SEPARATOR}stream"
        return [
            f"evomemory: shard {index}/{self.count}{unit}: {share} ({self.calls[index - 1]:,} of {total:,} expected model "
            f"calls; busiest shard {max(self.calls):,}, total/N {total / self.count:,.0f})",
            f"evomemory: shard plan (config {self.fingerprint[:12]}): {plan}",
        ]


def plan_shards(cells: Sequence[Cell], count: int, fingerprint: str, arms: Sequence[str]) -> ShardPlan:
    """Greedy longest-processing-time: the biggest cell first (ties in the cells'
    order), each to the shard with the least expected calls so far (ties to the lower
    shard). Deterministic: the plan depends on the cells and ``count`` only. The unit
    is the cells': ``arm`` when they name one."""
    order = {cell.name: position for position, cell in enumerate(cells)}
    loads = [0] * count
    held: list[list[str]] = [[] for _ in range(count)]
    for cell in sorted(cells, key=lambda cell: (-cell.calls, order[cell.name])):
        shard = min(range(count), key=lambda index: (loads[index], index))
        loads[shard] += cell.calls
        held[shard].append(cell.name)
    return ShardPlan(
        count=count,
        fingerprint=fingerprint,
        arms=tuple(arms),
        streams=tuple(dict.fromkeys(cell.stream for cell in cells)),
        cells=tuple(tuple(sorted(names, key=order.__getitem__)) for names in held),
        calls=tuple(loads),
        unit=SHARD_UNITS[1] if any(cell.arm is not None for cell in cells) else SHARD_UNITS[0],
    )


def session_cells(arms: Sequence[tuple[str, Sequence[Stream]]], unit: str = SHARD_UNITS[0]) -> list[Cell]:
    """The cells of a session whose arms ``(name, streams)`` run their streams: in the
    baseline's stream order (then any stream only a later arm runs). The stream unit:
    one per stream, with the calls of every arm that runs it; the arm unit: one per
    arm's run of a stream, the arms of a stream in their order."""
    calls: dict[str, dict[str, int]] = {}
    for arm, streams in arms:
        for stream in streams:
            calls.setdefault(stream.name, {})[arm] = expected_calls(stream)
    if unit == SHARD_UNITS[0]:
        return [Cell(name, sum(per_arm.values())) for name, per_arm in calls.items()]
    return [Cell(name, each, arm) for name, per_arm in calls.items() for arm, each in per_arm.items()]


def check_shard_dir(run_dir: Path, plan: ShardPlan, index: int) -> None:
    """Refuse to write shard ``index`` into a run directory that holds a shard's run of
    another plan, or another shard's run of this plan; a run without a shard record
    (an unsharded earlier run) moves to ``history/`` as any earlier run does."""
    document = RunReader(run_dir).recorded_run()
    if document is None or SHARD_FIELD not in document:
        return
    this, output_flag = f"{named('shard')}={index}/{plan.count}", named("output-dir")
    try:
        was_index, was = ShardPlan.from_record(document[SHARD_FIELD])
    except ValueError as error:
        raise RunDirError(
            f"{this}: {run_dir} holds a shard's run whose plan cannot be read ({error}); give this shard "
            f"another {output_flag}, or remove that run",
            option="shard",
        ) from None
    difference = plan.difference(was)
    if difference:
        raise RunDirError(
            f"{this}: {run_dir} holds shard {was_index}/{was.count} of another plan ({difference}); its results "
            f"cannot be merged with this shard's: give this shard another {output_flag}, or remove that run",
            option="shard",
        )
    if was_index != index:
        raise RunDirError(
            f"{this}: {run_dir} holds shard {was_index}/{plan.count} of the same plan; give each shard its own "
            f"{output_flag} (e.g. results/shard-{index}), then merge them with 'evomemory merge'",
            option="shard",
        )


__all__ = [
    "CELL_SEPARATOR",
    "SHARD_FIELD",
    "Cell",
    "ShardPlan",
    "cell_stream",
    "check_shard_dir",
    "expected_calls",
    "plan_shards",
    "session_cells",
    "session_fingerprint",
]
