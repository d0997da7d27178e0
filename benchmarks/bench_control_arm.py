"""Control arm speed-up: a stream without memory spreads over xdist workers.

    python benchmarks/bench_control_arm.py [--tasks 96] [--latency 0.1] [--workers 4]

One ``files`` stream of 96 tasks, TinyAgent with ``memory_strategy: none`` (cache
off) against the ScriptedServer with 100 ms of latency per call. Without memory
the reset leaves nothing from one task for the next, so the plugin schedules each
task as its own unit of work; the stream then runs on every worker at once. The
target (issue "Does memory help?"): wall(-n 4) / wall(serial) <= 0.5, whole
command lines measured (interpreter start, collection and reporting included).
Both runs must produce the same scores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import (
    TimedServer,
    clean_env,
    echo_tasks,
    load_average,
    pytest_command,
    run_measured,
    tiny_agent_yaml,
    write_jsonl,
    write_run_config,
)

RATIO_TARGET = 0.5


def _scores(results: Path) -> list[tuple[str, bool]]:
    lines = (results / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    return [(record["task_id"], record["correct"]) for record in map(json.loads, lines)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=96)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per model call")
    parser.add_argument("--workers", default="4")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-control-"))
    stream = workdir / "control.jsonl"
    write_jsonl(stream, echo_tasks(args.tasks, prefix="c"))
    walls: dict[str, float] = {}
    scores: dict[str, list[tuple[str, bool]]] = {}
    with TimedServer(latency_s=args.latency) as server:
        run = write_run_config(workdir, {"control": stream}, tiny_agent_yaml(server.base_url, "none"), name="control")
        env = clean_env(EVOMEMORY_CACHE_DIR=str(workdir / "cache"))
        for label, extra in (("serial", []), (f"-n {args.workers}", ["-n", args.workers])):
            print(f"[bench_control_arm] pytest {label} ...", file=sys.stderr, flush=True)
            measured = run_measured(pytest_command(run, *extra), workdir, env, timeout_s=1800)
            if measured.returncode != 0:
                raise SystemExit(f"pytest {label} failed ({measured.returncode}):\n{measured.output[-3000:]}")
            walls[label] = measured.wall_s
            scores[label] = _scores(workdir / "results")
    parallel = f"-n {args.workers}"
    ratio = walls[parallel] / walls["serial"]
    same = scores[parallel] == scores["serial"]
    print(f"control arm: 1 stream x {args.tasks} tasks without memory, model latency {args.latency * 1000:.0f} ms/call")
    print(load_average())
    print(f"{'mode':<8} {'wall s':>7}")
    for label, wall in walls.items():
        print(f"{label:<8} {wall:>7.2f}")
    verdict = "met" if ratio <= RATIO_TARGET else "MISSED"
    print(f"ratio wall({parallel}) / wall(serial) = {ratio:.3f} (target <= {RATIO_TARGET}): {verdict}")
    print(f"scores identical to the serial run: {same}")
    return 1 if (args.strict and ratio > RATIO_TARGET) or not same else 0


if __name__ == "__main__":
    sys.exit(main())
