"""Scoring speed: one 1 MB answer and 10k typical answers per mode.

Run: ``python tests/evaluation/bench_scoring.py`` (not collected by pytest). The
figures are quoted in docs/scoring.md; rerun after changing a mode.
"""

from __future__ import annotations

import random
import statistics
import time

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import TaskQAEvaluator

REASONING = (
    "Let me work through this step by step. First we set up the relation between the "
    "quantities, then we simplify and check the edge cases carefully. "
)


def typical(mode: str, rng: random.Random) -> tuple[BenchmarkSample, str]:
    """One answer shaped like those real models submit (some long, some LaTeX)."""
    reasoning = REASONING * rng.randint(0, 12)
    if mode == "aime":
        n = rng.randint(0, 999)
        shapes = [
            f"{n}", f"\\boxed{{{n}}}", f"{reasoning}The answer is {n:03d}.",
            f"{reasoning}Final Answer: {n}", f"{reasoning}Thus $m+n=\\boxed{{{n}}}$.",
            f"\\frac{{{2 * n}}}{{2}}",  # LaTeX: goes through math-verify
        ]
        weights = [20, 30, 20, 15, 10, 5]
        sample = BenchmarkSample("t", "aime_2024", 0, "p", str(rng.randint(0, 999)), "aime")
    elif mode == "choice":
        options = tuple(f"option text number {i}" for i in range(rng.choice([4, 10])))
        letter = "ABCDEFGHIJ"[rng.randrange(len(options))]
        shapes = [
            letter, f"({letter})", f"{reasoning}The answer is ({letter}).", f"{reasoning}Answer: {letter}",
            f"{reasoning}\\boxed{{{letter}}}", options["ABCDEFGHIJ".index(letter)],
            f"{reasoning}so I pick {letter}",
        ]
        weights = [20, 10, 25, 20, 10, 5, 10]
        sample = BenchmarkSample("t", "gpqa", 0, "p", "B", "choice", options)
    else:
        shapes = ["Paris", "paris.", f"Rationale: {reasoning}\nFinal Answer: Paris", "Lyon"]
        weights = [40, 20, 30, 10]
        sample = BenchmarkSample("t", "user", 0, "p", "Paris", "exact")
    return sample, rng.choices(shapes, weights)[0]


def main() -> None:
    evaluator = TaskQAEvaluator()
    evaluator.score(BenchmarkSample("t", "a", 0, "p", "73", "aime"), "\\frac{146}{2}")  # warm imports
    for mode, target in [("exact", "Paris"), ("choice", "B"), ("aime", "73")]:
        sample = BenchmarkSample("t", "s", 0, "p", target, mode, ("w", "x", "y", "z"))
        times = []
        for big in ["x" * 1_000_000, "The answer is (B) 73. " * 45_000, "\x00\xff" * 500_000]:
            started = time.perf_counter()
            evaluator.score(sample, big)
            times.append(time.perf_counter() - started)
        print(f"{mode:7s} 1 MB answer: worst {max(times) * 1000:.1f} ms over 3 shapes")
    for mode in ["exact", "choice", "aime"]:
        rng = random.Random(0)
        cases = [typical(mode, rng) for _ in range(10_000)]
        per_answer = []
        started = time.perf_counter()
        for sample, answer in cases:
            one = time.perf_counter()
            evaluator.score(sample, answer)
            per_answer.append(time.perf_counter() - one)
        total = time.perf_counter() - started
        print(
            f"{mode:7s} 10k typical answers: {total:.2f} s total, "
            f"median {statistics.median(per_answer) * 1e6:.0f} us, max {max(per_answer) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
