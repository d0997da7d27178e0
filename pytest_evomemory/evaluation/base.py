"""The evaluator interface: turn one task's final answer into a :class:`Score`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..core.types import BenchmarkSample, Score


@runtime_checkable
class Evaluator(Protocol):
    """Scores the answer to one original task. Never sees feedback turns."""

    def score(self, sample: BenchmarkSample, answer: str | None) -> Score: ...
