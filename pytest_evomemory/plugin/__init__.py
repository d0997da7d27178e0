"""pytest adapter: options, the switch that turns the benchmark on, and fixtures.

The engine's :class:`~pytest_evomemory.runtime.session.Session` decides what
happens; this package maps it onto pytest (docs/design.md): a stream is a
session-scoped parametrized fixture, a task is a test item, feedback and reset are
the episode fixture's teardown. As pytest-xdist splits, :mod:`.controller` runs
where results are written and :mod:`.worker` where tasks run (without xdist, one
process runs both).

The benchmark is opt-in (``--evomemory``, ``--evomemory-config`` or
``--evomemory-resume``): an ``evomemory_config`` ini option alone runs nothing, so
plain ``pytest`` in an agent repository runs the user's tests only. pytest imports
this module in every run of every project that has the package installed, and
again in every xdist worker, so it imports nothing of the core at module level.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .stash import SESSION_KEY, STARTUP_HEAP, get_session, is_xdist_worker

if TYPE_CHECKING:
    from ..core.types import BenchmarkSample
    from ..runtime import AgentFactoryFn, MemoryFactoryFn, StreamRun
    from ..runtime.notrun import FailedStream
    from .worker import PytestEpisode


#: The package pytest marks for assertion rewriting as the plugin's distribution.
_PACKAGE = __name__.partition(".")[0]


def _load_the_core_without_assertion_rewriting(pluginmanager: pytest.PytestPluginManager) -> None:
    """Import the package's modules as Python does, not through pytest's assertion rewriting.

    pytest rewrites the asserts of every module of a plugin's distribution, so each
    of the some 120 modules a process imports before its first model call goes
    through its import hook: a second path search, the source read and hashed, the
    cached code unmarshalled from an open file (several times slower than from
    bytes): about 0.1 s of CPU per pytest process, each xdist worker's included
    (docs/performance-history.md, "Start-up per process"). The package's asserts are internal checks that
    never meet a user's values; its test helpers (``pytest_evomemory.testing``),
    which a user's tests call, stay rewritten. pytest offers no public way to unmark
    a name: where its hook has no such set (another pytest version, ``--assert=plain``)
    nothing changes.
    """
    hook = getattr(pluginmanager, "rewrite_hook", None)
    if hook is None:
        return
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set) and _PACKAGE in marked:
        marked.discard(_PACKAGE)
        cached = getattr(hook, "_marked_for_rewrite_cache", None)
        if isinstance(cached, dict):
            for name in [name for name in cached if name.partition(".")[0] == _PACKAGE]:
                del cached[name]
    # marked whatever the install: pytest finds the package's files (and marks them)
    # only in a wheel's metadata, not in an editable install's
    helpers = f"{_PACKAGE}.testing"
    if helpers not in sys.modules:  # one imported already stays as it is
        hook.mark_rewrite(helpers)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    _load_the_core_without_assertion_rewriting(pluginmanager)
    from ..options import PROGRESS_INTERVAL_INI, PYTEST_FLAGS, add_options

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
        PROGRESS_INTERVAL_INI,
        "seconds between a stream's progress lines (its last line always shows; 0: after every task)",
        default=None,
    )


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
    if config.getoption("evomemory_min_accuracy"):
        # a gate that silently judges nothing would pass CI: refused, as the gain gate is
        raise pytest.UsageError(
            "evomemory: --evomemory-min-accuracy gates the benchmark's accuracy, but the benchmark is off; "
            "add --evomemory (the ini config) or --evomemory-config=PATH"
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
    from ..util.heap import StartupHeap

    heap = config.stash[STARTUP_HEAP] = StartupHeap.for_process(fresh=is_xdist_worker(config))
    with heap.paused(settle_after=False):  # settled when collection is over
        from .activate import activate

        activate(config)


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
    return get_session(pytestconfig).plan.baseline.benchmark


@pytest.fixture(scope="session")
def evomemory_stream(
    request: pytest.FixtureRequest,
    evomemory_agent_factory: AgentFactoryFn | None,
    evomemory_memory_factory: MemoryFactoryFn | None,
) -> Iterator[StreamRun | FailedStream]:
    """One stream: its memory system lives exactly as long as this fixture.

    Teardown resets and closes the memory system before the next stream starts.
    A stream that cannot start is one failure (its first task's), not one per task.
    """
    from .worker import worker_of

    worker = worker_of(request.config)
    live = worker.open_stream(request.param, evomemory_agent_factory, evomemory_memory_factory)
    try:
        yield live
    finally:
        worker.driver.close_stream(live, worker.sink)


@pytest.fixture
def evomemory_sample(request: pytest.FixtureRequest) -> BenchmarkSample:
    """The task of this test item."""
    sample: BenchmarkSample = request.param
    return sample


@pytest.fixture
def evomemory_episode(
    request: pytest.FixtureRequest, evomemory_stream: StreamRun | FailedStream, evomemory_sample: BenchmarkSample
) -> Iterator[PytestEpisode]:
    """The task's episode; its teardown gives the feedback, then resets the agent."""
    __tracebackhide__ = True
    from .worker import worker_of

    key = request.node.callspec.params["evomemory_stream"]
    episode = worker_of(request.config).begin_episode(key, evomemory_stream, evomemory_sample)
    yield episode
    episode.finish()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    from ..reporting.sessionlines import header

    return header(session)
