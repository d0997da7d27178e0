"""The model side of a pytest session: what every process shares about its endpoints.

Registered by the plugin in every process (controller, xdist workers, or the only
one) when the benchmark is on:

* the controller opens the session's shared directory and names it in
  ``EVOMEMORY_SESSION_DIR`` before xdist starts its workers, which inherit it:
  connection slots and 429 backoff per endpoint (:mod:`..models.limits`) and the
  spend of ``--evomemory-max-cost`` (:mod:`..models.budget`) live there;
* ``--evomemory-max-cost`` makes every model client built in the process consult
  the shared :class:`~..models.budget.CostGuard`; once a call is refused, each
  process stops after its current task, and the controller ends the session with
  the reason (the run is incomplete and resumable, see runtime/stream.py).

The lead's runtime Session takes this over: it owns the directory and passes it on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ..models.budget import SPEND_FILE, CostGuard, activate_cost_guard
from ..models.limits import close_session_directory, open_session_directory, session_directory
from .stash import SESSION_KEY

MAX_COST_OPTION = "evomemory_max_cost"


def parse_max_cost(value: object) -> float | None:
    """``--evomemory-max-cost`` in US dollars, or a UsageError saying what to write."""
    if value is None:
        return None
    text = str(value).strip().removeprefix("$")
    try:
        cap = float(text)
    except ValueError:
        cap = math.nan
    if not (0 < cap < math.inf):
        raise pytest.UsageError(
            f"evomemory: --evomemory-max-cost must be a positive number of US dollars, got {str(value)[:40]!r}; "
            "write e.g. --evomemory-max-cost=5"
        )
    return cap


def check_priced(model_configs: list[tuple[str, Any]]) -> None:
    """Refuse a cost cap over a model without prices, before any task runs."""
    unpriced = [name for name, model in model_configs if model is not None and model.pricing is None]
    if unpriced:
        raise pytest.UsageError(
            f"evomemory: --evomemory-max-cost needs the price of every model it caps; the agent config of "
            f"{', '.join(map(repr, unpriced))} has no 'model.pricing': add pricing: "
            "{input_per_million: ..., output_per_million: ...} (0 and 0 for a model that costs nothing)"
        )


class ModelSideHooks:
    def __init__(self, config: pytest.Config, *, is_worker: bool, model_configs: list[tuple[str, Any]]) -> None:
        self.config = config
        self.is_worker = is_worker
        self.cap = parse_max_cost(config.getoption(MAX_COST_OPTION, None))
        if self.cap is not None:
            check_priced(model_configs)
        self.created: Path | None = None
        if not is_worker:  # before xdist starts the workers, so that they inherit it
            directory, created = open_session_directory()
            self.created = directory if created else None
        self.guard: CostGuard | None = None
        self.session: pytest.Session | None = None
        if self.cap is not None:
            self.guard = CostGuard(session_directory() / SPEND_FILE, self.cap)
            activate_cost_guard(self.guard)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Once any process refused a call, stop here too (the controller's stop
        also stops xdist from handing out more work)."""
        if self.guard is None or self.session is None or report.when != "teardown":
            return
        reason = self.guard.stop_reason
        if reason is None:
            return
        self.session.shouldstop = f"evomemory: {reason}"
        benchmark = self.config.stash.get(SESSION_KEY, None)
        if not self.is_worker and benchmark is not None and not getattr(benchmark, "stop_reason", None):
            benchmark.stop_reason = reason  # what run.json and the summary say, not "interrupted"
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is not None:
            dsession.shouldstop = self.session.shouldstop

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        activate_cost_guard(None)
        if self.created is not None:
            close_session_directory(self.created, True)
            self.created = None


__all__ = ["MAX_COST_OPTION", "ModelSideHooks", "parse_max_cost"]
