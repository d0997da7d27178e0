"""A llama-cpp-python that dies by a signal on this CPU is refused with one line that
names the signal, the cause and the fix, before any task and through both doors.
The library here is a stand-in that kills its own process with the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.models.llamaprobe import (
    ProbeResult,
    built_for,
    check_embedded_library,
    cpu_flags,
    crash_message,
    missing_instructions,
    run_probe,
)

INFO = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 0 | LLAMAFILE = 1 |"


def dying(signal_number: int, info: str = INFO) -> list[str]:
    """A child that reports a build, then dies as a bad build would."""
    code = (f"import json, os, sys; print(json.dumps({{'system_info': {info!r}}}), flush=True); "
            f"os.kill(os.getpid(), {signal_number})")
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(
    ("signal_number", "says"),
    [
        (signal.SIGILL, ["SIGILL (illegal instruction)", "built for CPU instructions", "evomemory local-model build"]),
        (signal.SIGSEGV, ["SIGSEGV (segmentation fault)", "-march=native", "evomemory local-model build"]),
        (signal.SIGBUS, ["SIGBUS (bus error)", "model.gguf: the model file is truncated", "download it again"]),
    ],
)
def test_a_library_killed_by_a_signal_is_one_line_with_cause_and_fix(
    tmp_path: Path, signal_number: int, says: list[str]
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    result = run_probe(model, dying(signal_number))
    assert (result.ok, result.signal, result.system_info) == (False, signal_number, INFO)
    with pytest.raises(ConfigError) as refused:
        check_embedded_library(model, command=dying(signal_number))
    message = str(refused.value)
    assert all(part in message for part in says) and "\n" not in message


def test_the_instructions_the_cpu_lacks_are_named(tmp_path: Path) -> None:
    assert built_for(INFO) == ["SSE3", "AVX", "AVX2", "AVX512", "LLAMAFILE"]
    assert missing_instructions(INFO, {"pni", "avx", "avx2"}) == ["AVX512"]
    assert missing_instructions(INFO, None) == []
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags\t\t: fpu sse2 avx avx2\n")
    assert cpu_flags(cpuinfo) == {"fpu", "sse2", "avx", "avx2"}
    assert cpu_flags(tmp_path / "none") is None
    crashed = ProbeResult(False, INFO, signal.SIGILL)
    message = crash_message(crashed, "/lib/llama_cpp", tmp_path / "m.gguf", {"pni", "avx", "avx2"})
    assert "built for CPU instructions (AVX512, which this CPU lacks)" in message


def test_a_child_that_fails_otherwise_is_left_to_the_in_process_load(tmp_path: Path) -> None:
    """An import error or a bad model file is no crash: the load names it in its own words."""
    failing = [sys.executable, "-c", "raise SystemExit('no such model')"]
    result = run_probe(tmp_path / "model.gguf", failing)
    assert (result.ok, result.signal, result.detail) == (False, None, "no such model")
    check_embedded_library(tmp_path / "model.gguf", command=failing)  # not refused


# --------------------------------------------------------------------------- both doors

STAND_IN = """
import os, signal
def llama_print_system_info():
    return b"CPU : AVX = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 |"
class Llama:
    def __init__(self, **kwargs):
        os.kill(os.getpid(), signal.SIGILL)
"""


@pytest.fixture
def crashing_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose llama_cpp is the stand-in, with a local-model run config."""
    (tmp_path / "lib" / "llama_cpp").mkdir(parents=True)
    (tmp_path / "lib" / "llama_cpp" / "__init__.py").write_text(STAND_IN)
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({
        "name": "local", "benchmark": {"benchmark": "sample", "limit": 1},
        "agent": {"kind": "tiny", "model": {"provider": "local", "model_path": str(tmp_path / "model.gguf")}},
    }))
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "lib"), root]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(tmp_path / "responses"))
    return tmp_path


@pytest.mark.parametrize(
    ("command", "status"),
    [
        (["-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
          "-p", "no:langsmith_plugin", "--evomemory-config=run.yaml"], 4),
        (["-m", "pytest_evomemory.cli", "run", "--config", "run.yaml"], 4),
        (["-m", "pytest_evomemory.models.local", "--model", "model.gguf"], 1),  # the model server
        (["-m", "pytest_evomemory.cli", "local-model", "check"], 1),
    ],
    ids=["pytest", "evomemory-run", "server", "check"],
)
def test_both_doors_refuse_a_library_that_dies_before_any_task(
    crashing_library: Path, command: list[str], status: int
) -> None:
    done = subprocess.run([sys.executable, *command], cwd=crashing_library, capture_output=True, text=True,
                          timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == status, output
    assert "killed by SIGILL (illegal instruction)" in output
    assert "evomemory local-model build" in output
    assert "Traceback" not in output and "Fatal Python error" not in output
    assert not (crashing_library / "evomemory-results").exists()


def test_an_embedded_model_that_cannot_load_is_refused_before_any_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel user has neither llama-cpp-python nor the bundled model until
    ``evomemory local-model build``: one line saying so before any stream starts, not
    a failed episode per stream naming ``pip install '...[local]'`` (the native build)."""
    from pytest_evomemory.config import AgentConfig, ModelConfig
    from pytest_evomemory.models import check_agent_environment, llamaprobe

    agent = AgentConfig(kind="tiny", model=ModelConfig(provider="local", model_path=str(tmp_path / "absent.gguf")))
    monkeypatch.setattr(llamaprobe, "library_location", lambda: None)
    with pytest.raises(ConfigError, match=r"needs llama-cpp-python, which is not installed; run: evomemory "
                                          r"local-model build") as refused:
        check_agent_environment(agent)
    assert "pip install" not in str(refused.value) and "\n" not in str(refused.value)
    monkeypatch.setattr(llamaprobe, "library_location", lambda: tmp_path)
    with pytest.raises(ConfigError, match=r"absent\.gguf is not a file.*evomemory local-model build"):
        check_agent_environment(agent)
