"""The accuracy gates a command line sets: ``min-accuracy`` per arm and stream.

This module parses the minimums; which figure a minimum is compared with is not
decided here but by the scope's match modes (their declared headline figure:
accuracy, or LoCoMo's mean F1; :func:`pytest_evomemory.analysis.summary.check_thresholds`).
(The gain gates of a comparison are :mod:`pytest_evomemory.analysis.gain`'s.)
Messages name the option by identity; the door spells it (:func:`..options.render`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import ConfigError, named
from ..util.text import did_you_mean

#: What separates the arm from the stream in a gate (``memory:sample_facts=0.5``)
#: and in an item's id (``memory:sample_facts/f01``).
ARM_SEPARATOR = ":"
#: The option the gates come from, in a message.
OPTION = named("min-accuracy")


def thresholds_for_arms(values: Sequence[str], names: Sequence[str]) -> dict[str, list[str]]:
    """``[ARM:][STREAM=]FRACTION`` values per arm; a value without an arm applies to every arm."""
    per_arm: dict[str, list[str]] = {name: [] for name in names}
    for value in values:
        text = str(value)
        if ARM_SEPARATOR not in text.partition("=")[0]:  # no arm named before the stream
            for name in names:
                per_arm[name].append(text)
            continue
        arm, _, rest = text.partition(ARM_SEPARATOR)
        if arm in per_arm:
            per_arm[arm].append(rest)
        else:
            raise ConfigError(
                f"{OPTION} {value!r}: unknown arm {arm!r}{did_you_mean(arm, names)}; arms: {', '.join(names)} "
                "(the form is [ARM:][STREAM=]FRACTION)",
                option="min-accuracy",
            )
    return per_arm


def parse_min_accuracy(values: Sequence[str], streams: Sequence[str]) -> tuple[float | None, dict[str, float]]:
    """``[STREAM=]FRACTION`` thresholds, checked against the streams."""
    overall: float | None = None
    per_stream: dict[str, float] = {}
    for value in values:
        name, equals, number = value.rpartition("=")
        if equals and not name.strip():
            raise ConfigError(
                f"{OPTION} {value!r}: no stream name before '='; "
                "write STREAM=FRACTION, or FRACTION alone for the overall accuracy",
                option="min-accuracy",
            )
        if (overall is not None and not name) or name in per_stream:
            raise ConfigError(
                f"{OPTION} {value!r}: a threshold for {name or 'the overall accuracy'} "
                "is given twice (only one would count); give it once",
                option="min-accuracy",
            )
        try:
            fraction = float(number)
        except ValueError:
            raise ConfigError(
                f"{OPTION} {value!r}: expected [STREAM=]FRACTION; write e.g. 0.5, or STREAM=0.5 for one stream",
                option="min-accuracy",
            ) from None
        if not 0.0 <= fraction <= 1.0:
            raise ConfigError(f"{OPTION} {value!r}: the fraction must be between 0 and 1; write e.g. 0.8 for 80%", option="min-accuracy")
        if not name:
            overall = fraction
        elif name not in streams:
            raise ConfigError(
                f"{OPTION} {value!r}: unknown stream {name!r}{did_you_mean(name, streams)}; "
                f"use one of the streams: {', '.join(streams)}",
                option="min-accuracy",
            )
        else:
            per_stream[name] = fraction
    return overall, per_stream


__all__ = ["ARM_SEPARATOR", "parse_min_accuracy", "thresholds_for_arms"]
