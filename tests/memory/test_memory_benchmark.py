"""The memory benchmark script runs end to end on tiny sizes and prints its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_memory.py"


def test_bench_memory_prints_a_row_per_backend_and_size(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_memory_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = ["--sizes", "40,80", "--backends", "inprocess,sqlite,sqlite+hashing", "--queries", "5"]
    assert module.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["backend", "records", "retain/s"]
    rows = [line.split() for line in lines[2:] if line and not line.startswith("target")]
    assert [(row[0], row[1]) for row in rows] == [
        ("inprocess", "40"), ("inprocess", "80"), ("sqlite", "40"), ("sqlite", "80"),
        ("sqlite+hashing", "40"), ("sqlite+hashing", "80"),
    ]
    assert all(float(row[4]) >= float(row[3]) >= 0 for row in rows)  # p99 >= p50
