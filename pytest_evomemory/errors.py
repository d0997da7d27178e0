"""Errors that reach the user. Each says what went wrong *and* what to do about it.

Deep exceptions (YAML, pydantic, parquet, HTTP) are translated into these at the
layer that knows the file, key, stream or task involved, so that pytest can print
one clear line instead of a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .types import AgentResponse


class EvoMemoryError(Exception):
    """Base class of every error this package raises on purpose.

    ``response`` is the agent's response of the turn the error ended, when there
    was a turn: the runtime attaches it (as httpx attaches ``.request``), so a
    failed turn's transcript is recorded from the error itself.
    """

    response: AgentResponse | None = None


class ConfigError(EvoMemoryError):
    """A configuration file or option is invalid; raised before any test runs."""


class DataError(EvoMemoryError):
    """A stream could not be materialized, loaded or converted."""


class MemoryBackendError(EvoMemoryError):
    """The memory system could not be opened or failed during a stream."""


class ModelError(EvoMemoryError):
    """The model could not be reached or kept failing after the configured retries."""


class EpisodeError(EvoMemoryError):
    """A task episode could not complete (the test fails with this reason)."""

    def __init__(self, message: str, *, response: AgentResponse | None = None) -> None:
        super().__init__(message)
        self.response = response


class ProtocolViolation(EpisodeError):
    """The agent or memory system broke the Evo-Memory episode protocol."""
