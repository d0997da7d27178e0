"""Continue an interrupted run from what its output directory already holds.

A run can take hours and cost money, so an interruption (Ctrl-C, a killed job, a
crashed machine) must not throw it away. Per stream, the completed episodes are the
longest prefix of tasks that each have either a scored task *and* a feedback
response, or a recorded failure. Those tasks are not run again; everything after the
prefix is. The stream's memory is restored exactly by replaying, in order, the
records that the completed episodes wrote (``memory_writes`` in responses.jsonl) into
a fresh memory system, so the remaining tasks see the same memory they would have
seen in an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .benchmarks import Stream
from .errors import ConfigError
from .reporting.artefacts import read_jsonl


@dataclass
class ResumeState:
    """What an earlier, interrupted run completed."""

    #: stream -> number of leading tasks that are complete
    done: dict[str, int] = field(default_factory=dict)
    #: records to keep, in their original order
    responses: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    #: stream -> memory writes of the completed episodes, in order
    memory_writes: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)

    def is_done(self, stream: str, position: int) -> bool:
        return position < self.done.get(stream, 0)

    @property
    def completed_tasks(self) -> int:
        return sum(self.done.values())


def load_resume_state(run_dir: Path, streams: Sequence[Stream]) -> ResumeState:
    """Read an interrupted run's artefacts; a torn last line (SIGKILL) is ignored."""
    if not (run_dir / "run.json").is_file():
        raise ConfigError(
            f"--evomemory-resume {run_dir}: no run.json there; pass the output directory "
            "of the run to continue"
        )
    responses = list(read_jsonl(run_dir / "responses.jsonl"))
    scores = list(read_jsonl(run_dir / "scores.jsonl"))
    state = ResumeState()
    for stream in streams:
        position_of = {sample.task_id: sample.position for sample in stream.samples}
        scored = {s["task_id"]: s for s in scores if s.get("stream") == stream.name}
        fed_back = {
            r["task_id"] for r in responses if r.get("stream") == stream.name and r.get("kind") == "feedback"
        }
        done = 0
        for sample in stream.samples:
            score = scored.get(sample.task_id)
            complete = score is not None and (score.get("error") or sample.task_id in fed_back)
            if not complete:
                break
            done += 1
        state.done[stream.name] = done
        kept_ids = {sample.task_id for sample in stream.samples[:done]}
        kept_responses = [
            r for r in responses if r.get("stream") == stream.name and r.get("task_id") in kept_ids
        ]
        state.responses += kept_responses
        state.scores += [scored[task_id] for task_id in sorted(kept_ids, key=position_of.__getitem__)]
        state.memory_writes[stream.name] = [
            write for response in kept_responses for write in response.get("memory_writes", [])
        ]
    return state
