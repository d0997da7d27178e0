"""Where a memory-library arm's time goes: the library, the embedder, or the harness.

    python benchmarks/bench_library_arms.py                          # sample streams + 1,000 tasks
    python benchmarks/bench_library_arms.py --tasks 0 --embedder bundled   # sample streams, MiniLM
    python benchmarks/bench_library_arms.py --backends mem0 --tasks 1000 --check

Each arm is a whole run (``run_benchmark``, in this process) of the model-free
recall agent (deterministic recall: one recall per task, one retain per feedback:
ExpRAG's retrieve-then-answer) with the library as the memory (``infer: false``),
on the bundled sample streams and on ``--tasks`` generated tasks (one ``files``
stream). Every call the arm makes into these parts is timed, each part's time
counted once (exclusive: the embedder's time inside ``Memory.add`` is the
embedder's):

* **library**: the library's own operations (Mem0's ``Memory.add/search/get/
  delete/reset``; LangGraph's ``InMemoryStore.put/search/delete``);
* **embedder**: the package's embedder the library calls (hashing by default;
  ``--embedder bundled``: the bundled MiniLM, the libraries' default), and how many
  texts it embedded per library operation (1.0 means nothing is embedded twice);
* **harness**, what this package adds around the library: opening each stream's
  store, snapshots after every episode (the backend's own and the slot's label,
  digests and syncs around it) and the journal they are made of (Mem0: the
  points read back from Qdrant's storage after each add; LangMem: each write of the
  store, which runs inside LangGraph's ``put``), teardown, the backend adapter and
  the runtime's observation of it (``adapter``), the recall agent's own code
  (``agent``), scoring with the recall similarity, the run directory's records,
  the HTML report, the run's start and finish (its preflight; its summary, run
  file and the order of its record files), and the rest of the run (the episode
  driver, the turn, the session's bookkeeping);
* **garbage collection**: Python's collector passes, timed apart (``gc.callbacks``)
  and taken out of the part that set them off: a pass scans every object of the
  process, the library's store (Mem0's Qdrant payloads) as much as ours, so it is
  nobody's alone. The table shows the harness share without it (``harness``) and
  with all of it counted as the harness's (``harness+gc``, an upper bound).

The harness's share is its time over the arm's wall time; the target is at most
20 % (``--check`` exits 1 when an arm is over, garbage collection not counted). Import time (the library's and
MiniLM's first load, a first one-task run that imports the rest) is outside the
arm: it is paid once per process and printed apart. Timings are wall-clock on whatever machine runs it; the load average at
the start is printed with the table.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_evomemory import run_benchmark  # noqa: E402
from pytest_evomemory.configs.load import load_run_config  # noqa: E402

TARGET_SHARE = 0.20
HARNESS = ("opening", "snapshots", "journal", "teardown", "adapter", "agent", "scoring", "records", "report",
           "start and finish", "rest of the run")
COLLECTION = "garbage collection"
#: The clock of every part: wall time, or with ``--clock cpu`` the process's CPU time
#: (every thread's: LangGraph embeds search queries in a thread pool), which a
#: loaded machine's scheduling does not stretch.
NOW = time.perf_counter


class Clock:
    """Exclusive time per part, on the thread that runs the arm."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.texts = 0
        self._stack: list[list[Any]] = []  # [part, started, child seconds]
        self._thread = threading.get_ident()
        self._collecting = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks``: a collection pass is its own part, taken out of the part
        whose allocation set it off (it scans the library's objects as much as ours)."""
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._collecting = NOW()
            return
        spent = NOW() - self._collecting
        self.seconds[COLLECTION] += spent
        self.calls[COLLECTION] += 1
        if self._stack:
            self._stack[-1][2] += spent

    def call(self, name: str, function: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, its time counted as ``name`` (no context
        manager: the clock's own cost lands in the caller's part, so it is kept small)."""
        if threading.get_ident() != self._thread:  # the opening thread: counted as "opening"
            return function(*args, **kwargs)
        frame = [name, NOW(), 0.0]
        self._stack.append(frame)
        try:
            return function(*args, **kwargs)
        finally:
            self._stack.pop()
            spent = NOW() - frame[1]
            self.seconds[name] += spent - frame[2]
            self.calls[name] += 1
            if self._stack:
                self._stack[-1][2] += spent


def timed(clock: Clock, owner: Any, method: str, part: str, count_texts: bool = False) -> Callable[[], None]:
    """Wrap ``owner.method`` (a class attribute) so that its calls count as ``part``;
    returns the undo."""
    original = getattr(owner, method)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if count_texts and len(args) > 1 and isinstance(args[1], list):
            clock.texts += len(args[1])
        return clock.call(part, original, args, kwargs)

    setattr(owner, method, wrapper)
    return lambda: setattr(owner, method, original)


def instrument(clock: Clock) -> list[Callable[[], None]]:
    from langgraph.store.memory import InMemoryStore
    from mem0.memory.main import Memory

    import pytest_evomemory.runtime.run as run_module
    from pytest_evomemory.agents.baseline import RecallBaselineAgent
    from pytest_evomemory.evaluation.evomemory import EvoMemoryEvaluator
    from pytest_evomemory.memory import embedders, langmem, mem0
    from pytest_evomemory.memory.observed import ObservedMemory
    from pytest_evomemory.memory.snapshot import StreamSnapshots
    from pytest_evomemory.reporting import html
    from pytest_evomemory.runtime.collector import Collector
    from pytest_evomemory.runtime.records import ResultCollector
    from pytest_evomemory.runtime.run import Run
    from pytest_evomemory.runtime.stream import Episode

    undo = [
        timed(clock, embedders.HashingEmbedder, "embed", "embedder", count_texts=True),
        timed(clock, embedders.SentenceTransformerEmbedder, "embed", "embedder", count_texts=True),
        timed(clock, run_module, "open_with_timeout", "opening"),
    ]
    for name in ("add", "search", "get", "delete", "reset"):
        undo.append(timed(clock, Memory, name, "library"))
    for name in ("put", "search", "delete"):
        undo.append(timed(clock, InMemoryStore, name, "library"))
    for backend in (mem0.Mem0Memory, langmem.LangMemMemory):
        undo.append(timed(clock, backend, "snapshot", "snapshots"))
        undo.append(timed(clock, backend, "restore", "snapshots"))
        undo.append(timed(clock, backend, "reset", "teardown"))
        undo.append(timed(clock, backend, "close", "teardown"))
    # the rest of the run, by part (each exclusive of the library, embedder and journal inside it)
    undo += [
        timed(clock, ObservedMemory, "retain", "adapter"),
        timed(clock, ObservedMemory, "recall", "adapter"),
        timed(clock, RecallBaselineAgent, "respond", "agent"),
        timed(clock, EvoMemoryEvaluator, "score_response", "scoring"),
        timed(clock, Episode, "_scored", "scoring"),
        timed(clock, ResultCollector, "add", "records"),
        timed(clock, html, "write_html_report", "report"),
        timed(clock, StreamSnapshots, "save", "snapshots"),  # the slot's label, digests and syncs around the backend's
        timed(clock, StreamSnapshots, "restore", "snapshots"),
        timed(clock, Collector, "preflight", "start and finish"),
        timed(clock, Run, "finish", "start and finish"),
    ]
    for backend in (mem0.Mem0Memory, langmem.LangMemMemory):  # LangMem's runs inside the store's put
        undo.append(timed(clock, backend, "_journal_writes", "journal"))
    gc.callbacks.append(clock.on_gc)
    undo.append(lambda: gc.callbacks.remove(clock.on_gc))
    return undo


def generated_tasks(directory: Path, count: int) -> Path:
    """``count`` short factual tasks over 50 topics, each asked twice in other words,
    so that recall has something to find."""
    topics = [f"harbour {n}" for n in range(50)]
    lines = []
    for index in range(count):
        topic = topics[index % len(topics)]
        ask = "What colour is the door of" if (index // len(topics)) % 2 == 0 else "Which colour was painted on the door of"
        lines.append(json.dumps({"id": f"g{index:05d}", "prompt": f"{ask} the {topic} lighthouse?",
                                 "target": f"colour {index % len(topics)}"}))
    path = directory / "generated.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_arm(backend: str, benchmark: dict[str, Any], embedder: str | None, tmp: Path) -> dict[str, Any]:
    memory: dict[str, Any] = {"backend": backend, "top_k": 4, backend: {"infer": False}}
    if embedder is not None:
        memory["embedder"] = embedder
    path = tmp / f"run-{len(os.listdir(tmp))}.yaml"
    path.write_text(json.dumps({
        "name": f"bench_{backend}", "benchmark": benchmark,
        "agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"}, "memory": memory,
    }), encoding="utf-8")
    config = load_run_config(path)
    clock = Clock()
    undo = instrument(clock)
    try:
        started = NOW()
        summary = run_benchmark(config, tmp / f"out-{backend}-{len(os.listdir(tmp))}")
        total = NOW() - started
    finally:
        for step in undo:
            step()
    parts = dict(clock.seconds)
    parts["rest of the run"] = total - sum(parts.values())
    operations = 2 * int(summary["overall"]["tasks"])  # the recall of each task, the retain of its feedback
    return {
        "backend": backend, "tasks": summary["overall"]["tasks"], "accuracy": summary["overall"]["accuracy"],
        "seconds": total, "parts": parts, "texts_per_operation": clock.texts / operations if operations else 0.0,
        "harness_share": sum(parts.get(name, 0.0) for name in HARNESS) / total,
        "with_collection": sum(parts.get(name, 0.0) for name in (*HARNESS, COLLECTION)) / total,
    }


def warm(backends: list[str], embedder: str | None) -> dict[str, float]:
    """Import each library and load the embedder once, outside the timed arms."""
    seconds = {}
    for backend in backends:
        started = time.perf_counter()
        if backend == "mem0":
            from pytest_evomemory.memory.mem0 import import_mem0

            import_mem0()
        else:
            from pytest_evomemory.memory.langmem import import_langmem

            import_langmem()
        seconds[f"import {backend}"] = time.perf_counter() - started
    if embedder is None:
        from pytest_evomemory.memory.embedders import SentenceTransformerEmbedder

        started = time.perf_counter()
        SentenceTransformerEmbedder(None).embed(["warm up"])
        seconds["load MiniLM"] = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="evomemory-bench-") as name:
        for backend in backends:  # the run's own modules, and each library's first store
            started = time.perf_counter()
            run_arm(backend, {"benchmark": "sample", "limit": 1}, embedder, Path(name))
            seconds[f"first run of {backend} (1 task a stream)"] = time.perf_counter() - started
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="mem0,langmem")
    parser.add_argument("--tasks", type=int, default=1000, help="generated tasks (0: the sample streams only)")
    parser.add_argument("--embedder", choices=("hashing", "bundled"), default="hashing")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="time the parts by the wall clock (default) or by the process's CPU time")
    parser.add_argument("--check", action="store_true", help=f"exit 1 when an arm's harness share is over {TARGET_SHARE:.0%}")
    args = parser.parse_args(argv)
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    global NOW
    NOW = time.perf_counter if args.clock == "wall" else time.process_time
    embedder = None if args.embedder == "bundled" else "hashing"
    try:
        load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        load = "n/a"
    print(f"load average at start: {load} on {os.cpu_count()} CPUs; embedder: {args.embedder}; clock: {args.clock}")
    for what, seconds in warm(backends, embedder).items():
        print(f"  {what}: {seconds:.1f} s (once per process, outside the arms)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="evomemory-bench-") as name:
        tmp = Path(name)
        workloads: list[tuple[str, dict[str, Any]]] = [("sample streams", {"benchmark": "sample"})]
        if args.tasks:
            path = generated_tasks(tmp, args.tasks)
            workloads.append((f"{args.tasks} generated tasks", {
                "benchmark": "files", "files": [{"name": "generated", "path": str(path), "match_mode": "exact"}],
            }))
        for label, benchmark in workloads:
            for backend in backends:
                row = run_arm(backend, benchmark, embedder, tmp)
                row["workload"] = label
                rows.append(row)
                print(f"  {label} / {backend}: {row['seconds']:.1f} s, harness {row['harness_share']:.1%}", file=sys.stderr)
    names = ["library", "embedder", *HARNESS, COLLECTION]
    header = f"{'workload':<22} {'backend':<8} {'tasks':>6} {'seconds':>8} " + " ".join(f"{n:>16}" for n in names)
    print("\n" + header + f" {'texts/op':>9} {'harness':>8} {'harness+gc':>11}")
    print("-" * (len(header) + 31))
    failed = False
    for row in rows:
        cells = " ".join(
            f"{row['parts'].get(n, 0.0):>8.2f} s {row['parts'].get(n, 0.0) / row['seconds']:>4.0%}" for n in names
        )
        print(f"{row['workload']:<22} {row['backend']:<8} {row['tasks']:>6} {row['seconds']:>8.1f} {cells} "
              f"{row['texts_per_operation']:>9.2f} {row['harness_share']:>8.1%} {row['with_collection']:>11.1%}")
        failed = failed or row["harness_share"] > TARGET_SHARE
    print("harness: the harness parts' share of the arm, garbage collection left out (what --check checks); "
          "harness+gc: with every collection pass counted as the harness's (an upper bound: a pass scans the "
          "library's objects too)")
    if args.check and failed:
        print(f"FAIL: an arm's harness share is over {TARGET_SHARE:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
