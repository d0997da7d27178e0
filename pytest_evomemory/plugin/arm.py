"""One arm of a session: one run config, its own run directory and :class:`Run`.

``pytest --evomemory-config=CONTROL.yaml --evomemory-config=MEMORY.yaml`` runs
every arm in one session, the first being the baseline of the comparison. Each arm
is a complete run of its own (directory, memory per stream, summary, thresholds):
what an arm writes is exactly what running its config alone would write, so
``evomemory compare``, ``--evomemory-resume`` and the report read it as any run.

With one config the session has one arm and nothing about the single-run layout
changes (item ids ``<stream>/<task>``, the run directory as before). With several,
an item's stream part becomes ``<arm>:<stream>`` (see :func:`stream_key`), which
is also the unit xdist schedules: each arm's stream keeps its own memory on one
worker, and a stream without memory spreads task by task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..errors import ConfigError
from ..identity import describe_ran
from ..redaction import redact
from ..reporting.terminal import format_table
from ..rundir import ARMS_DIRECTORY_FILES, RESERVED_NAMES, holds_a_run
from ..runtime import BenchmarkRun, Run, RunResult, parse_min_accuracy

#: What separates the arm from the stream in an item's id (``control:sample_facts/f01``).
ARM_SEPARATOR = ":"
#: A record's arm while it travels from the process that ran it to the controller.
ARM_FIELD = "evomemory_arm"
#: Arm names end up in node ids, directory names and table headers.
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
#: What an arm's directory would collide with (case-folded: macOS and Windows file systems fold case).
_RESERVED = frozenset(name.casefold() for name in RESERVED_NAMES)
_ALWAYS_RESERVED = frozenset(name.casefold() for name in ARMS_DIRECTORY_FILES)


def stream_key(arm: str | None, stream: str) -> str:
    """The stream as items and the xdist scheduler name it (the arm's prefix only
    when the session has several arms)."""
    return stream if arm is None else f"{arm}{ARM_SEPARATOR}{stream}"


def check_arm_names(run_configs: Sequence[RunConfig], arms_dir: Path | None = None) -> list[str]:
    """Arm names are the run configs' names: unique, usable in a node id, and not the
    name of what the arms directory ``arms_dir`` holds (``arms.json``,
    ``compare.html``, ``compare.json``; when it also holds a run, any name a run
    directory holds: see :data:`..rundir.RESERVED_NAMES`)."""
    reserved, what = _ALWAYS_RESERVED, ", ".join(ARMS_DIRECTORY_FILES)
    if arms_dir is not None and holds_a_run(arms_dir):
        reserved, what = _RESERVED, f"{arms_dir} holds a run: {', '.join(sorted(RESERVED_NAMES))}"
    names: list[str] = []
    for run_config in run_configs:
        name = run_config.name
        if not _ARM_NAME.match(name):
            raise ConfigError(
                f"{run_config.path}: run name {name!r} cannot name an arm (letters, digits, '.', '_', '+', '-'; "
                "it becomes part of each task's node id); set another `name:` in that run config",
                source=str(run_config.path), key="name",
            )
        if name.casefold() in reserved:
            raise ConfigError(
                f"{run_config.path}: run name {name!r} cannot name an arm: the arms' directory holds a file or "
                f"directory of that name ({what}); set another `name:` in that run config, or give the arms "
                "another --evomemory-output-dir",
                source=str(run_config.path), key="name",
            )
        if name.casefold() in (other.casefold() for other in names):  # one directory where case folds
            raise ConfigError(
                f"two arms are named {name!r} ({run_config.path}); each arm is one run with its own "
                "directory, so give each run config its own `name:`",
                source=str(run_config.path), key="name",
            )
        names.append(name)
    return names


def thresholds_for_arms(values: Sequence[str], names: Sequence[str]) -> dict[str, list[str]]:
    """``--evomemory-min-accuracy`` values per arm: ``[ARM:][STREAM=]FRACTION``, where a
    value without an arm applies to every arm."""
    per_arm: dict[str, list[str]] = {name: [] for name in names}
    for value in values:
        text = str(value)
        if ARM_SEPARATOR not in text.partition("=")[0]:  # no arm named before the stream
            for name in names:
                per_arm[name].append(text)
            continue
        arm, _, rest = text.partition(ARM_SEPARATOR)
        if arm in per_arm:
            per_arm[arm].append(rest)
        else:
            raise ConfigError(
                f"--evomemory-min-accuracy {value!r}: unknown arm {arm!r}; arms: {', '.join(names)} "
                "(the form is [ARM:][STREAM=]FRACTION)",
                source="--evomemory-min-accuracy",
            )
    return per_arm


class Arm:
    """The run of one run config in this session."""

    def __init__(
        self,
        run_config: RunConfig,
        run_dir: Path,
        *,
        labelled: bool,
        is_worker: bool,
        resume: bool,
        command: Sequence[str],
        min_accuracy: Sequence[str],
    ) -> None:
        self.name = run_config.name
        self.prefix: str | None = self.name if labelled else None
        self.run_config = run_config
        self.run_dir = run_dir
        self.benchmark = BenchmarkRun(run_config, run_dir)
        self.min_overall, self.min_streams = parse_min_accuracy(min_accuracy, self.benchmark.stream_order)
        if resume:
            self.run = Run.resuming(self.benchmark, run_dir, command)
        else:
            self.run = Run(self.benchmark, run_dir, command=command, write=not is_worker)
        self.started = False
        self.result: RunResult | None = None

    def key(self, stream: str) -> str:
        return stream_key(self.prefix, stream)

    @property
    def summary(self) -> dict[str, Any] | None:
        return None if self.result is None else self.result.summary

    def tag(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``record`` that names this arm when the session has several."""
        tagged = dict(record)
        if self.prefix is not None:
            tagged[ARM_FIELD] = self.name
        return tagged

    def _start(self) -> None:
        if not self.started:
            self.started = True
            self.run.start()

    def add(self, records: Sequence[Mapping[str, Any]]) -> None:
        if not records:
            return
        self._start()
        for record in records:
            self.run.record({key: value for key, value in record.items() if key != ARM_FIELD})

    def finish(self, stop_reason: str | None) -> RunResult | None:
        """Summary, thresholds and report of this arm; ``None`` when none of its tasks ran."""
        resumed = self.run.resume
        if not self.started and resumed is not None and resumed.completed_tasks:
            # A resumed run with nothing left to run still gets its summary: the
            # interrupted session may have died before writing it (after its last
            # episode, or in another arm), and a comparison needs it.
            self._start()
        if not self.started:
            self.run.release()
            return None  # no task ran: an earlier run's results stay as they were
        # The session's stop (max-errors, Ctrl-C, -x) cuts short the arms still running;
        # an arm whose every planned task ran before it stays complete.
        if self.prefix is None or not self.run.completion()["complete"]:
            self.run.stop_reason = self.run.stop_reason or stop_reason
        self.result = self.run.finish(min_overall=self.min_overall, min_streams=self.min_streams)
        return self.result

    @property
    def cut_short(self) -> bool:
        """Whether something stopped this arm's run before its planned tasks ran
        (Ctrl-C, SIGTERM, -x, --evomemory-max-errors), so that resuming continues it."""
        return self.result is not None and bool(self.run.stop_reason) and not self.run.completion()["complete"]

    @property
    def failed(self) -> bool:
        result = self.result
        if result is None:
            return False
        return bool(result.artefacts_lost) or (
            not result.summary["passed"] and bool(result.thresholds or result.summary["failed_episodes"])
        )

    def report(self, write: Callable[..., None], compare_dir: Path | None = None) -> None:
        """This arm's table, thresholds, failures and paths, as the terminal shows them."""
        result = self.result
        if result is None:
            return
        for line in format_table(result.metrics):
            write(line)
        for line in describe_ran(result.summary.get("ran", {})):
            write(f"ran: {line}")
        completion = result.summary["completion"]
        if not completion["complete"]:
            # the reason is the shortfall itself unless something stopped the run
            why = f" ({self.run.stop_reason})" if self.run.stop_reason else ""
            write(
                f"evomemory: the run is incomplete: {completion['tasks_run']} of "
                f"{completion['tasks_planned']} planned tasks ran{why}; "
                "thresholds are not passed by an incomplete run",
                yellow=True, bold=True,
            )
        for threshold in result.thresholds:
            write(threshold.describe(), red=not threshold.met, green=threshold.met)
        missed = sum(not t.met for t in result.thresholds)
        if missed:
            write(f"evomemory: {missed} accuracy threshold(s) missed; the session fails", red=True, bold=True)
        elif result.thresholds and not result.summary["thresholds_met"]:
            write("evomemory: thresholds are not passed by an incomplete run; the session fails", red=True, bold=True)
        for failure in result.summary["failed_episodes"]:
            if failure.get("phase") != "task":
                where = failure["stream"] + (f"/{failure['task_id']}" if failure.get("task_id") else "")
                write(redact(f"evomemory: {failure['phase']} failed at {where}: {failure['reason']}"), red=True)
        if result.write_failure:
            write(f"evomemory: {result.write_failure}", red=True, bold=True)
        write(f"results: {self.run_dir}")
        if result.report_error:
            write(
                f"evomemory: the HTML report could not be written: {result.report_error}; the session fails "
                f"(the results are written: 'evomemory report {self.run_dir}' renders it again)",
                red=True, bold=True,
            )
        elif result.write_failure is None:
            write(f"report: {self.run_dir / 'report.html'}")
            if compare_dir is not None:
                write(f"comparison: {self.run_dir / 'compare.html'} ({compare_dir} vs this run)")


__all__ = ["ARM_FIELD", "ARM_SEPARATOR", "Arm", "check_arm_names", "stream_key", "thresholds_for_arms"]
