"""Recall latency and retain throughput of the memory backends.

    python benchmarks/bench_memory.py --sizes 1000,10000,100000 \
        --backends inprocess,sqlite,sqlite+hashing,postgres,postgres+hashing

Each backend is filled incrementally up to each size with synthetic ~30-word
sentences (Zipf-distributed vocabulary, so frequent and rare words behave as in
prose), then queried with phrases taken from stored records and from unseen
text, as an agent's recall would be. PostgreSQL settings come from the PG*
environment variables (``eval "$(bash .ci/start-postgres.sh)"``); a backend that
cannot be opened is reported and skipped. Target: sqlite p99 recall < 10 ms at 10k.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.memory import MemorySystem, build_memory
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.postgres import PostgresOptions

TARGET_RECORDS = 10_000
TARGET_P99_MS = 10.0

SYLLABLES = "ka lo mi ne ru sa ti vo ze pa qu ri on el an is ur ba de fi go".split()
FUNCTION_WORDS = "the of and to in is was for on that with as by at from".split()


class SentenceGenerator:
    """Sentences of ~30 words over a fixed invented vocabulary.

    Word frequencies follow a Zipf-Mandelbrot law (weight 1 / (rank + 30)) over
    20,000 words, which puts the commonest content word in ~15% of records and a
    typical one in well under 1% — roughly English prose once stopwords are
    removed. Every fourth word is a stopword, as in prose.
    """

    def __init__(self, seed: int, vocabulary: int = 20_000) -> None:
        self.rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < vocabulary:
            words.add("".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        self.rng.shuffle(self.words)
        self.weights = [1.0 / (rank + 30) for rank in range(len(self.words))]

    def sentence(self, length: int = 30) -> str:
        content = self.rng.choices(self.words, self.weights, k=length)
        for index in range(0, length, 4):
            content[index] = self.rng.choice(FUNCTION_WORDS)
        return " ".join(content).capitalize() + "."

    def query(self, stored: list[str]) -> str:
        """Half: eight consecutive words of a stored record; half: unseen text."""
        if stored and self.rng.random() < 0.5:
            words = self.rng.choice(stored).split()
            start = self.rng.randrange(max(1, len(words) - 8))
            return " ".join(words[start : start + 8])
        return self.sentence(12)


def open_backend(backend_id: str, run_dir: Path, top_k: int) -> MemorySystem:
    backend, _, embedder = backend_id.partition("+")
    document: dict[str, Any] = {"backend": backend, "top_k": top_k}
    if embedder:
        document["embedder"] = embedder
    if backend == "postgres":
        defaults = PostgresOptions()
        document["postgres"] = PostgresOptions(
            host=os.environ.get("PGHOST", defaults.host), port=int(os.environ.get("PGPORT", defaults.port)),
            user=os.environ.get("PGUSER", defaults.user), dbname=os.environ.get("PGDATABASE", defaults.dbname),
        ).model_dump()
    config = MemoryConfig.model_validate(document)
    return build_memory(config, MemoryContext("bench", run_dir, f"bench_{os.getpid()}"))


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def bench_backend(
    backend_id: str, sizes: list[int], queries: int, max_query_s: float, top_k: int, seed: int
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="evomemory-bench-") as tmp:
        try:
            memory = open_backend(backend_id, Path(tmp), top_k)
        except MemoryBackendError as error:
            print(f"  {backend_id}: skipped ({error})", file=sys.stderr)
            return rows
        generator = SentenceGenerator(seed)
        stored: list[str] = []
        try:
            for size in sizes:
                batch = [generator.sentence(generator.rng.randint(25, 35)) for _ in range(size - len(stored))]
                started = time.perf_counter()
                for index, text in enumerate(batch):
                    memory.retain(text, {"n": len(stored) + index})
                retain_s = time.perf_counter() - started
                stored.extend(batch)
                latencies: list[float] = []
                hits = 0
                deadline = time.perf_counter() + max_query_s
                for _ in range(queries):
                    query = generator.query(stored)
                    begin = time.perf_counter()
                    hits += len(memory.recall(query))
                    latencies.append((time.perf_counter() - begin) * 1000)
                    if time.perf_counter() > deadline and len(latencies) >= 20:
                        break
                rows.append({
                    "backend": backend_id,
                    "records": size,
                    "retain_per_s": len(batch) / retain_s if retain_s else float("inf"),
                    "p50_ms": statistics.median(latencies),
                    "p99_ms": percentile(latencies, 0.99),
                    "queries": len(latencies),
                    "mean_hits": hits / len(latencies),
                })
                print(
                    f"  {backend_id:>18} {size:>7}: retain {rows[-1]['retain_per_s']:.0f}/s, "
                    f"p50 {rows[-1]['p50_ms']:.2f} ms, p99 {rows[-1]['p99_ms']:.2f} ms",
                    file=sys.stderr,
                )
        finally:
            memory.reset()
            memory.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated record counts")
    parser.add_argument(
        "--backends", default="inprocess,sqlite,sqlite+hashing,postgres,postgres+hashing",
        help="comma-separated backend ids: BACKEND[+EMBEDDER]",
    )
    parser.add_argument("--queries", type=int, default=300, help="recalls timed per size")
    parser.add_argument("--max-query-seconds", type=float, default=20.0, help="time cap per size (min 20 recalls)")
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--check", action="store_true", help="exit 1 when the sqlite target is missed")
    args = parser.parse_args(argv)
    sizes = sorted({int(size) for size in args.sizes.split(",") if size.strip()})
    rows: list[dict[str, Any]] = []
    for backend_id in [b.strip() for b in args.backends.split(",") if b.strip()]:
        rows.extend(bench_backend(backend_id, sizes, args.queries, args.max_query_seconds, args.top_k, args.seed))
    header = f"{'backend':<18} {'records':>8} {'retain/s':>10} {'recall p50 ms':>14} {'recall p99 ms':>14} {'queries':>8} {'hits':>5}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['backend']:<18} {row['records']:>8} {row['retain_per_s']:>10.0f} "
            f"{row['p50_ms']:>14.2f} {row['p99_ms']:>14.2f} {row['queries']:>8} {row['mean_hits']:>5.1f}"
        )
    target = [row for row in rows if row["backend"] == "sqlite" and row["records"] == TARGET_RECORDS]
    if target:
        met = target[0]["p99_ms"] < TARGET_P99_MS
        print(
            f"target: sqlite recall p99 < {TARGET_P99_MS:g} ms at {TARGET_RECORDS} records: "
            f"{'met' if met else 'MISSED'} ({target[0]['p99_ms']:.2f} ms)"
        )
        if args.check and not met:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
