"""No placeholder is left in the documentation a user reads (docs/, the READMEs):
a figure still to be measured (``MEASURED_DEMO``), a note to self (TODO, FIXME, XXX,
TBD), a template's blank. The check is on words, so prose about placeholders is not
one (``MEASURED_`` followed by capitals is; "measured" is not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "benchmarks" / "README.md"])

#: Markers, in capitals as they are written (prose such as "a todo list" is a word, not one).
MARKER = re.compile(r"\b(?:MEASURED_[A-Z0-9_]+|TODO|FIXME|XXX+|TBD|TKTK|PLACEHOLDER)\b")
#: A template's blanks, in any case.
BLANK = re.compile(r"lorem ipsum|<fill[^>]*>|\{\{\s*[a-z_]+\s*\}\}", re.IGNORECASE)


def placeholders(text: str) -> list[str]:
    """Each placeholder in ``text``, as ``line N: the match``, in reading order."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        matches = sorted([*MARKER.finditer(line), *BLANK.finditer(line)], key=lambda match: match.start())
        found += [f"line {number}: {match.group(0)}" for match in matches]
    return found


def test_the_check_finds_what_it_is_for() -> None:
    text = "take MEASURED_DEMO on 2 cores\nTODO: say more\nfine prose, measured\n{{ value }} and <fill in>\nTBD"
    assert placeholders(text) == [
        "line 1: MEASURED_DEMO", "line 2: TODO", "line 4: {{ value }}", "line 4: <fill in>", "line 5: TBD",
    ]
    assert placeholders("a todo list is not a marker; measured figures are not either") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_no_placeholder_is_left_in_the_docs(page: Path) -> None:
    found = placeholders(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(REPO)} still has placeholder text: {'; '.join(found)}"
