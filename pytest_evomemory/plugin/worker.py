"""The side of a pytest session that runs tasks: an xdist worker, or the only process.

As pytest-xdist keeps its worker code in ``remote.py``, this plugin holds what runs
episodes: a stream for the stream fixture, an episode for the episode fixture, and
each phase's records, moved onto the phase's test report (redacted and inert, see
:mod:`.reportsafety`), on which they travel to the controller (:mod:`.controller`).
It writes nothing itself.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from contextlib import nullcontext
from typing import Any, NoReturn

import pytest

from ..core.errors import BudgetExhausted, EpisodeError, EvoMemoryError
from ..core.types import BenchmarkSample
from ..options import render
from ..reporting.properties import without_task_properties
from ..runtime import Episode, StreamRun, TaskOutcome
from ..runtime.notrun import FailedStream
from ..runtime.records import Record, from_wires
from ..runtime.session import Session
from ..util.redaction import shown
from .collection import CollectionHooks, task_of
from .reportsafety import clean_report
from .stash import is_xdist_worker

#: Who gives the pytest side its factories (named in a refusal of what they built).
_FIXTURES = "the evomemory_agent_factory / evomemory_memory_factory fixtures"


def worker_of(config: pytest.Config) -> WorkerPlugin:
    plugin = config.pluginmanager.get_plugin("evomemory-worker")
    assert isinstance(plugin, WorkerPlugin)
    return plugin


class WorkerPlugin:
    """Registered in the process that runs tasks."""

    def __init__(self, config: pytest.Config, session: Session) -> None:
        self.config = config
        self.session = session
        #: the session's side that runs episodes
        self.driver = session.driver
        self.is_worker = is_xdist_worker(config)
        #: records of the phase in progress, moved onto its report
        self.pending: list[Record] = []
        self.pytest_session: pytest.Session | None = None
        #: the last report's typed records: this process logs the report it made, and
        #: need not validate its own records back from their wire form
        self.reported: tuple[pytest.TestReport, list[Record]] | None = None

    def sink(self, record: Record) -> None:
        self.pending.append(record)

    # ----- the fixtures

    def open_stream(self, key: str, agent_factory: Any, memory_factory: Any) -> StreamRun | FailedStream:
        """The stream fixture's setup: a fresh memory and agent, or a failed stream."""
        return self.driver.start_stream(
            key, self.sink, agent_factory=agent_factory, memory_factory=memory_factory,
            notice=self._write_past_capture, factories_from=_FIXTURES,
        )

    def _write_past_capture(self, line: str) -> None:
        """A line on the real stderr now: pytest captures a fixture's output (at the file
        descriptor), and a notice that something is waited for must show while it is
        (in an xdist worker too, whose stderr is the controller's terminal)."""
        capture = self.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
            sys.stderr.write(shown(line) + "\n")
            sys.stderr.flush()

    def begin_episode(self, key: str, live: StreamRun | FailedStream, sample: BenchmarkSample) -> PytestEpisode:
        """The episode fixture's setup, or the session's word that the task does not
        run: the task that carries its stream's failure fails with it, the others are
        skipped. A refused session runs nothing: this process stops, and the
        controller refuses the session (exit 4), or, if it recorded results already,
        fails the stream (Collector.add_records)."""
        __tracebackhide__ = True
        hooks = self.config.pluginmanager.get_plugin("evomemory-collection")
        first = hooks.first_positions.get(key) if isinstance(hooks, CollectionHooks) else None
        task = self.driver.start_task(live, sample, self.sink, first)
        if isinstance(task, Episode):
            return PytestEpisode(task)
        if task.refused:  # its refusal went to the controller with the stream's records
            if self.pytest_session is not None:
                self.pytest_session.shouldstop = "evomemory: the session is refused"
        elif task.failure is not None:
            fail_test(task.failure)
        pytest.skip(task.reason)

    # ----- pytest's hooks

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: sees the report as every other wrapper left it
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Move this phase's records onto its report, where xdist carries them home.
        A task's report is redacted and made inert before any reporter (terminal, JUnit
        XML, pytest-json-report) or xdist's serialization sees it."""
        report = yield
        if "evomemory_sample" in getattr(item, "fixturenames", ()):
            clean_report(report)
            if report.when == "teardown":  # the last report copies them: the item need not keep them
                kept = without_task_properties(item.user_properties)
                if kept is not None:
                    item.user_properties[:] = kept
        records, self.pending, task = self.pending, [], task_of(item)
        if report.when == "setup" and report.failed and task is not None:
            reason = str(call.excinfo.value).strip() if call.excinfo is not None else ""
            records += self.driver.setup_failed(*task, records, reason)  # a user fixture failed: no record of ours
        if records:
            report.evomemory_records = [record.wire() for record in records]  # type: ignore[attr-defined]
        self.reported = (report, records)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """An xdist worker runs its whole stream before the controller's stop could
        reach it, so each worker adds its failed episodes to the session's shared
        count and stops itself once the total reaches the max errors."""
        if not self.is_worker or self.pytest_session is None:
            return
        reported, self.reported = self.reported, None
        if reported is not None and reported[0] is report:
            records = reported[1]
        else:
            records = from_wires(getattr(report, "evomemory_records", None))
        reason = self.driver.stop_here(records, task_over=report.when == "teardown")
        if reason is not None:
            self.pytest_session.shouldstop = f"evomemory: {reason}"

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.driver.ahead.join()  # the process must not end while a thread imports
        if self.is_worker:  # the controller (or the only process) releases the session itself
            self.session.release()


class PytestEpisode:
    """The episode as a test sees it: a failure of ours is one clear test failure;
    an exception raised in the user's agent or memory code is shown as itself,
    with the user's frames (pytest honours ``--tb``)."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode

    def run_task(self) -> TaskOutcome:
        __tracebackhide__ = True
        try:
            return self.episode.run_task()
        except EvoMemoryError as error:
            _raise_for_test(error, "")

    def finish(self) -> None:
        __tracebackhide__ = True
        try:
            self.episode.finish()
        except EvoMemoryError as error:
            _raise_for_test(error, "feedback turn failed: ")


def _raise_for_test(error: EvoMemoryError, prefix: str) -> NoReturn:
    __tracebackhide__ = True
    if isinstance(error, BudgetExhausted):  # the session stops here; the task runs on resume
        pytest.skip(shown(render(str(error), "pytest")))
    cause = error.__cause__
    if isinstance(error, EpisodeError) and cause is not None and not isinstance(cause, EvoMemoryError):
        raise cause from None
    fail_test(render(f"{prefix}{type(error).__name__}: {error}", "pytest"))


def fail_test(message: str) -> NoReturn:
    """Fail the test with one clear message: no traceback into our internals, no
    "during handling of the above exception" chain, nothing a terminal would obey.
    This frame alone stays in the traceback: pytest shows a ``pytrace=False`` failure
    as its message, but with every frame hidden it adds "All traceback entries are
    hidden. Pass --full-trace ...", sending the user into our internals."""
    failure = pytest.fail.Exception(shown(message), pytrace=False)
    failure.__suppress_context__ = True
    raise failure


__all__ = ["PytestEpisode", "WorkerPlugin", "fail_test", "worker_of"]
