"""One arm of a session: one run config, its own run directory and :class:`Run`.

``--evomemory-config=CONTROL.yaml --evomemory-config=MEMORY.yaml`` (or
``evomemory run --config ... --config ...``) runs every arm in one session, the
first being the baseline of the comparison. Each arm is a complete run of its own
(directory, memory per stream, summary, thresholds): what an arm writes is exactly
what running its config alone would write, so ``evomemory compare``, resume and
the report read it as any run.

A repeated session (:mod:`.replicates`) has one arm per replicate of each config,
named ``<name>@r<i>`` (``@`` is in no run name) and placed in ``<arm dir>/r<i>``.

With one config the session has one arm and nothing about the single-run layout
changes (item ids ``<stream>/<task>``, the run directory as before). With several,
an item's stream part becomes ``<arm>:<stream>`` (see :meth:`Arm.key`), which is
also the unit xdist schedules: each arm's stream keeps its own memory on one
worker, and a stream without memory spreads task by task.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import RunConfig
from ..core.errors import ConfigError
from ..rundir import ARMS_DIRECTORY_FILES, RESERVED_NAMES, holds_a_run
from .gates import ARM_SEPARATOR, parse_min_accuracy
from .records import Record
from .reports import Reports
from .run import BenchmarkRun, Run, RunResult, effective_thresholds

if TYPE_CHECKING:
    from ..rundocs.summary import Summary

#: Arm names end up in node ids, directory names and table headers.
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
#: What an arm's directory would always collide with (case-folded).
_ALWAYS_RESERVED = frozenset(name.casefold() for name in ARMS_DIRECTORY_FILES)


def check_arm_names(run_configs: Sequence[RunConfig], arms_dir: Path | None = None) -> list[str]:
    """Arm names are the run configs' names: unique (case-folded: one directory where
    the file system folds case), usable in a node id, and not the name of what the
    arms directory ``arms_dir`` holds: ``arms.json``, ``compare.html``,
    ``compare.json`` always; when it also holds a run (an earlier single run in the
    same output directory), any name a run directory holds
    (:data:`..rundir.RESERVED_NAMES`). Elsewhere an arm named ``memory`` or
    ``history`` collides with nothing."""
    reserved, what = _ALWAYS_RESERVED, ", ".join(ARMS_DIRECTORY_FILES)
    if arms_dir is not None and holds_a_run(arms_dir):
        reserved, what = RESERVED_NAMES, f"{arms_dir} holds a run: {', '.join(sorted(RESERVED_NAMES))}"
    names: list[str] = []
    for run_config in run_configs:
        name = run_config.name
        problem, advice = None, "set another `name:` in that run config"
        if not _ARM_NAME.match(name):
            problem = (
                f"run name {name!r} cannot name an arm (letters, digits, '.', '_', '+', '-'; "
                "it becomes part of each task's node id)"
            )
        elif name.casefold() in reserved:
            problem = (
                f"run name {name!r} cannot name an arm: the arms' directory holds a file or folder of that name "
                f"({what})"
            )
            advice += ", or give the arms another output directory"
        elif name.casefold() in (other.casefold() for other in names):
            problem = f"two arms are named {name!r}; each arm is one run with its own directory"
        if problem:
            raise ConfigError(
                f"{run_config.path}: {problem}; {advice}",
                source=str(run_config.path), key="name",
            )
        names.append(name)
    return names


class Arm:
    """The run of one run config in this session."""

    def __init__(
        self,
        run_config: RunConfig,
        run_dir: Path,
        run: Run,
        benchmark: BenchmarkRun,
        *,
        labelled: bool,
        min_accuracy: Sequence[str],
    ) -> None:
        #: the run name, with its replicate when the session repeats it (``memory@r2``)
        self.name = run_config.label
        self.replicate = run_config.replicate
        self.prefix: str | None = self.name if labelled else None
        self.run_config = run_config
        self.run_dir = run_dir
        self.benchmark = benchmark
        self.run = run
        self.min_overall, self.min_streams = parse_min_accuracy(min_accuracy, benchmark.planned_stream_order)
        self.started = False
        self.result: RunResult | None = None
        #: :meth:`finish` ran (once: at the session's end, or as soon as the arm's
        #: chains all ended, :meth:`.Collector.finish_early`)
        self.finished = False
        #: held while this arm's records are written (its run directory, its counts),
        #: and while it finishes: chains of other arms write theirs at the same time
        #: (:meth:`.Collector.add_records`)
        self.lock = threading.Lock()

    def key(self, stream: str) -> str:
        """The stream as items and the xdist scheduler name it (the arm's prefix only
        when the session has several arms)."""
        return stream if self.prefix is None else f"{self.prefix}{ARM_SEPARATOR}{stream}"

    @property
    def summary(self) -> Summary | None:
        return None if self.result is None else self.result.summary

    def _start(self) -> None:
        if not self.started:
            self.started = True
            self.run.start()

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        self._start()
        for record in records:
            self.run.record(record)

    def finish(self, stop_reason: str | None, reports: Reports, *, compared: bool = False) -> RunResult | None:
        """Summary, thresholds and report of this arm (written by ``reports``, the
        renderers the entry point handed the session; ``compared``: the arms'
        comparison follows in this process); ``None`` when none of its tasks ran."""
        self.finished = True
        resumed = self.run.resume
        if not self.started and (
            (resumed is not None and resumed.completed_tasks)
            or (self.run.shard is not None and not self.benchmark.streams)
        ):
            # A resumed run with nothing left to run still gets its summary: the
            # interrupted session may have died before writing it (after its last
            # episode, or in another arm), and a comparison needs it. So does a shard
            # with no cell: its (empty, complete) run is one the merge reads.
            self._start()
        if not self.started:
            self.run.release()
            return None  # no task ran: an earlier run's results stay as they were
        # The session's stop (max-errors, Ctrl-C, -x) cuts short the arms still running;
        # an arm whose every planned task ran before it stays complete.
        if self.prefix is None or not self.run.completion().complete:
            self.run.stop_reason = self.run.stop_reason or stop_reason
        self.result = self.run.finish(reports=reports, min_overall=self.min_overall, min_streams=self.min_streams,
                                      compared=compared)
        return self.result

    @property
    def gated(self) -> bool:
        """Whether accuracy gates (the run config's thresholds or the option) apply to this arm."""
        overall, streams = effective_thresholds(self.benchmark.config, self.min_overall, self.min_streams)
        return overall is not None or bool(streams)

    @property
    def cut_short(self) -> bool:
        """Whether something stopped this arm's run before its planned tasks ran
        (Ctrl-C, SIGTERM, -x, max errors), so that resuming continues it."""
        return self.result is not None and bool(self.run.stop_reason) and not self.run.completion().complete

    @property
    def failed(self) -> bool:
        result = self.result
        if result is None:
            return False
        return bool(result.artefacts_lost) or (
            not result.summary.passed and bool(result.thresholds or result.summary.failed_episodes)
        )


__all__ = ["Arm", "check_arm_names"]
