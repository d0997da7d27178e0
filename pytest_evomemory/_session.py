"""The benchmark's side of a pytest session: loaded only when a run config is given.

:mod:`.plugin` is imported by pytest in every run of every project that has the
package installed, so it holds only hooks and fixtures; this module holds the
session state and everything that needs the core (configs, streams, agents,
reports). It is imported by the plugin the moment ``--evomemory-config`` (or the
ini option, or ``--evomemory-resume``) turns the benchmark on.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from . import _benchmark_items
from ._stash import SESSION_KEY, STARTUP_HEAP
from .config import RunConfig, load_run_config
from .episode import StreamRun, TaskOutcome
from .errors import ConfigError, DataError, EvoMemoryError
from .reporting.artefacts import RunArtefacts, utc_now
from .reporting.summary import StreamMetrics, ThresholdResult
from .reporting.terminal import format_table
from .resume import ResumeState, load_resume_state
from .run import (
    BenchmarkRun,
    RecordedEpisode,
    ResultCollector,
    default_run_dir,
    error_record,
    evaluate_thresholds,
)
from .types import BenchmarkSample

PLUGIN_NAME = "evomemory-session"
_ITEM_ID = re.compile(r"::test_task\[([^/\]]+)/(.+)\]")


def activate(config: pytest.Config, path: str, resume: str | None) -> None:
    """Load the run config at ``path`` and register the session's hooks."""
    try:
        run_config = load_run_config(path).with_overrides(
            limit=config.getoption("evomemory_limit"),
            streams=config.getoption("evomemory_stream"),
        )
        output = resume or config.getoption("evomemory_output_dir") or run_config.output_dir
        invocation_dir = config.invocation_params.dir
        run_dir = (invocation_dir / output) if output else default_run_dir(run_config, invocation_dir)
        session = EvoMemorySession(config, run_config, run_dir.resolve())
    except (ConfigError, DataError) as error:
        raise pytest.UsageError(f"evomemory: {error}") from None
    except EvoMemoryError as error:
        raise pytest.UsageError(f"evomemory: {type(error).__name__}: {error}") from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    _add_benchmark_module_to_args(config)
    _register_xdist_scheduling(config)
    if config.pluginmanager.hasplugin("pytest_jsonreport"):
        from ._jsonreport import JsonReportHooks

        config.pluginmanager.register(JsonReportHooks(session), "evomemory-jsonreport")


def _add_benchmark_module_to_args(config: pytest.Config) -> None:
    """Collect the benchmark without a user test file; alone when no paths were given."""
    module = str(Path(_benchmark_items.__file__).resolve())
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if module not in config.args:
            config.args.append(module)
    else:
        config.args[:] = [module]


def _register_xdist_scheduling(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.getvalue("dist") == "each":
        # Every worker would run every stream: each task scored several times over.
        raise pytest.UsageError(
            "evomemory: --dist each would run every stream on every worker; use -n N alone "
            "(each stream then runs whole, on one worker)"
        )
    from ._xdist import XdistHooks

    config.pluginmanager.register(XdistHooks(), "evomemory-xdist")


class EvoMemorySession:
    """Run-wide state, registered as a plugin so its hooks see the run."""

    def __init__(self, config: pytest.Config, run_config: RunConfig, run_dir: Path) -> None:
        self.config = config
        self.run_config = run_config
        self.run_dir = run_dir
        self.is_worker = hasattr(config, "workerinput")
        self.benchmark = BenchmarkRun(run_config, run_dir)
        self.started = utc_now()
        self.collector: ResultCollector | None = None
        self.summary: dict[str, Any] | None = None
        self.thresholds: list[ThresholdResult] = []
        self.metrics: dict[str, StreamMetrics] = {}
        self.min_overall, self.min_streams = _parse_min_accuracy(
            config.getoption("evomemory_min_accuracy"), self.benchmark.stream_order
        )
        self.max_errors: int | None = config.getoption("evomemory_max_errors")
        if self.max_errors is not None and self.max_errors < 1:
            raise ConfigError(f"--evomemory-max-errors must be at least 1, got {self.max_errors}")
        self.errors = 0
        self.first_positions: dict[str, int] = {}
        self.report_error: str | None = None
        self.compare_dir: Path | None = None
        other = config.getoption("evomemory_compare")
        if other:
            self.compare_dir = (config.invocation_params.dir / other).resolve()
            if self.compare_dir == run_dir.resolve():
                raise ConfigError("--evomemory-compare must name another run's directory")
            from .reporting.html import ReportError, load_run

            try:
                load_run(self.compare_dir)
            except ReportError as error:
                raise ConfigError(f"--evomemory-compare: {error}") from None
        self.pytest_session: pytest.Session | None = None
        self.resume: ResumeState | None = None
        if config.getoption("evomemory_resume"):
            self.resume = load_resume_state(run_dir, self.benchmark.streams)

    # ----- collection

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        params = [
            pytest.param(
                stream.name, sample, id=sample.test_id,
                marks=[pytest.mark.evomemory],
            )
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

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Put benchmark items back in stream order, whatever shuffled them.

        Plugins such as pytest-randomly reorder items; a stream is only a stream if
        its tasks run in source order, so ours go back into the slots they hold.
        """
        slots = [index for index, item in enumerate(items) if _sample_of(item) is not None]
        order = {name: index for index, name in enumerate(self.benchmark.stream_order)}
        ours = sorted(
            (items[index] for index in slots),
            key=lambda item: (order[_sample_of(item).stream], _sample_of(item).position),  # type: ignore[union-attr]
        )
        for index, item in zip(slots, ours, strict=True):
            items[index] = item
        if self.resume is not None:
            done = [item for item in items if self._already_done(item)]
            if done:
                self.config.hook.pytest_deselected(items=done)
                items[:] = [item for item in items if not self._already_done(item)]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            sample = _sample_of(item)
            if sample is not None:
                self.first_positions.setdefault(sample.stream, sample.position)
        self.config.stash[STARTUP_HEAP].settle()

    def _sample_for_nodeid(self, nodeid: str) -> BenchmarkSample | None:
        match = _ITEM_ID.search(nodeid)
        if match is None or match.group(1) not in self.benchmark.by_name:
            return None
        for sample in self.benchmark.by_name[match.group(1)].samples:
            if sample.task_id == match.group(2):
                return sample
        return None

    def first_selected_position(self, stream: str) -> int | None:
        """Position of the first task of ``stream`` this session runs (after -k/-m/resume)."""
        return self.first_positions.get(stream)

    def _already_done(self, item: pytest.Item) -> bool:
        sample = _sample_of(item)
        return self.resume is not None and sample is not None and self.resume.is_done(sample.stream, sample.position)

    def memory_replay(self, stream: str) -> list[Any]:
        return list(self.resume.memory_writes.get(stream, [])) if self.resume else []

    # ----- running

    def start(self) -> None:
        if self.is_worker or self.config.option.collectonly:
            return
        if self.resume is None:
            _clear_previous_artefacts(self.run_dir)
        artefacts = RunArtefacts(self.run_dir)
        document = self.benchmark.run_document(self.started, self.config.invocation_params.args)
        self.collector = ResultCollector(self.benchmark.stream_order, artefacts)
        if self.resume is not None:
            artefacts.restart_from(self.resume.responses, self.resume.scores)
            self.collector.preload(self.resume.responses, self.resume.scores)
            document["resumed"] = {"at": self.started, "completed_tasks": self.resume.done}
        artefacts.write_run(document)
        if self.config.pluginmanager.hasplugin("dsession"):
            # The xdist controller collects nothing: its start-up ends here.
            self.config.stash[STARTUP_HEAP].settle()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.collector is None:
            return
        records = getattr(report, "evomemory_records", None) or []
        if not records and report.failed and report.when not in ("setup", "teardown"):
            # No records at all: the process running the task died (xdist worker crash).
            sample = self._sample_for_nodeid(report.nodeid)
            if sample is not None:
                records = [error_record(sample, f"the test process crashed: {_first_line(report.longreprtext)}")]
        for record in records:
            self.collector.add_record(record)
            if record.get("type") == "error":
                self.errors += 1
                if self.max_errors is not None and self.errors >= self.max_errors and self.pytest_session:
                    self.pytest_session.shouldstop = (
                        f"evomemory: {self.errors} failed episodes reached --evomemory-max-errors"
                    )

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """Summarize before other plugins' sessionfinish (pytest-json-report's is
        ``tryfirst``), so their reports carry the summary and the gated exit status."""
        if self.collector is not None:
            self._finish(session)
        return (yield)

    def _finish(self, session: pytest.Session) -> None:
        assert self.collector is not None
        self.metrics = self.collector.metrics()
        self.thresholds = evaluate_thresholds(
            self.run_config, self.metrics, self.min_overall, self.min_streams
        )
        self.summary = self.collector.finish(self.thresholds, self.started, {"run": self.run_config.name})
        if not all(t.met for t in self.thresholds) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        from .reporting.html import ReportError, write_comparison_report, write_html_report

        try:
            write_html_report(self.run_dir)
            if self.compare_dir is not None:
                write_comparison_report([self.compare_dir, self.run_dir], self.run_dir / "compare.html")
        except ReportError as error:
            self.report_error = str(error)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None:
            return
        write = terminalreporter.write_line
        terminalreporter.section(f"evomemory: {self.run_config.name}", sep="=")
        for line in format_table(self.metrics):
            write(line)
        for result in self.thresholds:
            write(result.describe(), red=not result.met, green=result.met)
        if self.thresholds and not all(t.met for t in self.thresholds):
            missed = sum(not t.met for t in self.thresholds)
            write(f"evomemory: {missed} accuracy threshold(s) missed; the session fails", red=True, bold=True)
        write(f"results: {self.run_dir}")
        if self.report_error:
            write(f"evomemory: the HTML report could not be written: {self.report_error}", red=True)
        else:
            write(f"report: {self.run_dir / 'report.html'}")
            if self.compare_dir is not None:
                write(f"comparison: {self.run_dir / 'compare.html'} ({self.compare_dir} vs this run)")


def setup_failure_records(item: pytest.Item, call: pytest.CallInfo[None]) -> list[dict[str, Any]]:
    """The error record of a task whose setup failed (its stream could not start)."""
    sample = _sample_of(item)
    if sample is None or call.excinfo is None:
        return []
    reason = str(call.excinfo.value).strip() or call.excinfo.typename
    return [error_record(sample, reason)]


def _sample_of(item: pytest.Item) -> BenchmarkSample | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    sample = callspec.params.get("evomemory_sample")
    return sample if isinstance(sample, BenchmarkSample) else None


def _parse_min_accuracy(values: list[str], streams: list[str]) -> tuple[float | None, dict[str, float]]:
    overall: float | None = None
    per_stream: dict[str, float] = {}
    for value in values:
        name, _, number = value.rpartition("=")
        try:
            fraction = float(number)
        except ValueError:
            raise ConfigError(f"--evomemory-min-accuracy {value!r}: expected [STREAM=]FRACTION such as 0.5") from None
        if not 0.0 <= fraction <= 1.0:
            raise ConfigError(f"--evomemory-min-accuracy {value!r}: the fraction must be between 0 and 1")
        if not name:
            overall = fraction
        elif name not in streams:
            raise ConfigError(f"--evomemory-min-accuracy {value!r}: unknown stream {name!r}; streams: {', '.join(streams)}")
        else:
            per_stream[name] = fraction
    return overall, per_stream


_ARTEFACT_NAMES = ("run.json", "responses.jsonl", "scores.jsonl", "summary.json", "report.html", "compare.html")


def _clear_previous_artefacts(run_dir: Path) -> None:
    """A new run replaces the previous run's files in the same directory (only ours)."""
    for name in _ARTEFACT_NAMES:
        (run_dir / name).unlink(missing_ok=True)
    transcripts = run_dir / "transcripts"
    if transcripts.is_dir():
        for path in transcripts.glob("*.jsonl"):
            path.unlink()


def fail_test(message: str) -> NoReturn:
    """Fail the test with one clear message: no traceback into our internals and no
    "during handling of the above exception" chain."""
    failure = pytest.fail.Exception(message, pytrace=False)
    failure.__suppress_context__ = True
    raise failure


class Episode(RecordedEpisode):
    """The episode as a test sees it: a failure is one clear test failure."""

    def run_task(self) -> TaskOutcome:
        try:
            return super().run_task()
        except EvoMemoryError as error:
            fail_test(f"{type(error).__name__}: {error}")

    def finish(self) -> None:
        try:
            super().finish()
        except EvoMemoryError as error:
            fail_test(f"feedback turn failed: {type(error).__name__}: {error}")


def recover_after_worker_crash(config: pytest.Config, run: StreamRun, sample: BenchmarkSample) -> None:
    """Restore memory when a stream continues on a new xdist worker.

    If this process's first task of the stream is not the stream's first selected
    task, another worker ran the earlier tasks and died. Their records are in the
    controller's artefacts, so the memory is restored from them exactly as a resume
    would, instead of silently continuing the stream with an empty memory.
    """
    session = config.stash[SESSION_KEY]
    if run.episodes_started or run.memory is None:
        return
    first = session.first_selected_position(sample.stream)
    if first is None or sample.position <= first or not hasattr(config, "workerinput"):
        return
    stream = session.benchmark.by_name[sample.stream]
    state = load_resume_state(session.run_dir, [stream])
    already = len(session.memory_replay(sample.stream))  # replayed when a resumed stream opened
    run.memory.replay(state.memory_writes.get(sample.stream, [])[already:])


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no details"


