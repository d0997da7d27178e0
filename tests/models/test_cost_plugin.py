"""``--evomemory-max-cost`` as a user runs it: the session stops before the cap,
keeps every complete record, is marked incomplete with the reason, and a resume
with a higher cap finishes it (serially and across xdist workers)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config.pricing import Pricing
from pytest_evomemory.core.types import Usage
from pytest_evomemory.testing.fixtures import ServerFactory

from ..bad_input.conftest import KEY_VARIABLE, SECRET, tasks_file

PRICES = {"input_per_million": 1000, "output_per_million": 2000}


def _run_config(directory: Path, base_url: str, *, pricing: bool = True) -> str:
    for name in ("a", "b"):
        tasks_file(directory, count=5, name=f"{name}.jsonl")
    # b's tasks its own: two streams storing the same record under the same id are a
    # leak to the isolation guard, whichever runs first (the streams run at once)
    b = directory / "b.jsonl"
    b.write_text(b.read_text(encoding="utf-8").replace('"Say ', '"Repeat '), encoding="utf-8")
    (directory / "run.yaml").write_text(
        "name: costed\noutput_dir: results\n"
        "benchmark: {benchmark: files, files: [{name: a, path: a.jsonl}, {name: b, path: b.jsonl}]}\n"
        "memory: {backend: inprocess}\n"
        "agent:\n  kind: tiny\n  memory_strategy: deterministic_recall\n  max_steps: 4\n  model:\n"
        f"    model: scripted-model\n    base_url: {base_url}\n    api_key_env: {KEY_VARIABLE}\n"
        "    cache: false\n    max_tokens: 300\n"
        + (f"    pricing: {json.dumps(PRICES)}\n" if pricing else ""),
        encoding="utf-8",
    )
    return "--evomemory-config=run.yaml"


def _responses(directory: Path) -> list[dict[str, Any]]:
    path = directory / "results" / "responses.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_session_stops_before_the_cap_and_a_resume_finishes_it(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    server = scripted_openai_server()
    config = _run_config(pytester.path, server.base_url)
    cap = 6.0
    stopped = pytester.runpytest_subprocess(config, "-p", "no:randomly", "--evomemory-max-cost", str(cap), *workers)
    output = stopped.stdout.str()
    assert "--evomemory-max-cost $6 reached" in output and "Traceback" not in output, output
    assert "to continue where it stopped: pytest --evomemory-resume=results" in output
    outcomes = stopped.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("skipped", 0) >= 1
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["completion"]["complete"] is False
    assert "--evomemory-max-cost $6 reached" in summary["completion"]["reason"]
    assert summary["failed_episodes"] == []
    paid = Pricing.model_validate(PRICES).cost_of(Usage(**server.total_usage()))
    assert paid <= cap
    assert summary["overall"]["cost_usd"] <= cap
    assert "cost $" in output  # the progress line

    resumed = pytester.runpytest_subprocess("--evomemory-resume=results", "-p", "no:randomly",
                                            "--evomemory-max-cost", "1000", *workers)
    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["completion"]["complete"] is True and summary["overall"]["tasks"] == 10
    responses = _responses(pytester.path)
    assert len(responses) == 20  # each task once with its feedback: nothing doubled, nothing lost
    assert summary["overall"]["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in responses), abs=1e-5)


def test_a_bad_cap_or_an_unpriced_model_is_refused_before_any_call(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    server = scripted_openai_server()
    config = _run_config(pytester.path, server.base_url, pricing=False)
    bad = pytester.runpytest(config, "-p", "no:randomly", "--evomemory-max-cost=lots")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--evomemory-max-cost must be a positive number of US dollars, got 'lots'" in bad.stderr.str()
    unpriced = pytester.runpytest(config, "-p", "no:randomly", "--evomemory-max-cost=5")
    assert unpriced.ret == pytest.ExitCode.USAGE_ERROR
    assert "the agent config of 'costed' has no 'model.pricing'" in unpriced.stderr.str()
    assert server.requests == []


def test_evomemory_run_takes_the_same_cap_spelled_as_its_own_flag(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The cap is one option of the engine's session: ``evomemory run --max-cost`` stops
    (exit 2, as any early stop) and ``--resume`` goes on, naming the flag as typed."""
    from pytest_evomemory.cli import main as evomemory
    from pytest_evomemory.models.limits import SESSION_DIR_ENV

    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.delenv(SESSION_DIR_ENV, raising=False)
    monkeypatch.chdir(pytester.path)
    server = scripted_openai_server()
    config = _run_config(pytester.path, server.base_url).removeprefix("--evomemory-")
    assert evomemory(["run", f"--{config}", "--max-cost=lots"]) == 4
    assert "--max-cost must be a positive number of US dollars, got 'lots'" in capsys.readouterr().err
    assert server.requests == []

    assert evomemory(["run", f"--{config}", "--max-cost", "6", "-q"]) == 2
    output = capsys.readouterr().out
    assert "--max-cost $6 reached" in output and "--evomemory-max-cost" not in output, output
    assert "to continue where it stopped: evomemory run --resume=results" in output
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["completion"]["complete"] is False and "--max-cost $6 reached" in summary["completion"]["reason"]
    assert summary["failed_episodes"] == [] and 0 < summary["overall"]["cost_usd"] <= 6
    assert SESSION_DIR_ENV not in os.environ  # the session closed the directory it opened

    assert evomemory(["run", "--resume", "results", "--max-cost", "1000", "-q"]) == 0
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["completion"]["complete"] is True and summary["overall"]["tasks"] == 10
    assert len(_responses(pytester.path)) == 20


def test_a_session_directory_shared_on_purpose_shares_no_spend(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """``EVOMEMORY_SESSION_DIR`` set by the user (shards sharing connection slots)
    outlives each session in it: the stopped session's spend must not follow the
    resume into that directory, or the resume would stop at once on a cap it raised."""
    from pytest_evomemory.cli import main as evomemory
    from pytest_evomemory.models.budget import SPEND_FILE_ENV
    from pytest_evomemory.models.limits import SESSION_DIR_ENV

    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.setenv(SESSION_DIR_ENV, str(shared))
    monkeypatch.chdir(pytester.path)
    server = scripted_openai_server()
    config = _run_config(pytester.path, server.base_url).removeprefix("--evomemory-")
    assert evomemory(["run", f"--{config}", "--max-cost", "6", "-q"]) == 2
    assert "--max-cost $6 reached" in capsys.readouterr().out
    assert evomemory(["run", "--resume=results", "--max-cost", "1000", "-q"]) == 0, capsys.readouterr().out
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["completion"]["complete"] is True and summary["overall"]["tasks"] == 10
    assert os.environ[SESSION_DIR_ENV] == str(shared) and shared.is_dir()  # the user's directory stays
    assert SPEND_FILE_ENV not in os.environ and not list(shared.glob("spend-*"))  # each session took its spend back


@pytest.mark.parametrize("backend", ["mem0", "langmem"])
def test_a_cap_meters_a_memory_library_that_calls_its_own_model(
    tmp_path: Path, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], backend: str,
) -> None:
    """Mem0's and LangMem's ``infer`` call the agent's model through the library's own
    client, metered by the cap at the agent's price (the same model): the library's
    fact extraction, which asks for up to 2,000 reply tokens at $2,000 a million, could
    pass a $5 cap, so the session stops before it is sent (exit 2) and a resume with a
    higher cap finishes the run. A library model of its own without a price is refused
    before any call (exit 4), naming its key and the way out in the entry point's spelling."""
    from pytest_evomemory.cli import main as evomemory
    from pytest_evomemory.testing.scripted_server import (
        echo_policy,
        langmem_conversation,
        mem0_new_messages,
        memory_library_policy,
    )

    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.chdir(tmp_path)
    server = scripted_openai_server(memory_library_policy(lambda text: ["a fact"], then=echo_policy))
    config = _run_config(tmp_path, server.base_url)
    text = (tmp_path / "run.yaml").read_text(encoding="utf-8")
    (tmp_path / "run.yaml").write_text(
        text.replace("memory: {backend: inprocess}", f"memory: {{backend: {backend}, embedder: hashing}}"),
        encoding="utf-8",
    )
    run = ["run", f"--{config.removeprefix('--evomemory-')}", "--limit", "2", "--max-cost", "5", "-q"]
    assert evomemory(run) == 2
    output = capsys.readouterr().out
    assert "--max-cost $5 reached" in output and "Traceback" not in output, output

    def extractions() -> int:
        return sum(1 for r in server.requests if mem0_new_messages(r.body) or langmem_conversation(r.body))

    assert extractions() == 0 and server.requests  # the agent's first task ran; the extraction was never sent
    assert evomemory(["run", "--resume=results", "--max-cost", "100000", "-q"]) == 0, capsys.readouterr().out
    assert extractions() == 4  # one per task's experience (2 streams of 2 tasks), all metered under the cap

    own_model = text.replace(
        "memory: {backend: inprocess}",
        f"memory: {{backend: {backend}, embedder: hashing, {backend}: {{llm: {{model: another-model}}}}}}",
    )
    (tmp_path / "run.yaml").write_text(own_model, encoding="utf-8")
    before = len(server.requests)
    assert evomemory([*run, "--output-dir", "other"]) == 4
    error = capsys.readouterr().err
    assert f"key '{backend}.llm.pricing': --max-cost meters the calls memory backend '{backend}'" in error, error
    assert f"--set memory.{backend}.infer=false" in error and "--evomemory-" not in error
    assert len(server.requests) == before
