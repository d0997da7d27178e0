"""Token counts of the paper's methods per task, and what the full single-turn table costs.

    python benchmarks/bench_paper_tokens.py [--limit N] [--prompt-factor F] [--completion T]

Runs the control (no memory), ExpRecent, ExpRAG and ReMem TinyAgents over the bundled
sample streams (2 x 12 tasks, or the first ``--limit``) against the scripted
OpenAI-compatible server (no network, no model; it answers as a memory-using model
would: recall, then answer; retain, then acknowledge), and prints per method and task:
model calls, prompt tokens (the server counts 4 characters of the request's JSON, tool
schemas included, as one token: the usual rule of thumb for English with GPT
tokenizers) and the prompt tokens of the memory's experiences.

Then it scales those figures to the paper's four streams at full size (2,726 tasks:
30 + 198 + 2,312 + 186, docs/streams.md). The sample tasks are one-line questions;
real ones are longer (GPQA and MMLU-Pro questions with their options run to hundreds
of tokens), so ``--prompt-factor`` multiplies the task-dependent part of every prompt
(default 1: the sample's own length, a lower bound), and ``--completion`` is the
completion tokens assumed per model call (the scripted model writes almost none; a
real one writes its reasoning; default 150). Prices are list prices per million tokens
at the time of writing (check the vendor's page). Nothing here is a timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_evomemory import load_run_config, run_benchmark
from pytest_evomemory.testing.scripted_server import ScriptedServer

#: The paper's four streams at full size (docs/streams.md).
FULL_TASKS = 30 + 198 + 2312 + 186

METHODS = (
    ("no memory", "tiny", "memory_strategy: none", "{backend: inprocess}"),
    ("ExpRecent", "exprecent", "", "{backend: inprocess, top_k: 4}"),
    ("ExpRAG", "exprag", "", "{backend: inprocess, top_k: 4}"),
    ("ReMem", "remem", "max_steps: 12", "{backend: inprocess, top_k: 4, editing_tools: true}"),
)

#: (name, input $, output $) per million tokens, list prices at the time of writing.
PRICES = (("gpt-4o-mini", 0.15, 0.60), ("gpt-4o", 2.50, 10.00))


def run_method(directory: Path, server: ScriptedServer, kind: str, extra: str, memory: str, limit: int) -> dict[str, Any]:
    config = directory / f"{kind}.yaml"
    config.write_text(
        f"name: {kind}\nbenchmark: {{benchmark: sample, limit: {limit}}}\n"
        f"agent:\n  kind: {kind}\n" + (f"  {extra}\n" if extra else "")
        + f"  model: {{model: scripted, base_url: '{server.base_url}', api_key_env: null, cache: false}}\n"
        f"memory: {memory}\n"
    )
    before = len(server.requests)
    summary = run_benchmark(load_run_config(config), directory / kind)
    overall = summary["overall"]
    tasks = overall["tasks"]
    requests = server.chat_requests[before:]
    experience_chars = fixed_chars = 0
    for body in requests:
        # what does not grow with the task: the system prompt and the tool schemas
        fixed_chars += len(json.dumps(body.get("messages", [])[:1])) + len(json.dumps(body.get("tools", [])))
        for message in body.get("messages", []):
            content = message.get("content") or ""
            if message.get("role") == "user" and "Current task:" in content:
                experience_chars += len(content.split("Current task:")[0])
    return {
        "tasks": tasks,
        "calls": overall["agent_turns"] / tasks,
        "prompt": overall["prompt_tokens"] / tasks,
        "completion": overall["completion_tokens"] / tasks,
        "experiences": experience_chars / 4 / tasks,
        "fixed": fixed_chars / 4 / tasks,
        "accuracy": overall["accuracy"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=12, help="tasks per sample stream (default: all 12)")
    parser.add_argument("--prompt-factor", type=float, default=1.0, help="real task length / sample task length")
    parser.add_argument("--completion", type=int, default=150, help="completion tokens assumed per model call")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as temporary, ScriptedServer() as server:
        for label, kind, extra, memory in METHODS:
            rows.append((label, run_method(Path(temporary), server, kind, extra, memory, args.limit)))
    print(f"Per task on the sample streams ({rows[0][1]['tasks']} tasks; task + feedback turns):")
    print(f"{'method':<10} {'calls':>6} {'prompt tok':>11} {'of which experiences':>21}")
    for label, row in rows:
        print(f"{label:<10} {row['calls']:>6.2f} {row['prompt']:>11.0f} {row['experiences']:>21.0f}")
    print()
    print(
        f"Full single-turn benchmark ({FULL_TASKS:,} tasks), prompt x{args.prompt_factor:g} "
        f"(task-dependent part), {args.completion} completion tokens per call:"
    )
    header = f"{'method':<10} {'calls':>8} {'input Mtok':>11} {'output Mtok':>12}"
    header += "".join(f" {name + ' $':>14}" for name, _, _ in PRICES)
    print(header)
    for label, row in rows:
        # The fixed part (system prompt, tool schemas) stays; the task, its experiences
        # and the conversation scale with the task's length.
        prompt = row["fixed"] + (row["prompt"] - row["fixed"]) * args.prompt_factor
        calls = row["calls"] * FULL_TASKS
        tokens_in = prompt * FULL_TASKS / 1e6
        tokens_out = calls * args.completion / 1e6
        line = f"{label:<10} {calls:>8,.0f} {tokens_in:>11.2f} {tokens_out:>12.2f}"
        line += "".join(f" {tokens_in * inp + tokens_out * out:>14.2f}" for _, inp, out in PRICES)
        print(line)
    print(json.dumps({label: row for label, row in rows}, indent=None, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
