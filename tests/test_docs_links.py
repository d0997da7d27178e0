"""Every relative link in the documentation a user reads (docs/, the READMEs) leads
somewhere: the file exists, and a ``#fragment`` names a heading of that page as
GitHub renders its anchor. A section renamed or moved to another page breaks the
links to it silently on GitHub; here it fails the suite and names the link."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "benchmarks" / "README.md"])

#: ``[text](target)``, not an image's; the target up to the first space or closing parenthesis
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped
    (hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors of ``page``'s headings; a repeated heading gets ``-1``, ``-2`` as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if fenced or not heading:
            continue
        anchor = anchor_of(heading.group(1))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return frozenset(found)


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file or heading does not exist, as ``line N: target``."""
    broken = []
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... : not this repository's
                continue
            path_part, _, fragment = target.partition("#")
            linked = (page.parent / path_part).resolve() if path_part else page
            if not linked.exists():
                broken.append(f"line {number}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"line {number}: {target} (no heading with that anchor in {linked.name})")
    return broken


def test_the_check_finds_what_it_is_for(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Title\n\n## A long stream (issue 29; 2026-12-05)\n\n## Notes\n## Notes\n")
    page = tmp_path / "page.md"
    page.write_text(
        "See [ok](other.md#a-long-stream-issue-29-2026-12-05), [second](other.md#notes-1), [self](#here),\n"
        "[gone](other.md#long-streams-issue-29), [missing](nothere.md), [web](https://example.com/x#y)\n"
        "## Here\n```\n[in code](nowhere.md)\n```\n"
    )
    assert broken_links(page) == [
        "line 2: other.md#long-streams-issue-29 (no heading with that anchor in other.md)",
        "line 2: nothere.md (no such file)",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    assert broken_links(page) == []
