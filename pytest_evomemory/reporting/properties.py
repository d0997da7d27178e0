"""What a test report says of the benchmark: one task's fields, and what ran.

The pytest plugin hands them to reporters a CI system or a dashboard reads
(docs/artefacts.md): each task's fields become its ``evomemory_<key>`` JUnit
properties and its pytest-json-report ``metadata`` (:class:`..rundocs.taskmeta.TaskMetadata`);
what ran (agent, memory, model, from the summary's record of what ran, never from
the config alone) becomes the JUnit suite's properties. Their content is decided
here, beside the other reports; which reporter gets them is the plugin's business.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.summary import cache_counts
from ..models.identity import describe_component, describe_model, summary_ran
from ..rundocs import Response, Score
from ..rundocs.records import as_response, as_score
from ..rundocs.taskmeta import TaskMetadata

if TYPE_CHECKING:
    from ..rundocs.summary import Summary

#: The prefix of every property name (JUnit ``<property>``, pytest's user properties).
PROPERTY_PREFIX = "evomemory_"


def task_properties(
    scored_item: Score | Mapping[str, Any], response_record: Response | Mapping[str, Any], arm: str | None = None
) -> list[tuple[str, Any]]:
    """What a dashboard needs of one task, as ``evomemory_<key>`` properties.

    ``cached`` is true when every model call of the task turn was replayed from
    the response cache (then ``seconds`` is not the model's latency). ``arm``
    names the task's arm (the run's name with one arm): one shape for every session.
    """
    scored, response = as_score(scored_item), as_response(response_record)
    calls, cached = cache_counts(response)
    metadata = TaskMetadata(
        arm=arm, stream=scored.stream, task_id=scored.task_id, position=scored.position, correct=scored.correct,
        extracted=scored.extracted, target=scored.target, match_mode=scored.match_mode, reason=scored.reason,
        tokens=response.usage.total_tokens, seconds=response.seconds, cached=bool(calls) and cached == calls,
        violation=response.protocol_violation,
    )
    return [(_property_name(key), value) for key, value in metadata.written().items()]


def _property_name(key: str) -> str:
    """``evomemory_<key>``, one string for every task (spelled anew per task, the
    names were 14 strings a task that pytest's reports kept to the end of the session)."""
    return sys.intern(PROPERTY_PREFIX + key)


def task_metadata(properties: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """A task's pytest-json-report ``metadata`` (schema ``task_metadata``): its
    :func:`task_properties` without the prefix; empty for an item of no task."""
    return {name[len(PROPERTY_PREFIX):]: value for name, value in properties if is_task_property(name)}


def is_task_property(name: object) -> bool:
    return isinstance(name, str) and name.startswith(PROPERTY_PREFIX)


def without_task_properties(properties: list[tuple[str, Any]]) -> list[tuple[str, Any]] | None:
    """``properties`` without the task's ``evomemory_*`` ones, or None when it has none.

    Once JUnit XML and pytest-json-report have read them (both at the teardown
    report's ``pytest_runtest_logreport``), they are in those files and in the run
    directory; pytest keeps every item and report to the end of the session, and
    the properties with them cost ~2 KB a task (20,000 tasks: 40 MB)."""
    if not any(is_task_property(name) for name, _ in properties):
        return None
    return [(name, value) for name, value in properties if not is_task_property(name)]


def session_identity_properties(runs: Sequence[tuple[str, Summary | Mapping[str, Any] | None]]) -> list[tuple[str, str]]:
    """What ran in a session of one or several arms (``runs``: each arm's name and
    summary, None for one that did not finish): each finished run's
    :func:`identity_properties`, named by its arm when there are several."""
    several = len(runs) > 1
    properties: list[tuple[str, str]] = []
    for name, summary in runs:
        if summary is not None:
            properties += identity_properties(summary, name if several else None)
    return properties


def identity_properties(summary: Summary | Mapping[str, Any], arm: str | None = None) -> list[tuple[str, str]]:
    """``evomemory_agent``, ``evomemory_memory`` and ``evomemory_model`` of one run
    (each value prefixed ``<arm>: `` when a session runs several arms; a mapping:
    what ran, as summary.json holds it)."""
    identity = summary_ran(summary)
    prefix = f"{arm}: " if arm is not None else ""
    return [
        (f"{PROPERTY_PREFIX}agent", prefix + describe_component(identity.agent)),
        (f"{PROPERTY_PREFIX}memory", prefix + describe_component(identity.memory)),
        (f"{PROPERTY_PREFIX}model", prefix + describe_model(identity.model)),
    ]


__all__ = [
    "PROPERTY_PREFIX",
    "identity_properties",
    "is_task_property",
    "session_identity_properties",
    "task_metadata",
    "task_properties",
    "without_task_properties",
]
