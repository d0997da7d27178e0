"""``evomemory report`` on a long run: time, peak memory, page size, and how fast the page opens.

    python benchmarks/bench_report.py [--tasks 20000] [--streams 1] [--keep DIR]
                                      [--pythonpath OTHER_CHECKOUT] [--no-browser]

A run directory of N tasks is generated synthetically, shaped as a real run of the
model-free ``recall_baseline`` agent with a SQLite memory writes it (issue 29's
case): per task a score, a task response that recalled four stored experiences,
a feedback response that retained one, and both turns' transcripts. Then:

* ``evomemory report DIR`` runs in a fresh process; its wall time and peak RSS
  (``wait4``) are measured. Targets at 20,000 tasks: < 3 s, < 300 MiB.
* report.html's size, in total and per task (it must grow linearly, with a small
  constant).
* the page opens in headless Chromium (``/usr/bin/chromium``, or
  ``$EVOMEMORY_CHROMIUM``): the time from navigation until the load event and
  the first page of every stream's tasks is drawn. Target: < 2 s.

``--pythonpath`` runs the report from another checkout (e.g. the commit before a
change: ``git worktree add /tmp/base <commit>``) to give before/after figures on
the same generated directory. Figures on a shared machine are noisy; the 1-minute
load average is printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TIME_TARGET_S = 3.0
RSS_TARGET_MIB = 300.0
OPEN_TARGET_S = 2.0

_SYSTEM_FEEDBACK = (
    "Feedback on the task you just answered.\nYour submitted answer: {answer}\nThe correct answer: {target}\n"
    "If this experience could help with later tasks, store it in memory now. Then call final_answer with "
    'exactly "Feedback recorded".'
)


def _prompt(stream: str, index: int, rng: random.Random) -> str:
    words = " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa")) for _ in range(8))
    return f"Task {stream}-{index}: zq{index}x {words}?\nanswer-{index}"


def _experience(stream: str, index: int, rng: random.Random) -> str:
    return f"Task: {_prompt(stream, index, random.Random(index))}\nCorrect answer: answer-{index}"


def write_run(directory: Path, tasks: int, streams: int, seed: int = 0) -> Path:
    """A run directory as the plugin writes it (summary via the package's own summarize)."""
    from pytest_evomemory.analysis.summary import summarize
    from pytest_evomemory.rundir import TRANSCRIPTS, dumps

    rng = random.Random(seed)
    names = [f"gen{index}" for index in range(streams)]
    per_stream = max(1, tasks // streams)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TRANSCRIPTS).mkdir(exist_ok=True)
    scores_meta: list[dict[str, Any]] = []
    responses_meta: list[dict[str, Any]] = []
    with (directory / "scores.jsonl").open("w", encoding="ascii") as scores, \
            (directory / "responses.jsonl").open("w", encoding="ascii") as responses:
        for stream in names:
            with (directory / TRANSCRIPTS / f"{stream}.jsonl").open("w", encoding="ascii") as transcripts:
                for index in range(per_stream):
                    prompt = _prompt(stream, index, rng)
                    recalled = [
                        {"content": _experience(stream, hit, rng), "metadata": {"task_id": f"t{hit}"},
                         "record_id": str(hit + 1), "score": round(rng.random() / 1000, 9)}
                        for hit in sorted(rng.sample(range(index), min(4, index)))
                    ] if index else []
                    answer = f"answer-{recalled[0]['record_id']}" if recalled else "unknown"
                    target = f"answer-{index}"
                    correct = answer == target or rng.random() < 0.3
                    scored = {
                        "correct": correct, "details": {"final_answer_label": False, "normalized_target": target},
                        "extracted": answer, "group": None, "match_mode": "exact", "position": index,
                        "raw_answer": answer,
                        "reason": f"normalized answer {answer!r} {'equals' if correct else 'differs from'} "
                                  f"normalized target {target!r}",
                        "stream": stream, "target": target, "task_id": f"t{index}", "value": float(correct),
                    }
                    task = {
                        "agent_turns": 1, "final_answer": answer, "kind": "task", "memory_recalled": recalled,
                        "memory_recalls": 1, "memory_retains": 0, "memory_writes": [], "protocol_violation": None,
                        "seconds": 0.004 + rng.random() / 1000, "stream": stream, "task_id": f"t{index}",
                        "tool_calls": [{"arguments": {"answer": answer}, "error": False, "name": "final_answer",
                                        "result": "answer recorded"}],
                        "usage": {"completion_tokens": 0, "prompt_tokens": 0, "total_tokens": 0},
                    }
                    feedback = {
                        **task, "final_answer": "Feedback recorded", "kind": "feedback", "memory_recalled": [],
                        "memory_recalls": 0, "memory_retains": 1, "seconds": 0.0002,
                        "memory_writes": [{"content": _experience(stream, index, rng), "id": str(index + 1),
                                           "metadata": {"task_id": f"t{index}"}}],
                        "tool_calls": [{"arguments": {"answer": "Feedback recorded"}, "error": False,
                                        "name": "final_answer", "result": "answer recorded"}],
                    }
                    scores.write(dumps(scored) + "\n")
                    for response, said, reply in (
                        (task, prompt, answer),
                        (feedback, _SYSTEM_FEEDBACK.format(answer=answer, target=target), "Feedback recorded"),
                    ):
                        responses.write(dumps(response) + "\n")
                        transcripts.write(dumps({
                            "kind": response["kind"], "task_id": response["task_id"], "tool_calls": response["tool_calls"],
                            "messages": [{"content": said, "role": "user"}, {"content": reply, "role": "assistant"}],
                        }) + "\n")
                        responses_meta.append({k: v for k, v in response.items() if k != "memory_recalled"})
                    scores_meta.append({k: v for k, v in scored.items() if k != "details"})
    metrics = summarize(names, scores_meta, responses_meta)
    summary = {
        "schema_version": 1, "run": "bench_report", "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T01:00:00+00:00", "thresholds": [], "thresholds_met": True, "passed": True,
        "streams": {name: m.document().written() for name, m in metrics.items() if name != "overall"},
        "overall": metrics["overall"].document().written(), "failed_episodes": [], "skipped_feedback": [],
        "completion": {"complete": True, "tasks_planned": per_stream * streams, "tasks_run": per_stream * streams,
                       "reason": None},
        "ran": {name: {"agent": {"class": "pytest_evomemory.agents.baseline:RecallBaselineAgent",
                                 "factory": "pytest_evomemory.agents.factory:build_agent", "kind": "recall_baseline"},
                       "memory": {"class": "pytest_evomemory.memory.sqlite:SqliteMemory",
                                  "factory": "pytest_evomemory.memory.factory:build_memory", "backend": "sqlite"},
                       "model": None} for name in names},
    }
    (directory / "summary.json").write_text(json.dumps(summary, indent=1), encoding="ascii")
    run = {
        "schema_version": 1, "streams": [{"name": name, "tasks": per_stream} for name in names],
        "run": {"name": "bench_report", "agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall",
                                                  "model": None},
                "memory": {"backend": "sqlite", "top_k": 4}},
    }
    (directory / "run.json").write_text(json.dumps(run, indent=1), encoding="ascii")
    return directory


def directory_size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file() and item.name != "report.html")


def run_report(directory: Path, pythonpath: Path | None) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of ``evomemory report DIR`` in a
    fresh process (CPU time says what the command costs on a busy machine, where
    its wall time says more about the neighbours)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, "-c", "import sys; from pytest_evomemory.cli import main; sys.exit(main())",
               "report", str(directory)]
    started = time.perf_counter()
    # cwd outside any checkout: `python -c` puts the working directory first on sys.path
    process = subprocess.Popen(command, env=env, cwd=directory.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    output = process.stdout.read().decode("utf-8", "replace") if process.stdout else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"evomemory report failed ({process.returncode}):\n{output[-3000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, output


_OPENED = """(async () => {
  const wait = ms => new Promise(r => setTimeout(r, ms));
  const streams = document.querySelectorAll('details.stream-tasks').length;
  for (let i = 0; i < 500; i++) {
    const drawn = [...document.querySelectorAll('details.stream-tasks')].filter(d => d.querySelector('details.task')).length;
    if (drawn === streams) break;
    await wait(10);
  }
  return performance.now();
})()"""


def open_in_chromium(page: Path) -> float | None:
    """Seconds from navigation to the load event and every stream's first page drawn."""
    from tests.reporting._browser import find_chromium, launch

    executable = find_chromium()
    if executable is None:
        return None
    with launch(executable, timeout=120) as browser:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Page", "Runtime"):
                browser.call(f"{domain}.enable", session=session)
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
            browser.events.clear()
            started = time.perf_counter()
            browser.call("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
            browser._wait_for("Page.loadEventFired", session)
            browser.call("Runtime.evaluate", {"expression": _OPENED, "awaitPromise": True, "returnByValue": True},
                         session=session)
            return time.perf_counter() - started
        finally:
            browser.call("Target.closeTarget", {"targetId": target})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="generate the run directory here and keep it")
    parser.add_argument("--pythonpath", type=Path, help="run the report from this checkout instead")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium load time")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-report-")) if args.keep is None else args.keep
    try:
        directory = scratch / "run"
        if not (directory / "summary.json").is_file():
            print(f"generating a {args.tasks:,}-task run in {directory} ...", file=sys.stderr, flush=True)
            write_run(directory, args.tasks, args.streams)
        wall, cpu, rss, _ = run_report(directory, args.pythonpath)
        page = directory / "report.html"
        size = page.stat().st_size
        opened = None if args.no_browser else open_in_chromium(page)
        tasks = args.tasks - args.tasks % args.streams
        try:
            load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        except OSError:
            load = ""
        source = f" (report code from {args.pythonpath})" if args.pythonpath else ""
        print(f"evomemory report on a generated {tasks:,}-task run, {args.streams} stream(s){source}; {load}")
        print(f"run directory (records): {directory_size(directory) / 2**20:.1f} MiB\n")
        header = f"{'measure':<34} {'value':>12}  target"
        print(header)
        print("-" * len(header))
        rows = [
            ("evomemory report wall s", f"{wall:.2f}", f"< {TIME_TARGET_S:g} s", wall < TIME_TARGET_S),
            ("evomemory report CPU s (user+sys)", f"{cpu:.2f}", "", True),
            ("evomemory report peak RSS MiB", f"{rss:.0f}", f"< {RSS_TARGET_MIB:g} MiB", rss < RSS_TARGET_MIB),
            ("report.html MiB", f"{size / 2**20:.2f}", "linear, small constant", True),
            ("report.html bytes per task", f"{size / max(tasks, 1):.0f}", "", True),
            (
                "Chromium: open + first pages s",
                "skipped" if opened is None else f"{opened:.2f}",
                f"< {OPEN_TARGET_S:g} s",
                opened is None or opened < OPEN_TARGET_S,
            ),
        ]
        for name, value, target, met in rows:
            print(f"{name:<34} {value:>12}  {target}{'' if met else '  MISSED'}")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
