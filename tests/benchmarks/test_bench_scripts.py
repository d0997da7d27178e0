"""Smoke tests: each benchmark script of ours runs at tiny sizes and prints its table.

Timings are never asserted: on a shared CI machine they say nothing about the code.
The scripts run as a user runs them (a subprocess with this interpreter), so a
broken import path or argument is caught here rather than in the first real run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"

pytestmark = pytest.mark.slow


def run_script(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_bench_harness_prints_its_table_through_run_all(tmp_path: Path) -> None:
    """bench_harness.py as run_all.py runs it (``--only``, ``--args``): both scripts in one run."""
    harness = f"--tasks 3 --small 1 --repeat 1 --skip peer --mmlu-tasks 12 --keep {tmp_path}"
    result = run_script(str(BENCHMARKS / "run_all.py"), "--only", "harness", "--args", f"harness={harness}")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "all benchmark tables" in out and "bench_harness.py" in out
    assert "per task ms" in out
    assert "\npytest " in out and "\nrun_benchmark " in out
    assert "peak RSS MiB" in out
    assert "recall_baseline, inprocess memory" in out and "12 passed" in out


def test_bench_parallel_prints_its_table(tmp_path: Path) -> None:
    result = run_script(
        str(BENCHMARKS / "bench_parallel.py"), "--streams", "2", "--tasks", "3", "--latency", "0.01",
        "--workers", "2", "--repeat", "2", "--keep", str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "ratio (wall)" in out
    row = next(line for line in out.splitlines() if line.startswith("-n 2 "))
    # calls counted by the run and requests served by the scripted server agree
    # "-n 2", wall, session, model s, nominal s, 3 ratios, then calls and served
    columns = row.split()
    assert columns[9] == columns[10] == "12"  # 2 streams x 3 tasks x (task + feedback)
    assert float(columns[5]) == pytest.approx(0.06)  # nominal: 6 calls x 10 ms on the longest stream
    assert float(columns[4]) >= 0.06  # measured: the server's time answering them, at least the latency
    assert "streams: stream0" in out
    walls = next(line for line in out.splitlines() if line.startswith("-n 2: wall s of each run"))
    assert len(walls.split(":")[-1].split(",")) == 2
    assert "pytest plugins switched off" in out


def test_bench_report_prints_its_table(tmp_path: Path) -> None:
    result = run_script(str(BENCHMARKS / "bench_report.py"), "--tasks", "30", "--streams", "2", "--no-browser",
                        "--keep", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "evomemory report wall s" in out and "peak RSS MiB" in out and "bytes per task" in out
    assert (tmp_path / "run" / "report.html").is_file() and "30-task run, 2 stream(s)" in out
    from pytest_evomemory.reporting.drilldown import read_task_pages

    pages = read_task_pages((tmp_path / "run" / "report.html").read_text(encoding="utf-8"))
    assert {name: len(tasks) for name, tasks in pages.items()} == {"gen0": 15, "gen1": 15}


def test_benchmarks_switch_off_only_plugins_the_harness_does_not_bring() -> None:
    """The test extra's plugins are foreign; pytest-evomemory's own dependencies are not."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_harness
    finally:
        sys.path.remove(str(BENCHMARKS))
    harness = bench_harness.harness_distributions()
    assert {"pytest-evomemory", "pytest-xdist", "pytest-json-report", "pytest", "pydantic"} <= harness
    assert "hypothesis" not in harness and "pytest-randomly" not in harness
    foreign = bench_harness.foreign_pytest_plugins()
    assert {"hypothesispytest", "randomly"} <= set(foreign)
    assert not {"evomemory", "xdist", "pytest_jsonreport"} & set(foreign)
    command = bench_harness.pytest_command(Path("/tmp/x/run.yaml"))
    assert "no:hypothesispytest" in command and "--basetemp=/tmp/x/pytest-tmp" in command
    assert "no:hypothesispytest" not in bench_harness.pytest_command(Path("/tmp/x/run.yaml"), foreign_plugins=True)


def test_bench_control_arm_prints_its_ratio_and_checks_the_scores() -> None:
    result = run_script(
        str(BENCHMARKS / "bench_control_arm.py"), "--tasks", "6", "--latency", "0.01", "--workers", "2",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ratio wall(-n 2) / wall(serial) = " in result.stdout
    assert "scores identical to the serial run: True" in result.stdout


def test_bench_two_arms_prints_its_ratio_and_checks_both_arms(tmp_path: Path) -> None:
    result = run_script(
        str(BENCHMARKS / "bench_two_arms.py"), "--scale", "0.01", "--latency", "0.01", "--workers", "2",
        "--keep", str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "ratio wall / model s = " in out
    # the floor is the memory arm's mmlu_pro stream (23 tasks at scale 0.01), measured by its server
    floor = next(line for line in out.splitlines() if line.startswith("longest memory stream: "))
    assert floor.startswith("longest memory stream: mmlu_pro (23 tasks)")
    assert float(floor.split("server: ")[1].split()[0]) >= 2 * 23 * 0.01
    assert "control arm results: 28/28 tasks scored, 28 correct, 0 duplicates, complete=True: OK" in out
    assert "memory arm results: 28/28 tasks scored, 28 correct, 0 duplicates, complete=True: OK" in out
    # each arm's server saw only its arm: task + feedback call per task
    assert "control arm: 56 requests served" in out and "memory arm: 56 requests served" in out
    # both arms ran in one session, whose comparison pairs every task
    assert "command(s): 1 (one session)" in out
    assert "compare.json: memory vs baseline on 28/28 paired tasks, difference +0.0 points" in out


def test_bench_redaction_prints_its_table() -> None:
    result = run_script(str(BENCHMARKS / "bench_redaction.py"), "--records", "5", "--repeat", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "records written (rundir.dumps), per task" in result.stdout
    assert "redact: the key URL-encoded" in result.stdout


def test_bench_connections_prints_its_table_and_holds_the_cap() -> None:
    result = subprocess.run([
        sys.executable, str(BENCHMARKS / "bench_connections.py"), "--latency", "0.02", "--seconds", "0.5",
        "--cap", "2", "--processes", "1",
    ], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "calls/s" in result.stdout and "capped" in result.stdout
    assert "peak 2 <= cap 2: yes" in result.stdout or "peak 1 <= cap 2: yes" in result.stdout


def test_bench_growth_prints_ms_per_task_by_tenth_for_both_drivers(tmp_path: Path) -> None:
    result = run_script(str(BENCHMARKS / "bench_growth.py"), "--sizes", "60", "--keep", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("pytest ", "run "))}
    assert set(rows) == {"pytest", "run"} and all(row[1] == "60" for row in rows.values())
    assert out.count("ms/task by tenth:") == 2
    for line in out.splitlines():
        if "ms/task by tenth:" in line:
            assert len(line.split(":")[1].split()) == 10
    # both drivers wrote every task's score and one shared snapshot log
    for driver in ("pytest", "run"):
        scores = tmp_path / f"{driver}-60" / "results" / "scores.jsonl"
        assert len(scores.read_text().splitlines()) == 60
        assert list((tmp_path / f"{driver}-60" / "results" / "memory" / "growth" / "log").glob("records-*.jsonl"))
    assert "peak RSS MiB" in out and "snap/1" in out and "load average" in out


def test_bench_snapshots_prints_a_row_per_backend_and_durability() -> None:
    result = run_script(str(BENCHMARKS / "bench_snapshots.py"), "--episodes", "30", "--backends", "inprocess")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("inprocess ")]
    assert [row[1] for row in rows] == ["never", "default", "every"]
    assert all(float(row[2]) > 0 for row in rows)


def test_bench_memory_libraries_prints_its_tables() -> None:
    pytest.importorskip("mem0")
    pytest.importorskip("langmem")
    result = run_script(
        str(BENCHMARKS / "bench_memory_libraries.py"), "--sizes", "8", "--ops", "3", "--infer-retains", "2",
        "--skip", "install,scores",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "per-task overhead" in out and "infer: true" in out
    for backend in ("mem0", "langmem", "inprocess", "sqlite"):
        assert f"\n{backend} " in out
    assert "calls/retain" in out


def test_bench_library_arms_prints_where_each_arms_time_goes() -> None:
    pytest.importorskip("mem0")
    pytest.importorskip("langmem")
    result = run_script(str(BENCHMARKS / "bench_library_arms.py"), "--tasks", "30")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("sample streams ", "30 generated "))]
    # the backend and its tasks follow the workload's words; the row ends with texts/op,
    # the harness's share and its share with garbage collection counted as ours
    backends = [next(i for i, word in enumerate(row) if word in ("mem0", "langmem")) for row in rows]
    arms = [(row[i], row[i + 1]) for row, i in zip(rows, backends, strict=True)]
    assert arms == [("mem0", "24"), ("langmem", "24"), ("mem0", "30"), ("langmem", "30")], result.stdout
    for row in rows:  # texts embedded per recall and retain: nothing twice
        assert row[-3] == "1.00" and row[-2].endswith("%") and row[-1].endswith("%"), row
    # the last column's header and legend say it counts garbage collection as the harness's
    assert " harness+gc" in result.stdout and "harness+gc: with every collection pass counted" in result.stdout


def test_bench_paper_tokens_prints_per_task_tokens_and_the_full_size_cost() -> None:
    result = run_script(str(BENCHMARKS / "bench_paper_tokens.py"), "--limit", "3", "--prompt-factor", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Per task on the sample streams (6 tasks" in out
    for method in ("no memory", "ExpRecent", "ExpRAG", "ReMem"):
        assert f"\n{method}" in out
    assert "2,726 tasks" in out and "gpt-4o-mini $" in out


def test_bench_shards_prints_the_balance_and_merges_a_small_grid() -> None:
    result = run_script(str(BENCHMARKS / "bench_shards.py"), "--scale", "0.005", "--merge-shards", "2",
                        "--merge-by", "arm")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "shards by stream (--evomemory-shard-by=stream, the default" in out
    by_arm = out.split("shards by arm (--evomemory-shard-by=arm")[1].split("merge of a full grid")[0]
    assert by_arm.count("  met") == 3, by_arm  # N = 2, 4, 8 within 1.2 x total/N
    assert "evomemory merge: " in out and "every arm complete: True; compare.json written: True" in out


def test_bench_grid_prints_its_table_and_holds_the_cap() -> None:
    """Two arms (four chains at once), capped at 2 connections in its second row."""
    result = run_script(str(BENCHMARKS / "bench_grid.py"), "--arms", "2", "--latency", "0.01", "--cap", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split("  ")[0].strip(): line for line in result.stdout.splitlines()
            if line.startswith("4 chains") and "RSS <= 1 GiB" in line}
    assert set(rows) == {"4 chains", "4 chains, max_connections 2"}, result.stdout
    assert rows["4 chains, max_connections 2"].split()[10] == "2"  # the server's peak of concurrent requests
    assert "ms with Nagle off" in result.stdout
