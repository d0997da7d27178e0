"""Shards as a user runs them: ``pytest --evomemory-shard=I/N`` (serial and under
xdist), and the recipes of docs/scale.md (a GitHub Actions matrix, a Slurm array)
run as local subprocesses, then merged: always the run of the whole session."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_evomemory.cli import main as evomemory

from ..runtime.test_shards import same_run
from .guarantee_project import importable_by_xdist_workers, make_project

SCALE = Path(__file__).resolve().parents[2] / "docs" / "scale.md"


# serial by arm, under xdist by stream (the default; also the recipes' below)
@pytest.mark.parametrize(("workers", "unit"), [("", "arm"), pytest.param("2", "stream", marks=pytest.mark.slow)])
def test_pytest_shards_merge_to_the_run_on_one_machine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str, unit: str
) -> None:
    project = make_project(pytester, monkeypatch)
    importable_by_xdist_workers(pytester)
    monkeypatch.chdir(project)
    assert evomemory(["run", "--config", "run.yaml", "--output-dir", "whole", "-q"]) == 0
    # two streams, three shards: the third has no cell; pytest and `evomemory run` make the same plan
    assert evomemory(["run", "--config", "run.yaml", "--shard", "2/3", "--shard-by", unit, "--output-dir", "shard-2",
                      "-q"]) == 0
    for index, tasks in ((1, 3), (3, 0)):
        args = ("-p", "no:randomly", "--evomemory-config=run.yaml", f"--evomemory-shard={index}/3",
                f"--evomemory-shard-by={unit}", f"--evomemory-output-dir=shard-{index}")
        result = pytester.runpytest(*args, "-n", workers) if workers else pytester.runpytest(*args)
        assert result.ret == 0, result.stdout.str()  # a shard without a cell too (pytest would say 5)
        if tasks:
            result.assert_outcomes(passed=tasks)  # only the shard's cells are collected
        result.stdout.fnmatch_lines([f"evomemory: shard {index}/3*: *", "evomemory: shard plan (config *): 1: *"])
    assert evomemory(["merge", "shard-1", "shard-2", "shard-3", "--output-dir", "merged"]) == 0
    same_run(project / "merged", project / "whole")


def _recipe(kind: str) -> str:
    """The fenced block after ``<!-- recipe: kind -->`` in docs/scale.md."""
    found = re.search(rf"<!-- recipe: {kind} -->\n```\w*\n(.*?)```", SCALE.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/scale.md has no {kind} recipe"
    return found.group(1)


def _run_all(commands: list[tuple[str, dict[str, str]]], cwd: Path) -> None:
    """The jobs side by side, as the scheduler's machines run them."""
    processes = [
        subprocess.Popen(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for command, env in commands
    ]
    for process, (command, _) in zip(processes, commands, strict=True):
        output = process.communicate(timeout=300)[0].decode()
        assert process.returncode == 0, f"{command}\n{output}"


@pytest.mark.slow
def test_the_documented_recipes_run_as_local_jobs_and_merge_to_the_run_on_one_machine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(pytester, monkeypatch)
    (project / "study.yaml").write_text((project / "run.yaml").read_text(), encoding="utf-8")
    monkeypatch.chdir(project)
    assert evomemory(["run", "--config", "study.yaml", "--output-dir", "whole", "-q"]) == 0
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    # GitHub Actions: every matrix job's run steps, then the merge job's (artefacts stay on this disk)
    workflow = yaml.safe_load(_recipe("github-actions"))
    shards = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]

    def steps(job: str, shard: int | None = None) -> str:
        runs = [step["run"] for step in workflow["jobs"][job]["steps"] if "run" in step and "pip install" not in step["run"]]
        text = "\n".join(runs)
        return text.replace("${{ matrix.shard }}", str(shard)).replace("${{ strategy.job-total }}", str(len(shards)))

    _run_all([(steps("shard", shard), env) for shard in shards], project)
    _run_all([(steps("merge"), env)], project)
    same_run(project / "merged", project / "whole")

    # Slurm: the array job's tasks side by side, then the merge job
    slurm = project / "slurm"
    slurm.mkdir()
    (slurm / "shard.sbatch").write_text(_recipe("slurm-shard"), encoding="utf-8")
    (slurm / "merge.sbatch").write_text(_recipe("slurm-merge"), encoding="utf-8")
    count = int(re.search(r"#SBATCH --array=1-(\d+)", _recipe("slurm-shard")).group(1))  # type: ignore[union-attr]
    _run_all([
        ("bash slurm/shard.sbatch", {**env, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count)})
        for task in range(1, count + 1)
    ], project)
    _run_all([("bash slurm/merge.sbatch", env)], project)
    same_run(project / "results" / "merged", project / "whole")
    assert json.loads((project / "results" / "merged" / "run.json").read_text())["merged"]["count"] == count
