"""``evomemory local-model``: the embedded model's library, built and checked from the package.

A wheel has no ``scripts/``, and ``pip install '...whl[local]'`` compiles
llama-cpp-python for the building machine's CPU. So the package itself offers:

* ``build``: compile the portable llama-cpp-python wheel (:mod:`..models.localbuild`, with
  progress lines while it compiles), install it over any other build, then install
  the rest of the ``[local]`` extra (its requirements as the installed package
  declares them) with pip told to take llama-cpp-python from that wheel only;
* ``flags``: print the ``CMAKE_ARGS`` of that build, for building it yourself;
* ``check``: run the embedded model's library in a child process
  (:mod:`..models.llamaprobe`) and say whether it runs on this CPU.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..models.localbuild import BuildPlan, build_wheel, portable_plan

EXIT_OK = 0
EXIT_FAILED = 1
#: The extra whose other requirements ``build`` installs.
EXTRA = "local"
DISTRIBUTION = "pytest-evomemory"


def add_parser(commands: Any) -> None:
    local = commands.add_parser(
        "local-model",
        help="build or check llama-cpp-python for the embedded model",
        description="Build the portable llama-cpp-python the embedded model runs on, print its CMake "
        "flags, or check that the installed one runs on this CPU (docs/local-model.md).",
    )
    actions = local.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="compile and install the portable llama-cpp-python, then the rest of the [local] extra",
        description="Compile llama-cpp-python without -march=native (AVX2 on x86-64) into "
        "~/.cache/pytest-evomemory/wheels once, install it, then install the rest of the [local] extra.",
    )
    build.add_argument("--version", dest="llama_version", metavar="VERSION", default=None,
                       help="llama-cpp-python version (default: the tested one, or $EVOMEMORY_LLAMA_CPP_VERSION)")
    build.add_argument("--wheel-dir", type=Path, default=None, help="where the wheel is built and kept")
    build.add_argument("--python", default=sys.executable,
                       help="the interpreter whose environment gets the build (default: this one)")
    build.add_argument("--force", action="store_true", help="compile again even if the wheel was built before")
    build.add_argument("--no-install", action="store_true", help="only build the wheel, print its path")
    actions.add_parser("flags", help="print the CMAKE_ARGS of the portable build")
    actions.add_parser("check", help="check that the installed llama-cpp-python runs the model on this CPU")


def main(args: argparse.Namespace, write: Callable[[str], None] | None = None) -> int:
    say = write or _stderr
    if args.action == "flags":
        plan = portable_plan()
        print(f'CMAKE_ARGS="{" ".join(plan.cmake_args)}" FORCE_CMAKE=1 pip install --no-cache-dir '
              f"--force-reinstall --no-deps {plan.requirement}")
        return EXIT_OK
    if args.action == "check":
        return _check(say)
    plan = portable_plan(args.llama_version, wheel_dir=args.wheel_dir)
    wheel = build_wheel(plan, args.python, say, force=args.force)
    if wheel is None:
        say(f"evomemory: error: the llama-cpp-python build failed (above); it needs a C/C++ compiler "
            f"(build-essential) and pip able to fetch llama-cpp-python=={plan.version}")
        return EXIT_FAILED
    if args.no_install:
        print(wheel)
        return EXIT_OK
    return _install(plan, wheel, args.python, say)


def _install(plan: BuildPlan, wheel: Path, python: str, say: Callable[[str], None]) -> int:
    steps = [("installing the portable wheel", plan.install_command(python, wheel))]
    others = extra_requirements(EXTRA)
    if others:
        steps.append((
            f"installing the rest of the [{EXTRA}] extra ({', '.join(others)})",
            [python, "-m", "pip", "install", "--find-links", str(plan.wheel_dir),
             "--only-binary", "llama-cpp-python", *others],
        ))
    for what, command in steps:
        say(f"evomemory: {what}")
        if subprocess.run(command, check=False).returncode != 0:
            say(f"evomemory: error: {what} failed (pip's output above)")
            return EXIT_FAILED
    say(f"evomemory: llama-cpp-python {plan.version} ({plan.flavour}) is installed; "
        "check it with: evomemory local-model check")
    return EXIT_OK


def extra_requirements(extra: str, distribution: str = DISTRIBUTION) -> list[str]:
    """The requirements of ``distribution``'s ``extra``, as its installed metadata
    declares them (none when it is not installed)."""
    try:
        declared = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [requirement.split(";")[0].strip() for requirement in declared if marker.search(requirement)]


def _check(say: Callable[[str], None]) -> int:
    from ..models.llamaprobe import (
        cpu_flags,
        crash_message,
        library_location,
        missing_instructions,
        run_probe,
    )
    from ..models.local import resolve_model_path

    library = library_location()
    if library is None:
        say("evomemory: llama-cpp-python is not installed; run: evomemory local-model build")
        return EXIT_FAILED
    try:
        model = resolve_model_path(None)
    except ConfigError as error:
        say(f"evomemory: error: {error}")
        return EXIT_FAILED
    result = run_probe(model)
    if result.system_info:
        say(f"llama-cpp-python at {library}: {result.system_info.strip()}")
    flags = cpu_flags()
    if result.signal is not None:
        say(f"evomemory: error: {crash_message(result, str(library), model, flags)}")
        return EXIT_FAILED
    if not result.ok:
        say(f"evomemory: error: llama-cpp-python could not run {model.name}: {result.detail or 'no reason given'}")
        return EXIT_FAILED
    missing = missing_instructions(result.system_info, flags)
    if missing:
        say(f"evomemory: warning: the build uses {', '.join(missing)}, which this CPU lacks; it ran this time, "
            "but may die later: evomemory local-model build")
    say(f"evomemory: llama-cpp-python runs {model.name} on this CPU")
    return EXIT_OK


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
