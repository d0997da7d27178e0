"""A merge loses nothing: the merged directory's summary.json, compare.json and
report equal the unsharded session's, field by field, everything but times.

The comparison walks both JSON trees whole (:func:`differences`), so a field the
merge forgets (before: ``cached_responses``, 0 after the merge of shards that each
replayed every reply from the response cache) fails it without being named here.
A tiny agent against the scripted server, with a warm response cache, through
``evomemory run`` / ``merge`` / ``compare`` / ``report`` in-process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.reporting.drilldown import read_task_pages
from pytest_evomemory.testing.fixtures import scripted_openai_server
from pytest_evomemory.testing.scripted_server import ScriptedServer, make_echo_policy

__all__ = ["scripted_openai_server"]

#: The only keys whose values may differ between two runs of the same work: when
#: things happened and how long they took (anywhere in the tree).
TIMINGS = frozenset({"started", "finished", "generated", "wall_seconds", "seconds"})


def differences(first: Any, second: Any, where: str = "") -> list[str]:
    """Every place the two JSON trees differ, but :data:`TIMINGS`."""
    if isinstance(first, dict) and isinstance(second, dict):
        found = []
        for key in sorted(set(first) | set(second)):
            if key in TIMINGS:
                continue
            if key not in first or key not in second:
                found.append(f"{where}.{key}: only in the {'second' if key in second else 'first'}")
            else:
                found += differences(first[key], second[key], f"{where}.{key}")
        return found
    if isinstance(first, list) and isinstance(second, list):
        if len(first) != len(second):
            return [f"{where}: {len(first)} items, then {len(second)}"]
        return [found for index, pair in enumerate(zip(first, second, strict=True))
                for found in differences(*pair, f"{where}[{index}]")]
    return [] if first == second else [f"{where}: {first!r}, then {second!r}"]


def read(path: Path, root: Path) -> Any:
    """A JSON artefact with its session directory's path written as ``<root>``."""
    return json.loads(path.read_text(encoding="utf-8").replace(str(root), "<root>"))


ARMS = ("control", "memory")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted_openai_server: Any) -> Path:
    """Two tiny-agent arms (no memory; tool-use memory) on the sample streams, against
    the scripted server, the response cache in the test's directory."""
    solved = {"sample_facts": 0}

    def answer(prompt: str) -> str:  # some right, some wrong, so the comparison has flips
        solved["sample_facts"] += 1
        return prompt.strip().splitlines()[-1][:200] if solved["sample_facts"] % 2 else "B"

    server: ScriptedServer = scripted_openai_server(make_echo_policy(answer))
    monkeypatch.setenv("EVOMEMORY_CACHE_DIR", str(tmp_path / "response-cache"))
    model = {"model": "scripted-model", "base_url": server.base_url, "api_key_env": None, "timeout_s": 5,
             "max_retries": 1, "retry_backoff_s": 0}
    for name, strategy in zip(ARMS, ("none", "tool_use"), strict=True):
        document = {
            "name": name, "benchmark": {"benchmark": "sample", "limit": 4},
            "agent": {"kind": "tiny", "memory_strategy": strategy, "max_steps": 4, "model": model},
            "memory": {"backend": "inprocess"},
        }
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_merged_session_equals_the_unsharded_one_in_every_field_but_times(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = [arg for arm in ARMS for arg in ("--config", f"{arm}.yaml")]
    assert evomemory(["run", *configs, "--output-dir", "warm", "-q"]) == 0  # fills the response cache
    assert evomemory(["run", *configs, "--output-dir", "whole", "-q"]) == 0
    for index in (1, 2):
        assert evomemory(["run", *configs, "--shard", f"{index}/2", "--output-dir", f"shard-{index}", "-q"]) == 0
    assert evomemory(["merge", "shard-2", "shard-1", "--output-dir", "merged"]) == 0
    whole, merged = project / "whole", project / "merged"

    for arm in ARMS:
        summaries = [read(root / arm / "summary.json", root) for root in (whole, merged)]
        # every reply replayed: a field that is not 0 (nor left out) in the session
        assert summaries[0]["overall"]["cached_responses"] == summaries[0]["overall"]["stimuli"] > 0
        assert differences(*summaries) == [], arm
    assert differences(*(read(root / "compare.json", root) for root in (whole, merged))) == []

    # evomemory compare and report on the merged directory say what they say on the whole one
    # (written beside it: no command writes its output inside a run's directory)
    pages = {root: project / "pages" / root.name for root in (whole, merged)}
    for root, out in pages.items():
        assert evomemory(["compare", *(str(root / arm) for arm in ARMS), "-o", str(out / "again.html")]) == 0
        assert evomemory(["report", str(root / "memory"), "-o", str(out / "memory-again.html")]) == 0
    capsys.readouterr()
    assert differences(*(read(out / "again.json", root) for root, out in pages.items())) == []
    reports = [(out / "memory-again.html").read_text(encoding="utf-8").replace(str(root), "<root>")
               for root, out in pages.items()]
    assert differences(*(_task_pages(page) for page in reports)) == []
    assert _TIME.sub("<time>", _PAGE_BLOCK.sub("", reports[0])) == _TIME.sub("<time>", _PAGE_BLOCK.sub("", reports[1]))


#: The report's packed per-task pages (read back by :func:`read_task_pages`), and
#: what it prints as a time: a timestamp, or seconds / milliseconds.
_PAGE_BLOCK = re.compile(r'<script type="text/plain" class="task-page">[^<]*</script>')
_TIME = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)?|\d+(?:\.\d+)?\s?(?:ms|s)\b")
#: Where a packed turn (:func:`..reporting.drilldown.turn_entry`) holds its seconds.
_TURN_SECONDS = 3


def _task_pages(page: str) -> dict[str, list[dict[str, Any]]]:
    """The report's task records, each turn's seconds left out (a time, by position)."""
    pages = read_task_pages(page)
    for records in pages.values():
        for record in records:
            for turn in ("T", "F"):
                if isinstance(record.get(turn), list):
                    record[turn][_TURN_SECONDS] = None
    return pages
