"""The benchmark's side of a pytest session: loaded only when the benchmark is on.

The plugin's hooks (:mod:`pytest_evomemory.plugin`) are imported by pytest in every
run of every project that has the package installed, so they hold nothing but
hooks and fixtures; this module maps the engine's :class:`~..runtime.Run` onto the
session: collection, records from reports (xdist or not), and the end of the run.
"""

from __future__ import annotations

import signal
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import pytest

from ..config import RunConfig, load_run_config
from ..errors import ConfigError, DataError, EpisodeError, EvoMemoryError
from ..memory.snapshot import supports_snapshots
from ..redaction import redact
from ..reporting.terminal import format_table
from ..rundir import check_output_dir, default_run_dir
from ..runtime import BenchmarkRun, Episode, Run, RunResult, StreamRun, TaskOutcome, parse_min_accuracy
from ..runtime.records import error_record, stream_error_record
from ..types import BenchmarkSample
from .items import task_of_nodeid
from .stash import SESSION_KEY, STARTUP_HEAP, is_xdist_worker

PLUGIN_NAME = "evomemory-session"
ITEMS_MODULE = Path(__file__).resolve().with_name("items.py")


def activate(config: pytest.Config, path: str, resume: str | None) -> None:
    """Load the run config at ``path``, lock the run directory, register the hooks."""
    try:
        run_config = load_run_config(path, config.getoption("evomemory_set")).with_overrides(
            limit=config.getoption("evomemory_limit"),
            streams=config.getoption("evomemory_stream"),
        )
        session = EvoMemorySession(config, run_config, _run_dir(config, run_config, resume))
    except EvoMemoryError as error:
        raise pytest.UsageError(f"evomemory: {_describe(error)}") from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    _add_benchmark_module_to_args(config)
    _register_xdist_scheduling(config, session.benchmark.independent_streams)
    if config.pluginmanager.hasplugin("pytest_jsonreport"):
        from .jsonreport import JsonReportHooks

        config.pluginmanager.register(JsonReportHooks(lambda: session.summary), "evomemory-jsonreport")


def _describe(error: EvoMemoryError) -> str:
    if isinstance(error, ConfigError | DataError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def _run_dir(config: pytest.Config, run_config: RunConfig, resume: str | None) -> Path:
    invocation_dir = config.invocation_params.dir
    output = resume or config.getoption("evomemory_output_dir") or run_config.output_dir
    run_dir = (invocation_dir / output) if output else default_run_dir(run_config.name, invocation_dir)
    if is_xdist_worker(config):
        return run_dir.resolve()
    return check_output_dir(run_dir)


def _add_benchmark_module_to_args(config: pytest.Config) -> None:
    """Collect the benchmark without a user test file; alone when no paths were given."""
    module = str(ITEMS_MODULE)
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if module not in config.args:
            config.args.append(module)
    else:
        config.args[:] = [module]


def _register_xdist_scheduling(config: pytest.Config, independent: frozenset[str]) -> None:
    if is_xdist_worker(config) or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.getvalue("dist") == "each":
        # Every worker would run every stream: each task scored several times over.
        raise pytest.UsageError(
            "evomemory: --dist each would run every stream on every worker; use -n N alone "
            "(each stream then runs whole, on one worker)"
        )
    from .xdist import XdistHooks

    config.pluginmanager.register(XdistHooks(independent), "evomemory-xdist")


class EvoMemorySession:
    """Run-wide state, registered as a plugin so its hooks see the run.

    The controller (or the only process) owns the :class:`Run`: it locks the run
    directory at once, starts writing when the first task's records arrive (so a
    session that runs no task leaves an earlier run's results as they were), and
    finishes the run at session end. An xdist worker only runs episodes; its records
    travel to the controller on the test reports.
    """

    def __init__(self, config: pytest.Config, run_config: RunConfig, run_dir: Path) -> None:
        self.config = config
        self.run_config = run_config
        self.run_dir = run_dir
        self.is_worker = is_xdist_worker(config)
        self.benchmark = BenchmarkRun(run_config, run_dir)
        self.min_overall, self.min_streams = parse_min_accuracy(
            config.getoption("evomemory_min_accuracy"), self.benchmark.stream_order
        )
        self.max_errors: int | None = config.getoption("evomemory_max_errors")
        if self.max_errors is not None and self.max_errors < 1:
            raise ConfigError(f"--evomemory-max-errors must be at least 1, got {self.max_errors}")
        self.compare_dir = self._compare_dir(config.getoption("evomemory_compare"))
        command = [str(arg) for arg in config.invocation_params.args]
        if config.getoption("evomemory_resume"):
            self.run = Run.resuming(self.benchmark, run_dir, command)
        else:
            self.run = Run(self.benchmark, run_dir, command=command, write=not self.is_worker)
        if not self.is_worker and not config.option.collectonly:
            self.run.lock()
        #: Records of the phase in progress, moved onto its report (see plugin/__init__.py).
        self.pending: list[dict[str, Any]] = []
        self.first_positions: dict[str, int] = {}
        self.pytest_session: pytest.Session | None = None
        self.result: RunResult | None = None
        self.summary: dict[str, Any] | None = None
        self.started = False
        self.terminated = False
        self._previous_sigterm: Any = None

    def _compare_dir(self, other: str | None) -> Path | None:
        if not other:
            return None
        compare_dir = (self.config.invocation_params.dir / other).resolve()
        if compare_dir == self.run_dir.resolve():
            raise ConfigError("--evomemory-compare must name another run's directory")
        from ..reporting.html import ReportError, load_run

        try:
            load_run(compare_dir)
        except ReportError as error:
            raise ConfigError(f"--evomemory-compare: {error}") from None
        return compare_dir

    # ----- collection

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        params = [
            pytest.param(stream.name, sample, id=sample.test_id, marks=[pytest.mark.evomemory])
            for stream in self.benchmark.streams
            for sample in stream.samples
        ]
        metafunc.parametrize(
            ["evomemory_stream", "evomemory_sample"], params,
            indirect=True,
            # Session scope keeps the stream fixture alive across its tasks; the
            # sample fixture is function-scoped and only hands out request.param.
            scope="session",
        )

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Generator[None, None, None]:
        """Put benchmark items back in stream order, whatever reordered them.

        A wrapper around every other implementation (``--ff``, ``--nf``,
        pytest-randomly, ...): a stream is only a stream if its tasks run in source
        order, so ours go back into the slots they hold after all of them ran.
        """
        result = yield
        slots = [index for index, item in enumerate(items) if _sample_of(item) is not None]
        order = {name: index for index, name in enumerate(self.benchmark.stream_order)}
        ours = sorted(
            (items[index] for index in slots),
            key=lambda item: (order[_sample_of(item).stream], _sample_of(item).position),  # type: ignore[union-attr]
        )
        for index, item in zip(slots, ours, strict=True):
            items[index] = item
        resume = self.run.resume
        if resume is not None:
            done = [item for item in items if _done(resume, item)]
            if done:
                self.config.hook.pytest_deselected(items=done)
                items[:] = [item for item in items if not _done(resume, item)]
        return result

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        last: dict[str, int] = {}
        for item in session.items:
            sample = _sample_of(item)
            if sample is None:
                continue
            self.first_positions.setdefault(sample.stream, sample.position)
            if sample.position <= last.get(sample.stream, -1):
                raise pytest.UsageError(
                    f"evomemory: the tasks of stream {sample.stream!r} are out of order after "
                    "collection (a plugin reordered them); run without that plugin's reordering"
                )
            last[sample.stream] = sample.position
        self.config.stash[STARTUP_HEAP].settle()

    def first_selected_position(self, stream: str) -> int | None:
        """Position of the first task of ``stream`` this session runs (after -k/-m/resume)."""
        return self.first_positions.get(stream)

    def sample_for_nodeid(self, nodeid: str) -> BenchmarkSample | None:
        found = task_of_nodeid(nodeid)
        if found is None or found[0] not in self.benchmark.by_name:
            return None
        for sample in self.benchmark.by_name[found[0]].samples:
            if sample.task_id == found[1]:
                return sample
        return None

    # ----- running

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session
        if self.is_worker:
            return
        if self.config.pluginmanager.hasplugin("dsession"):
            # The xdist controller collects nothing: its start-up ends here.
            self.config.stash[STARTUP_HEAP].settle()
        self._catch_sigterm()

    def _catch_sigterm(self) -> None:
        """A CI timeout sends SIGTERM: end the session as Ctrl-C does, so the summary
        (marked incomplete) is still written."""
        try:
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread
            pass

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.terminated = True
        raise KeyboardInterrupt("SIGTERM")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        self.run.release()

    def add_records(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        if not self.started:
            self.started = True
            self.run.start()
        for record in records:
            self.run.record(record)
        if self.max_errors is not None and self.run.errors >= self.max_errors and self.pytest_session:
            reason = f"evomemory: {self.run.errors} failed episodes reached --evomemory-max-errors"
            self.run.stop_reason = f"--evomemory-max-errors ({self.run.errors} failed episodes)"
            self.pytest_session.shouldstop = reason
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None:
                dsession.shouldstop = reason

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        records = list(getattr(report, "evomemory_records", None) or [])
        if not records and report.failed and report.when not in ("setup", "teardown"):
            # No records at all: the process running the task died (xdist worker crash).
            sample = self.sample_for_nodeid(report.nodeid)
            if sample is not None:
                records = [error_record(sample, f"the test process crashed: {_last_line(report.longreprtext)}")]
        self.add_records(records)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """Summarize before other plugins' sessionfinish (pytest-json-report's is
        ``tryfirst``), so their reports carry the summary and the gated exit status."""
        if not self.is_worker and not self.config.option.collectonly:
            self._finish(session)
        return (yield)

    def _stop_reason(self, session: pytest.Session) -> str | None:
        if self.run.stop_reason:
            return self.run.stop_reason
        if self.terminated:
            return "terminated by SIGTERM"
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            return "interrupted (Ctrl-C)"
        if session.shouldfail:
            return f"stopped early: {session.shouldfail}"
        if session.shouldstop:
            return f"stopped early: {session.shouldstop}"
        return None

    def _finish(self, session: pytest.Session) -> None:
        if not self.started:
            self.run.release()
            return  # no task ran: an earlier run's results stay as they were
        self.run.stop_reason = self._stop_reason(session)
        result = self.run.finish(min_overall=self.min_overall, min_streams=self.min_streams)
        self.result = result
        self.summary = result.summary
        failed = (
            not result.summary["passed"]
            and (result.thresholds or result.summary["failed_episodes"] or result.write_failure)
        )
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.compare_dir is not None and result.write_failure is None:
            from ..reporting.html import ReportError, write_comparison_report

            try:
                write_comparison_report([self.compare_dir, self.run_dir], self.run_dir / "compare.html")
            except ReportError as error:
                result.report_error = str(error)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        result = self.result
        if result is None:
            if not self.is_worker and not self.started and not self.config.option.collectonly:
                terminalreporter.write_line(
                    f"evomemory: no benchmark task ran; {self.run_dir} was left as it was"
                )
            return
        write = terminalreporter.write_line
        terminalreporter.section(f"evomemory: {self.run_config.name}", sep="=")
        for line in format_table(result.metrics):
            write(line)
        completion = result.summary["completion"]
        if not completion["complete"]:
            write(
                f"evomemory: the run is incomplete ({completion['reason']}): "
                f"{completion['tasks_run']} of {completion['tasks_planned']} tasks ran; "
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
            write(f"evomemory: the HTML report could not be written: {result.report_error}", red=True)
        elif result.write_failure is None:
            write(f"report: {self.run_dir / 'report.html'}")
            if self.compare_dir is not None:
                write(f"comparison: {self.run_dir / 'compare.html'} ({self.compare_dir} vs this run)")

    # ----- streams and episodes (called from the plugin's fixtures)

    def open_stream(self, name: str, agent_factory: Any, memory_factory: Any) -> StreamRun:
        with self.config.stash[STARTUP_HEAP].paused():
            return self.benchmark.open_stream(
                name, agent_factory=agent_factory, memory_factory=memory_factory,
                snapshots=not self.config.option.collectonly,
            )

    def close_stream(self, run: StreamRun) -> None:
        """Stream teardown; a failure is charged to this stream, not to whichever
        task happens to be running when pytest tears the fixture down."""
        try:
            run.close()
        except EvoMemoryError as error:
            self.pending.append(stream_error_record(run.stream, f"stream teardown failed: {error}"))

    def episode(self, run: StreamRun, sample: BenchmarkSample) -> PytestEpisode:
        if not run.prepared:
            try:
                run.prepare_memory(self._completed_before(run, sample))
            except EvoMemoryError as error:
                run.broken = str(error)
                fail_test(f"stream {sample.stream!r} cannot continue: {error}")
        return PytestEpisode(run, sample, lambda record: self.pending.append(dict(record)))

    def _completed_before(self, run: StreamRun, sample: BenchmarkSample) -> int | None:
        """How many episodes of the stream precede the first one this process runs.

        ``None`` for a stream starting from its first selected task. On resume, the
        interrupted run's completed prefix. In an xdist worker that takes over a
        stream whose worker died (its first task here is not the stream's first),
        the latest memory snapshot saved at or before this task: the crashed task
        itself is a failed episode and its memory operations are gone with it.
        """
        resumed = self.run.completed_before(sample.stream)
        first = self.first_selected_position(sample.stream)
        taking_over = self.is_worker and first is not None and sample.position > first
        if not taking_over:
            return resumed
        if run.snapshots is None or run.memory is None or not supports_snapshots(run.memory.backend):
            return sample.position  # refused by prepare_memory: nothing to restore from
        saved = [count for count in run.snapshots.completed_prefixes() if count <= sample.position]
        return max(saved, default=0)

    def setup_failure_records(self, item: pytest.Item, call: pytest.CallInfo[None]) -> list[dict[str, Any]]:
        """The error record of a task whose setup failed (its stream could not start)."""
        sample = _sample_of(item)
        if sample is None or call.excinfo is None:
            return []
        reason = str(call.excinfo.value).strip() or call.excinfo.typename
        return [error_record(sample, reason)]


class PytestEpisode(Episode):
    """The episode as a test sees it: a failure of ours is one clear test failure;
    an exception raised in the user's agent or memory code is shown as itself,
    with the user's frames (pytest honours ``--tb``)."""

    def run_task(self) -> TaskOutcome:
        __tracebackhide__ = True
        try:
            return super().run_task()
        except EvoMemoryError as error:
            _raise_for_test(error, "")

    def finish(self) -> None:
        __tracebackhide__ = True
        try:
            super().finish()
        except EvoMemoryError as error:
            _raise_for_test(error, "feedback turn failed: ")


def _raise_for_test(error: EvoMemoryError, prefix: str) -> NoReturn:
    __tracebackhide__ = True
    cause = error.__cause__
    if isinstance(error, EpisodeError) and cause is not None and not isinstance(cause, EvoMemoryError):
        raise cause from None
    fail_test(f"{prefix}{type(error).__name__}: {error}")


def fail_test(message: str) -> NoReturn:
    """Fail the test with one clear message: no traceback into our internals and no
    "during handling of the above exception" chain."""
    __tracebackhide__ = True
    failure = pytest.fail.Exception(redact(message), pytrace=False)
    failure.__suppress_context__ = True
    raise failure


def _done(resume: Any, item: pytest.Item) -> bool:
    sample = _sample_of(item)
    return sample is not None and bool(resume.is_done(sample.stream, sample.position))


def _sample_of(item: pytest.Item) -> BenchmarkSample | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    sample = callspec.params.get("evomemory_sample")
    return sample if isinstance(sample, BenchmarkSample) else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no details"
