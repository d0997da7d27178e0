"""Run directories made by hand, an HTML reader, and the browser for the report tests.

Hand-made artefacts keep the HTML tests independent of the agents and benchmarks,
and let them carry what real runs rarely do: markup in task ids and answers,
failed episodes, empty streams.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.stats import wilson_interval
from pytest_evomemory.analysis.summary import RESPONSE_COUNTS, ResponseTally, StreamMetrics

from ._browser import Browser, find_chromium, launch

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def stream_metrics(name: str, outcomes: Sequence[bool | None]) -> dict[str, Any]:
    """Metrics as summary.py writes them; ``None`` in ``outcomes`` is a failed episode."""
    correct = errors = 0
    curve = []
    for index, outcome in enumerate(outcomes, start=1):
        correct += outcome is True
        errors += outcome is None
        curve.append(round(correct / index, 6))
    tasks = len(outcomes)
    stimuli = 2 * tasks - errors
    return {
        "stream": name, "tasks": tasks, "correct": correct, "errors": errors,
        "accuracy": correct / tasks if tasks else None, "stimuli": stimuli, "feedback_turns": tasks - errors,
        "agent_turns": stimuli * 2, "tool_calls": stimuli, "memory_retains": tasks - errors, "memory_recalls": tasks,
        "accuracy_ci": list(wilson_interval(correct, tasks)) if tasks else None,
        "protocol_violations": 0, "cached_responses": 0, "prompt_tokens": 100 * stimuli, "completion_tokens": 10 * stimuli,
        "total_tokens": 110 * stimuli, "seconds": 0.5 * stimuli,
        "per_stimulus": {"tokens": 110.0, "agent_turns": 2.0, "seconds": 0.5} if stimuli else
        {"tokens": None, "agent_turns": None, "seconds": None},
        "learning_curve": curve,
    }


def write_responses(run_dir: Path, responses: Sequence[dict[str, Any]]) -> None:
    """Replace a run's responses.jsonl, and what its summary.json counts of them: a
    report refuses records that do not add up to the summary."""
    (run_dir / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in responses), encoding="utf-8")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    tally = ResponseTally.of(responses)
    for name, scope in [*summary["streams"].items(), ("overall", summary["overall"])]:
        counted = tally.overall if name == "overall" else tally.streams.get(name, StreamMetrics(name))
        scope.update({key: getattr(counted, key) for key in RESPONSE_COUNTS})
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def write_run_dir(
    directory: Path, name: str, streams: dict[str, Sequence[bool | None]], *, task_id: str = "t",
    config: dict[str, Any] | None = None, cached: bool = False,
) -> Path:
    """A run directory consistent with ``streams``: summary.json, run.json, scores.jsonl,
    responses.jsonl and transcripts/, shaped as the plugin writes them (a failed
    episode is a wrong score with ``error`` set, and has no feedback turn)."""
    directory.mkdir(parents=True, exist_ok=True)
    metrics = {stream: stream_metrics(stream, outcomes) for stream, outcomes in streams.items()}
    everything = [o for outcomes in streams.values() for o in outcomes]
    overall = stream_metrics("overall", everything)
    overall["learning_curve"] = []
    if cached:
        for scope in (*metrics.values(), overall):
            scope["cached_responses"] = scope["stimuli"]
    failed = [
        {"stream": s, "task_id": f"{task_id}{i}", "position": i, "phase": "task", "reason": f"model unreachable for {task_id}{i}"}
        for s, outcomes in streams.items() for i, o in enumerate(outcomes) if o is None
    ]
    summary = {
        "schema_version": 1, "run": name, "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T00:01:00+00:00", "streams": metrics, "overall": overall,
        "thresholds": [{"scope": "overall", "minimum": 0.5, "accuracy": overall["accuracy"], "met": (overall["accuracy"] or 0) >= 0.5}],
        "passed": (overall["accuracy"] or 0) >= 0.5, "failed_episodes": failed,
    }
    run = {
        "schema_version": 1,
        "run": config or {"name": name, "agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall", "model": None},
                          "memory": {"backend": "inprocess"}},
        "streams": [{"name": stream, "tasks": len(outcomes)} for stream, outcomes in streams.items()],
    }
    scores = [
        {"stream": s, "task_id": f"{task_id}{i}", "position": i, "correct": bool(o), "extracted": f"answer {i}",
         "raw_answer": f"Final Answer: answer {i}", "target": f"target {i}", "match_mode": "exact",
         "reason": f"reason {i}", "details": {}, "group": None, **({"error": "model unreachable"} if o is None else {})}
        for s, outcomes in streams.items() for i, o in enumerate(outcomes)
    ]
    responses, transcripts = [], {}
    for s, outcomes in streams.items():
        records = []
        for i, o in enumerate(outcomes):
            for kind in ("task", "feedback") if o is not None else ("task",):
                answer = f"answer {i}" if kind == "task" else "Feedback recorded"
                prompt = f"Question {i} of {s}?" if kind == "task" else f"The correct answer: target {i}"
                responses.append({
                    "stream": s, "task_id": f"{task_id}{i}", "kind": kind, "final_answer": answer, "agent_turns": 2,
                    "tool_calls": [{"name": "final_answer", "arguments": {"answer": answer}, "result": "answer recorded", "error": False}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
                    "memory_retains": int(kind == "feedback"), "memory_recalls": int(kind == "task"), "seconds": 0.5,
                    "protocol_violation": None, "memory_writes": [], **({"cached": True} if cached else {}),
                })
                records.append({"task_id": f"{task_id}{i}", "kind": kind, "tool_calls": [], "messages": [
                    {"role": "system", "content": "You are a careful problem solver."},
                    {"role": "user", "content": prompt},
                    {"role": "assistant", "content": answer},
                ]})
        transcripts[s] = records
    (directory / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (directory / "run.json").write_text(json.dumps(run), encoding="utf-8")
    (directory / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scores), encoding="utf-8")
    (directory / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in responses), encoding="utf-8")
    (directory / "transcripts").mkdir(exist_ok=True)
    for s, records in transcripts.items():
        if "/" not in s and "\0" not in s:
            (directory / "transcripts" / f"{s}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
            )
    return directory


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str, streams: dict[str, Sequence[bool | None]], **kwargs: Any) -> Path:
        return write_run_dir(tmp_path / name, name, streams, **kwargs)

    return make


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.text: list[str] = []

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str, cls: str | None = None) -> list[Element]:
        return [e for e in self.iter() if e.tag == tag and (cls is None or cls in e.classes)]

    def all_text(self) -> str:
        return "".join(self.text) + "".join(child.all_text() for child in self.children)


_VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "source", "wbr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(element)
        if tag not in _VOID:
            self.current = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.current.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag: str) -> None:
        node: Element | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"stray </{tag}>"
        self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.text.append(data)


def parse_html(text: str) -> Element:
    """A strict-enough tree: unbalanced closing tags fail the test instead of passing silently."""
    builder = _Builder()
    builder.feed(text)
    builder.close()
    assert builder.current is builder.root, f"unclosed <{builder.current.tag}>"
    return builder.root


def chromium_or_skip() -> str:
    executable = find_chromium()
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not found but CI is set: run .ci/install-chromium.sh or set EVOMEMORY_CHROMIUM")
        pytest.skip("chromium not found (install it with .ci/install-chromium.sh or set EVOMEMORY_CHROMIUM)")
    return executable


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch(chromium_or_skip()) as running:
        yield running


def assert_only_our_script(tree: Element, text: str) -> None:
    """The page runs one script, the drill-down's own (its hash is the only one the
    Content-Security-Policy allows), and holds nothing else but inert data blocks."""
    from pytest_evomemory.reporting.drilldown import SCRIPT, SCRIPT_HASH

    scripts = tree.find_all("script")
    running = [script for script in scripts if script.attrs.get("type") != "text/plain"]
    assert len(running) <= 1
    for script in running:
        assert script.all_text() == SCRIPT and not script.attrs
    for block in scripts:
        if block.attrs.get("type") == "text/plain":
            assert set(block.all_text()) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    (csp,) = [m for m in tree.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    policy = csp.attrs["content"]
    assert "default-src 'none'" in policy and f"script-src '{SCRIPT_HASH}'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1] and "unsafe-eval" not in policy
    assert text.count("<script>") == len(running)


def task_records(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every task of a report's drill-down, by stream, as the page's script unpacks them."""
    from pytest_evomemory.reporting.drilldown import read_task_pages

    return read_task_pages(path.read_text(encoding="utf-8"))


def stream_rows(tree: Element) -> list[list[str]]:
    """report.html's per-stream metric tables (one per group of columns) joined into
    one table's rows: the stream, then every column left to right."""
    joined: list[list[str]] = []
    for index, table in enumerate(tree.find_all("table", "streams")):
        rows = [[cell.all_text().strip() for cell in tr.children if cell.tag in ("td", "th")] for tr in table.find_all("tr")]
        joined = rows if index == 0 else [mine + theirs[1:] for mine, theirs in zip(joined, rows, strict=True)]
    return joined
