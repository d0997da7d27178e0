"""Run every benchmark script in this folder and print their tables.

    python benchmarks/run_all.py                      # every benchmarks/bench_*.py, defaults
    python benchmarks/run_all.py --only harness,parallel
    python benchmarks/run_all.py --args "bench_harness=--tasks 100 --skip peer"
    python benchmarks/run_all.py --full               # long scripts at full size too

Scripts are found by name (``bench_*.py``), so a new benchmark joins the suite by
being added here, with no list to keep up to date. A script whose full size takes
many minutes (``QUICK``: the full-size two-arm comparison, 8-9 minutes; the
20,000-task growth runs, several minutes each; the grid at 16 chains rather than 16
and 64) runs shrunk
by default, so that the whole suite stays a matter of minutes; ``--full``, or
``--args`` for that script, runs it as asked. Each runs in its own process
with this interpreter: a crash or a missed budget in one does not hide the others'
tables. Progress goes to stderr; each script's table is printed as it comes and
again, all together, at the end. Exit status 1 if any script failed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: script -> arguments it gets by default: a quick check of a benchmark whose full
#: size takes many minutes (dropped by ``--full`` or by ``--args`` for the script)
QUICK = {
    "bench_two_arms": ["--scale", "0.05"], "bench_growth": ["--sizes", "1000"], "bench_report": ["--tasks", "2000"],
    "bench_statistics": ["--experiments", "300"], "bench_grid": ["--arms", "8"],
}


def discover(only: set[str]) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    if only:
        scripts = [s for s in scripts if s.stem in only or s.stem.removeprefix("bench_") in only]
    return scripts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated script names (bench_harness or harness)")
    parser.add_argument(
        "--args", action="append", default=[], metavar="SCRIPT=ARGS",
        help="extra arguments for one script, e.g. 'bench_parallel=--tasks 10'; repeatable",
    )
    parser.add_argument(
        "--full", action="store_true",
        help=f"run the long scripts ({', '.join(sorted(QUICK))}) at full size instead of their quick check",
    )
    args = parser.parse_args(argv)
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    extra: dict[str, list[str]] = {}
    for item in args.args:
        name, _, rest = item.partition("=")
        extra["bench_" + name.strip().removeprefix("bench_")] = shlex.split(rest)

    scripts = discover(only)
    if not scripts:
        print(f"no benchmark scripts matched in {HERE}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    results: list[tuple[str, int, float, str]] = []
    for script in scripts:
        default = [] if args.full else QUICK.get(script.stem, [])
        command = [sys.executable, str(script), *extra.get(script.stem, default)]
        print(f"\n===== {script.name} {' '.join(command[2:])}".rstrip(), flush=True)
        started = time.perf_counter()
        # stdout (the table) is captured to be reprinted at the end; stderr (progress)
        # goes straight through so a long benchmark is visibly alive.
        process = subprocess.run(command, cwd=HERE.parent, env=env, stdout=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - started
        print(process.stdout, end="", flush=True)
        results.append((script.name, process.returncode, elapsed, process.stdout))

    try:
        load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    except OSError:
        load = ""
    print("\n" + "=" * 30 + f" all benchmark tables {load} " + "=" * 30)
    for name, code, elapsed, output in results:
        print(f"\n--- {name} (exit {code}, {elapsed:.0f} s)")
        print(output.rstrip())
    print("\nsummary:")
    for name, code, elapsed, _ in results:
        print(f"  {name:<24} {'ok' if code == 0 else f'FAILED (exit {code})':<18} {elapsed:>7.0f} s")
    return 0 if all(code == 0 for _, code, _, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
