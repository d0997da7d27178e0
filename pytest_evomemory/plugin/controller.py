"""The side of a pytest session that writes the results: the xdist controller, or
the only process.

As pytest-xdist registers its ``DSession`` on the controller only, this plugin is
registered only where results are written: it refuses what the session refuses
before any task, hands every record arriving on a test report to the session's
:class:`~..runtime.collector.Collector`, turns the session's stop reasons into
pytest's ``shouldstop``, finishes the session before other plugins'
``sessionfinish`` (so JUnit and JSON reports carry its verdict), and prints the
session's lines (:mod:`..reporting.sessionlines`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from ..core.errors import EvoMemoryError
from ..options import render
from ..reporting.properties import without_task_properties
from ..reporting.sessionlines import report
from ..runtime.records import from_wires
from ..runtime.session import Session
from ..runtime.signals import lift_shield, shield_interrupts
from ..util.redaction import shown
from .items import task_of_nodeid
from .reporters import add_identity_properties
from .stash import STARTUP_HEAP, distributes

#: Where the default factory fixtures live: a fixture of that name defined in any
#: other registered plugin (a conftest) is the user's own.
_DEFAULT_FIXTURES = "pytest_evomemory.plugin"


class ControllerPlugin:
    def __init__(self, config: pytest.Config, session: Session) -> None:
        self.config = config
        self.session = session
        self.collector = session.collector
        self.pytest_session: pytest.Session | None = None
        #: the benchmark failed the session (a gate missed, results not written)
        self._failed_by_benchmark = False
        #: the end's loads are queued (at the first task's report)
        self._finish_queued = False
        if distributes(config) and config.getvalue("dist") == "each":
            # Every worker would run every stream: each task scored several times over.
            raise pytest.UsageError(
                "evomemory: --dist each would run every stream on every worker; use -n N alone "
                "(each stream then runs whole, on one worker)"
            )
        from .progress import ProgressHooks

        config.pluginmanager.register(ProgressHooks(config, session.plan), "evomemory-progress")
        config.pluginmanager.register(ReleaseRecords(), "evomemory-release-records")

    # ----- before any task

    @pytest.hookimpl(trylast=True)  # after the conftests that may override the factories are loaded
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session
        try:
            self.collector.preflight(
                builtin_agent=not self._overridden("evomemory_agent_factory"),
                builtin_memory=not self._overridden("evomemory_memory_factory"),
            )
        except EvoMemoryError as error:
            raise pytest.UsageError(shown(render(f"evomemory: {error}", "pytest"))) from None
        if distributes(self.config):
            # The xdist controller collects nothing: its start-up ends here.
            self.config.stash[STARTUP_HEAP].settle()
        self.session.state.termination.install()

    def _overridden(self, fixture: str) -> bool:
        """Whether a conftest (or another plugin) defines the factory fixture ``fixture``."""
        for plugin in self.config.pluginmanager.get_plugins():
            if getattr(plugin, "__name__", None) == _DEFAULT_FIXTURES:
                continue
            try:
                defined = getattr(plugin, fixture, None) is not None
            except Exception:  # an odd plugin object
                defined = False
            if defined:
                return True
        return False

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        from .xdist import LOAD_MODES, StreamScheduling

        if config.getvalue("dist") in LOAD_MODES:
            return StreamScheduling(config, log, self.session.plan.independent_streams)
        return None

    # ----- records

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self._finish_queued:
            # the first task's report: the streams are under way (xdist's workers past
            # their start-up), so the end's loads take no process's start-up CPU and
            # are done before the last reply instead of after it
            self._finish_queued = True
            self.session.load_finish_ahead()
        records = from_wires(getattr(report, "evomemory_records", None))
        if not records and report.failed and report.when not in ("setup", "teardown"):
            # no record at all (xdist reports a crash with when "???"): the process running the task died
            task = task_of_nodeid(report.nodeid)
            records = self.collector.crashed(*task, report.longreprtext) if task is not None else []
        stop = self.collector.add_records(records)
        if stop is not None and self.pytest_session is not None:
            reason = f"evomemory: {stop}"
            self.pytest_session.shouldstop = reason
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None:
                dsession.shouldstop = reason

    # ----- the end

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """Finish before other plugins' sessionfinish (pytest-json-report's is
        ``tryfirst``), so their reports carry the summary and the gated exit status."""
        if not self.config.option.collectonly:
            self._finish(session)
        return (yield)

    def _finish(self, session: pytest.Session) -> None:
        # what the thread loads ahead is loaded by then (it started at the first
        # task's report); if not, wait for it rather than import the same modules beside it
        self.session.driver.ahead.join()
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED or self.session.state.termination.terminated
        if not interrupted:
            if session.shouldfail and self.config.getoption("maxfail", 0):
                self.collector.stop(f"stopped early by -x/--maxfail: {session.shouldfail}")
            elif session.shouldfail:
                self.collector.stop(f"stopped early: {session.shouldfail}")
            elif session.shouldstop:
                self.collector.stop(f"stopped early: {session.shouldstop}")
        outcome = self.collector.finish(interrupted=interrupted)
        self._failed_by_benchmark = outcome.failed
        # junitxml writes its file in its own sessionfinish, after this: it names what ran
        add_identity_properties(self.config, [(arm.name, arm.summary) for arm in self.session.plan.arms])
        status = outcome.exit_status(session.exitstatus)
        if status != session.exitstatus:  # the session's own verdict (a pytest.exit code stays as given)
            session.exitstatus = pytest.ExitCode(status)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.option.collectonly:
            return
        for line in report(self.session, resume_command="pytest"):
            if line.section:
                terminalreporter.section(line.text, sep="=")
            else:
                style = {line.style: True} if line.style != "plain" else {}
                terminalreporter.write_line(line.text, bold=line.bold, **style)
        if self._failed_by_benchmark:
            # pytest colours its last line red when a "failed" entry exists; an empty
            # one adds no count ("24 passed" stays true) but ends a failed session in red
            terminalreporter.stats.setdefault("failed", [])

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        """Before pytest formats the first interrupt (its terminal reporter's hook),
        further Ctrl-C is ignored until the session has ended: a second one 50 ms later
        would land in pytest's own handling and print a Python traceback, and the run
        would not be summarized as interrupted."""
        shield_interrupts()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.session.driver.ahead.join()  # the process must not end while a thread imports
        self.session.state.termination.uninstall()
        self.session.release()
        lift_shield()


class ReleaseRecords:
    """Once every plugin has read a task's report, drop what it carries of the task:
    its records (in the run directory by then) and its ``evomemory_*`` properties
    (JUnit XML and pytest-json-report read them in their own ``logreport``, before
    this one). pytest's terminal reporter keeps every report to the end of the
    session, and a task's records (its response, its transcript) and properties
    would otherwise stay in memory with it, ~12 KB per task."""

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if getattr(report, "evomemory_records", None):
            report.evomemory_records = ()  # type: ignore[attr-defined]
        if report.user_properties:
            kept = without_task_properties(report.user_properties)
            if kept is not None:
                report.user_properties = kept


__all__ = ["ControllerPlugin"]
