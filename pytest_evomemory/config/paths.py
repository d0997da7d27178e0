"""Where a relative path in a config points: one rule, in one place, for every path.

* A path written in a config file is relative to that file's directory (an inline
  part's, to the run config's, which holds it; a built-in part's, to its own).
* A path given on the command line (``--evomemory-set`` / ``--set``) is relative to
  the working directory, as any path typed in a shell.

``~`` is the home directory in both. The loader (:mod:`..configs.load`) applies the rule
to each part once, before the part is validated, so every reader gets an absolute path
and decides nothing about it. Which keys are paths is declared once, by their type in
:mod:`pytest_evomemory.config` (:data:`~.PathText`: ``data_dir``, ``files[].path``, ``path``,
``order_from``, ``model.cache_dir``, ``model.model_path``, ``model.pricing`` as a file,
the run file's ``output_dir``); :func:`path_keys` finds them, so a new path key follows
the rule by its type alone. The run file's parts (``benchmark: my.yaml``) follow it too
(:func:`base_for`).

Not paths in this sense: a memory backend's store template (``sqlite.path``,
``mem0.path``) names a place inside each run's own directory, where a relative
template is taken from (docs/memory.md): read from a config file's directory, two runs
of one config would share one store.

run.json records each value as written (the config fingerprint that a resume, and the
shards of one session, compare must not change with where the checkout is) and where
it resolved under ``run.paths`` (:attr:`.RunConfig.spelled`, ``located``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel

from . import CONFIG_PATH

#: A key path's step into each entry of a list of models (``files[].path``).
EACH = "[]"


def _is_path(annotation: Any) -> bool:
    """Whether a field's type is (or offers, in a union or list) a :data:`~.PathText`."""
    if get_origin(annotation) is Annotated:
        return CONFIG_PATH in annotation.__metadata__ or _is_path(get_args(annotation)[0])
    return any(_is_path(argument) for argument in get_args(annotation))


def _models_in(annotation: Any) -> Iterator[tuple[type[BaseModel], bool]]:
    """The config models a field holds: ``(model, in a list)``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, False
        return
    listed = get_origin(annotation) is list
    for argument in get_args(annotation):
        for model, _ in _models_in(argument):
            yield model, listed


@cache
def path_keys(model: type[BaseModel]) -> tuple[tuple[str, ...], ...]:
    """Every path-valued key of ``model`` and the models it holds, as key paths
    (``("files", EACH, "path")``, ``("model", "cache_dir")``)."""
    keys: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        if CONFIG_PATH in info.metadata or _is_path(info.annotation):
            keys.append((name,))
            continue
        for inner, listed in _models_in(info.annotation):
            keys += [(name, *((EACH,) if listed else ()), *key) for key in path_keys(inner)]
    return tuple(keys)


@dataclass
class Located:
    """What :func:`locate` did: each path's value as written and where it points,
    by dotted key (``benchmark.files.0.path``)."""

    spelled: dict[str, Any]
    located: dict[str, str]


def base_for(key: Sequence[str], file_dir: Path, set_keys: Sequence[Sequence[str]], cwd: Path) -> Path:
    """The directory a relative path at ``key`` is relative to: the working directory
    when a command-line setting gave it (``set_keys``: each setting's key; one that
    sets a mapping or list above ``key`` gave it too), else the file's directory."""
    given = any(tuple(key[: len(setting)]) == tuple(setting) for setting in set_keys)
    return cwd if given else file_dir


def absolute(value: str, base: Path) -> str:
    """``value`` (``~`` expanded) as an absolute path, taken from ``base`` if relative."""
    path = Path(value).expanduser()
    return os.path.normpath(path if path.is_absolute() else base / path)


def locate(
    data: Mapping[str, Any], model: type[BaseModel], part: str | None, file_dir: Path,
    set_keys: Sequence[Sequence[str]], cwd: Path,
) -> tuple[dict[str, Any], Located]:
    """``data`` (a part's raw mapping, settings applied) with every path of ``model``
    absolute; ``part`` names it in the dotted keys (None: the run file); ``set_keys``
    are the keys within the part the command line set. A value of the wrong type is
    left for the part's validation to refuse."""
    result = _copy(data)
    found = Located({}, {})
    for key in path_keys(model):
        for where, holder in _holders(result, key[:-1], ()):
            name = key[-1]
            value = holder.get(name)
            dotted = ".".join((*((part,) if part else ()), *where, name))
            base = base_for((*where, name), file_dir, set_keys, cwd)
            if isinstance(value, str) and value.strip():
                holder[name] = absolute(value, base)
                found.spelled[dotted], found.located[dotted] = value, holder[name]
            elif isinstance(value, list) and value and all(isinstance(item, str) and item.strip() for item in value):
                holder[name] = [absolute(item, base) for item in value]
                found.spelled[dotted] = value
                found.located.update({f"{dotted}.{index}": item for index, item in enumerate(holder[name])})
    return result, found


def _holders(data: Any, key: Sequence[str], where: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """The mappings at ``key`` in ``data`` with their place (a list index as text)."""
    if not key:
        if isinstance(data, dict):
            yield where, data
        return
    step, rest = key[0], key[1:]
    if step == EACH:
        for index, item in enumerate(data if isinstance(data, list) else []):
            yield from _holders(item, rest, (*where, str(index)))
    elif isinstance(data, dict):
        yield from _holders(data.get(step), rest, (*where, step))


def _copy(data: Any) -> Any:
    if isinstance(data, Mapping):
        return {key: _copy(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_copy(item) for item in data]
    return data


__all__ = ["EACH", "Located", "absolute", "base_for", "locate", "path_keys"]
