"""Turning the benchmark on in a pytest process: the session, the plugins, the items.

Loaded by :func:`pytest_evomemory.plugin.pytest_configure` only when a run config
switched the benchmark on. It opens the :class:`~..runtime.session.Session` (every
refusal is a pytest usage error: one line, exit 4, nothing run), registers the
controller plugin in the process that writes results and the worker plugin in the
process that runs tasks, and points pytest at the benchmark's items.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..core.errors import ConfigError, EvoMemoryError
from ..options import PROGRESS_INTERVAL_INI, PYTEST_FLAGS, read_options, render
from ..reporting.progress import progress_interval
from ..reporting.reports import REPORTS
from ..runtime.session import Session, SessionSetup
from ..util.redaction import shown
from .items import ITEMS_MODULE, task_argument
from .stash import SESSION_KEY, STARTUP_HEAP, distributes, is_xdist_worker


def activate(config: pytest.Config) -> None:
    worker = is_xdist_worker(config)
    writes = not worker and not config.option.collectonly
    try:
        # checked first, as evomemory run checks it: both doors name the same problem first
        progress_interval(config.getini(PROGRESS_INTERVAL_INI), PROGRESS_INTERVAL_INI)
        options = read_options(vars(config.option), PYTEST_FLAGS)
        setup = SessionSetup(
            options, PYTEST_FLAGS, config.invocation_params.dir,
            tuple(str(arg) for arg in config.invocation_params.args), writes=writes, worker=worker,
            hand_picked=_hand_picked(config), heap=config.stash[STARTUP_HEAP],
        )
        session = Session.open(setup, _ini_configs(config), config.rootpath, reports=REPORTS)
    except EvoMemoryError as error:
        # one line, as evomemory run says it, naming the options as pytest takes them
        raise pytest.UsageError(shown(render(f"evomemory: {error}", "pytest"))) from None
    config.stash[SESSION_KEY] = session
    try:
        _register(config, session, worker)
    except BaseException:
        session.release()  # the plugin that would release it at the end was never registered
        raise


def _register(config: pytest.Config, session: Session, worker: bool) -> None:
    from .collection import CollectionHooks

    config.pluginmanager.register(CollectionHooks(session.plan), "evomemory-collection")
    if not worker:
        from .controller import ControllerPlugin

        config.pluginmanager.register(ControllerPlugin(config, session), "evomemory-controller")
    if config.pluginmanager.hasplugin("pytest_jsonreport"):
        from .reporters import JsonReportHooks

        # pytest-json-report asks for a task's metadata where the task runs and sends it
        # on with the report; the block is the session's where results are written
        block = (lambda: None) if worker else _json_block(session)
        config.pluginmanager.register(JsonReportHooks(block), "evomemory-jsonreport")
    if not distributes(config):
        from .worker import WorkerPlugin

        config.pluginmanager.register(WorkerPlugin(config, session), "evomemory-worker")
    _point_args_at_items(config, session)


def _json_block(session: Session) -> Callable[[], dict[str, Any] | None]:
    """The session's block of the JSON report, rendered when pytest-json-report asks."""

    def block() -> dict[str, Any] | None:
        from ..reporting.sessionlines import json_block

        return json_block(session)

    return block


def _ini_configs(config: pytest.Config) -> list[str]:
    """The ini option's run config when ``--evomemory`` asks for it."""
    if not config.getoption("evomemory"):
        return []
    ini = config.getini("evomemory_config")
    if not ini:
        raise ConfigError(
            "--evomemory needs a run config: set evomemory_config in your pytest ini "
            "(e.g. pyproject.toml [tool.pytest.ini_options]) or pass --evomemory-config=PATH"
        )
    return [str(ini)]


def _hand_picked(config: pytest.Config) -> str | None:
    """How the command line picks tasks by hand, if it does (the session then writes
    a side run beside the full one instead of replacing it)."""
    for arg in map(str, config.args):
        if task_argument(arg) is not None or ("::" in arg and _in_items_module(arg)):
            return "node id"
    for option, spelling in (("keyword", "-k"), ("deselect", "--deselect")):
        if getattr(config.option, option, None):
            return spelling
    if getattr(config.option, "lf", None) and _last_failed_tasks(config):
        return "--lf"
    return None


def _last_failed_tasks(config: pytest.Config) -> bool:
    """Whether ``--lf`` narrows the benchmark: only when pytest's cache records a
    failed task. With none, pytest runs every task (no failures recorded) or none (only
    tests of the user's failed), so a full run stays a full run, not a side run."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return False
    failed = cache.get("cache/lastfailed", {})
    return isinstance(failed, dict) and any(task_argument(str(nodeid)) is not None for nodeid in failed)


def _in_items_module(arg: str) -> bool:
    """Whether a command-line path (or node id) names the benchmark's items module."""
    return str(Path(arg.split("::")[0]).resolve()) == str(ITEMS_MODULE)


def _point_args_at_items(config: pytest.Config, session: Session) -> None:
    """Collect the benchmark without a user test file: beside the paths given, alone
    when none is. A task's node id as pytest printed it (``evomemory::test_task[s/t]``)
    selects that task again: the items live in the installed package, not in the
    user's tree, so pytest could not resolve it; it is pointed at the items module,
    and the other tasks are not added."""
    module = str(ITEMS_MODULE)
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [module]
        return
    known = session.plan.task_ids()
    unknown = [arg for arg in config.args if (task := task_argument(arg)) is not None and task not in known]
    if unknown:
        raise pytest.UsageError(
            f"evomemory: no task {unknown[0]!r} in this run (its streams and limit decide which tasks exist); "
            "add --collect-only -q to the same command to list the tasks' ids"
        )
    args = [f"{module}::test_task[{task}]" if (task := task_argument(arg)) is not None else arg for arg in config.args]
    if not any(_in_items_module(arg) for arg in args):
        args.append(module)
    config.args[:] = args


__all__ = ["activate"]
