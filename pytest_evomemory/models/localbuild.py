"""The portable llama-cpp-python build of the embedded model: its flags, in one place.

llama-cpp-python publishes only a source distribution, and pip's default build
compiles llama.cpp for the building machine's CPU (``-march=native``). That wheel
lands in pip's cache and is reused on the next machine, whose CPU may lack the
instructions it was built for (``Illegal instruction``); a native build with AMX
also crashed in ``llama_decode`` on a VM that reports AMX. So the embedded model
runs on a **portable** build: AVX2/FMA/F16C on x86-64 (every x86 CPU of the last
ten years), the compiler's generic target elsewhere, built once into a cache of
our own keyed by version, machine and flavour, then installed from there.

``evomemory local-model build`` (:mod:`pytest_evomemory.cli.local`) does that for wheel users, and
``scripts/_venv.sh`` for a checkout: it runs this file (standard library only, so
it works before the package's dependencies are installed) as
``python -P pytest_evomemory/models/localbuild.py shell|build``.

The build takes minutes (measured in docs/local-model.md), so :func:`run_with_progress`
reads pip's verbose output and prints the compile step (``[34/140]``) and the time
every few seconds, instead of leaving the user in front of a silent terminal.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The llama-cpp-python version built unless :data:`VERSION_ENV` names another.
LLAMA_CPP_VERSION = "0.3.36"
VERSION_ENV = "EVOMEMORY_LLAMA_CPP_VERSION"
#: The CMake flags of the portable x86-64 build: no ``-march=native``, the AVX2
#: generation's instructions on. Other machines get the compiler's generic target.
X86_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON",
)
GENERIC_CMAKE_ARGS = ("-DGGML_NATIVE=OFF",)
#: Seconds between progress lines while the build runs.
PROGRESS_INTERVAL_S = 15.0
#: A compile step in CMake/Ninja output: ``[34/140] Building C object ...``.
_STEP = re.compile(r"\[(\d+)/(\d+)\]")


@dataclass(frozen=True)
class BuildPlan:
    """What the portable build is: version, flavour, CMake flags and the wheel cache."""

    version: str
    machine: str
    flavour: str
    cmake_args: tuple[str, ...]
    wheel_dir: Path

    @property
    def requirement(self) -> str:
        return f"llama-cpp-python=={self.version}"

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with the build's ``CMAKE_ARGS`` (``FORCE_CMAKE=1``: always compile)."""
        return {**base, "CMAKE_ARGS": " ".join(self.cmake_args), "FORCE_CMAKE": "1"}

    def wheel_command(self, python: str) -> list[str]:
        """pip building the wheel into the cache; ``-v`` shows the compile steps."""
        return [python, "-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir", self.requirement,
                "-w", str(self.wheel_dir)]

    def install_command(self, python: str, wheel: Path) -> list[str]:
        """pip installing the portable wheel over whatever build is installed."""
        return [python, "-m", "pip", "install", "--force-reinstall", "--no-deps", str(wheel)]

    def wheel(self) -> Path | None:
        """The built wheel in the cache, if it is there."""
        found = sorted(self.wheel_dir.glob("llama_cpp_python-*.whl")) if self.wheel_dir.is_dir() else []
        return found[0] if found else None


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    xdg = environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "pytest-evomemory"


def portable_plan(
    version: str | None = None, machine: str | None = None, wheel_dir: Path | None = None,
    environ: Mapping[str, str] = os.environ,
) -> BuildPlan:
    """The portable build for this machine (or ``machine``), at ``version`` (else
    :data:`VERSION_ENV`, else :data:`LLAMA_CPP_VERSION`)."""
    version = version or environ.get(VERSION_ENV) or LLAMA_CPP_VERSION
    machine = machine or platform.machine()
    x86 = machine in ("x86_64", "AMD64", "amd64")
    flavour, flags = ("avx2", X86_CMAKE_ARGS) if x86 else ("generic", GENERIC_CMAKE_ARGS)
    directory = wheel_dir or cache_root(environ) / "wheels" / f"llama-cpp-python-{version}-{machine}-{flavour}"
    return BuildPlan(version, machine, flavour, flags, directory)


def run_with_progress(
    command: Sequence[str],
    environment: Mapping[str, str],
    write: Callable[[str], None],
    *,
    what: str,
    interval_s: float = PROGRESS_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run ``command``, printing a progress line (compile step, elapsed time) at most
    every ``interval_s`` seconds; on failure, the last lines of its output. Returns
    its exit status."""
    started = last = clock()
    step: tuple[int, int] | None = None
    tail: deque[str] = deque(maxlen=25)
    write(f"{what}: started ({' '.join(shlex.quote(part) for part in command)})")
    with subprocess.Popen(
        list(command), env=dict(environment), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace",
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip())
            found = _STEP.search(line)
            if found:
                step = (int(found.group(1)), int(found.group(2)))
            now = clock()
            if now - last >= interval_s:
                last = now
                write(f"{what}: {_progress(step)}, {_elapsed(now - started)}")
        status = process.wait()
    if status != 0:
        write(f"{what}: failed (exit status {status}) after {_elapsed(clock() - started)}; its last lines:")
        for line in tail:
            write(f"    {line}")
    else:
        write(f"{what}: done in {_elapsed(clock() - started)}")
    return status


def _progress(step: tuple[int, int] | None) -> str:
    if step is None:
        return "preparing (pip, CMake)"
    done, total = step
    return f"compiling, step {done}/{total} ({100 * done // max(total, 1)}%)"


def _elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def build_wheel(plan: BuildPlan, python: str, write: Callable[[str], None], *, force: bool = False) -> Path | None:
    """The portable wheel, built into the cache the first time (``force``: again).
    ``None`` when the build failed (its output was written)."""
    wheel = plan.wheel()
    if wheel is not None and not force:
        write(f"llama-cpp-python {plan.version} ({plan.flavour}): using the wheel built earlier, {wheel}")
        return wheel
    plan.wheel_dir.mkdir(parents=True, exist_ok=True)
    for stale in plan.wheel_dir.glob("llama_cpp_python-*.whl"):
        stale.unlink()
    write(
        f"building llama-cpp-python {plan.version} ({plan.flavour}, CMAKE_ARGS={' '.join(plan.cmake_args)}) "
        f"into {plan.wheel_dir}; this compiles llama.cpp and takes several minutes (about 5 on 2 idle cores)"
    )
    status = run_with_progress(
        plan.wheel_command(python), plan.environment(os.environ), write, what="llama-cpp-python build"
    )
    return plan.wheel() if status == 0 else None


def shell_variables(plan: BuildPlan) -> str:
    """The plan as shell assignments, for ``scripts/_venv.sh`` to ``eval``."""
    values = {
        "LLAMA_CPP_VERSION": plan.version,
        "LLAMA_CPP_FLAVOUR": plan.flavour,
        "LLAMA_CPP_CMAKE_ARGS": " ".join(plan.cmake_args),
        "LLAMA_CPP_WHEELS": str(plan.wheel_dir),
    }
    return "\n".join(f"{name}={shlex.quote(value)}" for name, value in values.items())


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``shell``: the plan as shell variables; ``build``: build the wheel (no install)
    and print its path. Used by scripts/_venv.sh; users run ``evomemory local-model``."""
    parser = argparse.ArgumentParser(prog="localbuild.py")
    parser.add_argument("action", choices=("shell", "build"))
    args = parser.parse_args(argv)
    plan = portable_plan()
    if args.action == "shell":
        print(shell_variables(plan))
        return 0
    wheel = build_wheel(plan, sys.executable, _stderr)
    if wheel is None:
        return 1
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
