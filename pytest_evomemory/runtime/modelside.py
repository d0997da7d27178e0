"""The model side of a session: what every process of it shares about its endpoints.

The process that drives the session (the only process, ``evomemory run``, or the
xdist controller before it starts its workers, which inherit
:data:`~..models.limits.SESSION_DIR_ENV`) opens the directory where every process
keeps the endpoints' connection slots and 429 backoff (:mod:`..models.limits`) and
the spend of the cost cap (:mod:`..models.budget`); a worker uses the one it
inherited. With a cap (``max-cost``), every model client built in this process
consults the shared guard, and a capped model without a price is refused before
any task.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from ..models.budget import (
    CostGuard,
    activate_cost_guard,
    active_cost_guard,
    close_spend_file,
    inherited_spend_file,
    open_spend_file,
)
from ..models.limits import close_session_directory, open_session_directory, session_directory
from .plan import SessionPlan


class ModelSide:
    """The session's shared directory and its cost cap, opened in this process."""

    def __init__(self, plan: SessionPlan) -> None:
        self.plan = plan
        if plan.max_cost is not None:
            self._check_priced()
        self._shared_dir: Path | None = None
        self._spend_file: tuple[Path, str | None] | None = None
        if not plan.setup.worker:
            directory, created = open_session_directory()
            self._shared_dir = directory if created else None
        self.cost_guard: CostGuard | None = None
        if plan.max_cost is not None:
            if plan.setup.worker:
                spend = inherited_spend_file(session_directory())
            else:  # a spend of this session's own, even in a directory other sessions share
                self._spend_file = open_spend_file(session_directory())
                spend = self._spend_file[0]
            self.cost_guard = CostGuard(spend, plan.max_cost)
            activate_cost_guard(self.cost_guard)

    def _check_priced(self) -> None:
        """A cost cap needs the price of every model it caps: refused before any task."""
        unpriced = [arm.name for arm in self.plan.arms
                    if (model := arm.run_config.agent.model) is not None and model.pricing is None]
        if unpriced:
            raise ConfigError(
                f"{self.plan.flags('max-cost')} needs the price of every model it caps; the agent config of "
                f"{', '.join(map(repr, unpriced))} has no 'model.pricing': add pricing: "
                "{input_per_million: ..., output_per_million: ...} (0 and 0 for a model that costs nothing)",
                key="model.pricing",
            )

    @property
    def stop_reason(self) -> str | None:
        """Why any process of the session refused a model call for the cost cap, once one did."""
        return None if self.cost_guard is None else self.cost_guard.stop_reason

    def close(self) -> None:
        if self.cost_guard is not None and active_cost_guard() is self.cost_guard:
            activate_cost_guard(None)
        if self._spend_file is not None:
            close_spend_file(*self._spend_file)
            self._spend_file = None
        if self._shared_dir is not None:
            close_session_directory(self._shared_dir, True)
            self._shared_dir = None


__all__ = ["ModelSide"]
