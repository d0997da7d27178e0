"""Errors that reach the user. Each says what went wrong *and* what to do about it.

Deep exceptions (YAML, pydantic, parquet, HTTP) are translated into these at the
layer that knows the file, key, stream or task involved, so that pytest can print
one clear line instead of a traceback.

Like httpx's exceptions, the errors also carry that context as attributes
(``ConfigError.source``/``.key``, ``ModelError.endpoint``/``.status``/``.attempts``),
so callers and reports can act on it without parsing the message. Every attribute
is keyword-only and optional: ``ConfigError("message")`` keeps working everywhere.

An error never spells a command-line option: ``--evomemory-output-dir`` is pytest's
word and ``--output-dir`` that of ``evomemory run``. The engine names an option by
identity (``option="output-dir"``, and :func:`named` in the message), and each door
writes the flag as its user types it where it catches the error
(:func:`..options.render`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .types import AgentResponse

#: An option's identity: its name without any door's prefix. :mod:`..options` declares
#: each option once under this name (a test keeps the two lists equal).
OptionName = Literal[
    "config", "set", "output-dir", "limit", "stream", "min-accuracy", "min-gain", "min-gain-by", "resume",
    "repeats", "max-errors", "max-cost", "shard", "shard-by", "chains", "compare",
]


def named(option: OptionName) -> str:
    """``option`` in a message: a placeholder (``{--output-dir}``) that the door the
    message reaches fills with its own spelling (:func:`..options.render`), so the
    engine says which option without knowing how the user typed it."""
    return f"{{--{option}}}"


#: An option named in a message (:func:`named`), waiting for its door's spelling.
NAMED = re.compile(r"\{--([a-z][a-z-]*[a-z])\}")


class EvoMemoryError(Exception):
    """Base class of every error this package raises on purpose.

    ``response`` is the agent's response of the turn the error ended, when there
    was a turn: the runtime attaches it (as httpx attaches ``.request``), so a
    failed turn's transcript is recorded from the error itself.
    """

    response: AgentResponse | None = None
    #: the option at fault, by identity, when one is (the message names it with :func:`named`)
    option: OptionName | None = None

    def __init__(self, message: str = "", *, option: OptionName | None = None) -> None:
        super().__init__(message)
        self.message = message
        if option is not None:
            self.option = option

    def __str__(self) -> str:
        return self.message


def without_secrets(text: str) -> str:
    """``text`` redacted as every output is (:func:`..util.redaction.redact`: the known
    secrets, the values of the variables a config names for its keys, in every
    spelling, and the key-shaped patterns), every value shaped like one
    (:mod:`..util.secretshape`) masked, and a word too long for one line cut: what a
    config error may quote of the user's input."""
    # imported here: the plugin imports this module before a run config turns the
    # benchmark on, and plain pytest must load nothing more
    from ..util.redaction import redact
    from ..util.secretshape import mask_secret_shaped

    return _LONG_WORD.sub(_cut, mask_secret_shaped(redact(text)))


#: A word (no space) this long in a message is a value pasted whole (a 20,000-character
#: key or name), which would make the one line unreadable: it is cut.
_LONG_WORD = re.compile(r"\S{300,}")


def _cut(match: re.Match[str]) -> str:
    word = match.group(0)
    body = word.rstrip(":;,.)'\"")
    return f"{body[:120]}...({len(body):,} characters){word[len(body):]}"


class ConfigError(EvoMemoryError):
    """A configuration file or option is invalid; raised before any test runs.

    ``source`` is the file at fault, ``key`` the dotted key path in it, ``option``
    the command-line option. The message and key quote what the user wrote, so they
    never hold a secret (:func:`without_secrets`): an API key pasted into the wrong key
    (``kind:``, a URL, a key's name) is not echoed to the terminal or a CI log.
    """

    def __init__(
        self, message: str = "", *, source: str | None = None, key: str | None = None, option: OptionName | None = None
    ) -> None:
        super().__init__(without_secrets(message), option=option)
        self.source = source
        self.key = None if key is None else without_secrets(key)


class SessionRefused(ConfigError):
    """What refuses the whole session before its first task (exit 4, nothing written),
    though it shows only when a stream's parts are first built: a factory whose result
    is not an Agent or a MemorySystem, a resumed memory that cannot restore its
    snapshot. Found once the session has recorded results, it fails that stream only."""


class DataError(EvoMemoryError):
    """A stream could not be materialized, loaded or converted.

    ``source`` is the data file, ``line`` the 1-based line, ``task`` the task id.
    """

    def __init__(
        self,
        message: str = "",
        *,
        source: str | None = None,
        line: int | None = None,
        task: str | None = None,
    ) -> None:
        super().__init__(message)
        self.source = source
        self.line = line
        self.task = task


class MemoryBackendError(EvoMemoryError):
    """The memory system could not be opened or failed during a stream."""


class ArtefactWriteError(EvoMemoryError):
    """A file of the run (a memory snapshot, a results file) could not be written:
    the disk is full, the file system read-only, the directory not writable.

    ``path`` is the file or directory being written. The run stops on it once: what
    was written before it (scores, snapshots of earlier episodes) is kept and a
    resume continues from there. Its message reaches the run's own files (the
    summary's ``write_failure``), which either door may read back, so it names no
    option: the session's last lines say how to resume.
    """

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    @classmethod
    def from_os_error(cls, path: object, error: OSError) -> ArtefactWriteError:
        """One line naming the path and the system's reason (``strerror``)."""
        where = str(path)
        return cls(
            f"could not write {where}: {system_reason(error)}; the results written before "
            f"it are kept; {system_remedy(error)}, then resume the run (it continues from there)",
            path=where,
        )


def system_reason(error: OSError) -> str:
    """The system's reason for refusing a file operation, with its errno's name:
    'No space left on device (ENOSPC)'."""
    import errno

    reason = error.strerror or str(error) or type(error).__name__
    code = errno.errorcode.get(error.errno or 0)
    return f"{reason}{f' ({code})' if code else ''}"


def system_remedy(error: OSError) -> str:
    """What the user does about a write the system refused: out of descriptors is
    the process's limit, not the disk's room nor the files' permissions."""
    import errno

    if error.errno in (errno.EMFILE, errno.ENFILE):
        return "raise the limit of open files (ulimit -n) or run fewer chains at once"
    return "free space or fix the permissions"


#: What to do about an output file the system would not let a command write.
WRITE_HINT = "give a path in a directory you can write (it is created if missing), or fix the permissions"


class ReportError(EvoMemoryError):
    """A run directory cannot be turned into a report (missing or unreadable artefacts),
    or a page cannot be written. Declared here, not beside the page code, so the engine
    can tell a report that failed from its own errors without importing the renderers."""


class ModelError(EvoMemoryError):
    """The model could not be reached, kept failing after the configured retries,
    or sent a reply that cannot be used.

    ``endpoint`` is the API root (never with credentials), ``status`` the last HTTP
    status (``None`` when no reply came), ``attempts`` the attempts made.
    """

    def __init__(
        self,
        message: str = "",
        *,
        endpoint: str | None = None,
        status: int | None = None,
        attempts: int | None = None,
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.status = status
        self.attempts = attempts


class BudgetExhausted(EvoMemoryError):
    """The next model call could take the session past the cost cap (option ``max-cost``).

    Not a failure of the task: the session stops before the call, the task is left
    unrun (no record), and a resume runs it. ``spent_usd`` is the session's spend
    so far, ``cap_usd`` the cap.
    """

    def __init__(self, message: str = "", *, spent_usd: float = 0.0, cap_usd: float = 0.0) -> None:
        super().__init__(message)
        self.spent_usd = spent_usd
        self.cap_usd = cap_usd


class EpisodeError(EvoMemoryError):
    """A task episode could not complete (the test fails with this reason)."""

    def __init__(self, message: str, *, response: AgentResponse | None = None) -> None:
        super().__init__(message)
        self.response = response


class ProtocolViolation(EpisodeError):
    """The agent or memory system broke the Evo-Memory episode protocol."""
