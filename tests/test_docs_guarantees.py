"""docs/artefacts.md lists what the run directory guarantees; each guarantee names the
tests that hold it. A guarantee without a test, or a test renamed or deleted while the
page still cites it, fails here, so the list and the suite cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "artefacts.md"
SECTION = "## What the run directory guarantees"


def _guarantees() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    bullets = re.split(r"\n\* \*\*", text[start:end])[1:]
    return {bullet.split("**", 1)[0]: bullet for bullet in bullets}


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_the_page_lists_the_guarantees() -> None:
    titles = list(_guarantees())
    assert len(titles) >= 10, titles
    assert "An incomplete run says so." in titles and "No secret, no terminal control." in titles


def test_every_guarantee_names_tests_that_exist() -> None:
    problems = []
    for title, bullet in _guarantees().items():
        cited = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", bullet.split("Tested by", 1)[-1])
        if "Tested by" not in bullet or not cited:
            problems.append(f"{title!r} names no test")
            continue
        for path, name in cited:
            file = REPO / path
            if not file.is_file() or name not in _test_names(file):
                problems.append(f"{title!r} cites {path}::{name}, which does not exist")
    assert not problems, problems
