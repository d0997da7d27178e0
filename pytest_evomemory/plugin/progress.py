"""Live progress on the terminal while a benchmark runs, and a verdict per task.

A full run is thousands of model calls, so a dot per task says too little: a
wrong answer is a passed test (only a failed episode fails). This plugin, on the
process that prints (the controller under xdist, which receives every task's
records on its reports), shows

* per task, a letter and word of its own: ``.``/``CORRECT`` and ``w``/``WRONG``
  through ``pytest_report_teststatus``, the outcome staying "passed";
* per stream, a compact line at most every ``evomemory_progress_interval``
  seconds and when the stream's last task is in: tasks done of total, running
  accuracy, failed episodes, protocol violations, tokens, the share of model
  calls served from the response cache, and an ETA from the agent's own time per
  task. ``-q`` keeps only the final line of each stream, ``-qq`` none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import pytest

from ..reporting.progress import StreamProgress, cost_text
from ..runtime.session import Session
from .items import stream_of_nodeid

DEFAULT_INTERVAL = 10.0


def task_verdict(report: pytest.TestReport) -> bool | None:
    """True/False for a scored task's call report, None for anything else."""
    if report.when != "call" or not report.passed:
        return None
    for record in getattr(report, "evomemory_records", None) or ():
        scored = record.get("scored")
        if scored is not None and not scored.get("error"):
            return bool(scored.get("correct"))
    return None


class ProgressHooks:
    """Registered by the plugin on the controller (or the only process) when the
    benchmark is on."""

    def __init__(self, config: pytest.Config, session: Session) -> None:
        self.config = config
        self.session = session
        self.interval = _interval(config)
        self.streams: dict[str, StreamProgress] = {}
        self.pending: list[str] = []

    # ----- totals: what this session will run, per stream

    def _set_totals(self, nodeids: Sequence[str]) -> None:
        counts: dict[str, int] = {}
        for nodeid in nodeids:
            stream = stream_of_nodeid(nodeid)
            if stream is not None:
                counts[stream] = counts.get(stream, 0) + 1
        self.streams = {name: self._resumed(StreamProgress(name, total)) for name, total in counts.items()}

    def _resumed(self, progress: StreamProgress) -> StreamProgress:
        """A resumed stream's line counts the interrupted run's completed tasks too, so
        it says what the table at the end will say."""
        found = self.session.streams_by_key.get(progress.name)
        resume = found[0].run.resume if found is not None else None
        if resume is None or found is None:
            return progress
        stream = found[1]
        for scored in resume.scores:
            if scored.get("stream") == stream:
                progress.total += 1
                progress.add({"scored": scored})
        return progress

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._set_totals([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if not self.streams:
            self._set_totals(ids)

    # ----- per task

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        verdict = task_verdict(report)
        if verdict is None:
            return None
        if verdict:
            return "passed", ".", ("CORRECT", {"green": True})
        return "passed", "w", ("WRONG", {"yellow": True})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A report's scored and response records are its own task's, so its node id
        names their stream (and arm, when several arms run)."""
        key = stream_of_nodeid(report.nodeid)
        progress = self.streams.get(key) if key is not None else None
        records = getattr(report, "evomemory_records", None) or ()
        if progress is None or not records:
            return
        for record in records:
            progress.add(record)
        self._maybe_show(progress, final_only=report.when != "teardown")

    def _maybe_show(self, progress: StreamProgress, final_only: bool) -> None:
        """At teardown the task's feedback is in too, so that is when lines are shown."""
        verbosity = self.config.get_verbosity()
        if verbosity <= -2 or final_only:
            return
        now = time.monotonic()
        if not progress.last_shown:
            progress.last_shown = now  # the interval counts from the stream's first task
            due = verbosity >= 0 and self.interval == 0
        else:
            due = verbosity >= 0 and now - progress.last_shown >= self.interval
        if not (progress.finished or due):
            return
        progress.last_shown = now
        self.pending.append(progress.line(cost_text(list(self.streams.values()))))

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter starts the task's line
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """Lines go out before the next task's letter (or, with ``-v``, its node id), so
        pytest's own lines (and its ``[100%]`` at the end) stay whole."""
        self._flush()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._flush()

    def _flush(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        lines, self.pending = self.pending, []
        if reporter is None or not lines:
            return
        # Written as plain text, not with write_line: pytest then goes on with its line
        # of letters below ours, instead of starting a new one with the module's name.
        writer = getattr(reporter, "_tw", None)  # pytest's terminal writer knows its column
        width = getattr(writer, "width_of_current_line", None)
        mid_line = bool(width) if isinstance(width, int) else reporter.currentfspath is not None
        text = "\n".join(lines)
        # With -v pytest ends the current line itself before each node id; with -q its
        # letters go on below ours.
        if self.config.get_verbosity() <= 0:
            text += "\n"
        reporter.write(("\n" if mid_line else "") + text)


def _interval(config: pytest.Config) -> float:
    raw = config.getini("evomemory_progress_interval")
    try:
        value = float(raw) if raw not in (None, "") else DEFAULT_INTERVAL
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value < math.inf:
        raise pytest.UsageError(
            f"evomemory: ini option evomemory_progress_interval must be a number of seconds (0 or more), "
            f"got {raw!r}; write e.g. evomemory_progress_interval = 10"
        )
    return value
