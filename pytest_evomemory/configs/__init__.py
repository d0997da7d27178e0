"""The run configs that ship inside the package, and how a user names one.

A run config is given as a path (``--evomemory-config=configs/runs/x.yaml``) or,
for the configs shipped here, by name from any directory
(``--evomemory-config=sample_memory`` or ``builtin:sample_memory``). This module
is the one place that decides which of the two a value means, so the plugin, the
ini option and ``evomemory run`` agree. ``evomemory init`` copies these files into
a user's repository as editable starters (:mod:`pytest_evomemory.cli.init`).
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from ..util.text import did_you_mean

#: The directory of the shipped configs: ``runs/``, ``agents/``, ``benchmarks/``, ``memory/``.
BUILTIN_DIR = Path(__file__).resolve().parent
RUNS_DIR = BUILTIN_DIR / "runs"
PREFIX = "builtin:"
_SUFFIXES = (".yaml", ".yml")


def builtin_names() -> list[str]:
    """Every shipped run config's name (``testing/...`` for the test-suite ones)."""
    return sorted(path.relative_to(RUNS_DIR).with_suffix("").as_posix() for path in RUNS_DIR.rglob("*.yaml"))


def builtin_path(name: str) -> Path:
    """The shipped run config called ``name`` (``testing/evomemory_single_turn_medium``,
    or its last part alone when no other shipped config has it); a clear error naming
    the choices otherwise."""
    stem = name[: -len(Path(name).suffix)] if name.endswith(_SUFFIXES) else name
    path = (RUNS_DIR / f"{stem}.yaml").resolve()
    if RUNS_DIR in path.parents and path.is_file():
        return path
    same_stem = [found for found in builtin_names() if found.rsplit("/", 1)[-1] == stem]
    if len(same_stem) == 1:
        return (RUNS_DIR / f"{same_stem[0]}.yaml").resolve()
    raise ConfigError(
        f"no built-in run config named {name!r}{did_you_mean(name, builtin_names())}; built-in configs: {', '.join(builtin_names())}"
    )


#: The run config key of each part -> its folder of shipped configs.
PART_DIRS = {"benchmark": "benchmarks", "agent": "agents", "memory": "memory"}


def builtin_part_names(key: str) -> list[str]:
    """The shipped configs a run config's ``key`` (benchmark, agent, memory) may name."""
    return sorted(path.stem for path in (BUILTIN_DIR / PART_DIRS[key]).glob("*.yaml"))


def builtin_part(key: str, name: str) -> Path | None:
    """The shipped ``key`` config called ``name`` (``agent: recall_baseline``), if any;
    a name that would lead out of the folder (``../x``, ``a/b``) names none."""
    folder = BUILTIN_DIR / PART_DIRS[key]
    try:
        path = (folder / f"{name}.yaml").resolve()
        return path if path.parent == folder.resolve() and path.is_file() else None
    except (OSError, ValueError):  # a name too long for a file name, or holding a NUL: no shipped config's
        return None


def resolve_run_config(value: str, base: Path) -> Path:
    """What ``--evomemory-config=value`` names, relative paths being relative to ``base``.

    ``builtin:NAME`` is always a shipped config. Anything else is a path when that
    file exists; a name without ``.yaml`` that is not a file is a shipped config's
    name (with its folder, ``testing/evomemory_single_turn_medium``, or without it
    when no other shipped config has that name). A path that does not exist is returned as it is, so the
    loader reports "file not found" with the full path.
    """
    if value.startswith(PREFIX):
        return builtin_path(value[len(PREFIX):])
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    if path.exists():
        return path
    if not value.endswith(_SUFFIXES) and "\\" not in value:
        # a name: ``sample_memory``, or with its folder ``testing/evomemory_single_turn_medium``
        if "/" not in value or (RUNS_DIR / f"{value}.yaml").resolve().is_file():
            return builtin_path(value)
    shipped = _shipped_layout(value)
    if shipped is not None:
        return shipped
    return path


def _shipped_layout(value: str) -> Path | None:
    """``configs/runs/NAME.yaml`` where the user's repository has no such file: the
    documented command (``--evomemory-config=configs/runs/testing/...``) works in a
    repository without ``evomemory init`` too, using the shipped file of that name."""
    parts = Path(value).as_posix().split("/")
    if len(parts) < 3 or parts[0] != "configs" or parts[1] != "runs":
        return None
    candidate = (BUILTIN_DIR / "/".join(parts[1:])).resolve()
    return candidate if RUNS_DIR in candidate.parents and candidate.is_file() else None
