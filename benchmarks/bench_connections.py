"""Connection cap across processes: ``model.max_connections`` holds, and costs no throughput.

    python benchmarks/bench_connections.py [--latency 0.1] [--seconds 8] [--processes 2] [--cap 4]

Issue 27's target: with ``max_connections: 4`` and 8 workers the server never sees
more than 4 requests at once, and the throughput is within 10 % of 4 workers
without a cap (ScriptedServer, 100 ms per call).

A worker here is one model client (``OpenAICompatibleModel``, the plugin's own)
calling the server in a loop; workers run as threads spread over ``--processes``
processes, all sharing one session directory (``EVOMEMORY_SESSION_DIR``), as the
xdist workers of a session do. Eight pytest workers on a 2-core machine are eight
Python processes competing for the cores, so by default the 8 workers are 2
processes x 4 threads: the slots are ``flock``ed files, which exclude threads of
one process exactly as they exclude processes (each request opens its own slot
file), so the cap is exercised the same way. ``--processes 8 --threads 1`` runs
the literal layout where the cores allow it.

Two runs, each ``--seconds`` long after every worker is ready:

* ``uncapped``: ``--cap`` workers, no ``max_connections`` (the reference);
* ``capped``:   2 x ``--cap`` workers with ``max_connections: --cap``.

The table gives each run's calls per second and the server's peak of concurrent
requests; the verdict line checks peak <= cap and capped >= 0.9 x uncapped.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import load_average

THROUGHPUT_TARGET = 0.9
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


def _worker_process(base_url: str, cap: int | None, threads: int, seconds: float, ready: Any, results: Any) -> None:
    from pytest_evomemory.config import ModelConfig
    from pytest_evomemory.models.openai_compat import OpenAICompatibleModel

    config = ModelConfig(
        base_url=base_url, model="bench", api_key_env=None, cache=False, max_retries=0,
        timeout_s=30, max_concurrency=256, max_connections=cap,
    )
    models = [OpenAICompatibleModel(config) for _ in range(threads)]
    counts = [0] * threads
    ready.wait()  # every process imported and built: the runs start together
    stop_at = time.monotonic() + seconds

    def loop(index: int) -> None:
        while time.monotonic() < stop_at:
            models[index].complete(MESSAGES, [])
            counts[index] += 1

    workers = [threading.Thread(target=loop, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put(sum(counts))


def measure(latency: float, seconds: float, processes: int, threads: int, cap: int | None) -> dict[str, Any]:
    from pytest_evomemory.models.limits import SESSION_DIR_ENV
    from pytest_evomemory.testing.scripted_server import ScriptedServer

    directory = tempfile.mkdtemp(prefix="bench-connections-")
    os.environ[SESSION_DIR_ENV] = directory
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    ready = context.Barrier(processes + 1)
    try:
        with ScriptedServer(latency_s=latency) as server:
            children = [
                context.Process(target=_worker_process, args=(server.base_url, cap, threads, seconds, ready, results))
                for _ in range(processes)
            ]
            for child in children:
                child.start()
            ready.wait(timeout=120)
            started = time.monotonic()
            calls = sum(results.get(timeout=seconds + 120) for _ in children)
            wall = time.monotonic() - started
            for child in children:
                child.join(timeout=30)
            peak = server.in_flight_max
    finally:
        del os.environ[SESSION_DIR_ENV]
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "workers": processes * threads, "layout": f"{processes}x{threads}", "cap": cap,
        "calls": calls, "wall": wall, "per_second": calls / wall, "peak": peak,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.1, help="server seconds per call (default 0.1)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run (default 8)")
    parser.add_argument("--cap", type=int, default=4, help="max_connections of the capped run (default 4)")
    parser.add_argument("--processes", type=int, default=2, help="processes the workers run in (default 2)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on a missed target")
    args = parser.parse_args(argv)
    cap = args.cap
    if cap % args.processes or (2 * cap) % args.processes:
        parser.error("--processes must divide --cap (the workers are spread evenly)")
    uncapped = measure(args.latency, args.seconds, args.processes, cap // args.processes, None)
    capped = measure(args.latency, args.seconds, args.processes, 2 * cap // args.processes, cap)
    ideal = cap / args.latency
    print(f"connection cap: ScriptedServer {args.latency * 1000:g} ms per call, {args.seconds:g} s per run, "
          f"{load_average()}")
    print(f"{'run':<10} {'workers':>7} {'layout':>7} {'cap':>4} {'calls':>6} {'calls/s':>8} {'of ideal':>8} {'peak':>5}")
    for name, row in (("uncapped", uncapped), ("capped", capped)):
        print(f"{name:<10} {row['workers']:>7} {row['layout']:>7} {row['cap'] or '-':>4} {row['calls']:>6} "
              f"{row['per_second']:>8.1f} {row['per_second'] / ideal:>8.0%} {row['peak']:>5}")
    ratio = capped["per_second"] / uncapped["per_second"]
    held = capped["peak"] <= cap
    met = held and ratio >= THROUGHPUT_TARGET
    print(f"peak {capped['peak']} <= cap {cap}: {'yes' if held else 'NO'}; capped / uncapped throughput "
          f"{ratio:.2f} (target >= {THROUGHPUT_TARGET}): {'met' if met else 'MISSED'}")
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
