"""Per-task cost along a long stream: does task 20,000 cost what task 1 did?

    python benchmarks/bench_growth.py [--sizes 1000,5000,20000] [--drivers pytest,run]
                                      [--memory sqlite] [--keep DIR]

One ``files`` stream of N generated tasks, run by the model-free ``recall_baseline``
agent (``deterministic_recall``) with the SQLite memory (one record retained per
task), through ``pytest --evomemory-config`` and through ``evomemory run``, each in
a fresh process (issue 29). The tasks are the recall fallback case: each task's
distinguishing words (``t123``, ``123``) occur in no stored record, so the memory
has to rank with words every record holds; a memory whose recall ranks the whole
store gets slower with every task.

Reported per run:

* ms/task by tenth of the stream, from the moment each tenth's last score line
  reached ``scores.jsonl`` (appended task by task; polled without re-reading it),
  so start-up, collection and the end of the session are not in any tenth;
  "last/first" is the last tenth's ms/task over the first's;
* wall seconds of the whole process and its peak RSS (``wait4``);
* run directory size; the memory snapshots' size (``memory/<stream>/``, hard
  links counted once) against one snapshot's own size (what the live store
  takes written out) — the ratio is what the rotating slots cost on disk.

Targets at N = 20,000: last tenth within 1.5 x the first, peak RSS < 300 MiB,
snapshots < 2 x one snapshot. The 1-minute load average is printed with the
table: on a shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import clean_env, echo_tasks, load_average, pytest_command, write_jsonl, write_run_config

SLOPE_TARGET = 1.5
RSS_TARGET_MIB = 300.0
DISK_TARGET = 2.0
STREAM = "growth"


@dataclass
class GrowthRun:
    driver: str
    tasks: int
    wall_s: float = 0.0
    peak_rss_mib: float = 0.0
    returncode: int = 0
    #: perf_counter seconds at which the score line of each task arrived (index = tasks done - 1)
    arrivals: list[float] = field(default_factory=list)
    run_dir_mib: float = 0.0
    snapshots_mib: float = 0.0
    one_snapshot_mib: float = 0.0
    output: str = ""

    def tenths_ms(self) -> list[float]:
        """ms per task in each tenth of the stream (the first tenth from task 1's score on)."""
        if len(self.arrivals) < 20:
            return []
        step = len(self.arrivals) / 10
        bounds = [round(step * index) for index in range(11)]
        times = []
        for index in range(10):
            start, end = max(bounds[index] - 1, 0), bounds[index + 1] - 1
            count = end - start
            times.append((self.arrivals[end] - self.arrivals[start]) / max(count, 1) * 1000)
        return times


class ScoreLines:
    """Counts the lines of a growing file by reading only what was appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle: object = None
        self.count = 0

    def poll(self) -> int:
        if self.handle is None:
            try:
                self.handle = open(self.path, "rb")
            except OSError:
                return 0
        data = self.handle.read()  # type: ignore[attr-defined]
        self.count += data.count(b"\n")
        return self.count

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()  # type: ignore[attr-defined]


def run_growth(workdir: Path, driver: str, tasks: int, memory: str, timeout_s: float) -> GrowthRun:
    directory = workdir / f"{driver}-{tasks}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    data = directory / "tasks.jsonl"
    write_jsonl(data, echo_tasks(tasks))
    run = write_run_config(
        directory, {STREAM: data}, "kind: recall_baseline\nmemory_strategy: deterministic_recall\n",
        memory=f"backend: {memory}\n", name="growth",
    )
    if driver == "pytest":
        command = pytest_command(run)
    else:
        command = [sys.executable, "-m", "pytest_evomemory.cli", "run", "--config", str(run), "-q"]
    result = GrowthRun(driver, tasks)
    lines = ScoreLines(directory / "results" / "scores.jsonl")
    started = time.perf_counter()
    with tempfile.TemporaryFile() as sink:
        process = subprocess.Popen(command, cwd=directory, env=clean_env(), stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            done = lines.poll()
            now = time.perf_counter()
            while len(result.arrivals) < done:
                result.arrivals.append(now)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
        result.wall_s = time.perf_counter() - started
        result.returncode = os.waitstatus_to_exitcode(status)
        result.peak_rss_mib = usage.ru_maxrss / 1024.0
        sink.seek(0)
        result.output = sink.read().decode("utf-8", "replace")
    lines.close()
    results = directory / "results"
    result.run_dir_mib = tree_bytes(results) / 2**20
    snapshots = results / "memory" / STREAM
    result.snapshots_mib = tree_bytes(snapshots) / 2**20
    result.one_snapshot_mib = one_snapshot_bytes(snapshots) / 2**20
    return result


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path``; a file hard-linked twice counts once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_size
    return total


def one_snapshot_bytes(snapshots: Path) -> int:
    """What one snapshot of the final memory holds: the largest slot's own files
    plus the record bytes its manifest counts in a log it shares with other slots."""
    import json

    best = 0
    for slot in snapshots.glob("slot-*"):
        size = 0
        for root, _, files in os.walk(slot):
            for name in files:
                path = os.path.join(root, name)
                if name == "manifest.json":
                    try:
                        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
                    except (OSError, ValueError):
                        manifest = {}
                    shared = manifest.get("log") if isinstance(manifest, dict) else None
                    if isinstance(shared, dict) and isinstance(shared.get("bytes"), int):
                        size += shared["bytes"]
                size += os.path.getsize(path)
        best = max(best, size)
    return best


def print_table(runs: list[GrowthRun]) -> bool:
    print(f"per-task cost along one files stream (fallback recall), recall_baseline + {MEMORY_LABEL}")
    print(f"{load_average()}; commit {commit()}\n")
    header = (
        f"{'driver':<8} {'tasks':>6} {'wall s':>7} {'ms/task':>8} {'1st tenth':>9} {'last':>7} {'last/1st':>8} "
        f"{'peak RSS MiB':>12} {'run dir MiB':>11} {'snap MiB':>9} {'1 snap MiB':>10} {'snap/1':>6}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for run in runs:
        tenths = run.tenths_ms()
        overall = run.wall_s * 1000 / max(run.tasks, 1)
        first, last = (tenths[0], tenths[-1]) if tenths else (float("nan"), float("nan"))
        ratio = last / first if tenths and first > 0 else float("nan")
        disk = run.snapshots_mib / run.one_snapshot_mib if run.one_snapshot_mib else float("nan")
        print(
            f"{run.driver:<8} {run.tasks:>6} {run.wall_s:>7.1f} {overall:>8.2f} {first:>9.2f} {last:>7.2f} {ratio:>8.2f} "
            f"{run.peak_rss_mib:>12.0f} {run.run_dir_mib:>11.1f} {run.snapshots_mib:>9.2f} {run.one_snapshot_mib:>10.2f} "
            f"{disk:>6.2f}" + ("" if run.returncode == 0 else f"  (exit {run.returncode})")
        )
        if tenths:
            print("         ms/task by tenth: " + " ".join(f"{value:.2f}" for value in tenths))
        if run.returncode != 0:
            ok = False
            print("         " + run.output.strip()[-1500:].replace("\n", "\n         "))
        if run.tasks >= 20_000:
            ok &= ratio <= SLOPE_TARGET and run.peak_rss_mib < RSS_TARGET_MIB and disk < DISK_TARGET
    print(
        f"\ntargets at 20,000 tasks: last/1st <= {SLOPE_TARGET}, peak RSS < {RSS_TARGET_MIB:.0f} MiB, "
        f"snap/1 < {DISK_TARGET}"
    )
    return ok


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
            capture_output=True, text=True, check=False,
        ).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


MEMORY_LABEL = "sqlite memory"


def main(argv: list[str] | None = None) -> int:
    global MEMORY_LABEL
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000,20000", help="comma-separated stream lengths")
    parser.add_argument("--drivers", default="pytest,run", help="pytest (--evomemory-config), run (evomemory run)")
    parser.add_argument("--memory", default="sqlite", help="memory backend (sqlite, inprocess, module:factory)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is stopped")
    parser.add_argument("--keep", type=Path, help="work here and keep the files")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    MEMORY_LABEL = f"{args.memory} memory"
    sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    drivers = [part.strip() for part in args.drivers.split(",") if part.strip()]
    unknown = set(drivers) - {"pytest", "run"}
    if unknown:
        parser.error(f"unknown driver(s): {', '.join(sorted(unknown))}")
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-growth-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runs = []
    for size in sizes:
        for driver in drivers:
            print(f"[bench_growth] {driver}: {size} tasks ...", file=sys.stderr, flush=True)
            runs.append(run_growth(workdir, driver, size, args.memory, args.timeout))
    ok = print_table(runs)
    failed = any(run.returncode != 0 for run in runs)
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed or (args.strict and not ok) else 0


if __name__ == "__main__":
    raise SystemExit(main())
