"""tox.ini runs what the README's two commands run: the test extras of scripts/test and
the arms of scripts/demo's main job. A change to one script that tox.ini misses fails here."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tox() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / "tox.ini", encoding="utf-8")
    return parser


def test_tox_installs_the_extras_scripts_test_installs() -> None:
    script = (REPO / "scripts" / "test").read_text(encoding="utf-8")
    extras = re.search(r'install_project "([\w,]+)"', script)
    assert extras is not None
    assert set(_tox()["testenv"]["extras"].split(",")) == set(extras.group(1).split(","))


def test_tox_demo_runs_the_arms_of_scripts_demo() -> None:
    script = (REPO / "scripts" / "demo").read_text(encoding="utf-8")
    arms = re.search(r"ARMS=\(([^)]*)\)", script)
    assert arms is not None
    command = _tox()["testenv:demo"]["commands"]
    assert re.findall(r"--evomemory-config=(\S+)", command) == arms.group(1).split()
