"""Harness overhead per task, a peer harness for scale, and the full-size memory footprint.

    python benchmarks/bench_harness.py [--tasks 300] [--small 20] [--repeat 2]
                                       [--mmlu-tasks 12032] [--skip peer,footprint]

Three measurements (issue 8), each in fresh subprocesses so that start-up costs and
peak RSS are those a user sees:

* overhead: TinyAgent (``kind: tiny``, ``deterministic_recall``, cache off) against
  the ScriptedServer with zero latency, on a ``files`` stream of generated tasks,
  run by ``pytest --evomemory-config=...`` and by the pytest-free ``run_benchmark``.
  The time the server spent answering is subtracted, and pytest's fixed start-up
  is removed by taking the slope between a small and a large run, so what is left
  is what one task (task turn + feedback turn + reset) costs in the harness,
  the model client and HTTP included. Target: < 5 ms per task.
* peer: inspect_ai with its ``mockllm`` model, one ``generate()`` + ``match()`` per
  sample, same slope method. Its mockllm counts tokens with tiktoken, which
  downloads its encoding on first use; we hand it outputs with usage set so that it
  runs offline. If inspect_ai is not installed or fails, the row says so.
* footprint: a full-size MMLU-Pro-shaped stream (12,032 tasks, 10 options each)
  run by ``recall_baseline`` with the in-process memory under pytest; peak RSS of
  the pytest process (``wait4``) and wall time. Target: < 1 GiB.

Figures on a shared 2-core machine are noisy; ``--repeat`` keeps the fastest of
several runs per size, which is the usual way to estimate cost under
interference. The 1-minute load average is printed with the table.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_evomemory.testing.scripted_server import ScriptedServer

OVERHEAD_TARGET_MS = 5.0
RSS_TARGET_MIB = 1024.0


# --------------------------------------------------------------------------- shared helpers


class TimedServer(ScriptedServer):
    """A ScriptedServer that adds up the time its handlers spend on each request.

    The harness's overhead is the run's wall time minus this: the model's share.
    Timing the handler (not just the policy) charges JSON and HTTP work on the
    server side to the model, which is where a real server would spend it.
    """

    def __init__(self, *args: Any, nodelay: bool = True, **kwargs: Any) -> None:
        self.nodelay = nodelay
        self.busy_s = 0.0
        self.calls = 0
        #: (arrival, departure, first user message) of each request, perf_counter seconds
        self.timeline: list[tuple[float, float, str]] = []
        self._busy_lock = threading.Lock()
        self._local = threading.local()  # one handler thread serves one request at a time
        super().__init__(*args, **kwargs)

    def _reply(self, request: Any) -> Any:
        self._local.label = _first_user_message(request.body)
        return super()._reply(request)

    def _handler_class(self) -> type:
        base = super()._handler_class()
        server = self

        class TimedHandler(base):  # type: ignore[misc, valid-type]
            # The stock handler writes headers and body separately; with Nagle on,
            # the body waits for the client's delayed ACK (~40 ms a call on Linux),
            # which is the stand-in server's cost, not the harness's. See
            # docs/performance.md ("ScriptedServer and Nagle").
            disable_nagle_algorithm = server.nodelay

            def do_POST(self) -> None:
                started = time.perf_counter()
                try:
                    super().do_POST()
                finally:
                    finished = time.perf_counter()
                    with server._busy_lock:
                        server.busy_s += finished - started
                        server.calls += 1
                        server.timeline.append((started, finished, getattr(server._local, "label", "")))

        return TimedHandler

    def reset_counters(self) -> None:
        with self._busy_lock:
            self.busy_s, self.calls = 0.0, 0
            self.timeline.clear()
        with self._lock:
            self.requests.clear()


def _first_user_message(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def clean_env(**extra: str) -> dict[str, str]:
    """The user's environment without settings that would change the run.

    ``PYTHONDONTWRITEBYTECODE`` goes too: it is set on some build machines (this
    project's among them), and with it every process recompiles the package and
    pytest re-rewrites the asserts of every plugin module at each start (about
    0.2 s of CPU per process, so per xdist worker), where a user's Python writes
    and reuses bytecode caches.
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", **extra)
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_AUTO_NUM_WORKERS", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


@dataclass
class Measured:
    wall_s: float
    peak_rss_mib: float
    output: str
    returncode: int
    #: CPU seconds (user + sys) of the command and the children it waited for: on a
    #: machine shared with others, what the command costs, where wall time is the load's
    cpu_s: float = 0.0
    #: voluntary context switches (the process gave up its core: it waited for a
    #: lock, a thread, a reply or the disk), counted, so comparable at any load
    waits: int = 0


def run_measured(command: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 3600) -> Measured:
    """Wall seconds and peak RSS (MiB) of ``command`` and the children it waited for."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as sink:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        sink.seek(0)
        output = sink.read().decode("utf-8", "replace")
    return Measured(
        elapsed, usage.ru_maxrss / 1024.0, output, process.returncode, usage.ru_utime + usage.ru_stime, usage.ru_nvcsw
    )


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def echo_tasks(count: int, prefix: str = "t") -> list[dict[str, Any]]:
    """Tasks whose answer is the prompt's last line: the echo policy gets them right,
    so every episode completes and a wrong accuracy flags a broken run."""
    return [
        {"id": f"{prefix}{index}", "prompt": f"Task {prefix}{index}: repeat the last line.\nanswer-{index}",
         "target": f"answer-{index}"}
        for index in range(count)
    ]


def write_run_config(
    directory: Path,
    streams: dict[str, Path],
    agent: str,
    *,
    memory: str = "backend: inprocess\n",
    name: str = "bench",
) -> Path:
    """A run config with a ``files`` benchmark over ``streams`` (name -> JSONL path)."""
    files = "".join(
        f"    - {{name: {stream}, path: {json.dumps(str(path))}, match_mode: exact}}\n"
        for stream, path in streams.items()
    )
    (directory / "benchmark.yaml").write_text(f"benchmark: files\nfiles:\n{files}", encoding="utf-8")
    (directory / "agent.yaml").write_text(agent, encoding="utf-8")
    (directory / "memory.yaml").write_text(memory, encoding="utf-8")
    run = directory / "run.yaml"
    run.write_text(
        f"name: {name}\nbenchmark: benchmark.yaml\nagent: agent.yaml\nmemory: memory.yaml\noutput_dir: results\n",
        encoding="utf-8",
    )
    return run


def tiny_agent_yaml(base_url: str, strategy: str = "deterministic_recall") -> str:
    return textwrap.dedent(
        f"""\
        kind: tiny
        memory_strategy: {strategy}
        max_steps: 4
        model:
          model: scripted-model
          base_url: {base_url}
          api_key_env: null
          cache: false
          timeout_s: 30
          max_retries: 1
          retry_backoff_s: 0
        """
    )


def pytest_command(run: Path, *extra: str, foreign_plugins: bool = False) -> list[str]:
    """The user's command line, with pytest's temporary directory beside the run.

    Without ``--basetemp`` pytest deletes the oldest of the machine's earlier
    ``/tmp/pytest-of-<user>`` directories at session end; after a test-suite run
    that took 0.2 s on the critical path, a cost of the machine's history rather
    than of the harness. Plugins that installing pytest-evomemory does not bring
    (this venv's test tools: hypothesis, pytest-randomly) are switched off unless
    ``foreign_plugins``: the figures are those of the harness as a user installs it.
    """
    disabled = [] if foreign_plugins else [arg for name in foreign_pytest_plugins() for arg in ("-p", f"no:{name}")]
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *disabled,
        f"--basetemp={run.parent / 'pytest-tmp'}", f"--evomemory-config={run}", *extra,
    ]


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def harness_distributions(root: str = "pytest-evomemory") -> set[str]:
    """pytest-evomemory and everything its requirements pull in (no extras)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    pending = [root]
    while pending:
        name = pending.pop()
        if _dist_key(name) in seen:
            continue
        seen.add(_dist_key(name))
        try:
            requirements = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requirements:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return seen


@functools.cache
def foreign_pytest_plugins() -> list[str]:
    """Entry-point names of installed pytest plugins from outside the harness's install."""
    harness = harness_distributions()
    names = []
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        dist = entry_point.dist.name if entry_point.dist is not None else ""
        if _dist_key(dist) not in harness:
            names.append(entry_point.name)
    return sorted(set(names))


def read_summary(run: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run.parent / "results" / "summary.json").read_text(encoding="utf-8"))
    return summary


def load_average() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unavailable"
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def slope(small: tuple[int, float], large: tuple[int, float]) -> float:
    (n_small, t_small), (n_large, t_large) = small, large
    return (t_large - t_small) / (n_large - n_small) if n_large != n_small else t_large / max(1, n_large)


# --------------------------------------------------------------------------- overhead


RUN_BENCHMARK_SNIPPET = """
import json, sys, time
from pathlib import Path
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory import run_benchmark
config = load_run_config(sys.argv[1])
started = time.perf_counter()
summary = run_benchmark(config, Path(sys.argv[2]))
print(json.dumps({"seconds": time.perf_counter() - started, "overall": summary["overall"]}))
"""


@dataclass
class OverheadSample:
    tasks: int
    wall_s: float
    server_s: float
    calls: int
    accuracy: float | None
    #: the whole process's CPU seconds and voluntary context switches (Measured)
    cpu_s: float = 0.0
    waits: int = 0

    @property
    def harness_s(self) -> float:
        return self.wall_s - self.server_s


@dataclass
class OverheadResult:
    path: str
    samples: list[OverheadSample] = field(default_factory=list)

    def best(self, tasks: int) -> OverheadSample:
        return min((s for s in self.samples if s.tasks == tasks), key=lambda s: s.harness_s)

    def per_task_ms(self, small: int, large: int) -> float:
        a, b = self.best(small), self.best(large)
        return 1000 * slope((a.tasks, a.harness_s), (b.tasks, b.harness_s))

    def per_task_cpu_ms(self, small: int, large: int) -> float:
        """CPU per task (slope), of the run that gave the wall figure at each size."""
        a, b = self.best(small), self.best(large)
        return 1000 * slope((a.tasks, a.cpu_s), (b.tasks, b.cpu_s))

    def waits_per_task(self, small: int, large: int) -> float:
        a, b = self.best(small), self.best(large)
        return slope((a.tasks, float(a.waits)), (b.tasks, float(b.waits)))

    def fixed_s(self, small: int, large: int) -> float:
        """The intercept: start-up and teardown that every run pays once."""
        b = self.best(large)
        return b.harness_s - b.tasks * self.per_task_ms(small, large) / 1000


def measure_overhead(workdir: Path, sizes: list[int], repeat: int) -> list[OverheadResult]:
    env = clean_env(EVOMEMORY_CACHE_DIR=str(workdir / "cache"))
    pytest_result, plain_result = OverheadResult("pytest"), OverheadResult("run_benchmark")
    with TimedServer(latency_s=0.0) as server:
        for size in sizes:
            directory = workdir / f"overhead-{size}"
            directory.mkdir(parents=True, exist_ok=True)
            data = directory / "tasks.jsonl"
            write_jsonl(data, echo_tasks(size))
            run = write_run_config(directory, {"harness": data}, tiny_agent_yaml(server.base_url))
            for _ in range(repeat):
                server.reset_counters()
                measured = run_measured(pytest_command(run), directory, env)
                if measured.returncode != 0:
                    raise SystemExit(f"pytest overhead run failed ({measured.returncode}):\n{measured.output[-3000:]}")
                overall = read_summary(run)["overall"]
                pytest_result.samples.append(OverheadSample(
                    size, measured.wall_s, server.busy_s, server.calls, overall.get("accuracy"),
                    measured.cpu_s, measured.waits,
                ))
                server.reset_counters()
                plain = run_measured(
                    [sys.executable, "-c", RUN_BENCHMARK_SNIPPET, str(run), str(directory / "plain")], directory, env
                )
                if plain.returncode != 0:
                    raise SystemExit(f"run_benchmark overhead run failed:\n{plain.output[-3000:]}")
                report = json.loads(plain.output.strip().splitlines()[-1])
                plain_result.samples.append(OverheadSample(
                    size, report["seconds"], server.busy_s, server.calls, report["overall"].get("accuracy"),
                    plain.cpu_s, plain.waits,
                ))
    return [pytest_result, plain_result]


def measure_round_trip(calls: int = 50) -> dict[str, float]:
    """ms per raw HTTP round trip to the ScriptedServer, stock and with TCP_NODELAY.

    Shows the stand-in server's Nagle / delayed-ACK stall (see TimedServer) apart
    from anything the harness does.
    """
    import http.client

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Task: echo\nx"}]})
    result = {}
    for label, nodelay in (("stock", False), ("nodelay", True)):
        with TimedServer(nodelay=nodelay) as server:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            started = time.perf_counter()
            for _ in range(calls):
                connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
                connection.getresponse().read()
            result[label] = 1000 * (time.perf_counter() - started) / calls
            connection.close()
    return result


# --------------------------------------------------------------------------- peer harness


INSPECT_SNIPPET = """
import json, sys, time
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

def output(messages, tools, tool_choice, config):
    # usage set: mockllm would otherwise count tokens with tiktoken (a download)
    answer = messages[-1].text.strip().splitlines()[-1]
    result = ModelOutput.from_content(model="mockllm", content=answer)
    result.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
    return result

count, log_dir = int(sys.argv[1]), sys.argv[2]
samples = [Sample(input=f"Task {i}: repeat the last line.\\nanswer-{i}", target=f"answer-{i}") for i in range(count)]
started = time.perf_counter()
logs = inspect_eval(
    Task(dataset=samples, solver=[generate()], scorer=match(location="exact")),
    model=get_model("mockllm/model", custom_outputs=output),
    log_dir=log_dir, display="none", max_samples=int(sys.argv[3]) if len(sys.argv) > 3 else None,
)
log = logs[0]
accuracy = log.results.scores[0].metrics["accuracy"].value if log.results and log.results.scores else None
print(json.dumps({"seconds": time.perf_counter() - started, "status": log.status, "accuracy": accuracy,
                  "error": str(log.error.message)[:300] if log.error else None}))
"""


@dataclass
class PeerResult:
    label: str
    per_sample_ms: float | None = None
    fixed_s: float | None = None
    accuracy: float | None = None
    note: str = ""


def measure_peer(workdir: Path, sizes: list[int], repeat: int) -> list[PeerResult]:
    try:
        import importlib.metadata as metadata

        version = metadata.version("inspect_ai")
    except Exception:
        return [PeerResult("inspect_ai mockllm", note="inspect_ai not installed (pip install inspect_ai)")]
    env = clean_env(INSPECT_LOG_DIR=str(workdir / "inspect-logs"), INSPECT_DISPLAY="none")
    results = []
    # Default concurrency (inspect's own choice) and one sample at a time (as a stream runs).
    for label, extra in ((f"inspect_ai {version} mockllm", []), (f"inspect_ai {version} mockllm, max_samples=1", ["1"])):
        best: dict[int, tuple[float, float | None]] = {}
        try:
            for size in sizes:
                for _ in range(repeat):
                    measured = run_measured(
                        [sys.executable, "-c", INSPECT_SNIPPET, str(size), str(workdir / "inspect-logs"), *extra],
                        workdir, env, timeout_s=900,
                    )
                    lines = measured.output.strip().splitlines()
                    if measured.returncode != 0 or not lines or not lines[-1].startswith("{"):
                        raise RuntimeError(f"exit {measured.returncode}: {measured.output[-300:]}")
                    report = json.loads(lines[-1])
                    if report["status"] != "success":
                        raise RuntimeError(f"status {report['status']}: {report['error']}")
                    if size not in best or report["seconds"] < best[size][0]:
                        best[size] = (report["seconds"], report["accuracy"])
        except Exception as error:
            results.append(PeerResult(label, note=f"could not run: {error}"[:400]))
            continue
        small, large = min(best), max(best)
        per = slope((small, best[small][0]), (large, best[large][0]))
        results.append(PeerResult(label, 1000 * per, best[large][0] - large * per, best[large][1]))
    return results


# --------------------------------------------------------------------------- footprint


def mmlu_like_tasks(count: int) -> list[dict[str, Any]]:
    """MMLU-Pro-sized records: a ~40-word question and 10 options each."""
    letters = "ABCDEFGHIJ"
    records = []
    for index in range(count):
        records.append({
            "id": f"mmlu-{index}",
            "prompt": f"Synthetic question {index} about topic {index % 14}: which option holds? "
            + " ".join(f"w{(index * 7 + k) % 997}" for k in range(30)),
            "target": letters[index % 10],
            "choices": [f"Option {letter} of item {index}: value {(index + k) % 101}" for k, letter in enumerate(letters)],
            "metadata": {"category": f"category-{index % 14}", "src": f"synthetic-{index % 57}"},
        })
    return records


@dataclass
class FootprintResult:
    label: str
    tasks: int
    done: int
    wall_s: float
    peak_rss_mib: float
    finished: bool
    note: str


def _tasks_done(results: Path) -> int:
    """Tasks scored so far: scores.jsonl is appended task by task, so it survives a kill."""
    try:
        with (results / "scores.jsonl").open("rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def measure_footprint(workdir: Path, tasks: int, strategy: str, backend: str, timeout_s: float) -> FootprintResult:
    directory = workdir / f"footprint-{strategy}-{backend.replace(':', '_')}"
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "mmlu_pro.jsonl"
    write_jsonl(data, mmlu_like_tasks(tasks))
    run = write_run_config(
        directory, {"mmlu_pro": data}, f"kind: recall_baseline\nmemory_strategy: {strategy}\n",
        memory=f"backend: {backend}\n", name="footprint",
    )
    measured = run_measured(pytest_command(run), directory, clean_env(), timeout_s=timeout_s)
    lines = measured.output.strip().splitlines()
    finished = measured.returncode == 0
    if finished:
        done, note = tasks, lines[-1].strip("= ") if lines else ""
    elif measured.wall_s >= timeout_s:
        done = _tasks_done(directory / "results")
        note = f"stopped at the {timeout_s:.0f} s cap after ~{done} tasks"
    else:
        raise SystemExit(f"footprint run failed ({measured.returncode}):\n{measured.output[-3000:]}")
    label = (
        f"recall_baseline, {backend} memory" if strategy != "none" else "recall_baseline, no memory (strategy none)"
    )
    return FootprintResult(label, tasks, done, measured.wall_s, measured.peak_rss_mib, finished, note)


# --------------------------------------------------------------------------- report


def _print_overhead(
    small: int,
    large: int,
    overhead: list[OverheadResult],
    peers: list[PeerResult] | None,
    round_trip: dict[str, float],
    emit: Callable[[str], None],
) -> bool:
    ok = True
    emit(f"harness overhead: TinyAgent + ScriptedServer (latency 0), {small} vs {large} tasks, fastest of repeats")
    emit(f"{load_average()}\n")
    header = f"{'path':<38} {'per task ms':>11} {'fixed s':>8} {'server ms/call':>14} {'calls/task':>10} {'acc':>5}  target"
    emit(header)
    emit("-" * len(header))
    for result in overhead:
        per_task = result.per_task_ms(small, large)
        big = result.best(large)
        within = per_task < OVERHEAD_TARGET_MS
        ok &= within
        emit(
            f"{result.path:<38} {per_task:>11.2f} {result.fixed_s(small, large):>8.2f} "
            f"{1000 * big.server_s / max(1, big.calls):>14.2f} {big.calls / max(1, big.tasks):>10.1f} "
            f"{(big.accuracy if big.accuracy is not None else float('nan')):>5.2f}  "
            f"< {OVERHEAD_TARGET_MS:.0f} ms {'OK' if within else 'MISSED'}"
        )
    if peers is not None:
        for peer in peers:
            if peer.per_sample_ms is None:
                emit(f"{peer.label:<38} {'n/a':>11}  {peer.note}")
            else:
                emit(
                    f"{peer.label:<38} {peer.per_sample_ms:>11.2f} {peer.fixed_s or 0:>8.2f} {'in-proc':>14} "
                    f"{1:>10.1f} {(peer.accuracy if peer.accuracy is not None else float('nan')):>5.2f}  (peer, per sample)"
                )
        emit("(peer: one in-process mock generate per sample, no HTTP, no feedback turn; ours: two HTTP model calls per task)")
    for result in overhead:
        emit(
            f"{result.path}: CPU {result.per_task_cpu_ms(small, large):.2f} ms per task (user + sys of the whole "
            f"process, the same slope), {result.waits_per_task(small, large):.1f} voluntary context switches per task"
        )
    if small == large:
        emit("(one size only: per task = whole run / tasks, start-up included; use --small < --tasks for the slope)")
    emit(
        f"ScriptedServer raw HTTP round trip: {round_trip['stock']:.2f} ms stock, {round_trip['nodelay']:.2f} ms with "
        "TCP_NODELAY (the overhead runs use TCP_NODELAY; see docs/performance.md)"
    )
    return ok


def print_table(
    sizes: list[int],
    overhead: list[OverheadResult],
    peers: list[PeerResult] | None,
    round_trip: dict[str, float],
    footprints: list[FootprintResult],
    emit: Callable[[str], None] = print,
) -> bool:
    ok = True
    if overhead:
        ok = _print_overhead(min(sizes), max(sizes), overhead, peers, round_trip, emit)
    if footprints:
        emit("")
        header = f"{'footprint: pytest, MMLU-Pro-sized files stream':<58} {'tasks':>6} {'wall s':>8} {'peak RSS MiB':>13}  target"
        emit(header)
        emit("-" * len(header))
        for footprint in footprints:
            within = footprint.peak_rss_mib < RSS_TARGET_MIB
            ok &= within and footprint.finished
            emit(
                f"{footprint.label:<58} {footprint.done:>6} {footprint.wall_s:>8.1f} {footprint.peak_rss_mib:>13.0f}  "
                f"< {RSS_TARGET_MIB:.0f} MiB {'OK' if within else 'MISSED'}"
                + ("" if footprint.finished else " (unfinished run)")
            )
            emit(f"  {footprint.note}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=300, help="tasks in the large overhead run")
    parser.add_argument("--small", type=int, default=20, help="tasks in the small overhead run (slope base)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per size; the fastest counts")
    parser.add_argument("--mmlu-tasks", type=int, default=12_032, help="tasks in the footprint run")
    parser.add_argument(
        "--footprint-memory", default="inprocess",
        help="memory backend of the footprint run (a module:factory to try another implementation)",
    )
    parser.add_argument(
        "--footprint-timeout", type=float, default=600.0,
        help="seconds before an unfinished footprint run is stopped (its peak RSS so far is reported)",
    )
    parser.add_argument("--skip", default="", help="comma-separated: overhead, peer, footprint")
    parser.add_argument("--keep", type=Path, help="work here and keep the files")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    large = max(1, args.tasks)
    sizes = sorted({max(1, min(args.small, large)), large})
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-harness-"))
    workdir.mkdir(parents=True, exist_ok=True)

    overhead: list[OverheadResult] = []
    round_trip: dict[str, float] = {}
    if "overhead" not in skip:
        print(f"[bench_harness] overhead runs: {sizes} tasks x {args.repeat} ...", file=sys.stderr, flush=True)
        overhead = measure_overhead(workdir, sizes, max(1, args.repeat))
        round_trip = measure_round_trip()
    peers = None
    if "peer" not in skip:
        print("[bench_harness] peer harness (inspect_ai mockllm) ...", file=sys.stderr, flush=True)
        peers = measure_peer(workdir, sizes, max(1, args.repeat))
    footprints = []
    if "footprint" not in skip:
        for strategy in ("deterministic_recall", "none"):
            print(f"[bench_harness] footprint run: {args.mmlu_tasks} tasks, {strategy} ...", file=sys.stderr, flush=True)
            footprints.append(
                measure_footprint(workdir, max(1, args.mmlu_tasks), strategy, args.footprint_memory, args.footprint_timeout)
            )
    ok = print_table(sizes, overhead, peers, round_trip, footprints)
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    raise SystemExit(main())
