"""pytest adapter: options, the switch that turns the benchmark on, and fixtures.

Everything that decides *what* happens lives in the engine's
:class:`~pytest_evomemory.runtime.session.Session`; this package maps it onto
pytest's life cycle as docs/design.md describes (a stream is a session-scoped
parametrized fixture, a task is a test item, feedback and reset are the episode
fixture's teardown) and splits as pytest-xdist does: the controller's hooks
(:mod:`.controller`: records in, the end of the session) are registered only in the
process that writes the results, the worker's (:mod:`.worker`: episodes run,
records out on the reports) only in the process that runs tasks; without xdist one
process registers both.

The benchmark is opt-in (``--evomemory``, ``--evomemory-config`` or
``--evomemory-resume``): an ``evomemory_config`` ini option alone runs nothing, so
plain ``pytest`` in an agent repository runs the user's tests only. pytest imports
this module in every run of every project that has the package installed, and
again in every xdist worker, so it imports nothing of the core at module level.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .heap import StartupHeap
from .stash import SESSION_KEY, STARTUP_HEAP, get_session, is_xdist_worker

if TYPE_CHECKING:
    from ..runtime import AgentFactoryFn, MemoryFactoryFn
    from ..types import BenchmarkSample
    from .worker import LiveStream, PytestEpisode


def pytest_addoption(parser: pytest.Parser) -> None:
    from ..options import PYTEST_FLAGS, add_options

    group = parser.getgroup("evomemory", "Evo-Memory benchmark")
    group.addoption(
        "--evomemory", action="store_true", default=False,
        help="run the benchmark with the run config of the evomemory_config ini option "
        "(without it, an ini config alone runs nothing: plain pytest runs your own tests)",
    )
    add_options(group.addoption, PYTEST_FLAGS)
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


def _ini_configs(config: pytest.Config) -> list[str] | None:
    """The ini option's run config when ``--evomemory`` asks for it (None: not asked)."""
    if not config.getoption("evomemory"):
        return None
    from ..configs import resolve_run_config
    from ..errors import ConfigError

    ini = config.getini("evomemory_config")
    if not ini:
        raise ConfigError(
            "--evomemory needs a run config: set evomemory_config in your pytest ini "
            "(e.g. pyproject.toml [tool.pytest.ini_options]) or pass --evomemory-config=PATH"
        )
    return [str(resolve_run_config(str(ini), config.rootpath))]


def _switched_on(config: pytest.Config) -> bool:
    return bool(
        config.getoption("evomemory") or config.getoption("evomemory_config") or config.getoption("evomemory_resume")
    )


def _refuse_options_without_benchmark(config: pytest.Config) -> None:
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "evomemory: a task of an Evo-Memory benchmark stream")
    if not _switched_on(config):
        _refuse_options_without_benchmark(config)
        return
    worker = is_xdist_worker(config)
    heap = config.stash[STARTUP_HEAP] = StartupHeap.for_process(is_xdist_worker=worker)
    with heap.paused(settle_after=False):  # settled when collection is over
        from .activate import activate

        activate(config, _ini_configs)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """The benchmark's module gets the node id ``evomemory`` wherever the package
    is installed: ids a user can copy, and a JUnit classname that is not empty."""
    if SESSION_KEY not in parent.config.stash:
        return None
    from .items import ITEMS_MODULE, NODE_PREFIX

    if module_path != ITEMS_MODULE:
        return None
    module: pytest.Module = pytest.Module.from_parent(parent, path=module_path, nodeid=NODE_PREFIX)
    return module


def pytest_unconfigure(config: pytest.Config) -> None:
    heap = config.stash.get(STARTUP_HEAP, None)
    if heap is not None:
        heap.resume()  # a session that never finished collecting must not leave it paused


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: sees the report as every other wrapper left it
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Move this phase's records onto its report, where xdist carries them home,
    and keep what pytest reports of our items free of secrets and terminal control:
    a task's report is redacted and made inert before any reporter (terminal, JUnit
    XML, pytest-json-report) or xdist's serialization sees it."""
    report = yield
    worker = item.config.stash.get(SESSION_KEY, None)
    if worker is None:
        return report
    if "evomemory_sample" in getattr(item, "fixturenames", ()):
        from .reportsafety import clean_report

        clean_report(report)
        if report.when == "teardown":  # the last report copies them: the item need not keep them
            from .items import without_task_properties

            kept = without_task_properties(item.user_properties)
            if kept is not None:
                item.user_properties[:] = kept
    from .worker import attach_records

    attach_records(item, call, report)
    return report


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
def evomemory_run(pytestconfig: pytest.Config) -> Any:
    """The loaded benchmark of the baseline arm: configs, streams, output directory."""
    return get_session(pytestconfig).baseline.benchmark


@pytest.fixture(scope="session")
def evomemory_stream(
    request: pytest.FixtureRequest,
    evomemory_agent_factory: AgentFactoryFn | None,
    evomemory_memory_factory: MemoryFactoryFn | None,
) -> Iterator[LiveStream]:
    """One stream: its memory system lives exactly as long as this fixture.

    Teardown resets and closes the memory system before the next stream starts.
    A stream that cannot start is one failure (its first task's), not one per task.
    """
    from .worker import close_stream, open_stream

    live = open_stream(request.config, request.param, evomemory_agent_factory, evomemory_memory_factory)
    try:
        yield live
    finally:
        close_stream(request.config, live)


@pytest.fixture
def evomemory_sample(request: pytest.FixtureRequest) -> BenchmarkSample:
    """The task of this test item."""
    sample: BenchmarkSample = request.param
    return sample


@pytest.fixture
def evomemory_episode(
    request: pytest.FixtureRequest, evomemory_stream: LiveStream, evomemory_sample: BenchmarkSample
) -> Iterator[PytestEpisode]:
    """The task's episode; its teardown gives the feedback, then resets the agent."""
    __tracebackhide__ = True
    from .worker import begin_episode

    key = request.node.callspec.params["evomemory_stream"]
    episode = begin_episode(request.config, key, evomemory_stream, evomemory_sample)
    yield episode
    episode.finish()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = config.stash.get(SESSION_KEY, None)
    return None if session is None else session.header()
