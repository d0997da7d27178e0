"""The evomemory_single_turn streams through pytest itself (pytester)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.streams.evomemory.catalog import STREAMS as SOURCES
from pytest_evomemory.streams.evomemory.materialize import stream_file

from .conftest import FakeHub, upstream_files

REPO = Path(__file__).resolve().parents[2]


def _write_run(pytester: pytest.Pytester) -> Path:
    return pytester.makefile(
        ".yaml",
        run="""
name: streams_test
benchmark:
  benchmark: evomemory_single_turn
agent:
  kind: recall_baseline
memory:
  backend: inprocess
""",
    )


def test_collects_all_four_streams(hub: FakeHub, pytester: pytest.Pytester) -> None:
    run = _write_run(pytester)
    result = pytester.runpytest(f"--evomemory-config={run}", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*11 tests collected*"])
    for test_id in ("aime_2024/60", "gpqa_diamond/recTEST0000000001", "mmlu_pro/73", "toolbench/torchhub_2"):
        assert test_id in result.stdout.str()


@pytest.mark.parametrize("broken", ["missing", "gated", "wrong_bytes"])
def test_a_failing_stream_aborts_before_any_task(
    hub: FakeHub, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, broken: str, data_dir: Path
) -> None:
    wrong = upstream_files()["mmlu_pro"] + b"\0"
    if broken == "missing":
        hub.remove(SOURCES["toolbench"])
        stream = "toolbench"
    elif broken == "wrong_bytes":
        target = stream_file(SOURCES["mmlu_pro"], data_dir)
        target.parent.mkdir(parents=True)
        target.write_bytes(wrong)
        stream = "mmlu_pro"
    else:
        monkeypatch.delenv("HF_TOKEN")
        stream = "gpqa_diamond"
    run = _write_run(pytester)
    result = pytester.runpytest(f"--evomemory-config={run}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert f"stream '{stream}'" in output and "Traceback" not in output
    if broken == "wrong_bytes":
        assert hashlib.sha256(wrong).hexdigest() in output
        assert hashlib.sha256(upstream_files()["mmlu_pro"]).hexdigest() in output
    # Refused at configure time: nothing was collected, so not one task ran.
    assert "collected" not in output and "passed" not in output and "failed" not in output


def test_shipped_configs_resolve(hub: FakeHub, pytester: pytest.Pytester) -> None:
    medium = load_run_config(REPO / "pytest_evomemory/configs/runs/testing/evomemory_single_turn_medium.yaml")
    full = load_run_config(REPO / "pytest_evomemory/configs/runs/evomemory_single_turn_full.yaml")
    assert medium.benchmark.limit == 10 and full.benchmark.limit is None
    for config in (medium, full):
        assert config.benchmark.benchmark == "evomemory_single_turn" and config.benchmark.streams is None
        # Shipped inside the package: no data_dir that would point into the installation.
        assert config.benchmark.data_dir is None
    # The medium run end to end against the stand-in (EVOMEMORY_DATA_DIR points at tmp).
    result = pytester.runpytest(
        f"--evomemory-config={REPO / 'pytest_evomemory/configs/runs/testing/evomemory_single_turn_medium.yaml'}",
        "--collect-only",
        "-q",
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*11 tests collected*"])
