"""Progress on pytest's terminal: the verdict as a task's status, the streams' lines.

On the process that prints (the controller under xdist, which receives every
task's records on its reports): ``.``/``CORRECT`` and ``w``/``WRONG`` through
``pytest_report_teststatus`` (the outcome stays "passed"), and each stream's line
as :class:`~..reporting.progress.ProgressBoard` decides, written between pytest's
own output. ``-q`` keeps only the final line of each stream, ``-qq`` none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from ..core.errors import ConfigError
from ..options import PROGRESS_INTERVAL_INI
from ..reporting.progress import ProgressBoard, progress_interval, task_verdict
from ..rundocs.wire import from_wires
from ..runtime.plan import SessionPlan
from .items import stream_of_nodeid


class ProgressHooks:
    def __init__(self, config: pytest.Config, plan: SessionPlan) -> None:
        self.config = config
        self.plan = plan
        try:
            interval = progress_interval(config.getini(PROGRESS_INTERVAL_INI), PROGRESS_INTERVAL_INI)
        except ConfigError as error:
            raise pytest.UsageError(f"evomemory: {error}") from None
        self.board = ProgressBoard(interval, final_only=config.get_verbosity() < 0)
        self.pending: list[str] = []

    def _start(self, nodeids: Sequence[str]) -> None:
        totals = Counter(filter(None, map(stream_of_nodeid, nodeids)))  # tasks per stream key
        self.board.start(totals, self.plan.completed_scores)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._start([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if not self.board.streams:
            self._start(ids)

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        if report.when != "call" or not report.passed:
            return None
        for record in from_wires(getattr(report, "evomemory_records", None)):
            scored = getattr(record, "scored", None)
            verdict = task_verdict(scored) if scored is not None else None
            if verdict == "correct":
                return "passed", ".", ("CORRECT", {"green": True})
            if verdict == "wrong":
                return "passed", "w", ("WRONG", {"yellow": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A report's records are its own task's, so its node id names their stream
        (and arm); at teardown the task's feedback is in too, so lines show then."""
        key = stream_of_nodeid(report.nodeid)
        show = report.when == "teardown" and self.config.get_verbosity() > -2
        line = self.board.add(key, from_wires(getattr(report, "evomemory_records", None)), show=show) if key else None
        if line is not None:
            self.pending.append(line)

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

