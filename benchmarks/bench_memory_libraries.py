"""What the memory libraries (Mem0, LangMem) cost as backends, beside the built-in stores.

    python benchmarks/bench_memory_libraries.py                     # all sections
    python benchmarks/bench_memory_libraries.py --sizes 100,10000 --skip install
    python benchmarks/bench_memory_libraries.py --embedder bundled  # MiniLM instead of hashing

Sections (``--skip`` any of them):

* ``install``: each library's extra installed into a fresh virtualenv with pip
  (its dependencies included, pip's cache as this machine has it): wall time and
  the size it adds to site-packages over an empty venv.
* ``overhead``: per-task cost of ``retain`` and ``recall`` (and of the snapshot
  a resumable run takes after every episode) with 100 and 10,000 stored records,
  for mem0, langmem and the built-in ``inprocess`` (ExpRAG's store) and ``sqlite``.
  Records are ~30-word synthetic sentences (bench_memory.py's generator). The
  embedder is the hashing one by default, so the figures are the library's own
  overhead; ``--embedder bundled`` adds the bundled MiniLM's encoding, as in the
  default configuration.
* ``infer``: with ``infer: true``, the model calls a retain costs (Mem0's fact
  extraction, LangMem's memory manager) against the scripted server, and their
  prompt size (about 4 characters a token).
* ``scores``: the bundled sample streams with the model-free recall agent
  (deterministic recall: ExpRAG's retrieve-then-answer), memory swapped between
  the built-in ExpRAG store (inprocess) and the libraries with ``infer: false``
  and their default embedder (the bundled MiniLM).

Timings are wall-clock on whatever machine runs it; the table says the load
average it started under.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_memory import SentenceGenerator, percentile  # noqa: E402

from pytest_evomemory.configs.load import load_run_config, validate_memory  # noqa: E402
from pytest_evomemory.memory import MemorySystem, build_memory  # noqa: E402
from pytest_evomemory.memory.factory import MemoryContext  # noqa: E402
from pytest_evomemory.memory.snapshot import supports_snapshots  # noqa: E402

SECTIONS = ("install", "overhead", "infer", "scores")
#: what each library's extra installs (pyproject.toml's pins)
EXTRAS = {
    "mem0": ["mem0ai==2.2.1", "qdrant-client>=1.12,<1.21"],
    "langmem": ["langmem==0.0.30", "langgraph>=1.0,<1.3", "langchain-openai>=1.0,<2"],
}
LIBRARIES = ("mem0", "langmem")


def load_average() -> str:
    try:
        return " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


# --------------------------------------------------------------------------- install


def site_packages_bytes(environment: Path) -> int:
    total = 0
    for path in environment.rglob("*"):
        if path.is_file() and "site-packages" in path.parts:
            total += path.stat().st_size
    return total


def bench_install() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="evomemory-install-") as tmp:
        empty = Path(tmp) / "empty"
        venv.create(empty, with_pip=True)
        baseline = site_packages_bytes(empty)
        for library, requirements in EXTRAS.items():
            target = Path(tmp) / library
            shutil.copytree(empty, target, symlinks=True)
            python = target / "bin" / "python"
            started = time.perf_counter()
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
                capture_output=True, text=True,
            )
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                print(f"  {library}: install failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
                continue
            listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
            rows.append({
                "library": library,
                "seconds": seconds,
                "mib": (site_packages_bytes(target) - baseline) / 2**20,
                "packages": len(listed.stdout.splitlines()) - 1,  # pip itself
            })
            print(f"  install {library}: {seconds:.1f} s, {rows[-1]['mib']:.0f} MiB", file=sys.stderr)
    return rows


# --------------------------------------------------------------------------- overhead


def open_backend(backend: str, run_dir: Path, embedder: str | None, stream: str = "bench") -> MemorySystem:
    document: dict[str, Any] = {"backend": backend, "top_k": 4}
    if backend in LIBRARIES:
        document[backend] = {"infer": False}  # the backend's own section
        if embedder is not None:
            document["embedder"] = embedder
    elif embedder is not None and backend == "sqlite":
        document["embedder"] = embedder
    return build_memory(validate_memory(document, "bench memory config"), MemoryContext(stream, run_dir, f"bench_{os.getpid()}"))


def bench_overhead(backends: list[str], sizes: list[int], ops: int, embedder: str | None, seed: int) -> list[dict[str, Any]]:
    rows = []
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="evomemory-bench-") as tmp:
            memory = open_backend(backend, Path(tmp), embedder)
            generator = SentenceGenerator(seed)
            stored: list[str] = []
            try:
                for size in sizes:
                    fill = [generator.sentence(generator.rng.randint(25, 35)) for _ in range(size - len(stored) - ops)]
                    started = time.perf_counter()
                    for text in fill:
                        memory.retain(text, {"n": len(stored)})
                        stored.append(text)
                    fill_s = time.perf_counter() - started
                    retains = []
                    for _ in range(ops):  # the last `ops` records: timed one by one
                        text = generator.sentence(30)
                        begin = time.perf_counter()
                        memory.retain(text, {"n": len(stored)})
                        retains.append((time.perf_counter() - begin) * 1000)
                        stored.append(text)
                    recalls = []
                    for _ in range(ops):
                        query = generator.query(stored)
                        begin = time.perf_counter()
                        memory.recall(query)
                        recalls.append((time.perf_counter() - begin) * 1000)
                    snapshot_ms = float("nan")
                    if supports_snapshots(memory):
                        target = Path(tmp) / f"snapshot-{size}"
                        target.mkdir()
                        begin = time.perf_counter()
                        memory.snapshot(target)
                        snapshot_ms = (time.perf_counter() - begin) * 1000
                    rows.append({
                        "backend": backend, "records": size,
                        "fill_per_s": len(fill) / fill_s if fill and fill_s else float("nan"),
                        "retain_p50": statistics.median(retains), "retain_p99": percentile(retains, 0.99),
                        "recall_p50": statistics.median(recalls), "recall_p99": percentile(recalls, 0.99),
                        "snapshot_ms": snapshot_ms,
                    })
                    print(
                        f"  {backend:>9} {size:>6}: retain p50 {rows[-1]['retain_p50']:.2f} ms, "
                        f"recall p50 {rows[-1]['recall_p50']:.2f} ms, snapshot {snapshot_ms:.0f} ms",
                        file=sys.stderr,
                    )
            finally:
                memory.close()
    return rows


# --------------------------------------------------------------------------- infer


def bench_infer(retains: int) -> list[dict[str, Any]]:
    import re

    from pytest_evomemory.testing.scripted_server import (
        ScriptedServer,
        memory_library_policy,
        scripted_model_config,
    )

    def facts(text: str) -> list[str]:
        return [f"Fact: {match}" for match in re.findall(r"Correct answer: ([^\n\"]+)", text)]

    rows = []
    for library in LIBRARIES:
        with ScriptedServer(memory_library_policy(facts)) as server, tempfile.TemporaryDirectory() as tmp:
            config = validate_memory(
                {"backend": library, "top_k": 4, "embedder": "hashing", library: {"infer": True}}, "bench memory config"
            )
            memory = build_memory(config, MemoryContext("bench", Path(tmp), "bench", scripted_model_config(server)))
            generator = SentenceGenerator(7)
            try:
                started = time.perf_counter()
                for index in range(retains):
                    memory.retain(f"Task: {generator.sentence(25)}\nMy answer: x\nCorrect answer: answer {index}")
                seconds = time.perf_counter() - started
            finally:
                memory.close()
            served = [request for request in server.requests if request.status == 200]
            prompt = [request.usage.get("prompt_tokens", 0) for request in served]
            rows.append({
                "library": library, "retains": retains, "calls_per_retain": len(served) / retains,
                "prompt_tokens_mean": statistics.mean(prompt) if prompt else 0.0,
                "prompt_tokens_last": prompt[-1] if prompt else 0,
                "ms_per_retain": seconds / retains * 1000,
            })
    return rows


# --------------------------------------------------------------------------- scores


def bench_scores() -> list[dict[str, Any]]:
    from pytest_evomemory import run_benchmark

    configs = HERE.parent / "pytest_evomemory" / "configs"
    base = load_run_config(configs / "runs" / "sample_memory.yaml")
    rows = []
    for label, memory_file in (("inprocess (ExpRAG)", "inprocess.yaml"), ("mem0", "mem0_no_infer.yaml"),
                               ("langmem", "langmem_no_infer.yaml")):
        path = configs / "memory" / memory_file
        memory = validate_memory(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
        config = replace(base, memory=memory)
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            summary = run_benchmark(config, Path(tmp) / "out")
            seconds = time.perf_counter() - started
        streams = summary["streams"]
        rows.append({
            "memory": label,
            **{name: streams[name]["accuracy"] for name in sorted(streams)},
            "overall": summary["overall"]["accuracy"],
            "seconds": seconds,
        })
        print(f"  scores {label}: {rows[-1]['overall']:.3f} in {seconds:.1f} s", file=sys.stderr)
    return rows


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,10000", help="comma-separated record counts")
    parser.add_argument("--backends", default="mem0,langmem,inprocess,sqlite", help="backends for the overhead section")
    parser.add_argument("--ops", type=int, default=30, help="retains and recalls timed per size")
    parser.add_argument("--embedder", choices=("hashing", "bundled"), default="hashing",
                        help="the libraries' embedder in the overhead section (bundled: MiniLM)")
    parser.add_argument("--infer-retains", type=int, default=10, help="retains with infer per library")
    parser.add_argument("--skip", default="", help=f"comma-separated sections to skip: {', '.join(SECTIONS)}")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    skip = {name.strip() for name in args.skip.split(",") if name.strip()}
    unknown = skip - set(SECTIONS)
    if unknown:
        parser.error(f"--skip: unknown section(s) {', '.join(sorted(unknown))}; use {', '.join(SECTIONS)}")
    sizes = sorted({int(size) for size in args.sizes.split(",") if size.strip()})
    if min(sizes) <= args.ops:
        parser.error(f"--sizes: every size must be larger than --ops ({args.ops})")
    print(f"load average at start: {load_average()} on {os.cpu_count()} CPUs")

    if "install" not in skip:
        rows = bench_install()
        print("\ninstall (fresh venv, pip cache as on this machine)")
        print(f"{'library':<9} {'seconds':>8} {'MiB':>6} {'packages':>9}")
        for row in rows:
            print(f"{row['library']:<9} {row['seconds']:>8.1f} {row['mib']:>6.0f} {row['packages']:>9}")

    if "overhead" not in skip:
        embedder = None if args.embedder == "bundled" else "hashing"
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        rows = bench_overhead(backends, sizes, args.ops, embedder, args.seed)
        print(f"\nper-task overhead (embedder: {args.embedder}; ms per call, {args.ops} calls per size)")
        header = (f"{'backend':<10} {'records':>8} {'fill/s':>8} {'retain p50':>11} {'retain p99':>11} "
                  f"{'recall p50':>11} {'recall p99':>11} {'snapshot':>9}")
        print(header)
        print("-" * len(header))
        for row in rows:
            print(
                f"{row['backend']:<10} {row['records']:>8} {row['fill_per_s']:>8.0f} {row['retain_p50']:>11.2f} "
                f"{row['retain_p99']:>11.2f} {row['recall_p50']:>11.2f} {row['recall_p99']:>11.2f} {row['snapshot_ms']:>9.0f}"
            )

    if "infer" not in skip:
        rows = bench_infer(args.infer_retains)
        print("\ninfer: true (scripted model; prompt tokens ~ characters / 4)")
        print(f"{'library':<9} {'retains':>8} {'calls/retain':>13} {'prompt tok mean':>16} {'last':>6} {'ms/retain':>10}")
        for row in rows:
            print(
                f"{row['library']:<9} {row['retains']:>8} {row['calls_per_retain']:>13.2f} "
                f"{row['prompt_tokens_mean']:>16.0f} {row['prompt_tokens_last']:>6} {row['ms_per_retain']:>10.1f}"
            )

    if "scores" not in skip:
        rows = bench_scores()
        streams = [key for key in rows[0] if key not in ("memory", "overall", "seconds")] if rows else []
        print("\nsample streams, model-free recall agent (deterministic recall), infer: false")
        print(f"{'memory':<20} " + " ".join(f"{name:>14}" for name in streams) + f" {'overall':>8} {'seconds':>8}")
        for row in rows:
            print(f"{row['memory']:<20} " + " ".join(f"{row[name]:>14.3f}" for name in streams)
                  + f" {row['overall']:>8.3f} {row['seconds']:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
