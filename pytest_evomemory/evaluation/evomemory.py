"""The Evo-Memory evaluator: score original task responses, never feedback turns.

Feedback turns carry the target itself, so scoring one would count the answer
key as the agent's answer; refusing them here makes that impossible whatever the
caller does, rather than relying on every caller to filter.
"""

from __future__ import annotations

from ..core.errors import ProtocolViolation
from ..core.types import AgentResponse, BenchmarkSample, ScoredItem
from .taskqa import TaskQAEvaluator


class EvoMemoryEvaluator:
    """Selects the ``task`` responses of a run and scores each with its stream's mode."""

    def __init__(self, taskqa: TaskQAEvaluator | None = None) -> None:
        self.taskqa = taskqa or TaskQAEvaluator()

    def score_response(self, sample: BenchmarkSample, response: AgentResponse) -> ScoredItem:
        if response.kind != "task":
            raise ProtocolViolation(
                f"{response.stream}/{response.task_id}: a {response.kind} response was "
                "passed for scoring; only original task turns are scored"
            )
        if (response.stream, response.task_id) != (sample.stream, sample.task_id):
            raise ProtocolViolation(
                f"the response of {response.stream}/{response.task_id} was passed for scoring "
                f"against task {sample.stream}/{sample.task_id}"
            )
        score = self.taskqa.score(sample, response.final_answer)
        return ScoredItem(sample.stream, sample.task_id, sample.position, score, group=sample.group)
