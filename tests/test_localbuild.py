"""The portable llama-cpp-python build: flags in one place, the command pip gets, progress
while it compiles, and the install of the rest of the [local] extra. pip is a stand-in
here (a real build takes minutes): a fake interpreter that records what it was asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.models import localbuild
from pytest_evomemory.models.localbuild import X86_CMAKE_ARGS, portable_plan, run_with_progress

REPO = Path(__file__).resolve().parents[1]

#: Records argv and the build variables, prints CMake/Ninja-like steps, and "builds"
#: the wheel into pip's -w directory; exits with $FAKE_PIP_STATUS.
FAKE_PYTHON = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps({{"args": args, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS"),
                          "FORCE_CMAKE": os.environ.get("FORCE_CMAKE")}}) + "\\n")
if args[:3] == ["-m", "pip", "wheel"]:
    for step in range(1, 5):
        print(f"[{{step}}/4] Building C object ggml/src/part{{step}}.c.o", flush=True)
    status = int(os.environ.get("FAKE_PIP_STATUS", "0"))
    if status == 0:
        target = args[args.index("-w") + 1]
        open(os.path.join(target, "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"), "w").close()
    else:
        print("error: the compiler said no", flush=True)
    sys.exit(status)
"""


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake-python"
    script.write_text(FAKE_PYTHON.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_PIP_LOG", str(tmp_path / "pip.log"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return script


def pip_calls(tmp_path: Path) -> list[dict[str, object]]:
    log = tmp_path / "pip.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_plan_is_portable_per_machine_and_versioned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(localbuild.VERSION_ENV, raising=False)
    x86 = portable_plan(machine="x86_64")
    assert "-DGGML_NATIVE=OFF" in x86.cmake_args and "-DGGML_AVX2=ON" in x86.cmake_args
    assert not any("NATIVE=ON" in flag or "AVX512" in flag for flag in x86.cmake_args)
    assert x86.wheel_dir == tmp_path / "pytest-evomemory" / "wheels" / "llama-cpp-python-0.3.36-x86_64-avx2"
    arm = portable_plan(machine="aarch64")
    assert (arm.flavour, arm.cmake_args) == ("generic", ("-DGGML_NATIVE=OFF",))
    monkeypatch.setenv(localbuild.VERSION_ENV, "0.3.99")
    assert portable_plan().requirement == "llama-cpp-python==0.3.99"


def test_scripts_venv_reads_the_flags_from_the_package(tmp_path: Path) -> None:
    """scripts/_venv.sh evals the module run as a file, before the package's dependencies exist."""
    shown = subprocess.run(
        ["bash", "-c", f'eval "$("{sys.executable}" -P "{REPO}/pytest_evomemory/models/localbuild.py" shell)"; '
                       'echo "$LLAMA_CPP_CMAKE_ARGS|$LLAMA_CPP_WHEELS"'],
        capture_output=True, text=True, check=True, cwd=tmp_path, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    ).stdout.strip()
    plan = portable_plan(environ={"XDG_CACHE_HOME": str(tmp_path)})
    assert shown == f"{' '.join(plan.cmake_args)}|{plan.wheel_dir}"
    assert "localbuild.py" in (REPO / "scripts" / "_venv.sh").read_text()
    assert "GGML" not in (REPO / "scripts" / "_venv.sh").read_text()  # the flags live in one place


def test_progress_lines_name_the_compile_step_and_the_time(fake_python: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    ticks = iter(range(0, 1000, 20))
    (tmp_path / "w").mkdir()
    status = run_with_progress(
        [str(fake_python), "-m", "pip", "wheel", "x", "-w", str(tmp_path / "w")], dict(os.environ), lines.append,
        what="build", interval_s=30, clock=lambda: float(next(ticks)),
    )
    assert status == 0
    assert lines[0].startswith("build: started")
    assert "build: compiling, step 2/4 (50%), 40 s" in lines
    assert "build: compiling, step 4/4 (100%), 1 min 20 s" in lines
    assert lines[-1].startswith("build: done in")


def test_build_command_installs_the_portable_wheel_and_the_rest_of_the_extra(
    fake_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evomemory(["local-model", "build", "--python", str(fake_python)]) == 0
    calls = pip_calls(tmp_path)
    plan = portable_plan()
    wheel, install, extra = calls
    assert wheel["args"] == ["-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir",
                             "llama-cpp-python==0.3.36", "-w", str(plan.wheel_dir)]
    assert wheel["CMAKE_ARGS"] == " ".join(X86_CMAKE_ARGS if plan.flavour == "avx2" else plan.cmake_args)
    assert wheel["FORCE_CMAKE"] == "1"
    built = str(plan.wheel_dir / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl")
    assert install["args"] == ["-m", "pip", "install", "--force-reinstall", "--no-deps", built]
    assert extra["args"][:6] == ["-m", "pip", "install", "--find-links", str(plan.wheel_dir), "--only-binary"]
    assert any(arg.startswith("llama-cpp-python") for arg in extra["args"][7:])  # as the package declares it
    err = capsys.readouterr().err
    assert "takes several minutes" in err and "llama-cpp-python build: done in" in err
    # A second build finds the wheel in the cache and compiles nothing.
    assert evomemory(["local-model", "build", "--python", str(fake_python), "--no-install"]) == 0
    assert len(pip_calls(tmp_path)) == 3
    assert capsys.readouterr().out.strip() == built


def test_a_failed_build_shows_its_last_lines_and_installs_nothing(
    fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_PIP_STATUS", "1")
    assert evomemory(["local-model", "build", "--python", str(fake_python)]) == 1
    err = capsys.readouterr().err
    assert "error: the compiler said no" in err and "needs a C/C++ compiler" in err
    assert [call["args"][2] for call in pip_calls(tmp_path)] == ["wheel"]


def test_flags_prints_the_build_a_user_can_run_themselves(capsys: pytest.CaptureFixture[str]) -> None:
    assert evomemory(["local-model", "flags"]) == 0
    line = capsys.readouterr().out
    assert line.startswith('CMAKE_ARGS="-DGGML_NATIVE=OFF') and "FORCE_CMAKE=1 pip install" in line
