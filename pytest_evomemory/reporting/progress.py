"""A stream's running totals while it runs, as one compact line.

Kept beside the reports (no pytest here): the pytest plugin prints it as its
progress line; any other driver may too. The line reads the response and score
records as they arrive, so it never waits for the summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .columns import dollars, number
from .summary import cache_counts


@dataclass
class StreamProgress:
    """The running totals of one stream in this session."""

    name: str
    total: int
    done: int = 0
    correct: int = 0
    errors: int = 0
    violations: int = 0
    tokens: int = 0
    model_calls: int = 0
    cached_calls: int = 0
    agent_seconds: float = 0.0
    last_shown: float = 0.0
    #: Priced responses' ``cost_usd`` summed (None: nothing priced)
    cost_usd: float | None = None

    def add(self, record: Mapping[str, Any]) -> None:
        scored = record.get("scored")
        if scored is not None:
            self.done += 1
            self.correct += bool(scored.get("correct"))
            self.errors += bool(scored.get("error"))
        response = record.get("response")
        if response is not None:
            self.violations += bool(response.get("protocol_violation"))
            self.tokens += int((response.get("usage") or {}).get("total_tokens") or 0)
            calls, cached = cache_counts(response)
            self.model_calls += calls
            self.cached_calls += cached
            self.agent_seconds += float(response.get("seconds") or 0.0)
            cost = number(response.get("cost_usd"))
            if cost is not None:
                self.cost_usd = (self.cost_usd or 0.0) + cost

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def line(self, cost: str = "") -> str:
        accuracy = f"{self.correct / self.done:.1%}" if self.done else "-"
        cached = f"{self.cached_calls / self.model_calls:.0%}" if self.model_calls else "-"
        if self.finished:
            eta = "done"
        elif self.done:
            eta = _duration(self.agent_seconds / self.done * (self.total - self.done))
        else:
            eta = "?"
        return (
            f"evomemory {self.name}: {self.done}/{self.total}  acc {accuracy}  errors {self.errors}  "
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


def _count(value: int) -> str:
    return f"{value / 1000:.1f}k" if value >= 10_000 else str(value)


def _duration(value: float) -> str:
    seconds = round(value)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


__all__ = ["StreamProgress", "cost_text"]
