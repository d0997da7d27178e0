"""The benchmark's side of a pytest session: loaded only when the benchmark is on.

The plugin's hooks (:mod:`pytest_evomemory.plugin`) are imported by pytest in every
run of every project that has the package installed, so they hold nothing but
hooks and fixtures; this module maps the engine's :class:`~..runtime.Run` onto the
session: collection, records from reports (xdist or not), and the end of the run.
"""

from __future__ import annotations

import signal
from collections.abc import Generator, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import pytest

from ..config import RunConfig, load_run_config
from ..errors import ConfigError, DataError, EpisodeError, EvoMemoryError
from ..memory.snapshot import supports_snapshots
from ..redaction import redact
from ..rundir import (
    DEFAULT_OUTPUT_ROOT,
    RUN_DOCUMENT,
    ArmEntry,
    SharedErrorCount,
    check_output_dir,
    default_run_dir,
    read_arms_manifest,
    write_arms_manifest,
)
from ..runtime import BenchmarkRun, Episode, StreamRun, TaskOutcome
from ..runtime.records import error_record, stream_error_record, stream_started_record
from ..runtime.run import check_unread_options
from ..types import BenchmarkSample
from .arm import ARM_FIELD, Arm, check_arm_names, thresholds_for_arms
from .items import task_of_nodeid
from .stash import SESSION_KEY, STARTUP_HEAP, is_xdist_worker

PLUGIN_NAME = "evomemory-session"
ITEMS_MODULE = Path(__file__).resolve().with_name("items.py")


def activate(config: pytest.Config, paths: list[str], resume: str | None) -> None:
    """Load the run configs at ``paths`` (one per arm), lock their run directories,
    register the hooks."""
    try:
        run_configs = [
            load_run_config(path, config.getoption("evomemory_set")).with_overrides(
                limit=config.getoption("evomemory_limit"),
                streams=config.getoption("evomemory_stream"),
            )
            for path in paths
        ]
        if len(run_configs) > 1:
            check_arm_names(run_configs)
        session = EvoMemorySession(config, run_configs, _run_dirs(config, run_configs, resume))
    except EvoMemoryError as error:
        raise pytest.UsageError(redact(f"evomemory: {_describe(error)}")) from None  # a refusal may quote a value
    except OSError as error:  # a path the system refuses (too long, I/O error) in an option or a config
        where = str(error.filename)[:200] if error.filename else "a path of the run"
        raise pytest.UsageError(redact(
            f"evomemory: {where!r}: {error.strerror or error}; check the paths given in the options "
            "and the run config (output directory, --evomemory-compare, --evomemory-resume)"
        )) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    _add_benchmark_module_to_args(config)
    _register_xdist_scheduling(config, session.independent_streams)
    if config.pluginmanager.hasplugin("pytest_jsonreport"):
        from .jsonreport import JsonReportHooks

        config.pluginmanager.register(JsonReportHooks(session.json_report), "evomemory-jsonreport")


def _describe(error: EvoMemoryError) -> str:
    if isinstance(error, ConfigError | DataError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def _run_dirs(config: pytest.Config, run_configs: list[RunConfig], resume: str | None) -> list[Path]:
    """One run directory per arm.

    A single run goes where it always went (``--evomemory-output-dir``, the run
    config's ``output_dir``, or ``evomemory-results/<name>``). With several arms
    ``--evomemory-output-dir`` is the directory that holds them, each in
    ``<dir>/<name>``, and the comparison; without it an arm goes to its config's
    ``output_dir`` or ``evomemory-results/<name>``. The command line wins over a
    config, as it does for a single run.
    """
    invocation_dir = config.invocation_params.dir
    option = config.getoption("evomemory_output_dir")
    manifest = read_arms_manifest(invocation_dir / resume) if resume and len(run_configs) > 1 else None
    if manifest is not None:  # an interrupted session of several arms: where they were
        run_dirs = [entry.run_dir for entry in manifest[0]]
    elif len(run_configs) == 1:
        run_config = run_configs[0]
        output = resume or option or run_config.output_dir
        run_dirs = [(invocation_dir / output) if output else default_run_dir(run_config.name, invocation_dir)]
    else:
        parent = invocation_dir / (option or DEFAULT_OUTPUT_ROOT)
        run_dirs = [
            (invocation_dir / run_config.output_dir) if run_config.output_dir and not option
            else parent / run_config.name
            for run_config in run_configs
        ]
        resolved = [run_dir.resolve() for run_dir in run_dirs]
        for index, run_dir in enumerate(resolved):
            if run_dir in resolved[:index]:
                raise ConfigError(
                    f"arms {run_configs[resolved.index(run_dir)].name!r} and {run_configs[index].name!r} would both "
                    f"write to {run_dir}; remove `output_dir` from their run configs or give each its own"
                )
    if is_xdist_worker(config):
        return [run_dir.resolve() for run_dir in run_dirs]
    return [check_output_dir(run_dir) for run_dir in run_dirs]


def comparison_dir(config: pytest.Config) -> Path:
    """Where a session with several arms writes compare.html, compare.json and its
    arms manifest (a resumed session: where the interrupted one wrote them)."""
    where = (
        config.getoption("evomemory_resume") or config.getoption("evomemory_output_dir") or DEFAULT_OUTPUT_ROOT
    )
    return (config.invocation_params.dir / where).resolve()


def _add_benchmark_module_to_args(config: pytest.Config) -> None:
    """Collect the benchmark without a user test file; alone when no paths were given."""
    module = str(ITEMS_MODULE)
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        # A node id of ours (``.../items.py::test_task[stream/task]``) selects tasks:
        # adding the whole module beside it would run every task again.
        if not any(str(Path(arg.split("::")[0]).resolve()) == module for arg in config.args):
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
    """Session-wide state, registered as a plugin so its hooks see the run(s).

    The session runs one :class:`~.arm.Arm` per run config (one, usually; the
    first is the baseline when there are several). The controller (or the only
    process) owns each arm's :class:`Run`: it locks the run directory at once,
    starts writing when the arm's first records arrive (so a session that runs no
    task leaves an earlier run's results as they were), and finishes the run at
    session end. An xdist worker only runs episodes; its records travel to the
    controller on the test reports, tagged with their arm.
    """

    def __init__(self, config: pytest.Config, run_configs: list[RunConfig], run_dirs: list[Path]) -> None:
        self.config = config
        self.is_worker = is_xdist_worker(config)
        resume = bool(config.getoption("evomemory_resume"))
        command = [str(arg) for arg in config.invocation_params.args]
        labelled = len(run_configs) > 1
        minimums = thresholds_for_arms(
            config.getoption("evomemory_min_accuracy"), [run_config.name for run_config in run_configs]
        )
        self.arms = [
            Arm(
                run_config, run_dir, labelled=labelled, is_worker=self.is_worker,
                # an arm the interrupted session never started begins afresh
                resume=resume and (len(run_configs) == 1 or (run_dir / RUN_DOCUMENT).exists()),
                command=command, min_accuracy=minimums[run_config.name],
            )
            for run_config, run_dir in zip(run_configs, run_dirs, strict=True)
        ]
        self._manifest_written = False
        self.by_name = {arm.name: arm for arm in self.arms}
        #: stream key (``<stream>``, or ``<arm>:<stream>`` with several arms) -> (arm, stream)
        self.streams_by_key = {
            arm.key(name): (arm, name) for arm in self.arms for name in arm.benchmark.stream_order
        }
        self.max_errors: int | None = config.getoption("evomemory_max_errors")
        if self.max_errors is not None and self.max_errors < 1:
            raise ConfigError(f"--evomemory-max-errors must be at least 1, got {self.max_errors}")
        self.compare_dir = self._compare_dir(config.getoption("evomemory_compare"))
        self.gains = self._gains(config.getoption("evomemory_min_gain"))
        if not self.is_worker and not config.option.collectonly:
            for arm in self.arms:
                arm.run.lock()
        self.shared_errors = SharedErrorCount(self.run_dir) if self.max_errors is not None else None
        if self.shared_errors is not None and not self.is_worker and not config.option.collectonly:
            self.shared_errors.clear()  # before any worker starts
        self._failed_here: set[tuple[str, str, str]] = set()
        self._arm_of_stream: dict[int, Arm] = {}
        #: Records of the phase in progress, moved onto its report (see plugin/__init__.py).
        self.pending: list[dict[str, Any]] = []
        self.first_positions: dict[str, int] = {}
        self.pytest_session: pytest.Session | None = None
        self.comparison: dict[str, Any] | None = None
        self.comparison_files: tuple[Path, Path] | None = None
        self.comparison_error: str | None = None
        self.gain_results: list[Any] = []
        self.stop_reason: str | None = None
        self.terminated = False
        self._previous_sigterm: Any = None
        self._recording = False
        self._deferred_sigterm = False
        self._finishing = False

    # ----- the baseline arm, for what reads one run (fixtures, a single-run session)

    @property
    def baseline(self) -> Arm:
        return self.arms[0]

    @property
    def benchmark(self) -> BenchmarkRun:
        return self.baseline.benchmark

    @property
    def run_config(self) -> RunConfig:
        return self.baseline.run_config

    @property
    def run_dir(self) -> Path:
        return self.baseline.run_dir

    @property
    def started(self) -> bool:
        return any(arm.started for arm in self.arms)

    @property
    def independent_streams(self) -> frozenset[str]:
        """Stream keys whose tasks may run on any worker (no memory between tasks)."""
        return frozenset(arm.key(name) for arm in self.arms for name in arm.benchmark.independent_streams)

    def arm_label(self, key: str) -> str | None:
        """The arm of stream ``key`` when the session has several, else ``None``."""
        if len(self.arms) == 1 or key not in self.streams_by_key:
            return None
        return self.streams_by_key[key][0].name

    def json_report(self) -> dict[str, Any] | None:
        """The ``evomemory`` block of pytest-json-report's file (see jsonreport.py)."""
        from .jsonreport import run_identity

        if len(self.arms) == 1:
            summary = self.baseline.summary
            return None if summary is None else {**summary, **run_identity(self.run_config)}
        if not self.started:
            return None
        return {
            "baseline": self.baseline.name,
            "arms": {
                arm.name: {"run_dir": str(arm.run_dir), **(arm.summary or {}), **run_identity(arm.run_config)}
                for arm in self.arms
            },
            "comparison": self.comparison,
            "gains": [result.to_dict() for result in self.gain_results],
        }

    def _compare_dir(self, other: str | None) -> Path | None:
        if not other:
            return None
        if len(self.arms) > 1:
            raise ConfigError(
                "--evomemory-compare compares this run with an earlier one; a session with several "
                "--evomemory-config arms compares them by itself (compare.html beside the arms)"
            )
        compare_dir = (self.config.invocation_params.dir / other).resolve()
        if compare_dir == self.run_dir.resolve():
            raise ConfigError("--evomemory-compare must name another run's directory")
        from ..reporting.html import ReportError, load_run

        try:
            load_run(compare_dir)
        except ReportError as error:
            raise ConfigError(f"--evomemory-compare: {error}") from None
        return compare_dir

    def _gains(self, values: list[str]) -> list[Any]:
        if not values:
            return []
        if len(self.arms) < 2:
            raise ConfigError(
                "--evomemory-min-gain gates the gain of an arm over the baseline: give two run configs, "
                "e.g. --evomemory-config=CONTROL.yaml --evomemory-config=MEMORY.yaml (the first is the baseline)"
            )
        from ..reporting.gain import parse_min_gain

        streams = list(dict.fromkeys(name for arm in self.arms for name in arm.benchmark.stream_order))
        return parse_min_gain(values, streams)

    # ----- collection

    def _tasks(self) -> Iterator[tuple[str, BenchmarkSample, str]]:
        """(stream key, sample, item id) of every task, in arm and stream order."""
        for arm in self.arms:
            for stream in arm.benchmark.streams:
                for sample in stream.samples:
                    yield arm.key(stream.name), sample, f"{arm.key(stream.name)}/{sample.task_id}"

    def task_ids(self) -> set[str]:
        """The item ids (``<stream>/<task>``, with arms ``<arm>:<stream>/<task>``) this session has."""
        return {task_id for _, _, task_id in self._tasks()}

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        params = [
            pytest.param(key, sample, id=task_id, marks=[pytest.mark.evomemory])
            for key, sample, task_id in self._tasks()
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
        """Put benchmark items back in arm and stream order, whatever reordered them.

        A wrapper around every other implementation (``--ff``, ``--nf``,
        pytest-randomly, ...): a stream is only a stream if its tasks run in source
        order, so ours go back into the slots they hold after all of them ran.
        """
        result = yield
        slots = [index for index, item in enumerate(items) if _key_of(item) is not None]
        order = {key: index for index, key in enumerate(self.streams_by_key)}

        def place(item: pytest.Item) -> tuple[int, int]:
            sample = _sample_of(item)
            return order[_key_of(item) or ""], sample.position if sample is not None else 0

        ours = sorted((items[index] for index in slots), key=place)
        for index, item in zip(slots, ours, strict=True):
            items[index] = item
        if any(arm.run.resume is not None for arm in self.arms):
            done = [item for item in items if self._done(item)]
            if done:
                self.config.hook.pytest_deselected(items=done)
                finished = set(map(id, done))
                items[:] = [item for item in items if id(item) not in finished]
        return result

    def _done(self, item: pytest.Item) -> bool:
        """Whether an interrupted run of the item's arm completed its episode."""
        key, sample = _key_of(item), _sample_of(item)
        if key is None or sample is None or key not in self.streams_by_key:
            return False
        resume = self.streams_by_key[key][0].run.resume
        return resume is not None and resume.is_done(sample.stream, sample.position)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        last: dict[str, int] = {}
        for item in session.items:
            key, sample = _key_of(item), _sample_of(item)
            if key is None or sample is None:
                continue
            self.first_positions.setdefault(key, sample.position)
            if sample.position <= last.get(key, -1):
                raise pytest.UsageError(
                    f"evomemory: the tasks of stream {key!r} are out of order after "
                    "collection (a plugin reordered them); run without that plugin's reordering"
                )
            last[key] = sample.position
        self.config.stash[STARTUP_HEAP].settle()

    def first_selected_position(self, key: str) -> int | None:
        """Position of the first task of stream ``key`` this session runs (after -k/-m/resume)."""
        return self.first_positions.get(key)

    def task_for_nodeid(self, nodeid: str) -> tuple[Arm, BenchmarkSample] | None:
        found = task_of_nodeid(nodeid)
        if found is None or found[0] not in self.streams_by_key:
            return None
        arm, stream = self.streams_by_key[found[0]]
        for sample in arm.benchmark.by_name[stream].samples:
            if sample.task_id == found[1]:
                return arm, sample
        return None

    # ----- running

    @pytest.hookimpl(trylast=True)  # after the fixture manager, which knows the conftest factories, starts
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session
        if self.is_worker:
            return  # the xdist controller has refused for its workers
        self._refuse_unread_options(session)
        if self.config.pluginmanager.hasplugin("dsession"):
            # The xdist controller collects nothing: its start-up ends here.
            self.config.stash[STARTUP_HEAP].settle()
        self._catch_sigterm()

    def _refuse_unread_options(self, session: pytest.Session) -> None:
        """Options only a user's factory could read, given to the built-in agent or
        memory, are refused before collection (they would be silently ignored)."""
        builtin_agent, builtin_memory = _builtin_factories(session)
        for arm in self.arms:
            try:
                check_unread_options(arm.run_config, builtin_agent=builtin_agent, builtin_memory=builtin_memory)
            except ConfigError as error:
                raise pytest.UsageError(redact(f"evomemory: {error}")) from None

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
        if self._finishing:
            return  # a repeated SIGTERM must not interrupt the summary being written
        if self._recording:
            self._deferred_sigterm = True  # raised once the records are in
            return
        raise KeyboardInterrupt("SIGTERM")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        if self.shared_errors is not None and not self.is_worker and not config.option.collectonly:
            self.shared_errors.clear()
        for arm in self.arms:
            arm.run.release()

    @property
    def errors(self) -> int:
        return sum(arm.run.errors for arm in self.arms)

    def add_records(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        self._recording = True
        try:
            if not self._manifest_written and len(self.arms) > 1:
                self._write_manifest()
            if len(self.arms) == 1:
                self.baseline.add(records)
            else:
                for arm in self.arms:
                    arm.add([r for r in records if self._arm_of_record(r) is arm])
        finally:
            self._recording = False
        if self._deferred_sigterm:
            self._deferred_sigterm = False
            raise KeyboardInterrupt("SIGTERM")
        if self.max_errors is None:
            return
        errors = self.errors
        if errors >= self.max_errors and self.pytest_session:
            reason = f"evomemory: {errors} failed episodes reached --evomemory-max-errors"
            self.stop_reason = f"--evomemory-max-errors ({errors} failed episodes)"
            self.pytest_session.shouldstop = reason
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None:
                dsession.shouldstop = reason

    def _write_manifest(self) -> None:
        """Before the first record: an interrupted session can then be resumed whole."""
        self._manifest_written = True
        entries = [ArmEntry(arm.name, arm.run_dir, str(arm.run_config.path)) for arm in self.arms]
        write_arms_manifest(comparison_dir(self.config), entries, self.config.getoption("evomemory_set"))

    def _arm_of_record(self, record: dict[str, Any]) -> Arm:
        name = record.get(ARM_FIELD)
        return self.by_name.get(str(name), self.baseline) if name is not None else self.baseline

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            self._stop_worker_at_max_errors(report)
            return
        records = list(getattr(report, "evomemory_records", None) or [])
        if not records and report.failed and report.when not in ("setup", "teardown"):
            # No records at all: the process running the task died (xdist worker crash).
            found = self.task_for_nodeid(report.nodeid)
            if found is not None:
                arm, sample = found
                records = [arm.tag(error_record(sample, f"the test process crashed: {_last_line(report.longreprtext)}"))]
        self.add_records(records)

    def _stop_worker_at_max_errors(self, report: pytest.TestReport) -> None:
        """An xdist worker runs its whole stream before the controller's stop could
        reach it, so each worker adds its failed episodes to the shared count and
        stops itself once the run's total reaches --evomemory-max-errors."""
        if self.shared_errors is None or self.pytest_session is None:
            return
        failed = {
            (str(r.get(ARM_FIELD, "")), str(f["stream"]), str(f["task_id"]))
            for r in getattr(report, "evomemory_records", None) or []
            for f in [r.get("failure") or ((r.get("scored") or {}) if (r.get("scored") or {}).get("error") else {})]
            if f and f.get("task_id") is not None
        } - self._failed_here
        self._failed_here |= failed
        total = self.shared_errors.add(len(failed)) if failed else (
            self.shared_errors.read() if report.when == "teardown" else 0
        )
        if self.max_errors is not None and total >= self.max_errors:
            self.pytest_session.shouldstop = (
                f"evomemory: {total} failed episodes reached --evomemory-max-errors"
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """Summarize before other plugins' sessionfinish (pytest-json-report's is
        ``tryfirst``), so their reports carry the summary and the gated exit status."""
        if not self.is_worker and not self.config.option.collectonly:
            self._finish(session)
        return (yield)

    def _stop_reason(self, session: pytest.Session) -> str | None:
        if self.stop_reason:
            return self.stop_reason
        if self.terminated:
            return "terminated by SIGTERM"
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            return "interrupted (Ctrl-C)"
        if session.shouldfail and self.config.getoption("maxfail", 0):
            return f"stopped early by -x/--maxfail: {session.shouldfail}"
        if session.shouldfail:
            return f"stopped early: {session.shouldfail}"
        if session.shouldstop:
            return f"stopped early: {session.shouldstop}"
        return None

    def _finish(self, session: pytest.Session) -> None:
        self._finishing = True
        stop_reason = self._stop_reason(session)
        for arm in self.arms:
            arm.finish(stop_reason)
        failed = any(arm.failed for arm in self.arms)
        result = self.baseline.result
        if self.compare_dir is not None and result is not None and result.write_failure is None:
            from ..reporting.html import ReportError, write_comparison_report

            try:
                write_comparison_report([self.compare_dir, self.run_dir], self.run_dir / "compare.html")
            except ReportError as error:
                result.report_error = str(error)
        if len(self.arms) > 1 and self.started:
            failed = self._compare_arms() or failed
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _compare_arms(self) -> bool:
        """Write the arms' comparison and judge the gain gates; True when the session fails."""
        from ..reporting.gain import check_gains
        from ..reporting.html import ReportError, write_comparison

        ran = [arm for arm in self.arms if arm.result is not None and arm.result.write_failure is None]
        if len(ran) < len(self.arms):
            missing = ", ".join(arm.name for arm in self.arms if arm not in ran)
            self.comparison_error = f"no comparison: arm(s) {missing} ran no task or could not write their results"
            return bool(self.gains)
        target = comparison_dir(self.config)
        try:
            files = write_comparison([arm.run_dir for arm in ran], target / "compare.html", [arm.name for arm in ran])
        except (ReportError, OSError) as error:
            self.comparison_error = f"the comparison could not be written: {error}"
            return True
        self.comparison = dict(files.document)
        self.comparison_files = (files.html, files.json)
        complete = all(arm.result is not None and arm.result.complete for arm in ran)
        self.gain_results = check_gains(files.document, self.gains, complete=complete)
        return any(not result.met for result in self.gain_results)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or self.config.option.collectonly:
            return
        write = terminalreporter.write_line
        for arm in self.arms:
            if arm.result is None:
                if not arm.started:
                    which = "" if len(self.arms) == 1 else f" of arm {arm.name!r}"
                    write(f"evomemory: no benchmark task{which} ran; {arm.run_dir} was left as it was")
                continue
            terminalreporter.section(f"evomemory: {arm.name}", sep="=")
            arm.report(write, self.compare_dir)
        if len(self.arms) > 1 and self.started:
            self._report_comparison(terminalreporter)
        if any(arm.cut_short for arm in self.arms):
            where = comparison_dir(self.config) if len(self.arms) > 1 else self.arms[0].run_dir
            write(f"evomemory: to continue where it stopped: pytest --evomemory-resume={self._shown(where)}",
                  yellow=True, bold=True)

    def _shown(self, path: Path) -> str:
        """``path`` as the user would type it: relative to where pytest was started, if inside."""
        try:
            return str(path.relative_to(self.config.invocation_params.dir.resolve()))
        except ValueError:
            return str(path)

    def _report_comparison(self, terminalreporter: Any) -> None:
        from ..reporting.terminal import format_comparison

        write = terminalreporter.write_line
        terminalreporter.section(f"evomemory: {' vs '.join(arm.name for arm in self.arms)}", sep="=")
        if self.comparison is None:
            write(f"evomemory: {self.comparison_error}", red=True, bold=True)
            if self.gains:
                write("evomemory: the --evomemory-min-gain gate is not passed without a comparison; the session fails",
                      red=True, bold=True)
            return
        for line in format_comparison(self.comparison):
            write(line)
        for result in self.gain_results:
            write(result.describe(), red=not result.met, green=result.met)
        if any(not result.complete for result in self.gain_results):
            write("evomemory: gain gates are not passed by an incomplete run; the session fails", red=True, bold=True)
        elif any(not result.met for result in self.gain_results):
            write(f"evomemory: {sum(not r.met for r in self.gain_results)} gain gate(s) missed; the session fails",
                  red=True, bold=True)
        if self.comparison_files is not None:
            html, json_path = self.comparison_files
            write(f"comparison: {html}")
            write(f"comparison data: {json_path}")

    # ----- streams and episodes (called from the plugin's fixtures)

    def open_stream(self, key: str, agent_factory: Any, memory_factory: Any) -> StreamRun:
        arm, name = self.streams_by_key[key]
        with self.config.stash[STARTUP_HEAP].paused():
            run = arm.benchmark.open_stream(
                name, agent_factory=agent_factory, memory_factory=memory_factory,
                snapshots=not self.config.option.collectonly,
            )
        self._arm_of_stream[id(run)] = arm
        self.pending.append(arm.tag(stream_started_record(name, run.identity)))
        return run

    def close_stream(self, run: StreamRun) -> None:
        """Stream teardown; a failure is charged to this stream (and arm), not to
        whichever task happens to be running when pytest tears the fixture down."""
        arm = self._arm_of_stream.pop(id(run), self.baseline)
        try:
            run.close()
        except EvoMemoryError as error:
            self.pending.append(arm.tag(stream_error_record(run.stream, f"stream teardown failed: {error}")))

    def episode(self, run: StreamRun, sample: BenchmarkSample) -> PytestEpisode:
        arm = self._arm_of_stream.get(id(run), self.baseline)
        if not run.prepared:
            try:
                run.prepare_memory(  # a conversation's ingestion records go out with this item
                    self._completed_before(arm, run, sample), lambda record: self.pending.append(arm.tag(record))
                )
            except EvoMemoryError as error:
                run.broken = str(error)
                fail_test(f"stream {sample.stream!r} cannot continue: {error}")
        return PytestEpisode(run, sample, lambda record: self.pending.append(arm.tag(record)))

    def _completed_before(self, arm: Arm, run: StreamRun, sample: BenchmarkSample) -> int | None:
        """How many episodes of the stream precede the first one this process runs.

        ``None`` for a stream starting from its first selected task. On resume, the
        interrupted run's completed prefix. In an xdist worker that takes over a
        stream whose worker died (its first task here is not the stream's first),
        the latest memory snapshot saved at or before this task: the crashed task
        itself is a failed episode and its memory operations are gone with it.
        """
        resumed = arm.run.completed_before(sample.stream)
        first = self.first_selected_position(arm.key(sample.stream))
        taking_over = self.is_worker and first is not None and sample.position > first
        if not taking_over:
            return resumed
        if run.snapshots is None or run.memory is None or not supports_snapshots(run.memory.backend):
            return sample.position  # refused by prepare_memory: nothing to restore from
        saved = [count for count in run.snapshots.completed_prefixes() if count <= sample.position]
        return max(saved, default=0)

    def setup_failure_records(self, item: pytest.Item, call: pytest.CallInfo[None]) -> list[dict[str, Any]]:
        """The error record of a task whose setup failed (its stream could not start)."""
        sample, key = _sample_of(item), _key_of(item)
        if sample is None or key is None or call.excinfo is None:
            return []
        reason = str(call.excinfo.value).strip() or call.excinfo.typename
        arm = self.streams_by_key[key][0] if key in self.streams_by_key else self.baseline
        return [arm.tag(error_record(sample, reason))]


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


#: Where the default factory fixtures live (plugin/__init__.py): a fixture of that
#: name defined anywhere else is the user's own.
_PLUGIN_MODULE = __name__.rpartition(".")[0]


def _builtin_factories(session: pytest.Session) -> tuple[bool, bool]:
    """Whether the agent and the memory are built by the plugin's own factory
    fixtures, not by a conftest's (which may read any option). The benchmark's
    items sit directly under the session, so the session's view is theirs."""
    manager = getattr(session, "_fixturemanager", None)

    def builtin(name: str) -> bool:
        chain = manager.getfixturedefs(name, session) if manager is not None else None
        return not chain or getattr(chain[-1].func, "__module__", None) == _PLUGIN_MODULE

    return builtin("evomemory_agent_factory"), builtin("evomemory_memory_factory")


def _key_of(item: pytest.Item) -> str | None:
    """The item's stream key (``<stream>``, or ``<arm>:<stream>`` with several arms)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or _sample_of(item) is None:
        return None
    key = callspec.params.get("evomemory_stream")
    return key if isinstance(key, str) else None


def _sample_of(item: pytest.Item) -> BenchmarkSample | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    sample = callspec.params.get("evomemory_sample")
    return sample if isinstance(sample, BenchmarkSample) else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no details"
