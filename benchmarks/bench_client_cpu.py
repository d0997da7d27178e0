"""CPU one model call costs in the OpenAI-compatible client, beside the standard library's floor.

    python benchmarks/bench_client_cpu.py [--calls 2000] [--threads 1,16] [--pythonpath OTHER_CHECKOUT]

Many chains in one process (``evomemory run --chains N``) share one interpreter lock:
every millisecond of CPU a call costs on the client side is a turn the other chains
wait for (issue 38). Here ``OpenAICompatibleModel.complete`` is called ``--calls``
times against the stub (``bench_harness.TimedServer``, latency 0, Nagle off), from
1 thread and from 16 (each thread its own model, as chains have), and the same POST
(same body and headers) through a bare ``http.client.HTTPConnection`` kept alive,
which is the floor of any client on the standard library. The stub runs in a
process of its own and every measurement in a fresh one, so the figure is the
client's CPU (``time.process_time()``) alone. ``--pythonpath`` measures another
checkout's client on the same stub (before/after a change).

Target: the client's CPU per call at most 2.5 x the floor's, from 1 thread and
from 16. Figures on a shared machine are noisy; the load average is printed with
the table, and ``--repeat`` keeps the cheapest of several runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

TARGET_RATIO = 2.5

MESSAGES = [
    {"role": "system", "content": "You are a helpful agent. Answer with the final_answer tool. " * 8},
    {"role": "user", "content": "Task probe-17: what is 2 + 2? Give the number only."},
]
TOOLS = [{"type": "function", "function": {
    "name": "final_answer", "description": "Give the final answer.",
    "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
}}]


def _serve() -> None:
    """The stub, in this process until stdin closes; prints its base URL."""
    from bench_harness import TimedServer  # puts this checkout on the path

    with TimedServer(latency_s=0.0, nodelay=True) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def _drive(base_url: str, mode: str, threads: int, calls: int) -> dict[str, float]:
    """``calls`` calls spread over ``threads`` threads; this process's CPU per call."""
    if mode == "client":
        from pytest_evomemory.config import ModelConfig
        from pytest_evomemory.models.openai_compat import OpenAICompatibleModel

        config = ModelConfig(base_url=base_url, model="probe", api_key_env=None, cache=False, max_retries=0)

        def make() -> Any:
            model = OpenAICompatibleModel(config)
            return lambda: model.complete(MESSAGES, TOOLS)
    else:
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(base_url)
        body = json.dumps({"model": "probe", "messages": MESSAGES, "temperature": 0.0, "tools": TOOLS,
                           "stream": False}).encode()
        headers = {"Authorization": "Bearer no-key", "Content-Type": "application/json",
                   "Accept": "application/json", "User-Agent": "pytest-evomemory"}

        def make() -> Any:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port)

            def call() -> None:
                connection.request("POST", parts.path + "/chat/completions", body=body, headers=headers)
                json.loads(connection.getresponse().read())

            return call

    callers = [make() for _ in range(threads)]
    for call in callers:
        call()  # connections open, modules imported: a run's steady state
    each = max(1, calls // threads)
    times: list[float] = []

    def loop(call: Any) -> None:
        for _ in range(each):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)

    cpu = time.process_time()
    if threads == 1:
        loop(callers[0])
    else:
        workers = [threading.Thread(target=loop, args=(call,)) for call in callers]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    cpu = time.process_time() - cpu
    return {"cpu_ms": cpu / (each * threads) * 1000, "median_ms": statistics.median(times) * 1000}


def measure(base_url: str, mode: str, threads: int, calls: int, pythonpath: str, repeat: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    runs = []
    for _ in range(repeat):
        output = subprocess.run(
            [sys.executable, __file__, "--drive", base_url, "--mode", mode, "--threads", str(threads),
             "--calls", str(calls)],
            env=env, check=True, capture_output=True, text=True,
        ).stdout
        runs.append(json.loads(output.strip().splitlines()[-1]))
    return min(runs, key=lambda run: run["cpu_ms"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement (default 2000)")
    parser.add_argument("--threads", default="1,16", help="comma-separated thread counts (default 1,16)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per row; the cheapest is shown (default 2)")
    parser.add_argument("--pythonpath", default=str(HERE.parent), help="the checkout whose client is measured")
    parser.add_argument("--strict", action="store_true", help="exit 1 on a missed target")
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="client", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        print(json.dumps(_drive(args.drive, args.mode, int(args.threads), args.calls)))
        return 0
    server = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path[:0] = {[str(HERE), str(HERE.parent)]!r}; "
                               "import bench_client_cpu; bench_client_cpu._serve()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        rows = []
        for threads in [int(part) for part in args.threads.split(",") if part.strip()]:
            client = measure(base_url, "client", threads, args.calls, args.pythonpath, args.repeat)
            floor = measure(base_url, "raw", threads, args.calls, args.pythonpath, args.repeat)
            rows.append((threads, client, floor))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)

    sys.path.insert(0, str(HERE))
    from bench_harness import load_average

    print(f"model client CPU per call against the stub at latency 0 (client: {args.pythonpath})")
    print(load_average())
    header = (f"{'threads':>7} {'client CPU ms':>13} {'http.client CPU ms':>18} {'ratio':>6} "
              f"{'client median ms':>16} {'http.client median ms':>21}  verdict")
    print(header)
    print("-" * len(header))
    ok = True
    for threads, client, floor in rows:
        ratio = client["cpu_ms"] / floor["cpu_ms"]
        within = ratio <= TARGET_RATIO
        ok &= within
        print(f"{threads:>7} {client['cpu_ms']:>13.3f} {floor['cpu_ms']:>18.3f} {ratio:>6.2f} "
              f"{client['median_ms']:>16.3f} {floor['median_ms']:>21.3f}  "
              f"client <= {TARGET_RATIO} x http.client {'OK' if within else 'MISSED'}")
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
