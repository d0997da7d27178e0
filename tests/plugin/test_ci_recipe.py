"""docs/artefacts.md's CI gate recipe (a GitHub Actions job) run as that job runs it:
its ``run`` steps, in a project of the dry-run model, twice, with the response cache
the workflow restores and saves between the runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ..conftest import FOREIGN_PLUGINS_OFF, REPO

ARTEFACTS = REPO / "docs" / "artefacts.md"


def _workflow() -> dict[str, Any]:
    found = re.search(r"<!-- recipe: github-actions-gate -->\n```\w*\n(.*?)```", ARTEFACTS.read_text(encoding="utf-8"), re.S)
    assert found, "docs/artefacts.md has no github-actions-gate recipe"
    workflow: dict[str, Any] = yaml.safe_load(found.group(1))
    return workflow


def test_the_documented_ci_gate_runs_gates_and_replays_its_cache_the_second_time(tmp_path: Path) -> None:
    job = _workflow()["jobs"]["benchmark"]
    steps = job["steps"]
    runs = [step["run"] for step in steps if "run" in step and "pip install" not in step["run"]]
    cache = {step["uses"].split("@")[0]: step["with"] for step in steps if "uses" in step and "cache" in step["uses"]}
    # the cache is restored before the run and saved after it whatever the run's outcome
    assert set(cache) == {"actions/cache/restore", "actions/cache/save"}
    saving = next(step for step in steps if step.get("uses", "").startswith("actions/cache/save"))
    assert saving.get("if") == "always()" and cache["actions/cache/save"]["path"] == job["env"]["EVOMEMORY_CACHE_DIR"]
    uploads = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact"))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nevomemory_config = "sample_mock"\n', encoding="utf-8")
    env = {
        **os.environ, **job["env"],
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "PYTEST_ADDOPTS": f"-p no:randomly -p no:cacheprovider {FOREIGN_PLUGINS_OFF}",
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    for attempt in (1, 2):
        done = subprocess.run(["bash", "-euc", "\n".join(runs)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        for path in uploads["with"]["path"].split():
            assert (tmp_path / path).exists(), f"the upload's {path} was not written"
        report = json.loads((tmp_path / "evomemory-report.json").read_text(encoding="utf-8"))
        overall = report["evomemory"]["arms"][0]["summary"]["overall"]
        assert overall["correct"] == 14 and overall["cached_responses"] == (0 if attempt == 1 else overall["stimuli"])
    assert any((tmp_path / job["env"]["EVOMEMORY_CACHE_DIR"]).iterdir())
