"""What a task test's report says of its task: ``metadata.evomemory`` in
pytest-json-report's report, and the JUnit ``evomemory_<key>`` properties.

A module of its own, apart from the session's block (:mod:`.report`): every xdist
worker and every ``evomemory run`` attaches it to each task, before its first model
call, while the session's block, with the comparison's documents (about 15 ms of CPU
to define), is written once at the end. A dashboard reads it as it reads the run's
files, so it is declared here once and the shipped schema (``task_metadata``) is
generated from it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import RunDoc
from .fields import Count, Flag, Seconds, Text


class TaskMetadata(RunDoc):
    """A task test's metadata.evomemory in the JSON report (and its JUnit properties, evomemory_<key>)."""

    OMIT_NONE = frozenset({"arm"})
    CLOSED = True
    # the plugin always names the arm (the run's name with one arm)
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"required": [
        "arm", "stream", "task_id", "position", "correct", "extracted", "target", "match_mode", "reason", "tokens",
        "seconds", "cached", "violation"]}

    arm: str | None = None
    stream: Text = ""
    task_id: Text = ""
    position: Count = 0
    correct: Flag = False
    extracted: str | None = None
    target: Any = None
    match_mode: Text = ""
    reason: str = ""
    tokens: Count = 0
    seconds: Seconds | None = None
    cached: Flag = False
    violation: str | None = None


__all__ = ["TaskMetadata"]
