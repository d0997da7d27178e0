"""One shape for every registry: benchmarks, memory backends, agents, match modes.

A registry maps a name (what a config writes: ``backend: sqlite``) to an entry, the
spec of that kind of component. Built-in entries are declared where the component
lives and load on first lookup (``"module:attribute"``), so naming a registry costs
no import of what it lists; users add their own with :meth:`Registry.register`, and
a config may always name a ``package.module:factory`` instead of a registered name.

What a registry decides, it decides for every kind alike: whether a name is known,
the one error for an unknown name (listing the known ones), and that a built-in
entry cannot be replaced by another module (a conftest silently rescoring GPQA, or
swapping the SQLite backend, would void every figure measured with it).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

from ..util.text import did_you_mean
from .errors import ConfigError

T = TypeVar("T")

#: ``package.module:attribute``: where an entry, or a user's factory, is found.
REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def is_reference(value: str) -> bool:
    """Whether ``value`` names a ``package.module:attribute`` rather than a registered name."""
    return REFERENCE.match(value) is not None


def import_reference(reference: str) -> object:
    """The object a ``package.module:attribute`` reference names (ImportError/AttributeError as raised)."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


class ReadsKeys(Protocol):
    """A registry entry that declares the config keys only it (and its likes) read."""

    @property
    def reads(self) -> frozenset[str]: ...


R = TypeVar("R", bound=ReadsKeys)


def key_read_by_others(
    registry: Registry[R], reads: frozenset[str], given: object
) -> tuple[str, list[str]] | None:
    """The first key ``given`` sets (to a truthy value) that the chosen entry, which
    reads ``reads``, does not read but another entry does, with the entries that read
    it; None when there is none. Such a key would be silently ignored (``files`` under
    ``benchmark: sample`` runs the sample); each config kind words its own refusal."""
    fields_set: set[str] = getattr(given, "model_fields_set", set())
    for name in registry.names():
        for key in sorted(registry.get(name).reads - reads):
            if key in fields_set and getattr(given, key):
                return key, sorted(other for other in registry.names() if key in registry.get(other).reads)
    return None


class Registry(Generic[T]):
    """Name -> entry of one kind of component (``kind`` names it in messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        #: name -> module that owns a built-in entry; nobody else may replace it
        self._owners: dict[str, str] = {}

    def builtin(self, name: str, entry: T | str, *, owner: str | None = None) -> None:
        """Declare a built-in entry: the entry itself (``owner`` is the declaring
        module), or ``module:attribute`` where it is found, loaded on first lookup."""
        if isinstance(entry, str):
            self._lazy[name] = entry
            self._owners[name] = entry.partition(":")[0]
            return
        if owner is None:
            raise TypeError("a built-in entry given as an object needs its owner module")
        self._entries[name] = entry
        self._owners[name] = owner

    def register(self, name: str, entry: T, *, owner: str | None = None) -> T:
        """Add (or, for a name of the same owner, replace) the entry called ``name``.

        ``owner`` is the registering module; a built-in name is refused unless its
        own module registers it.
        """
        builtin_owner = self._owners.get(name)
        if builtin_owner is not None and owner != builtin_owner:
            raise ConfigError(
                f"{self.kind} {name!r} is built in ({builtin_owner}); {owner or 'another module'} may not "
                f"replace it. Register yours under a new name and name that in your config"
            )
        self._lazy.pop(name, None)
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        if name in self._owners:
            raise ConfigError(f"{self.kind} {name!r} is built in and cannot be removed")
        self._entries.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        """Every registered name: built-ins in declaration order, then the users'."""
        return [*self._owners, *(name for name in self._entries if name not in self._owners)]

    def is_builtin(self, name: str) -> bool:
        return name in self._owners

    def get(self, name: str) -> T:
        """The entry called ``name``; :class:`ConfigError` listing the known names otherwise."""
        entry = self._entries.get(name)
        if entry is not None:
            return entry
        reference = self._lazy.get(name)
        if reference is None:
            raise ConfigError(self.unknown(name))
        loaded = import_reference(reference)
        self._lazy.pop(name, None)
        # the module may have registered the entry itself while importing
        registered = self._entries.get(name)
        if registered is not None:
            return registered
        self._entries[name] = loaded  # type: ignore[assignment]
        return loaded  # type: ignore[return-value]

    def unknown(self, name: str) -> str:
        """The one message for a name this registry does not know."""
        return (
            f"unknown {self.kind} {name!r}{did_you_mean(name, self.names())}; use one of {', '.join(self.names())} "
            "or a 'package.module:factory' reference"
        )

    def check_name(self, name: str) -> str:
        """``name`` if it is registered or a ``module:factory`` reference (a config
        validator's check: the reference itself is imported later, with its file named)."""
        if name in self or is_reference(name):
            return name
        raise ValueError(self.unknown(name))


def lazy(reference: str) -> Callable[..., object]:
    """A callable that imports ``reference`` on its first call and forwards to it."""
    loaded: list[Callable[..., object]] = []

    def call(*args: object, **kwargs: object) -> object:
        if not loaded:
            target = import_reference(reference)
            if not callable(target):
                raise ConfigError(f"{reference} is not callable")
            loaded.append(target)
        return loaded[0](*args, **kwargs)

    call.__qualname__ = reference
    return call


__all__ = ["REFERENCE", "Registry", "import_reference", "is_reference", "lazy"]
