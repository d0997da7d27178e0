"""A ``module:factory`` benchmark source, called as the user wrote it.

Built-in sources are ours and tested; a user's source is code we did not write,
called at configure time before any task. Whatever it does wrong (a factory that
raises or wants arguments, a ``stream_names`` that is not a list of names, a
``load`` that raises or returns something other than the streams asked for, a task
that is not a :class:`~pytest_evomemory.core.types.BenchmarkSample`) is one
:class:`~pytest_evomemory.core.errors.ConfigError` here, naming the factory and what to
fix: never a traceback from inside the plugin, and never a run whose tasks are
scored under another stream's name or twice under one id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ..config import BenchmarkConfig
from ..core.errors import ConfigError, DataError, EvoMemoryError
from ..core.factories import call_factory, check_protocol, load_factory, returned, user_frames
from ..core.types import BenchmarkSample
from .base import BenchmarkSource, Stream
from .checks import check_sample

T = TypeVar("T")


def open_user_source(reference: str) -> BenchmarkSource:
    """The :class:`BenchmarkSource` the user's ``module:factory`` returns (called with
    no argument)."""
    source = call_factory(load_factory(reference, "benchmark"), (), "benchmark")
    check_protocol(source, BenchmarkSource, f"benchmark factory {reference!r}")
    return UserSource(reference, source)


class UserSource:
    """A user's source whose every answer is checked before the engine uses it."""

    def __init__(self, reference: str, source: BenchmarkSource) -> None:
        self.reference = reference
        self._source = source

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        names = self._call("stream_names", lambda: self._source.stream_names(config))
        if isinstance(names, str | bytes) or not isinstance(names, Sequence) or not all(
            isinstance(name, str) and name for name in names
        ):
            raise self._error(f"stream_names() returned {returned(names)}; return a list of stream names (strings)")
        if len(set(names)) != len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise self._error(f"stream_names() lists {', '.join(map(repr, twice))} twice; name each stream once")
        return list(names)

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        streams = self._call("load", lambda: self._source.load(config, base_dir, names))
        if not isinstance(streams, Sequence) or not all(isinstance(stream, Stream) for stream in streams):
            raise self._error(
                f"load() returned {returned(streams)}; return a list of pytest_evomemory.streams.Stream, one per name asked for"
            )
        got = [stream.name for stream in streams]
        if got != list(names):
            raise self._error(
                f"load() was asked for streams {list(names)} and returned {got}; return exactly those, in that order"
            )
        for stream in streams:
            for sample in stream.samples:
                if not isinstance(sample, BenchmarkSample):
                    raise self._error(
                        f"stream {stream.name!r}: a task is {returned(sample)}; make each task a "
                        "pytest_evomemory.BenchmarkSample"
                    )
                if sample.stream != stream.name:
                    raise self._error(
                        f"stream {stream.name!r}: task {sample.task_id!r} says it belongs to stream {sample.stream!r}; "
                        "set each BenchmarkSample's stream to the name of the Stream holding it"
                    )
                bad = [name for name in ("task_id", "prompt", "target", "match_mode") if not isinstance(getattr(sample, name), str)]
                if bad:
                    raise self._error(
                        f"stream {stream.name!r}: task {getattr(sample, 'task_id', '?')!r}: {', '.join(bad)} must be "
                        f"text, got {', '.join(returned(getattr(sample, name)) for name in bad)}; give strings"
                    )
                try:
                    check_sample(sample, f"benchmark factory {self.reference!r}, stream {stream.name!r}")
                except DataError as error:
                    raise ConfigError(str(error)) from None
        return list(streams)

    def _call(self, method: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except EvoMemoryError:
            raise  # already one clear line (a DataError naming the file, ...)
        except (Exception, SystemExit) as error:
            raise self._error(
                f"{method}() raised {type(error).__name__}: {' '.join(str(error).split())[:300]}"
                f"{user_frames(error)}; fix the source"
            ) from None

    def _error(self, problem: str) -> ConfigError:
        return ConfigError(f"benchmark factory {self.reference!r}: {problem}")
