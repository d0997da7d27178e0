"""Progress while a session runs: a verdict per task, a compact line per stream.

A full run is thousands of model calls, so a dot per task says too little: a wrong
answer is a passed test (only a failed episode fails). Kept beside the reports (no
pytest here): both drivers print a task's verdict as it comes in, and the pytest
plugin prints each stream's line (tasks done of total, running accuracy, failed
episodes, protocol violations, tokens, the share of model calls served from the
response cache, an ETA from the agent's own time per task, the cost) at most every
``interval`` seconds and when its last task is in. The line reads the response and
score records as they arrive, so it never waits for the summary.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..analysis.summary import StreamMetrics, cache_counts
from ..core.errors import ConfigError
from ..rundocs import Score
from ..rundocs.records import as_response, as_score
from ..rundocs.wire import Record
from .columns import dollars, number

#: Seconds between a stream's lines unless the driver is told otherwise.
DEFAULT_INTERVAL = 10.0

Verdict = Literal["correct", "wrong", "error"]


def progress_interval(raw: str | None, setting: str) -> float:
    """The seconds between a stream's lines as the ini option ``setting`` gives them
    (unset or empty: the default). Anything but a number of seconds, 0 or more, is
    refused before any task: a typo would otherwise silence the lines of a long run."""
    try:
        value = float(raw) if raw not in (None, "") else DEFAULT_INTERVAL
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value < math.inf:
        raise ConfigError(
            f"ini option {setting} must be a number of seconds (0 or more), got {raw!r}; write e.g. {setting} = 10",
            source=setting,
        )
    return value


def task_verdict(scored: Score | Mapping[str, Any]) -> Verdict:
    """A scored task's verdict (``error``: a failed episode), as the drivers print it."""
    typed = as_score(scored)
    if typed.error:
        return "error"
    return "correct" if typed.correct else "wrong"


@dataclass
class StreamProgress:
    """The running totals of one stream in this session."""

    name: str
    total: int
    violations: int = 0
    tokens: int = 0
    model_calls: int = 0
    cached_calls: int = 0
    agent_seconds: float = 0.0
    last_shown: float = 0.0
    #: Priced responses' ``cost_usd`` summed (None: nothing priced)
    cost_usd: float | None = None
    #: The scores as the summary counts them (tasks done, failed episodes): the line
    #: shows the figure the stream is judged on (accuracy, or a mean its match mode
    #: declares, LoCoMo's F1), as the table will
    scores: StreamMetrics = field(default_factory=lambda: StreamMetrics(stream=""))

    def add(self, record: Record | Mapping[str, Any]) -> None:
        """Count a record's score and response (a mapping: a record's parts by name)."""
        parts = record if isinstance(record, Mapping) else vars(record)
        scored = as_score(parts["scored"]) if parts.get("scored") is not None else None
        if scored is not None:
            self.scores.add_outcome(scored, with_groups=False)
        response = as_response(parts["response"]) if parts.get("response") is not None else None
        if response is not None:
            self.violations += bool(response.protocol_violation)
            self.tokens += response.usage.total_tokens
            calls, cached = cache_counts(response)
            self.model_calls += calls
            self.cached_calls += cached
            self.agent_seconds += float(response.seconds)
            cost = number(response.cost_usd)
            if cost is not None:
                self.cost_usd = (self.cost_usd or 0.0) + cost

    @property
    def done(self) -> int:
        return self.scores.tasks

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def figure(self) -> str:
        """``acc 60.0%``, or ``mean F1 43.0%`` where the stream is judged on a mean."""
        key, label, value = self.scores.headline_figure()
        name = "acc" if key == "accuracy" else label
        return f"{name} {value:.1%}" if value is not None else f"{name} -"

    def line(self, cost: str = "") -> str:
        cached = f"{self.cached_calls / self.model_calls:.0%}" if self.model_calls else "-"
        if self.finished:
            eta = "done"
        elif self.done:
            eta = _duration(self.agent_seconds / self.done * (self.total - self.done))
        else:
            eta = "?"
        return (
            f"evomemory {self.name}: {self.done}/{self.total}  {self.figure()}  errors {self.scores.errors}  "
            f"violations {self.violations}  tokens {_count(self.tokens)}  cached {cached}  eta {eta}{cost}"
        )


def cost_text(streams: Sequence[StreamProgress]) -> str:
    """The cost part of a progress line: this session's spend so far and, while
    tasks are left, the estimate for the rest (spend / tasks done x tasks left);
    empty when no response is priced (``model.pricing``)."""
    priced = [stream.cost_usd for stream in streams if stream.cost_usd is not None]
    if not priced:
        return ""
    spent = sum(priced)
    done = sum(stream.done for stream in streams)
    left = sum(max(0, stream.total - stream.done) for stream in streams)
    rest = f" (~{dollars(spent / done * left)} more)" if done and left else ""
    return f"  cost {dollars(spent)}{rest}"


class ProgressBoard:
    """Every stream's running totals in one session, and when its line is due: at
    most every ``interval`` seconds (0: after every task) and always when its last
    task is in; with ``final_only`` only then."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, *, final_only: bool = False) -> None:
        self.interval = interval
        self.final_only = final_only
        self.streams: dict[str, StreamProgress] = {}

    def start(self, totals: Mapping[str, int], completed: Callable[[str], Sequence[Score]]) -> None:
        """The tasks this session runs, per stream key. A resumed stream's line counts
        the scores its interrupted run ``completed`` too: it says what the table at the
        end will say."""
        self.streams = {}
        for key, total in totals.items():
            progress = self.streams[key] = StreamProgress(key, total)
            for scored in completed(key):
                progress.total += 1
                progress.scores.add_outcome(scored, with_groups=False)

    def add(self, key: str, records: Sequence[Record | Mapping[str, Any]], *, show: bool = True) -> str | None:
        """Add one task phase's records to stream ``key``; its line when one is due
        (``show``: the task is complete, its feedback in; a stream without feedback
        turns, LoCoMo's, has nothing left to add then)."""
        progress = self.streams.get(key)
        if progress is None or not (records or show):
            return None
        for record in records:
            progress.add(record)
        if not show:
            return None
        now = time.monotonic()
        if not progress.last_shown:
            progress.last_shown = now  # the interval counts from the stream's first task
            due = not self.final_only and self.interval == 0
        else:
            due = not self.final_only and now - progress.last_shown >= self.interval
        if not (progress.finished or due):
            return None
        progress.last_shown = now
        return progress.line(cost_text(list(self.streams.values())))


def _count(value: int) -> str:
    return f"{value / 1000:.1f}k" if value >= 10_000 else str(value)


def _duration(value: float) -> str:
    seconds = round(value)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


__all__ = [
    "DEFAULT_INTERVAL",
    "ProgressBoard",
    "StreamProgress",
    "Verdict",
    "cost_text",
    "progress_interval",
    "task_verdict",
]
