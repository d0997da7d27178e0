"""Redaction's cost per record and per string, with a key registered.

Every record the run directory writes, and every string quoted from a server,
passes :func:`pytest_evomemory.util.redaction.redact`; with an API key registered it
also looks for the key's other spellings (percent-encoded, escaped, base64, hex;
pytest_evomemory/util/spellings.py). This measures what that costs on the records a
task writes (a task response with its transcript, its score, the feedback
response) and on single strings: plain prose, text with escape introducers
(``%``, ``&``, backslashes: LaTeX answers, JSON-in-JSON tool arguments), and text
that holds the key URL-encoded. CPU time (``time.process_time``), the fastest of
``--repeat`` rounds, so a loaded machine disturbs it less than wall time.

    python benchmarks/bench_redaction.py [--records 2000] [--repeat 5]

Run it with ``PYTHONPATH`` pointing at another checkout to compare releases.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

KEY = "sk-bench-Ab3+Cd4/Ef5=Gh6_Ij7-Kl8xyz0123"


def task_records(index: int) -> list[dict[str, Any]]:
    """What one task writes: its response (with transcript), its score, the feedback."""
    answer = f"\\\\frac{{{index}}}{{7}}" if index % 2 else f"Option {'ABCD'[index % 4]}"
    messages = [
        {"role": "system", "content": "You are a careful assistant. Use tools; end with final_answer."},
        {"role": "user", "content": f"Task {index}: what is {index} / 7? Answer in lowest terms.\nChoices: A) 1 B) 2"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{index}", "type": "function",
             "function": {"name": "recall", "arguments": json.dumps({"query": f"task {index} fractions"})}},
        ]},
        {"role": "tool", "tool_call_id": f"call_{index}", "content": json.dumps([{"id": "r1", "content": "50% of ..."}])},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{index}b", "type": "function",
             "function": {"name": "final_answer", "arguments": json.dumps({"answer": answer})}},
        ]},
    ]
    response = {
        "stream": "bench", "task_id": f"t{index}", "kind": "task", "final_answer": answer, "agent_turns": 2,
        "tool_calls": [{"name": "final_answer", "arguments": {"answer": answer}, "result": "answer recorded", "error": False}],
        "messages": messages, "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320},
        "memory_retains": 0, "memory_recalls": 1, "seconds": 0.01, "protocol_violation": None,
    }
    scored = {
        "stream": "bench", "task_id": f"t{index}", "position": index, "correct": index % 3 == 0, "value": 1.0,
        "raw_answer": answer, "extracted": answer, "target": "1/7", "match_mode": "exact",
        "reason": "extracted answer differs from the target", "details": {}, "error": None, "group": None,
    }
    feedback = {**response, "kind": "feedback", "final_answer": "Feedback recorded", "messages": messages[:2]}
    return [response, scored, feedback]


def _fastest(work: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000, help="tasks whose records are written")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the fastest counts")
    args = parser.parse_args(argv)

    os.environ["OPENAI_API_KEY"] = KEY  # a key in SECRET_VARIABLES: registered as a user's key is
    from pytest_evomemory.rundir import dumps
    from pytest_evomemory.util.redaction import redact

    records = [record for index in range(args.records) for record in task_records(index)]
    strings = {
        "plain prose (600 chars)": "The answer follows from the second premise, not the first. " * 10,
        "escape introducers (600 chars)": "Score 50% & more: \\frac{1}{2}, see {\"a\": \"b\\\"c\"} " * 12,
        "the key URL-encoded (600 chars)": ("upstream said: " + urllib.parse.quote(KEY, safe="") + " ") * 10,
    }
    rows = [("records written (rundir.dumps), per task", _fastest(lambda: [dumps(r) for r in records], args.repeat)
             / args.records * 1e6, "3 records")]
    count = 2000
    for label, text in strings.items():
        seconds = _fastest(lambda text=text: [redact(text) for _ in range(count)], args.repeat)
        rows.append((f"redact: {label}", seconds / count * 1e6, "per string"))
    print(f"redaction cost, key registered, fastest of {args.repeat} rounds (CPU time)")
    print(f"{'measurement':<52} {'us':>9}  unit")
    for label, micros, unit in rows:
        print(f"{label:<52} {micros:>9.1f}  {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
