"""Resolve ``package.module:factory`` references from configs, and call user
factories, with useful errors.

The user's own code (an agent factory, a memory factory, a memory module) runs
inside the plugin; when it fails, the user needs *their* frames and one line that
says what to fix, once, not the plugin's internals (with locals) once per task.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ConfigError, EvoMemoryError, SessionRefused


def load_factory(reference: str, what: str) -> Callable[..., Any]:
    """Import the callable named by ``reference`` (``module:attribute``)."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"{what} factory {reference!r}: cannot import module {module_name!r} ({error}); "
            "add its directory to pytest's pythonpath setting (a module in your repository's root: "
            "pythonpath = [\".\"] under [tool.pytest.ini_options]; evomemory run reads it too), or install it"
        ) from None
    except (Exception, SystemExit) as error:  # the user's module raised (or exited) while being imported
        raise ConfigError(
            f"{what} factory {reference!r}: importing {module_name!r} raised "
            f"{type(error).__name__}: {_flat(error)}{user_frames(error)}; fix the module"
        ) from None
    factory = getattr(module, attribute, None)
    if factory is None or not callable(factory):
        raise ConfigError(
            f"{what} factory {reference!r}: module {module_name!r} has no callable {attribute!r}; "
            "name a function or class defined in that module"
        )
    return factory  # type: ignore[no-any-return]


def check_signature(factory: Callable[..., Any], parameters: tuple[str, ...], what: str) -> None:
    """Refuse, before any task, a factory that cannot be called with ``parameters``
    (positionally): otherwise every stream fails at its start, after the run began."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature available (a builtin): it is called as is
        return
    try:
        signature.bind(*parameters)
    except TypeError as error:
        raise ConfigError(
            f"{what}: its signature {signature} cannot take ({', '.join(parameters)}) ({_flat(error)}); "
            f"change it to accept {len(parameters)} positional argument(s): {', '.join(parameters)}"
        ) from None


#: The package's own directory, wherever this module sits in it (the top package is
#: imported before any of its modules).
_PACKAGE_DIR = str(Path(str(sys.modules[__name__.partition(".")[0]].__file__)).resolve().parent)


def user_frames(error: BaseException, limit: int = 3) -> str:
    """`` (at file:line in function, ...)``: the innermost frames of ``error`` that are
    not the plugin's own or the standard library's, for a one-line message."""
    frames = [
        frame for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(_PACKAGE_DIR)
        and "importlib" not in frame.filename and "<frozen" not in frame.filename
    ]
    if not frames:
        return ""
    shown = ", ".join(f"{frame.filename}:{frame.lineno} in {frame.name}" for frame in frames[-limit:])
    return f" (at {shown})"


def call_factory(factory: Callable[..., Any], args: tuple[Any, ...], what: str, *, name: str | None = None) -> Any:
    """Call a user factory with ``args``; a wrong signature, an exception or a
    ``None`` result becomes one :class:`ConfigError` naming the factory, the user's
    frames and what to fix. Call it once per stream start: a failure refuses the
    stream once instead of failing every task with a traceback. ``name``: the factory
    as the user named it (a config's ``module:factory``) when ``factory`` is the
    package's own builder that calls it."""
    name = name or getattr(factory, "__qualname__", None) or repr(factory)
    try:
        inspect.signature(factory).bind(*args)
    except TypeError as error:
        raise ConfigError(
            f"{what} factory {name}: cannot be called with {len(args)} argument(s) ({_flat(error)}); "
            f"it must accept {len(args)} positional argument(s)"
        ) from None
    except ValueError:  # no signature available (a builtin): just call it
        pass
    try:
        result = factory(*args)
    except EvoMemoryError:
        raise  # already one clear line (a backend that could not open, a bad config)
    except (Exception, SystemExit) as error:
        raise ConfigError(
            f"{what} factory {name} raised {type(error).__name__}: {_flat(error)}{user_frames(error)}; fix the factory"
        ) from None
    if result is None:
        raise ConfigError(f"{what} factory {name} returned None; it must return the {what}")
    return result


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The methods and properties ``protocol`` declares (its public names)."""
    return tuple(name for name in vars(protocol) if not name.startswith("_"))


_ABSENT = object()


def check_protocol(value: object, protocol: type, factory: str) -> None:
    """Refuse what a factory returned when it lacks a member of ``protocol``
    (:class:`SessionRefused`: one line naming the factory, what it returned and
    what is missing). Members are looked up without calling a property."""
    missing = [name for name in protocol_members(protocol)
               if inspect.getattr_static(value, name, _ABSENT) is _ABSENT
               and getattr(type(value), "__getattr__", None) is None]
    if missing:
        raise SessionRefused(
            f"{factory} returned {returned(value)}, which does not implement the {protocol.__name__} protocol: "
            f"it lacks {', '.join(missing)}; return an object with {', '.join(protocol_members(protocol))}"
        )


def returned(value: object) -> str:
    """What a factory returned, as the user would name its type."""
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return "None" if value is None else f"a {name}"


def _flat(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]
