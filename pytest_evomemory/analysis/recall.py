"""A task's similarity to what its recalls returned, measured as the episode runs.

Apart from :mod:`.similarity` (which correlates it with the gain when runs are
compared) because every stream computes it per task: this module needs only the
text measure, so a worker does not load the comparison's document models at
start-up (tests/runtime/test_startup_imports.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..util.text import similarity


def recall_similarity(prompt: str, recalled: Sequence[Mapping[str, Any]], recalls: int) -> float | None:
    """The largest lexical similarity between the task's prompt and a record its task
    turn recalled (0.0 when the recalls returned nothing; None when it made no recall).
    Why lexical: :mod:`.similarity`'s module docstring."""
    if recalls <= 0:
        return None
    contents = [str(hit.get("content", "")) for hit in recalled]
    return round(max((similarity(prompt, content) for content in contents), default=0.0), 6)


__all__ = ["recall_similarity"]
