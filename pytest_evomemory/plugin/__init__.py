"""pytest adapter: options, hooks and fixtures. Thin by design.

Everything that decides *what* happens lives in the engine
(:mod:`pytest_evomemory.runtime`); this package only maps it onto pytest's life
cycle as DESIGN.md describes: a stream is a session-scoped parametrized fixture, a
task is a test item, feedback and reset are the episode fixture's teardown.

The benchmark is opt-in (``--evomemory``, ``--evomemory-config`` or
``--evomemory-resume``): an ``evomemory_config`` ini option alone runs nothing, so
plain ``pytest`` in an agent repository runs the user's tests only.

pytest imports this module in every run of every project that has the package
installed, benchmark or not, and again in every xdist worker. So it imports
nothing of the core at module level: the session (:mod:`.session`) and the core
load when a run config turns the benchmark on.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from .heap import StartupHeap
from .stash import SESSION_KEY, STARTUP_HEAP, is_xdist_worker

if TYPE_CHECKING:
    from ..runtime import AgentFactoryFn, BenchmarkRun, MemoryFactoryFn, StreamRun
    from ..types import BenchmarkSample
    from .session import EvoMemorySession, PytestEpisode


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evomemory", "Evo-Memory benchmark")
    group.addoption(
        "--evomemory", action="store_true", default=False,
        help="run the benchmark with the run config of the evomemory_config ini option "
        "(without it, an ini config alone runs nothing: plain pytest runs your own tests)",
    )
    group.addoption(
        "--evomemory-config", metavar="PATH|NAME", action="append", default=[],
        help="run config (YAML path, or a built-in config's name such as sample_memory) "
        "naming the benchmark, agent and memory configs; enables the benchmark. Repeat it to "
        "run several arms in one session, the first being the baseline of their comparison",
    )
    group.addoption(
        "--evomemory-set", metavar="KEY=VALUE", action="append", default=[],
        help="override one config key, e.g. agent.model.model=gpt-4o-mini (VALUE is YAML); "
        "repeatable, validated like the config, recorded in run.json",
    )
    group.addoption(
        "--evomemory-output-dir", metavar="DIR", default=None,
        help="where the run's artefacts go (default: evomemory-results/<run name>)",
    )
    # --evomemory-limit and --evomemory-max-errors are kept as text: _count_options checks
    # them, so that a bad value is one line naming the option and what to write
    # (argparse's own error is a usage block)
    group.addoption(
        "--evomemory-limit", metavar="N", default=None,
        help="run only the first N tasks of each stream (overrides the benchmark config)",
    )
    group.addoption(
        "--evomemory-stream", metavar="NAME", action="append", default=[],
        help="run only this stream (repeatable); default: every stream of the benchmark",
    )
    group.addoption(
        "--evomemory-min-accuracy", metavar="[ARM:][STREAM=]FRACTION", action="append", default=[],
        help="fail the session if overall (or STREAM's) accuracy is below FRACTION; repeatable; "
        "with several arms it applies to each, or to ARM alone",
    )
    group.addoption(
        "--evomemory-min-gain", metavar="[STREAM=]POINTS", action="append", default=[],
        help="with several arms: fail the session if an arm's accuracy does not beat the baseline's "
        "by POINTS percentage points overall (or on STREAM), paired on the tasks both ran; repeatable",
    )
    group.addoption(
        "--evomemory-resume", metavar="RUN_DIR", default=None,
        help="continue the interrupted run whose output directory is RUN_DIR (or every arm of an "
        "interrupted session of arms, given the directory holding its arms.json): completed "
        "tasks are not run again and each stream's memory is restored",
    )
    group.addoption(
        "--evomemory-max-errors", metavar="N", default=None,
        help="stop the session after N failed episodes (default: never)",
    )
    group.addoption(
        "--evomemory-compare", metavar="OTHER_RUN_DIR", default=None,
        help="also write compare.html in the run directory: OTHER_RUN_DIR (baseline) vs this run",
    )
    parser.addini(
        "evomemory_config",
        "run config used by --evomemory (a path relative to the rootdir, or a built-in config's name)",
        default=None,
    )
    parser.addini(
        "evomemory_progress_interval",
        "seconds between a stream's progress lines (its last line always shows; 0: after every task)",
        default=None,
    )


# --------------------------------------------------------------------------- configure


def _config_paths(config: pytest.Config, resume: str | None) -> list[str] | None:
    """The run configs, one per arm, or ``None`` when the benchmark is off.

    The benchmark is opt-in: it runs for ``--evomemory-config`` (repeatable: one
    arm each), for ``--evomemory-resume`` (the interrupted run's own config) and
    for ``--evomemory`` (the ``evomemory_config`` ini option's). An ini option
    alone turns nothing on, so plain ``pytest`` in an agent repository runs only
    the user's tests. A value that is no file may name a built-in config.
    """
    paths = [str(path) for path in config.getoption("evomemory_config") or []]
    if paths:
        from ..configs import resolve_run_config

        if resume and len(paths) > 1:
            raise pytest.UsageError(
                "evomemory: --evomemory-resume=DIR continues an interrupted session as it was: a session "
                "of several arms reads them from DIR/arms.json, so give --evomemory-resume alone"
            )
        return [str(resolve_run_config(path, config.invocation_params.dir)) for path in paths]
    if resume:
        resume_dir = config.invocation_params.dir / resume
        arms = _resume_arm_configs(config, resume_dir)
        return arms if arms is not None else [_resume_config_path(config, resume_dir)]
    if not config.getoption("evomemory"):
        return None
    ini = config.getini("evomemory_config")
    if not ini:
        from ..errors import ConfigError

        raise ConfigError(
            "--evomemory needs a run config: set evomemory_config in your pytest ini "
            "(e.g. pyproject.toml [tool.pytest.ini_options]) or pass --evomemory-config=PATH"
        )
    from ..configs import resolve_run_config

    return [str(resolve_run_config(str(ini), config.rootpath))]


def _resume_arm_configs(config: pytest.Config, resume_dir: Path) -> list[str] | None:
    """The arms' run configs of an interrupted session of several arms (its
    ``arms.json``); ``None`` for a single run's directory. The session's
    ``--evomemory-set`` overrides apply again unless the command line gives its own."""
    from ..rundir import read_arms_manifest

    manifest = read_arms_manifest(resume_dir)
    if manifest is None:
        return None
    entries, overrides = manifest
    if overrides and not config.getoption("evomemory_set"):
        config.option.evomemory_set = overrides
    from ..rundir import RUN_DOCUMENT, read_run_document

    _reapply_recorded_selection(
        config, [read_run_document(entry.run_dir) for entry in entries if (entry.run_dir / RUN_DOCUMENT).exists()]
    )
    return [entry.config for entry in entries]


def _reapply_recorded_selection(config: pytest.Config, documents: list[dict[str, Any]]) -> None:
    """Resume with the interrupted run's ``--evomemory-limit`` and ``--evomemory-stream``
    unless the command line gives them again: they are part of the run's config (a
    resume continues the same run), and a user who stopped ``--evomemory-limit=50``
    with Ctrl-C types ``--evomemory-resume=DIR``, not the whole command again. The
    recorded benchmark settings are the interrupted run's, whichever way they were set;
    arms whose recorded values differ keep their own files' (no one option fits them)."""
    benchmarks = [_mapping(_mapping(document.get("run")).get("benchmark")) for document in documents]
    if not benchmarks:
        return
    limits = {json.dumps(benchmark.get("limit")) for benchmark in benchmarks}
    if config.getoption("evomemory_limit") is None and len(limits) == 1:
        limit = benchmarks[0].get("limit")
        if isinstance(limit, int) and not isinstance(limit, bool):
            config.option.evomemory_limit = limit
    streams = {json.dumps(benchmark.get("streams")) for benchmark in benchmarks}
    if not config.getoption("evomemory_stream") and len(streams) == 1:
        names = benchmarks[0].get("streams")
        if isinstance(names, list) and names and all(isinstance(name, str) for name in names):
            config.option.evomemory_stream = list(names)


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _resume_config_path(config: pytest.Config, resume_dir: Path) -> str:
    """The interrupted run's config; its ``--evomemory-set`` overrides apply again
    unless the command line gives its own."""
    from ..rundir import read_run_document

    document = read_run_document(resume_dir)
    try:
        path = str(document["run"]["path"])
    except (KeyError, TypeError):
        raise pytest.UsageError(
            f"evomemory: --evomemory-resume {resume_dir}: its run.json names no run config; "
            "pass --evomemory-config as well"
        ) from None
    overrides = document["run"].get("overrides") or []
    if not isinstance(overrides, list) or not all(isinstance(item, str) for item in overrides):
        raise pytest.UsageError(
            f"evomemory: --evomemory-resume {resume_dir}: its run.json key 'run.overrides' is not a list of "
            "KEY=VALUE strings (the file was edited or damaged); fix it, or give --evomemory-set yourself"
        )
    if overrides and not config.getoption("evomemory_set"):
        config.option.evomemory_set = list(overrides)
    _reapply_recorded_selection(config, [document])
    return path


#: Options whose value is a path, a name or a threshold: an empty one (``--evomemory-resume=``,
#: a shell variable that was never set) would silently mean "not given".
_VALUED_OPTIONS = (
    "evomemory_config", "evomemory_set", "evomemory_output_dir", "evomemory_stream",
    "evomemory_min_accuracy", "evomemory_min_gain", "evomemory_resume", "evomemory_compare",
)


#: Options that count something: a whole number, at least 1.
_COUNT_OPTIONS = {"evomemory_limit": "tasks per stream", "evomemory_max_errors": "failed episodes"}


def _count_options(config: pytest.Config) -> None:
    for name, what in _COUNT_OPTIONS.items():
        value = config.getoption(name)
        if value is None or isinstance(value, int):
            continue
        text = str(value).strip()
        count = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else 0
        if count < 1:
            raise pytest.UsageError(
                f"evomemory: --{name.replace('_', '-')} must be at least 1 (a whole number of {what}), "
                f"got {str(value)[:40]!r}; write e.g. --{name.replace('_', '-')}=5"
            )
        setattr(config.option, name, count)


def _refuse_blank_options(config: pytest.Config) -> None:
    for name in _VALUED_OPTIONS:
        value = config.getoption(name)
        values = value if isinstance(value, list) else [value]
        if any(item is not None and not str(item).strip() for item in values):
            raise pytest.UsageError(
                f"evomemory: --{name.replace('_', '-')} is given an empty value; give one "
                "(an unset shell variable?), or leave the option out"
            )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "evomemory: a task of an Evo-Memory benchmark stream")
    _refuse_blank_options(config)
    _count_options(config)
    resume = config.getoption("evomemory_resume")
    try:
        paths = _config_paths(config, resume)
    except pytest.UsageError:
        raise
    except Exception as error:  # ConfigError from the run directory: one line, exit 4
        from ..redaction import redact

        raise pytest.UsageError(redact(f"evomemory: {error}")) from None
    if paths is None:
        if config.getoption("evomemory_min_gain"):
            raise pytest.UsageError(
                "evomemory: --evomemory-min-gain gates a comparison of arms, but the benchmark is off; "
                "give --evomemory-config=CONTROL.yaml --evomemory-config=MEMORY.yaml"
            )
        if config.getoption("evomemory_set"):
            raise pytest.UsageError(
                "evomemory: --evomemory-set changes a run config, but the benchmark is off; "
                "add --evomemory (the ini config) or --evomemory-config=PATH"
            )
        return
    heap = config.stash[STARTUP_HEAP] = StartupHeap.for_process(is_xdist_worker=is_xdist_worker(config))
    with heap.paused(settle_after=False):  # the session settles it when collection is over
        from .session import activate

        activate(config, paths, resume)
    _accept_task_node_ids(config)
    if not is_xdist_worker(config):
        from .progress import ProgressHooks

        config.pluginmanager.register(ProgressHooks(config), "evomemory-progress")


def _accept_task_node_ids(config: pytest.Config) -> None:
    """Let a task's node id, as pytest printed it, select that task again.

    The benchmark's items live in the installed package, not in the user's tree,
    so pytest cannot resolve ``evomemory::test_task[s/t]`` as a path by itself:
    we point it at the items module. With any task named, the other tasks are not
    added.
    """
    from .items import task_argument, task_id_of_argument
    from .session import ITEMS_MODULE

    known = get_session(config).task_ids()
    unknown = [arg for arg in config.args if (task := task_id_of_argument(arg)) is not None and task not in known]
    if unknown:
        raise pytest.UsageError(
            f"evomemory: no task {unknown[0]!r} in this run (its streams and limit decide which tasks exist); "
            "add --collect-only -q to the same command to list the tasks' ids"
        )
    module = str(ITEMS_MODULE)
    rewritten = [
        f"{module}::{task}" if (task := task_argument(arg)) is not None else arg for arg in config.args
    ]
    if rewritten != list(config.args):
        config.args[:] = [arg for arg in rewritten if arg != module]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """The benchmark's module gets the node id ``evomemory`` wherever the package
    is installed: ids a user can copy, and a JUnit classname that is not empty."""
    if SESSION_KEY not in parent.config.stash:
        return None
    from .items import NODE_PREFIX
    from .session import ITEMS_MODULE

    if module_path != ITEMS_MODULE:
        return None
    module: pytest.Module = pytest.Module.from_parent(parent, path=module_path, nodeid=NODE_PREFIX)
    return module


def pytest_unconfigure(config: pytest.Config) -> None:
    heap = config.stash.get(STARTUP_HEAP, None)
    if heap is not None:
        heap.resume()  # a session that never finished collecting must not leave it paused


def get_session(config: pytest.Config) -> EvoMemorySession:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        raise pytest.UsageError("evomemory: no run config; pass --evomemory-config=PATH")
    return cast("EvoMemorySession", session)


# --------------------------------------------------------------------------- reports


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Move this phase's records onto its report, where xdist carries them home."""
    report = yield
    session = item.config.stash.get(SESSION_KEY, None)
    if session is None:
        return report
    records = list(session.pending)
    session.pending.clear()
    if report.when == "setup" and report.failed and not any(r.get("scored") for r in records):
        # The task never ran (its stream could not start): it counts as a failed episode.
        records += session.setup_failure_records(item, call)
    if records:
        report.evomemory_records = records  # type: ignore[attr-defined]
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The JUnit XML file names what ran (the session summarized the runs before
    this: its own sessionfinish wraps every other; junitxml writes after this)."""
    evomemory = session.config.stash.get(SESSION_KEY, None)
    if evomemory is None or is_xdist_worker(session.config):
        return
    from .junit import add_identity_properties

    add_identity_properties(session.config, [(arm.name, arm.summary) for arm in evomemory.arms])


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def evomemory_agent_factory() -> AgentFactoryFn | None:
    """Override in your conftest.py to benchmark your own agent.

    Return a callable ``(agent_config, memory) -> Agent``; ``None`` means "build the
    agent named in the agent config".
    """
    return None


@pytest.fixture(scope="session")
def evomemory_memory_factory() -> MemoryFactoryFn | None:
    """Override in your conftest.py to benchmark your own memory system.

    Return a callable ``(memory_config, context) -> MemorySystem``; ``None`` means
    "build the backend named in the memory config".
    """
    return None


@pytest.fixture(scope="session")
def evomemory_run(pytestconfig: pytest.Config) -> BenchmarkRun:
    """The loaded benchmark: configs, streams and output directory (the baseline
    arm's, when several ``--evomemory-config`` arms run in one session)."""
    return get_session(pytestconfig).benchmark


@pytest.fixture(scope="session")
def evomemory_stream(
    request: pytest.FixtureRequest,
    evomemory_run: BenchmarkRun,
    evomemory_agent_factory: AgentFactoryFn | None,
    evomemory_memory_factory: MemoryFactoryFn | None,
) -> Iterator[StreamRun]:
    """One stream: its memory system lives exactly as long as this fixture.

    Teardown resets and closes the memory system before the next stream starts.
    """
    from ..errors import EvoMemoryError
    from .session import fail_test

    name = request.param
    session = get_session(request.config)
    try:
        run = session.open_stream(name, evomemory_agent_factory, evomemory_memory_factory)
    except EvoMemoryError as error:
        fail_test(f"stream {name!r} could not start: {error}")
    try:
        yield run
    finally:
        session.close_stream(run)


@pytest.fixture
def evomemory_sample(request: pytest.FixtureRequest) -> BenchmarkSample:
    """The task of this test item."""
    sample: BenchmarkSample = request.param
    return sample


@pytest.fixture
def evomemory_episode(
    request: pytest.FixtureRequest, evomemory_stream: StreamRun, evomemory_sample: BenchmarkSample
) -> Iterator[PytestEpisode]:
    """The task's episode; its teardown gives the feedback, then resets the agent."""
    __tracebackhide__ = True
    episode = get_session(request.config).episode(evomemory_stream, evomemory_sample)
    yield episode
    episode.finish()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    from ..identity import configured_model, describe_model
    from ..streams.provenance import provenance_line

    several = len(session.arms) > 1
    lines = []
    if several:
        lines.append(f"evomemory: {len(session.arms)} arms, baseline {session.baseline.name!r}")
    for arm in session.arms:
        prefix = f"evomemory: [{arm.name}] " if several else "evomemory: "
        streams = ", ".join(f"{s.name} ({len(s)})" for s in arm.benchmark.streams)
        agent = arm.run_config.agent
        lines += [
            f"{prefix}run {arm.run_config.name!r} from {arm.run_config.path}",
            f"{prefix}streams {streams}",
            *(f"{prefix}data {provenance_line(s)}" for s in arm.benchmark.streams if s.provenance.get("repository")),
            f"{prefix}agent {agent.kind} ({agent.memory_strategy}), memory {arm.run_config.memory.backend} "
            "(as configured; a conftest fixture may override them: the summary says what ran)",
            f"{prefix}model {describe_model(configured_model(agent.model, arm.run_config.base_dir))}",
            f"{prefix}results -> {arm.run_dir}",
        ]
    return lines
