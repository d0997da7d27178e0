"""End to end: ``pytest --evomemory-config=...`` with ``kind: tiny`` against the
scripted server, in a subprocess, checking the summary and that no artefact or
output holds the API key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import echo_policy, is_feedback

from ..schema import assert_run_dir_valid

SECRET = "sk-e2e-DO-NOT-LEAK-9f8e7d6c5b4a"


def write_run_config(directory: Path, base_url: str, strategy: str) -> Path:
    (directory / "agent.yaml").write_text(
        "kind: tiny\n"
        f"memory_strategy: {strategy}\n"
        "max_steps: 4\n"
        "model:\n"
        "  model: scripted-model\n"
        f"  base_url: {base_url}\n"
        "  api_key_env: EVOMEMORY_E2E_KEY\n"
        "  timeout_s: 5\n"
        "  max_retries: 1\n"
        "  retry_backoff_s: 0\n"
    )
    (directory / "benchmark.yaml").write_text("benchmark: sample\nlimit: 3\n")
    (directory / "memory.yaml").write_text("backend: inprocess\ntop_k: 4\n")
    run = directory / "run.yaml"
    run.write_text(
        "name: tiny_e2e\nbenchmark: benchmark.yaml\nagent: agent.yaml\nmemory: memory.yaml\n"
        "output_dir: results\n"
    )
    return run


def test_tiny_run_end_to_end(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
) -> None:
    def dated(body: dict[str, object]) -> dict[str, object]:  # the server names a more exact model
        return {**echo_policy(body), "model": "scripted-model-2025-01-01"}

    server = scripted_openai_server(dated)
    monkeypatch.setenv("EVOMEMORY_E2E_KEY", SECRET)
    run = write_run_config(pytester.path, server.base_url, "tool_use")

    result = pytester.runpytest_subprocess(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")

    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=6)
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    overall = summary["overall"]
    served = server.total_usage()
    assert overall["prompt_tokens"] == served["prompt_tokens"] > 0
    assert overall["completion_tokens"] == served["completion_tokens"] > 0
    assert overall["stimuli"] == 12 and overall["feedback_turns"] == 6
    assert overall["agent_turns"] == len(server.requests)
    assert sum(is_feedback(body) for body in server.chat_requests) >= 6
    assert overall["memory_retains"] == 6
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    # what answered: the endpoint, the name asked for, and the name the server reported
    expected_model = {
        "provider": "openai", "model": "scripted-model", "endpoint": server.base_url,
        "temperature": 0.0, "max_tokens": 1024, "seed": 0, "reported": ["scripted-model-2025-01-01"],
    }
    assert {stream: parts["model"] for stream, parts in summary["ran"].items()} == {
        "sample_facts": expected_model, "sample_choice": expected_model,
    }
    result.stdout.fnmatch_lines(["ran: agent *TinyAgent*; model openai scripted-model (the server reported scripted-model-2025-01-01)*"])
    transcript = [json.loads(line) for line in (pytester.path / "results" / "transcripts" / "sample_facts.jsonl").read_text().splitlines()]
    replies = [m for record in transcript for m in record["messages"] if m["role"] == "assistant"]
    assert replies and all(m["model"] == "scripted-model-2025-01-01" for m in replies)
    assert_run_dir_valid(pytester.path / "results")  # an API model's identity, as the shipped schema says

    outputs = [result.stdout.str(), result.stderr.str()]
    files = [p for p in pytester.path.rglob("*") if p.is_file()]
    files += [p for p in isolated_cache.rglob("*") if p.is_file()]
    assert any(p.name == "responses.jsonl" for p in files)
    assert any(p.parent == isolated_cache or isolated_cache in p.parents for p in files)  # cache written
    for path in files:
        outputs.append(path.read_text(encoding="utf-8", errors="replace"))
    assert not any(SECRET in text for text in outputs)

    # A re-run of the same config replays from the cache: no model call, same tokens,
    # byte-identical scores and identical metrics other than times.
    first_scores = (pytester.path / "results" / "scores.jsonl").read_bytes()
    before = len(server.requests)
    again = pytester.runpytest_subprocess(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert again.ret == 0
    assert len(server.requests) == before
    replayed = json.loads((pytester.path / "results" / "summary.json").read_text())["overall"]
    assert replayed["total_tokens"] == overall["total_tokens"]
    assert (pytester.path / "results" / "scores.jsonl").read_bytes() == first_scores

    def without_times(metrics: dict[str, object]) -> dict[str, object]:
        per = dict(metrics["per_stimulus"])  # type: ignore[call-overload]
        per.pop("seconds")
        skipped = ("seconds", "cached_responses")
        return {**{k: v for k, v in metrics.items() if k not in skipped}, "per_stimulus": per}

    assert without_times(replayed) == without_times(overall)
    replayed_ran = json.loads((pytester.path / "results" / "summary.json").read_text())["ran"]
    assert replayed_ran["sample_facts"]["model"]["reported"] == ["scripted-model-2025-01-01"]  # kept by the cache
    # ... and says it was served from the cache
    assert overall["cached_responses"] == 0 and replayed["cached_responses"] == replayed["stimuli"]


def test_missing_key_variable_fails_clearly(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_openai_server()
    monkeypatch.delenv("EVOMEMORY_E2E_KEY", raising=False)
    run = write_run_config(pytester.path, server.base_url, "none")
    result = pytester.runpytest_subprocess(f"--evomemory-config={run}", "-p", "no:randomly")
    # refused once, before collection, naming the variable: not one failure per task
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*EVOMEMORY_E2E_KEY*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not server.requests
