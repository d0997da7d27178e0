"""What a memory snapshot costs per episode, and what making it durable adds.

    python benchmarks/bench_snapshots.py [--episodes 2000] [--backends sqlite,inprocess]

The runtime saves every stream's memory after every episode (StreamSnapshots), so
a save is on the per-task path. Each backend is filled one record per episode and
saved after each, as a run does, with three durability settings:

* ``never``: no fsync (what a kill -9 needs: the kernel keeps what was written);
* ``default``: a durable save at most every SYNC_INTERVAL_S (1 s), its slot kept
  out of the rotation — what a power cut needs;
* ``every``: every save durable (log, manifest, then label fsynced; directories
  synced) — shown for comparison.

Then the time to verify and restore the last snapshot (resume). Figures move with
the disk and the machine's load, printed with the table.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.memory import build_memory
from pytest_evomemory.memory import snapshot as snapshot_module
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.snapshot import StreamSnapshots

#: the run config fingerprint the snapshots are written under (a run's ``config_fingerprint``)
CONFIG = "a" * 64
SETTINGS = {"never": math.inf, "default": snapshot_module.SYNC_INTERVAL_S, "every": 0.0}


def measure(backend: str, setting: str, episodes: int, workdir: Path) -> tuple[float, float, float, float]:
    """(mean ms per save, p99 ms, ms to find the newest intact snapshot, ms to restore it)."""
    run_dir = workdir / f"{backend}-{setting}"
    shutil.rmtree(run_dir, ignore_errors=True)
    snapshot_module.SYNC_INTERVAL_S = SETTINGS[setting]
    config = MemoryConfig.model_validate({"backend": backend})
    memory = build_memory(config, MemoryContext("s", run_dir, "bench"))
    snapshots = StreamSnapshots.for_stream(run_dir, "s", CONFIG)
    snapshots.clear()
    times = []
    for episode in range(1, episodes + 1):
        memory.retain(f"Task: Task t{episode}: repeat the last line.\nanswer-{episode}\nCorrect answer: answer-{episode}")
        started = time.perf_counter()
        snapshots.save(memory, episode)
        times.append(time.perf_counter() - started)
    memory.close()
    started = time.perf_counter()
    newest = StreamSnapshots.for_stream(run_dir, "s", CONFIG).newest_intact(episodes)
    verify_ms = (time.perf_counter() - started) * 1000
    fresh = build_memory(config, MemoryContext("s", run_dir / "again", "bench"))
    started = time.perf_counter()
    StreamSnapshots.for_stream(run_dir, "s", CONFIG).restore(fresh, newest)
    restore_ms = (time.perf_counter() - started) * 1000
    fresh.close()
    times.sort()
    return statistics.fmean(times) * 1000, times[int(len(times) * 0.99) - 1] * 1000, verify_ms, restore_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--backends", default="sqlite,inprocess")
    parser.add_argument("--keep", type=Path, help="work here (on the disk to measure) and keep the files")
    args = parser.parse_args(argv)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-snapshots-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        one, five, _ = os.getloadavg()
        load = f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"
    except OSError:
        load = "load average unavailable"
    print(f"snapshot save per episode, {args.episodes} episodes, one record each; {load}; files in {workdir}")
    header = f"{'backend':<10} {'durable':<8} {'save ms':>8} {'p99 ms':>8} {'newest_intact ms':>17} {'restore ms':>11}"
    print(header)
    print("-" * len(header))
    for backend in [part.strip() for part in args.backends.split(",") if part.strip()]:
        for setting in SETTINGS:
            mean, p99, verify, restore = measure(backend, setting, max(1, args.episodes), workdir)
            print(f"{backend:<10} {setting:<8} {mean:>8.3f} {p99:>8.3f} {verify:>17.1f} {restore:>11.1f}")
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
