"""The package stays lint-clean and strictly typed (it ships py.typed)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from .conftest import REPO


@pytest.mark.runs_first
@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "pytest_evomemory", "tests", "benchmarks"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff", "mypy"],
)
def test_static_checks_pass(command: list[str]) -> None:
    tool = command[2]
    if shutil.which(tool) is None and subprocess.run([sys.executable, "-m", tool, "--version"], capture_output=True).returncode:
        pytest.skip(f"{tool} is not installed: pip install -e '.[test]'")
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_ships_its_type_marker() -> None:
    assert (REPO / "pytest_evomemory" / "py.typed").is_file()
