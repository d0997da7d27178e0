"""Benchmark: convert and collect a full-size MMLU-Pro test split (12,032 records).

    python benchmarks/bench_streams.py [--records 12032] [--keep DIR]

Writes synthetic records in MMLU-Pro's upstream parquet schema (nothing upstream is
copied or downloaded), then measures, each in a fresh subprocess so that start-up
cost and peak RSS are those a user sees:

* convert: materialize (validate + manifest) and convert every record to
  BenchmarkSample, category filter off;
* collect: ``pytest --collect-only -q --evomemory-config=<run>`` collecting all
  12,032 MMLU-Pro items.

Budgets (issue 3): each under 5 s wall time and under 1 GiB peak RSS. Exit status 1
when a budget is missed, so CI can run this script as a gate.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME_BUDGET_S = 5.0
RSS_BUDGET_MIB = 1024.0
CATEGORIES = (
    "biology",
    "business",
    "chemistry",
    "computer science",
    "economics",
    "engineering",
    "health",
    "history",
    "law",
    "math",
    "other",
    "philosophy",
    "physics",
    "psychology",
)


def write_synthetic_mmlu_pro(path: Path, count: int) -> None:
    """``count`` invented records in the upstream schema and column types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for index in range(count):
        # 4 to 10 options; a few rows padded with "N/A" (the genuine file has none,
        # the converter's drop rule is exercised anyway).
        width = 10 if index % 5 else 4 + index % 6
        options = [f"Synthetic option {letter} for item {index}" for letter in "ABCDEFGHIJ"[:width]]
        options += ["N/A"] * (10 - width) if index % 7 == 0 else []
        answer_index = index % width
        rows.append(
            {
                "question_id": index,
                "question": f"Synthetic question number {index}: which option is right? " + "filler " * 20,
                "options": options,
                "answer": "ABCDEFGHIJ"[answer_index],
                "answer_index": answer_index,
                "cot_content": "A: Let's think step by step. " + "reasoning " * 40,
                "category": CATEGORIES[index * len(CATEGORIES) // count],
                "src": f"synthetic-{index % 57}",
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def measure(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MiB) of the child, and its output.

    CPU time is reported too because wall time on a shared, loaded machine says
    more about the neighbours than about this code."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    output = process.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    peak_mib = usage.ru_maxrss / 1024.0  # Linux reports KiB
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{output[-3000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, peak_mib, output


CONVERT_SNIPPET = """
import sys
from pathlib import Path
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.config import BenchmarkConfig
config = BenchmarkConfig(benchmark="bench_streams_source:benchmark", streams=["mmlu_pro"], mmlu_pro_categories="all")
(stream,) = load_benchmark(config, Path.cwd())
print(len(stream))
"""

SOURCE_MODULE = """
from dataclasses import replace
from pytest_evomemory.streams.evomemory import HubBenchmark
from pytest_evomemory.streams.evomemory.catalog import MMLU_PRO
SYNTHETIC = replace(MMLU_PRO, source=replace(MMLU_PRO.source, size={size}, sha256="{sha256}"))
def benchmark():
    return HubBenchmark("bench_streams", {{"mmlu_pro": SYNTHETIC}})
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=12_032)
    parser.add_argument("--keep", type=Path, help="build the data here and keep it")
    args = parser.parse_args()

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-streams-"))
    data_dir = workdir / "data"
    from pytest_evomemory.streams.evomemory.catalog import MMLU_PRO

    synthetic = data_dir / MMLU_PRO.name / MMLU_PRO.source.filename
    write_synthetic_mmlu_pro(synthetic, args.records)
    # The catalog pins the genuine file's hash, so the synthetic one is declared as
    # its own stream (same reader and converter, pinned to the synthetic bytes).
    content = synthetic.read_bytes()
    (workdir / "bench_streams_source.py").write_text(
        SOURCE_MODULE.format(size=len(content), sha256=hashlib.sha256(content).hexdigest()), encoding="utf-8"
    )
    run = workdir / "run.yaml"
    run.write_text(
        "name: bench_streams\n"
        "benchmark:\n  benchmark: bench_streams_source:benchmark\n  streams: [mmlu_pro]\n"
        "  mmlu_pro_categories: all\n"
        "agent:\n  kind: recall_baseline\n"
        "memory:\n  backend: inprocess\n",
        encoding="utf-8",
    )
    python_path = os.pathsep.join(filter(None, [str(workdir), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, EVOMEMORY_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", PYTHONPATH=python_path)
    env.pop("PYTEST_ADDOPTS", None)

    rows = []
    # First use validates the hand-placed file and writes its manifest; measure the
    # steady state (what every later run pays), and report the first use too.
    first = measure([sys.executable, "-c", CONVERT_SNIPPET], env, workdir)
    rows.append(("convert (first use: validate + manifest)", *first[:3], first[3].strip()))
    again = measure([sys.executable, "-c", CONVERT_SNIPPET], env, workdir)
    rows.append(("convert (cached)", *again[:3], again[3].strip()))
    base = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:randomly",
        f"--evomemory-config={run}",
    ]
    # The hypothesis plugin (a test extra, not ours) imports all of hypothesis at
    # terminal-summary time; the second row shows what a user without it pays.
    for label, extra in (
        ("pytest --collect-only", []),
        ("  same, -p no:hypothesispytest", ["-p", "no:hypothesispytest"]),
    ):
        collect = measure(base + extra, env, workdir)
        collected = next((line for line in collect[3].splitlines() if "collected" in line), "?")
        rows.append((label, *collect[:3], collected.strip()))

    print(f"MMLU-Pro synthetic test split: {args.records} records, filter off\n")
    print(f"{'step':<42} {'wall s':>8} {'cpu s':>7} {'peak RSS MiB':>13}  result")
    print("-" * 98)
    ok = True
    for name, seconds, cpu, peak, result in rows:
        within = seconds < TIME_BUDGET_S and peak < RSS_BUDGET_MIB
        ok &= within
        print(
            f"{name:<42} {seconds:>8.2f} {cpu:>7.2f} {peak:>13.0f}  {result}{'' if within else '  OVER BUDGET'}"
        )
    print(f"\nload average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(
        f"\nbudget: < {TIME_BUDGET_S:.0f} s and < {RSS_BUDGET_MIB:.0f} MiB each -> {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
