"""A grid at the speed of its longest chain: many chains at once in one ``evomemory run``.

    python benchmarks/bench_grid.py [--arms 8,32] [--latency 0.1] [--cap 8] [--repeat 1]

A *chain* is one arm's run of one stream: a serial chain of episodes. The grid is the
bundled sample streams (2 streams of 12 tasks, a task and a feedback call each: 24
calls per chain) x ``--arms`` arms (TinyAgent, ``deterministic_recall``, the in-process
memory, cache off; each arm's model is named after it so the stub can tell the
chains apart), against the stub endpoint (the ScriptedServer with Nagle off, see
below) answering each call in ``--latency`` seconds. ``evomemory run --chains N``
runs every chain at once; nothing can make a chain faster than its model, so the
ideal wall time is the longest chain's model time (the server's time from each of
its requests' arrival to its reply, summed).

Rows (each a whole command, interpreter start to exit, in a fresh process):

* ``A chains``: every chain at once, no connection cap. Targets: wall <= 1.3 x the
  longest chain's model time; peak RSS <= 1 GiB (at 64 chains); the first model call
  <= 1 s after the command started.
* ``A chains, max_connections C``: the same grid with ``model.max_connections: C``
  (every arm names the same endpoint). Targets: the peak of concurrent requests the
  server saw is C, and the wall is within 1.2 x (calls x latency / C).

The stub: the standard library's ``http.server`` writes a reply's headers and body
in separate sends; with Nagle's algorithm on, the body waits for the client's
delayed ACK, about 40 ms per call on Linux. The benchmark's server turns Nagle off
(``TCP_NODELAY``, as the ScriptedServer subclass of bench_harness.py does), and the
script measures the round trip at latency 0 both ways with the package's own model
client, and prints it: it must be about a millisecond.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_harness import TimedServer, clean_env, load_average, run_measured

from pytest_evomemory.config import ModelConfig

WALL_TARGET = 1.3
CAP_WALL_TARGET = 1.2
RSS_TARGET_MIB = 1024.0
FIRST_CALL_TARGET_S = 1.0
SAMPLE = Path(__file__).resolve().parent.parent / "pytest_evomemory" / "streams" / "sample"


def stub_round_trip_ms(nodelay: bool, calls: int = 60) -> float:
    """Median ms per call at latency 0, through the package's own model client."""
    from pytest_evomemory.models.openai_compat import OpenAICompatibleModel

    with TimedServer(latency_s=0.0, nodelay=nodelay) as server:
        model = OpenAICompatibleModel(ModelConfig(model="probe", base_url=server.base_url, api_key_env=None))
        messages = [{"role": "user", "content": "Task probe: repeat the last line.\nanswer"}]
        model.complete(messages, [])  # the connection is opened once, as in a run
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            model.complete(messages, [])
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _prompts() -> dict[str, str]:
    """Each sample task's prompt -> its stream (the task message quotes it)."""
    streams = {"facts.jsonl": "sample_facts", "choice.jsonl": "sample_choice"}
    prompts = {}
    for file, stream in streams.items():
        for line in (SAMPLE / file).read_text(encoding="utf-8").splitlines():
            if line.strip():
                prompts[json.loads(line)["prompt"]] = stream
    return prompts


def write_arms(directory: Path, base_url: str, arms: int, cap: int | None) -> list[Path]:
    paths = []
    for index in range(1, arms + 1):
        name = f"arm{index:02d}"
        model: dict[str, Any] = {
            "model": name, "base_url": base_url, "api_key_env": None, "cache": False, "timeout_s": 60,
            "max_retries": 1, "retry_backoff_s": 0,
        }
        if cap is not None:
            model["max_connections"] = cap
        document = {
            "name": name,
            "benchmark": {"benchmark": "sample"},
            "agent": {"kind": "tiny", "memory_strategy": "deterministic_recall", "max_steps": 4, "model": model},
            "memory": {"backend": "inprocess"},
        }
        path = directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        paths.append(path)
    return paths


def measure(server: GridServer, workdir: Path, arms: int, cap: int | None, latency: float, attempt: int) -> dict[str, Any]:
    configs = write_arms(workdir, server.base_url, arms, cap)
    # A fresh output directory per run, and nothing deleted until every row ran: ext4
    # allocates inodes slowly for seconds after many were freed (``recently_deleted``
    # in perf; 0.7 s of system time for a 64-chain run's 2,600 files right after the
    # previous run's were removed), which is the deletion's cost, not the run's.
    out = workdir / f"out-{arms}-{cap}-{attempt}"
    server.reset_counters()
    server.in_flight_max = 0
    prompts = _prompts()
    command = [sys.executable, "-m", "pytest_evomemory.cli", "run", "-q", "--chains", str(arms * 2),
               "--output-dir", str(out), *(arg for config in configs for arg in ("--config", str(config)))]
    launched = time.perf_counter()
    measured = run_measured(command, workdir, clean_env(), timeout_s=1800)
    if measured.returncode not in (0, 1):  # 1: accuracy gates are none, but a wrong answer is no failure
        raise SystemExit(f"evomemory run failed ({measured.returncode}):\n{measured.output[-3000:]}")
    per_chain: dict[tuple[str, str], float] = {}
    by_message: dict[str, str] = {}
    for started, finished, label in server.timeline:
        arm, _, message = label.partition("\0")
        stream = by_message.get(message) or next((s for p, s in prompts.items() if p in message), "?")
        by_message[message] = stream
        per_chain[(arm, stream)] = per_chain.get((arm, stream), 0.0) + (finished - started)
    longest = max(per_chain.values())
    first = min(started for started, _, _ in server.timeline) - launched
    last = max(finished for _, finished, _ in server.timeline) - launched
    return {
        "arms": arms, "chains": len(per_chain), "cap": cap, "wall_s": measured.wall_s, "longest_s": longest,
        "calls": server.calls, "first_call_s": first, "rss_mib": measured.peak_rss_mib,
        "in_flight_max": server.in_flight_max, "latency": latency, "cpu_s": measured.cpu_s, "waits": measured.waits,
        "timeline": f"first call at {first:.2f} s, last reply at {last:.2f} s, exit at {measured.wall_s:.2f} s",
    }


class GridServer(TimedServer):
    """The stub: each request's timeline label is its model (the arm) and its first
    user message (the task, which names the stream)."""

    def _reply(self, request: Any) -> Any:
        reply = super()._reply(request)
        self._local.label = f"{request.body.get('model', '?')}\0{self._local.label}"
        return reply


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="8,32", help="comma-separated arm counts (chains = 2 x arms)")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per model call")
    parser.add_argument("--cap", type=int, default=8, help="max_connections of the capped row (0: no such row)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the one with the median wall is shown")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    arm_counts = [int(part) for part in args.arms.split(",") if part.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="bench-grid-"))
    rows = []
    try:
        stub_fast, stub_nagle = stub_round_trip_ms(True), stub_round_trip_ms(False, calls=10)
        with GridServer(latency_s=args.latency) as server:
            plans = [(arms, None) for arms in arm_counts] + ([(max(arm_counts), args.cap)] if args.cap else [])
            for arms, cap in plans:
                runs = []
                for attempt in range(1, max(1, args.repeat) + 1):
                    label = f"{arms * 2} chains" + (f", max_connections {cap}" if cap else "")
                    print(f"[bench_grid] {label} (run {attempt}/{args.repeat}) ...", file=sys.stderr, flush=True)
                    runs.append(measure(server, workdir, arms, cap, args.latency, attempt))
                runs.sort(key=lambda row: row["wall_s"])
                rows.append(runs[len(runs) // 2])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"grid: the sample streams (2 x 12 tasks, 24 calls a chain) x arms, model latency {args.latency * 1000:.0f} ms")
    print(load_average())
    print(f"stub at latency 0, median per call through the model client: {stub_fast:.2f} ms with Nagle off "
          f"(TCP_NODELAY, used here), {stub_nagle:.1f} ms with http.server's default (delayed ACK)\n")
    header = (f"{'row':<28} {'wall s':>7} {'longest chain s':>15} {'ratio':>6} {'ideal s':>8} {'first call s':>12} "
              f"{'peak RSS MiB':>12} {'in flight':>9} {'calls':>6} {'CPU s':>6} {'waits':>6}  verdict")
    print(header)
    print("-" * len(header))
    ok = True
    for row in rows:
        verdicts = []
        if row["cap"] is None:
            ideal = row["longest_s"]
            within = row["wall_s"] <= WALL_TARGET * ideal
            verdicts.append(f"wall <= {WALL_TARGET} x longest {'OK' if within else 'MISSED'}")
        else:
            ideal = row["calls"] * row["latency"] / row["cap"]
            within = row["wall_s"] <= CAP_WALL_TARGET * ideal and row["in_flight_max"] == row["cap"]
            verdicts.append(f"in flight == {row['cap']} and wall <= {CAP_WALL_TARGET} x calls x latency / "
                            f"{row['cap']} {'OK' if within else 'MISSED'}")
        first_ok = row["first_call_s"] <= FIRST_CALL_TARGET_S
        rss_ok = row["rss_mib"] <= RSS_TARGET_MIB
        verdicts.append(f"first call <= {FIRST_CALL_TARGET_S:g} s {'OK' if first_ok else 'MISSED'}")
        verdicts.append(f"RSS <= 1 GiB {'OK' if rss_ok else 'MISSED'}")
        ok &= within and first_ok and rss_ok
        label = f"{row['chains']} chains" + (f", max_connections {row['cap']}" if row["cap"] else "")
        print(f"{label:<28} {row['wall_s']:>7.2f} {row['longest_s']:>15.2f} {row['wall_s'] / ideal:>6.3f} "
              f"{ideal:>8.2f} {row['first_call_s']:>12.2f} {row['rss_mib']:>12.0f} {row['in_flight_max']:>9} "
              f"{row['calls']:>6} {row['cpu_s']:>6.2f} {row['waits']:>6}  {'; '.join(verdicts)}")
    for row in rows:
        label = f"{row['chains']} chains" + (f", max_connections {row['cap']}" if row["cap"] else "")
        print(f"{label}: {row['timeline']}")
    print("wall: the whole evomemory run command; longest chain s: the server's time answering that chain's "
          "calls, summed; ideal: the longest chain (uncapped) or calls x latency / max_connections (capped); "
          "ratio = wall / ideal; first call: from the command's start to the first request's arrival; CPU s: "
          "user + sys of the command; waits: its voluntary context switches (a thread waiting for a lock, another "
          "thread, a reply or the disk), which the load does not change, where it changes wall time")
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    raise SystemExit(main())
