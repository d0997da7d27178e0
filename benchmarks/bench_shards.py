"""Shards at full size: how even the plan's shares are, and how long a full grid's merge takes.

    python benchmarks/bench_shards.py [--latency 0.1] [--shards 2,4,8] [--merge-shards 4] [--merge-by stream|arm]
                                      [--scale 1.0]

**Balance** (computed, nothing runs): the session's cells
(``runtime.shards.session_cells``) and the planner (``plan_shards``), what
``--evomemory-shard`` uses, on a simulated grid: the four Evo-Memory streams at
full size (30, 198, 2,312 and 186 tasks, bench_two_arms.STREAMS; the catalog holds
no task counts), 2 methods x 3 task orders = 6 arms in one session, a task call
and a feedback call per task, a fixed simulated cost per call (``--latency``). For
each unit (``--evomemory-shard-by``: ``stream``, a stream with all its arms;
``arm``, one arm's run of one stream) and each N: the busiest shard's work against
the total / N, and the floor no plan can beat (the biggest cell: a memory stream
is never split).

**Merge**: the shards' output directories of that grid (6 arms x 2,726 tasks,
``--merge-shards`` shards of the unit ``--merge-by``), generated with the run directory's writer from the
records of a real small run (the sample streams, the recall baseline) used as
templates; then ``evomemory merge`` of them, in-process, timed: the merged run
directories, summaries, reports and the six-arm compare.html / compare.json.
Target (issue 27): under 30 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_two_arms import STREAMS

from pytest_evomemory.analysis.summary import outcome, summarize
from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.options import SHARD_UNITS
from pytest_evomemory.rundir import RunWriter, write_arms_manifest
from pytest_evomemory.rundocs.run import task_order_digest
from pytest_evomemory.runtime.shards import Cell, plan_shards, session_cells
from pytest_evomemory.streams import Stream

METHODS = ("control", "memory")
ORDERS = ("given", "shuffle", "easy_to_hard")
CALLS_PER_TASK = 2  # a task turn and a feedback turn
BALANCE_TARGET = 1.2
MERGE_TARGET_S = 30.0


def arms() -> list[str]:
    return [f"{method}-{order}" for order in ORDERS for method in METHODS]


def grid_cells(sizes: dict[str, int], unit: str = SHARD_UNITS[0]) -> list[Cell]:
    """The session's cells, as a shard computes them: every arm runs every stream
    (a stream with feedback: a task call and a feedback call per task)."""
    streams = [
        Stream(name, tuple(BenchmarkSample(f"{name}-{i}", name, i, "?", "?") for i in range(size)), "exact")
        for name, size in sizes.items()
    ]
    return session_cells([(arm, streams) for arm in arms()], unit)


def balance_rows(cells: list[Cell], counts: list[int], latency: float) -> list[tuple[int, float, float, float, float]]:
    """Per N: (N, busiest shard s, total/N s, ratio, floor ratio)."""
    total = sum(cell.calls for cell in cells) * latency
    biggest = max(cell.calls for cell in cells) * latency
    rows = []
    for count in counts:
        plan = plan_shards(cells, count, "0" * 64, arms())
        busiest = max(plan.calls) * latency
        ideal = total / count
        rows.append((count, busiest, ideal, busiest / ideal, max(biggest, ideal) / ideal))
    return rows


def print_balance(title: str, rows: list[tuple[int, float, float, float, float]]) -> None:
    print(title)
    print(f"{'N':>3} {'busiest shard':>15} {'total/N':>11} {'ratio':>7} {'floor':>7}  verdict (<= {BALANCE_TARGET})")
    for count, busiest, ideal, ratio, floor in rows:
        verdict = "met" if ratio <= BALANCE_TARGET else ("at the floor" if ratio <= floor + 1e-9 else "MISSED")
        print(f"{count:>3} {busiest / 3600:>13.2f} h {ideal / 3600:>9.2f} h {ratio:>7.2f} {floor:>7.2f}  {verdict}")


# ----------------------------------------------------------------------------- merge


def templates(workdir: Path) -> dict[str, Any]:
    """One score, one task and one feedback response, transcripts, run.json and
    summary.json of a real run (the sample, recall baseline with memory)."""
    from pytest_evomemory.configs import resolve_run_config

    run_dir = workdir / "template"
    with contextlib.redirect_stdout(io.StringIO()):
        status = evomemory(["run", "--config", str(resolve_run_config("sample_memory", workdir)), "--limit", "1",
                            "--output-dir", str(run_dir), "-q"])
    assert status == 0, status

    def first(name: str, **match: str) -> dict[str, Any]:
        for line in (run_dir / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if all(record.get(key) == value for key, value in match.items()):
                return dict(record)
        raise AssertionError(f"no {match} in {name}")

    transcript = next((run_dir / "transcripts").iterdir())
    return {
        "score": first("scores.jsonl"),
        "task": first("responses.jsonl", kind="task"),
        "feedback": first("responses.jsonl", kind="feedback"),
        "transcript": json.loads(transcript.read_text(encoding="utf-8").splitlines()[0]),
        "run": json.loads((run_dir / "run.json").read_text(encoding="utf-8")),
        "summary": json.loads((run_dir / "summary.json").read_text(encoding="utf-8")),
    }


def write_shards(
    root: Path, sizes: dict[str, int], count: int, parts: dict[str, Any], unit: str = SHARD_UNITS[0]
) -> tuple[list[Path], int]:
    """The output directories of ``count`` shards of the grid session, cells of
    ``unit``; returns them and the number of records written."""
    names = arms()
    plan = plan_shards(grid_cells(sizes, unit), count, "1" * 64, names)
    template_ran = next(iter(parts["summary"]["ran"].values()))
    written = 0
    directories = []
    for index in range(1, count + 1):
        shard_dir = root / f"shard-{index}"
        directories.append(shard_dir)
        for arm in names:
            streams = plan.streams_of(index, arm)
            arm_dir = shard_dir / arm
            writer = RunWriter(arm_dir)
            document = {key: value for key, value in parts["run"].items() if key != "schema_version"}
            document["run"] = {**document["run"], "name": arm}
            base_stream = document["streams"][0]
            document["streams"] = [
                {**base_stream, "name": stream, "tasks": sizes[stream],
                 # the order of the invented task ids (a reader checks a finished stream's scores by it)
                 "order": {**base_stream["order"], "tasks_sha256": task_order_digest(
                     f"{stream}-{position:05d}" for position in range(sizes[stream]))}}
                for stream in streams
            ]
            document["shard"] = {**plan.record(index).written(), "thresholds": {"overall": None, "streams": []}}
            document["ran"] = {stream: template_ran for stream in streams}
            writer.write_run(document)
            scores, responses = [], []
            for stream in streams:
                transcript = []
                for position in range(sizes[stream]):
                    task_id = f"{stream}-{position:05d}"
                    scores.append({**parts["score"], "stream": stream, "task_id": task_id, "position": position,
                                   "correct": (position * 7 + len(arm)) % 3 != 0})
                    for kind in ("task", "feedback"):
                        responses.append({**parts[kind], "stream": stream, "task_id": task_id, "position": position})
                        transcript.append({**parts["transcript"], "task_id": task_id, "kind": kind})
                writer.write_records(f"transcripts/{stream}.jsonl", transcript)
            writer.write_records("scores.jsonl", scores)
            writer.write_records("responses.jsonl", responses)
            written += len(scores) + 3 * len(responses)
            summary = {key: value for key, value in parts["summary"].items() if key != "schema_version"}
            metrics = summarize(streams, [outcome(score) for score in scores], responses)  # what the records add up to
            summary["streams"] = {name: value.document().written() for name, value in metrics.items() if name != "overall"}
            summary["overall"] = metrics["overall"].document().written()
            summary["completion"] = {"complete": True, "tasks_planned": len(scores), "tasks_run": len(scores),
                                     "reason": None}
            summary["run"] = arm
            writer.write_summary(summary)
        write_arms_manifest(shard_dir, [(arm, shard_dir / arm, "study.yaml") for arm in names], [], f"bench-{index}")
    return directories, written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.1, help="simulated seconds per model call (default 0.1)")
    parser.add_argument("--shards", default="2,4,8", help="the N to plan for (default 2,4,8)")
    parser.add_argument("--merge-shards", type=int, default=4, help="shards of the generated grid to merge (default 4)")
    parser.add_argument("--merge-by", choices=SHARD_UNITS, default=SHARD_UNITS[0],
                        help="the unit of the merged grid's shards (default stream)")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every stream of the merged grid (quick check)")
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.shards.split(",")]

    print(f"grid: {len(METHODS)} methods x {len(ORDERS)} orders = {len(arms())} arms; streams "
          + ", ".join(f"{name} {size:,}" for name, size in STREAMS.items())
          + f"; {CALLS_PER_TASK} calls per task, {args.latency * 1000:.0f} ms per call")
    print_balance("shards by stream (--evomemory-shard-by=stream, the default: a cell is one stream with all 6 arms)",
                  balance_rows(grid_cells(STREAMS), counts, args.latency))
    print_balance("shards by arm (--evomemory-shard-by=arm: a cell is one arm's run of one stream)",
                  balance_rows(grid_cells(STREAMS, "arm"), counts, args.latency))

    sizes = {name: max(1, round(size * args.scale)) for name, size in STREAMS.items()}
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as temporary:
        root = Path(temporary)
        parts = templates(root)
        started = time.perf_counter()
        directories, records = write_shards(root / "shards", sizes, args.merge_shards, parts, args.merge_by)
        generated = time.perf_counter() - started
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = evomemory(["merge", *map(str, directories), "--output-dir", str(root / "merged")])
        merge_s = time.perf_counter() - started
        tasks = sum(sizes.values()) * len(arms())
        complete = all(
            json.loads((root / "merged" / arm / "summary.json").read_text())["completion"]["complete"] for arm in arms()
        )
        compare = (root / "merged" / "compare.json").is_file()
    print(f"merge of a full grid: {args.merge_shards} shards by {args.merge_by}, {len(arms())} arms, {tasks:,} tasks "
          f"({records:,} records, generated in {generated:.1f} s)")
    print(f"  evomemory merge: {merge_s:.1f} s (target < {MERGE_TARGET_S:.0f} s: "
          f"{'met' if merge_s < MERGE_TARGET_S else 'MISSED'}); exit {status}; every arm complete: {complete}; "
          f"compare.json written: {compare}")
    return 0 if status == 0 and complete and compare else 1


if __name__ == "__main__":
    sys.exit(main())
