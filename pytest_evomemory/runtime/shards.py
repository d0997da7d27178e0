"""Shards: one machine's deterministic share of a session too large for one.

``--evomemory-shard=I/N`` (``evomemory run --shard I/N``) runs shard I of N. The
unit of the share is a *cell*: one stream with every arm's run of it, so a
memory stream (a serial chain of episodes) is never split and the paired
comparison of two arms on a stream never spans machines. Cells are assigned
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rundir import RUN_DOCUMENT, RunDirError, read_json
from ..streams import Stream

#: run.json's key for the shard record.
SHARD_FIELD = "shard"


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
    """One stream with every arm's run of it, and the calls they are expected to make."""

    stream: str
    calls: int


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
    #: per shard, its cells' streams in stream order
    cells: tuple[tuple[str, ...], ...]
    #: per shard, its cells' expected model calls
    calls: tuple[int, ...]

    def cells_of(self, index: int) -> tuple[str, ...]:
        """The streams of shard ``index`` (1-based, as the user types it)."""
        return self.cells[index - 1]

    def shard_of(self, stream: str) -> int:
        """The shard (1-based) that holds ``stream``."""
        for index, cells in enumerate(self.cells, 1):
            if stream in cells:
                return index
        raise KeyError(stream)

    def same_plan(self, other: ShardPlan) -> bool:
        return (self.fingerprint, self.count, self.cells) == (other.fingerprint, other.count, other.cells)

    def difference(self, other: ShardPlan) -> str:
        """What makes ``other`` another plan, in words (empty when it is this one)."""
        if self.fingerprint != other.fingerprint:
            return (f"another config or options (config fingerprint {other.fingerprint[:12]}, "
                    f"this one's {self.fingerprint[:12]})")
        if self.count != other.count:
            return f"{other.count} shards, not {self.count}"
        if self.cells != other.cells:
            return "other cells per shard (another version of the planner)"
        return ""

    def record(self, index: int) -> dict[str, Any]:
        """run.json's ``shard``: this shard and the whole plan (docs/artefacts.md)."""
        return {
            "index": index,
            "count": self.count,
            "config_fingerprint": self.fingerprint,
            "arms": list(self.arms),
            "streams": list(self.streams),
            "cells": [list(cells) for cells in self.cells],
            "calls": list(self.calls),
        }

    @classmethod
    def from_record(cls, record: object) -> tuple[int, ShardPlan]:
        """``(index, plan)`` from a run.json's ``shard``; :class:`ValueError` when damaged."""
        if not isinstance(record, Mapping):
            raise ValueError("the shard record is not an object")
        try:
            index, count = _whole(record["index"]), _whole(record["count"])
            cells = tuple(tuple(_names(cell)) for cell in record["cells"])
            plan = cls(
                count=count,
                fingerprint=str(record["config_fingerprint"]),
                arms=tuple(_names(record["arms"])),
                streams=tuple(_names(record["streams"])),
                cells=cells,
                calls=tuple(_whole(calls) for calls in record["calls"]),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"the shard record is damaged ({error})") from None
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
        return [
            f"evomemory: shard {index}/{self.count}: {share} ({self.calls[index - 1]:,} of {total:,} expected model "
            f"calls; busiest shard {max(self.calls):,}, total/N {total / self.count:,.0f})",
            f"evomemory: shard plan (config {self.fingerprint[:12]}): {plan}",
        ]


def _whole(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not a whole number")
    return value


def _names(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"{str(value)[:60]!r} is not a list of names")
    return list(value)


def plan_shards(cells: Sequence[Cell], count: int, fingerprint: str, arms: Sequence[str]) -> ShardPlan:
    """Greedy longest-processing-time: the biggest cell first (ties in stream order),
    each to the shard with the least expected calls so far (ties to the lower shard).
    Deterministic: the plan depends on the cells and ``count`` only."""
    order = {cell.stream: position for position, cell in enumerate(cells)}
    loads = [0] * count
    held: list[list[str]] = [[] for _ in range(count)]
    for cell in sorted(cells, key=lambda cell: (-cell.calls, order[cell.stream])):
        shard = min(range(count), key=lambda index: (loads[index], index))
        loads[shard] += cell.calls
        held[shard].append(cell.stream)
    return ShardPlan(
        count=count,
        fingerprint=fingerprint,
        arms=tuple(arms),
        streams=tuple(cell.stream for cell in cells),
        cells=tuple(tuple(sorted(streams, key=order.__getitem__)) for streams in held),
        calls=tuple(loads),
    )


def session_cells(arms: Sequence[Sequence[Stream]]) -> list[Cell]:
    """The cells of a session whose arms run ``arms`` (each arm's streams, in its
    order): one per stream name, in the baseline's order (then any stream only a
    later arm runs), with the calls of every arm that runs it."""
    calls: dict[str, int] = {}
    for streams in arms:
        for stream in streams:
            calls[stream.name] = calls.get(stream.name, 0) + expected_calls(stream)
    return [Cell(name, total) for name, total in calls.items()]


def check_shard_dir(run_dir: Path, plan: ShardPlan, index: int, flag: str, output_flag: str) -> None:
    """Refuse to write shard ``index`` into a run directory that holds a shard's run of
    another plan, or another shard's run of this plan; a run without a shard record
    (an unsharded earlier run) moves to ``history/`` as any earlier run does."""
    document = read_json(run_dir / RUN_DOCUMENT)
    if document is None or SHARD_FIELD not in document:
        return
    this = f"{flag}={index}/{plan.count}"
    try:
        was_index, was = ShardPlan.from_record(document[SHARD_FIELD])
    except ValueError as error:
        raise RunDirError(
            f"{this}: {run_dir} holds a shard's run whose plan cannot be read ({error}); give this shard "
            f"another {output_flag}, or remove that run"
        ) from None
    difference = plan.difference(was)
    if difference:
        raise RunDirError(
            f"{this}: {run_dir} holds shard {was_index}/{was.count} of another plan ({difference}); its results "
            f"cannot be merged with this shard's: give this shard another {output_flag}, or remove that run"
        )
    if was_index != index:
        raise RunDirError(
            f"{this}: {run_dir} holds shard {was_index}/{plan.count} of the same plan; give each shard its own "
            f"{output_flag} (e.g. results/shard-{index}), then merge them with 'evomemory merge'"
        )


__all__ = [
    "SHARD_FIELD",
    "Cell",
    "ShardPlan",
    "check_shard_dir",
    "expected_calls",
    "plan_shards",
    "session_cells",
    "session_fingerprint",
]
