"""The three reference agents as three arms of one pytest session against the scripted
server: what each retains and recalls, the stream order they ran in, and the
comparison's gain-versus-similarity (one subprocess, the way a user runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import is_feedback


def write_arm(directory: Path, name: str, kind: str, base_url: str, memory: str, extra: str = "") -> Path:
    (directory / f"{name}.yaml").write_text(
        f"name: {name}\n"
        "benchmark: {benchmark: sample, limit: 4, order: shuffle, order_seed: 3}\n"
        f"agent:\n  kind: {kind}\n  max_steps: 6\n{extra}"
        f"  model: {{model: scripted, base_url: '{base_url}', api_key_env: null, cache: false, timeout_s: 5}}\n"
        f"memory: {memory}\n"
    )
    return directory / f"{name}.yaml"


@pytest.mark.slow
def test_three_reference_agents_as_arms_of_one_session(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory
) -> None:
    server = scripted_openai_server()  # echo policy: recalls and retains when offered the tools
    url = server.base_url
    arms = [
        write_arm(pytester.path, "control", "tiny", url, "{backend: inprocess}", "  memory_strategy: none\n"),
        write_arm(pytester.path, "exprag", "exprag", url, "{backend: inprocess, top_k: 2}"),
        write_arm(pytester.path, "exprecent", "exprecent", url, "{backend: inprocess, top_k: 2}"),
        write_arm(pytester.path, "remem", "remem", url, "{backend: inprocess, editing_tools: true}"),
    ]
    result = pytester.runpytest_subprocess(
        *[f"--evomemory-config={arm}" for arm in arms], "--evomemory-output-dir=results", "-p", "no:randomly"
    )
    assert result.ret == 0, result.stdout.str()
    results = pytester.path / "results"

    def summary(arm: str) -> dict[str, object]:
        return json.loads((results / arm / "summary.json").read_text())["overall"]  # type: ignore[no-any-return]

    for arm in ("exprag", "exprecent", "remem"):
        assert summary(arm)["memory_retains"] == 8, arm  # one experience per task
        assert summary(arm)["memory_recalls"] == 8, arm
    assert summary("control")["memory_retains"] == 0

    # the deterministic arms retained the labelled experience themselves
    exprag = [json.loads(line) for line in (results / "exprag" / "responses.jsonl").read_text().splitlines()]
    writes = [w for r in exprag if r["kind"] == "feedback" for w in r["memory_writes"]]
    assert len(writes) == 8 and all(w["content"].splitlines()[-1].startswith("Outcome: ") for w in writes)
    # ReMem was offered the editing tools; the others only final_answer
    offered = {tuple(t["function"]["name"] for t in body.get("tools", [])) for body in server.chat_requests}
    assert ("final_answer", "retain", "recall", "forget", "update") in offered
    assert ("final_answer",) in offered
    assert sum(is_feedback(body) for body in server.chat_requests) >= 4 * 8

    # every arm ran each stream in the same seeded order, recorded in run.json
    orders = {
        arm: {s["name"]: s["order"]["tasks_sha256"] for s in json.loads((results / arm / "run.json").read_text())["streams"]}
        for arm in ("control", "exprag", "exprecent", "remem")
    }
    assert len({tuple(sorted(o.items())) for o in orders.values()}) == 1
    scores = [json.loads(line) for line in (results / "exprag" / "scores.jsonl").read_text().splitlines()]
    facts = [s["task_id"] for s in sorted(scores, key=lambda s: s["position"]) if s["stream"] == "sample_facts"]
    assert sorted(facts) == ["f01", "f02", "f03", "f04"] and facts != ["f01", "f02", "f03", "f04"]

    comparison = json.loads((results / "compare.json").read_text())
    similarity = comparison["similarity"]["streams"]["sample_facts"]
    assert [entry["label"] for entry in similarity] == ["exprag", "exprecent", "remem"]
    assert all(entry["tasks"] == 4 for entry in similarity)
