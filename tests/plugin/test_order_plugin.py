"""The sequence-robustness recipe through pytest, as docs/paper.md gives it: orders
set with ``--evomemory-set``, ``order_from`` a run directory relative to where pytest
runs (not to the built-in config's folder), and a difficulty order that cannot order
refused before any task. The routes and refusals are tested at the runtime level in
tests/runtime/test_sequence_robustness.py and tests/test_configpaths.py."""

from __future__ import annotations

import json

import pytest

from pytest_evomemory.cli import main as evomemory

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN


def test_orders_set_on_the_pytest_command_line_are_compared_as_sequence_robustness(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["-p", "no:randomly", "-q"]
    control = pytester.runpytest(*common, f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}", "--evomemory-output-dir=results/control")
    assert control.ret == 0, control.stdout.str()

    # the control solved nothing: every task is tied, easy_to_hard could only be the source order
    tied = pytester.runpytest(
        *common, f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=results/tied",
        "--evomemory-set", "benchmark.order=easy_to_hard", "--evomemory-set", "benchmark.order_from=results/control",
    )
    assert tied.ret == pytest.ExitCode.USAGE_ERROR
    error = tied.stderr.str()
    assert "easy_to_hard cannot order stream 'sample_facts': the reference run(s) solved none of its 12 tasks" in error
    assert error.count("\n") == 1 and "Traceback" not in error + tied.stdout.str()
    assert not (pytester.path / "results" / "tied").exists()

    # a reference that solved some: both orders run, relative to here, and the comparison finds them
    memory = pytester.runpytest(*common, f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=results/memory")
    assert memory.ret == 0
    for order in ("easy_to_hard", "hard_to_easy"):
        ran = pytester.runpytest(
            *common, f"--evomemory-config={SAMPLE_MEMORY_RUN}", f"--evomemory-output-dir=results/{order}",
            "--evomemory-set", f"benchmark.order={order}", "--evomemory-set", "benchmark.order_from=results/memory",
        )
        assert ran.ret == 0, ran.stdout.str() + ran.stderr.str()
    runs = [str(pytester.path / "results" / order) for order in ("easy_to_hard", "hard_to_easy")]
    assert evomemory(["compare", *runs, "-o", str(pytester.path / "orders.html")]) == 0
    document = json.loads((pytester.path / "orders.json").read_text(encoding="utf-8"))
    (entry,) = document["sequence_robustness"]
    assert (entry["baseline_order"], entry["order"]) == ("easy_to_hard", "hard_to_easy")
    assert entry["overall"]["paired_tasks"] == 24
    assert "sequence robustness: sample_memory #2 (hard_to_easy) - baseline (easy_to_hard)" in capsys.readouterr().out
