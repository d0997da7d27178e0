"""``evomemory init [DIR]``: copy the shipped configs into a repository to edit.

The built-in configs run by name from anywhere, but a user's own run needs files
they can change (their model, their memory backend, their thresholds). ``init``
writes the shipped run, agent, benchmark and memory configs into ``DIR``
(default ``configs``) with the same layout, so the relative references between
them keep working. A file that is already there is left alone (it may hold the
user's edits) unless ``--force`` is given; the missing ones are written, so running
``init`` again after deleting one file restores that file.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from ..configs import BUILTIN_DIR
from ..core.errors import WRITE_HINT
from ..rundir import output_path_problem

DEFAULT_DIR = "configs"
#: Shipped for the package's own test suite, not as starters.
_SKIPPED_PARTS = {"__pycache__"}
EXIT_OK = 0
EXIT_CANNOT_WRITE = 1


def add_parser(commands: Any) -> None:
    init = commands.add_parser(
        "init",
        help="write editable starter configs into a directory",
        description="Copy the built-in run, agent, benchmark and memory configs into DIR "
        "(default: ./configs) to edit; existing files are left alone.",
    )
    init.add_argument("directory", metavar="DIR", nargs="?", default=DEFAULT_DIR, help="target directory")
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")


def starter_files() -> list[Path]:
    """The shipped config files ``init`` copies, relative to the built-in directory."""
    return sorted(
        path.relative_to(BUILTIN_DIR)
        for path in BUILTIN_DIR.rglob("*.yaml")
        if not _SKIPPED_PARTS & set(path.relative_to(BUILTIN_DIR).parts)
    )


def main(args: argparse.Namespace) -> int:
    target = Path(args.directory)
    problem = output_path_problem(target, folder=True)
    if problem is not None:  # starter configs are no files of a run
        print(f"evomemory: error: {problem}", file=sys.stderr)
        return EXIT_CANNOT_WRITE
    starters = starter_files()
    existing = {name for name in starters if (target / name).exists()}
    write = starters if args.force else [name for name in starters if name not in existing]
    try:
        for name in write:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(BUILTIN_DIR / name, target / name)
    except OSError as error:
        where = error.filename or target
        print(f"evomemory: error: cannot write {where}: {error.strerror or error}; {WRITE_HINT}", file=sys.stderr)
        return EXIT_CANNOT_WRITE
    kept = len(existing) if not args.force else 0
    if not write:
        print(f"nothing to write: all {len(starters)} starter config files exist under {target}/ "
              "(left alone; --force overwrites them)")
    else:
        left = f" ({kept} existing file(s) left alone; --force overwrites them)" if kept else ""
        print(f"wrote {len(write)} of {len(starters)} config files under {target}/{left}")
    example = target / "runs" / "sample_memory.yaml"
    print(f"try:  pytest --evomemory-config={example.as_posix()}")
    print(f"or add to pyproject.toml:  [tool.pytest.ini_options] evomemory_config = \"{example.as_posix()}\"")
    print("      and run the benchmark with:  pytest --evomemory")
    control = target / "runs" / "sample_no_memory.yaml"
    print(
        f"does memory help?  pytest --evomemory-config={control.as_posix()} "
        f"--evomemory-config={example.as_posix()}   (control first)"
    )
    return EXIT_OK
