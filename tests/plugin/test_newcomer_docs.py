"""Every command and config snippet in the README and docs runs as written.

A fenced block is preceded by a marker comment saying what it is:

* ``<!-- doc-snippet: run -->``: a shell block this test runs (bash, ``-eu``) in a
  fresh directory, with this checkout's package and the test environment's
  ``pytest``/``evomemory`` first on the path; every marked block of a page runs in
  one directory, in page order, so a page can build on its earlier blocks;
* ``<!-- doc-snippet: file PATH -->``: written to ``PATH`` there before the next run;
* ``<!-- doc-snippet: network -->``, ``slow``, ``manual``: not run here (a model
  endpoint, minutes of build, or a change to the machine), but named.

On the pages listed in ``STRICT`` every shell block must carry a marker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
STRICT = {REPO / "README.md", REPO / "docs" / "configuration.md", REPO / "docs" / "local-model.md"}
KINDS = {"run", "file", "network", "slow", "manual"}
_BLOCK = re.compile(r"(?:<!-- doc-snippet: (?P<kind>\w+)(?P<arg>[^>]*?)-->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```", re.S | re.M)
_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    kind: str | None
    arg: str
    lang: str
    body: str


def snippets(page: Path) -> list[Snippet]:
    text = page.read_text(encoding="utf-8")
    return [
        Snippet(page, text.count("\n", 0, m.start()) + 1, m.group("kind"), (m.group("arg") or "").strip(),
                m.group("lang"), m.group("body"))
        for m in _BLOCK.finditer(text)
    ]


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@pytest.mark.parametrize("page", sorted(STRICT), ids=_name)
def test_every_shell_block_says_whether_it_runs(page: Path) -> None:
    blocks = snippets(page)
    unmarked = [f"{_name(page)}:{s.line}" for s in blocks if s.lang in ("bash", "sh", "console") and s.kind is None]
    assert not unmarked, f"shell blocks without a doc-snippet marker: {unmarked}"
    assert all(s.kind in KINDS for s in blocks if s.kind), [s.kind for s in blocks]


RUNNABLE = [page for page in PAGES if any(s.kind == "run" for s in snippets(page))]


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_runnable_snippets_run_as_written(page: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "PYTEST_ADDOPTS": "-p no:randomly -p no:cacheprovider",
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    for snippet in snippets(page):
        where = f"{_name(page)}:{snippet.line}"
        if snippet.kind == "file":
            target = tmp_path / snippet.arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(snippet.body, encoding="utf-8")
        elif snippet.kind == "run":
            done = subprocess.run(
                ["bash", "-euc", snippet.body], cwd=tmp_path, env=env,
                capture_output=True, text=True, timeout=300, check=False,
            )
            assert done.returncode == 0, f"{where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_point_at_files_in_the_repository(page: Path) -> None:
    missing = [
        link for link in _LINK.findall(page.read_text(encoding="utf-8"))
        if not (page.parent / link.split("#", 1)[0]).exists()
    ]
    assert not missing, f"{_name(page)} links to files that do not exist: {missing}"
