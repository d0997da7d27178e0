"""Cost (issue 27 item 5): ``model.pricing`` prices every response in one place
(pytest_evomemory/config/pricing.py), and ``--evomemory-max-cost`` stops the session
before a model call could pass the cap, across xdist workers, keeping complete
records and leaving the run resumable."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import run_benchmark
from pytest_evomemory.config import ModelConfig
from pytest_evomemory.config.pricing import Pricing, PricingFileError, cost_of, load_pricing_file
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.errors import BudgetExhausted, ConfigError
from pytest_evomemory.core.types import BenchmarkSample, Usage
from pytest_evomemory.models import build_chat_model
from pytest_evomemory.models.budget import (
    BudgetedChatModel,
    CostGuard,
    activate_cost_guard,
    most_a_call_costs,
)
from pytest_evomemory.models.factory import model_pricing
from pytest_evomemory.models.openai_compat import OpenAICompatibleModel
from pytest_evomemory.options import render
from pytest_evomemory.reporting.progress import StreamProgress, cost_text
from pytest_evomemory.runtime import Episode
from pytest_evomemory.runtime.records import Record, TaskRecord
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import Script, final_answer, scripted_model_config, text

from ..bad_input.conftest import tasks_file

PRICES = Pricing(input_per_million=2.0, output_per_million=8.0)
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(autouse=True)
def _no_guard_left_behind() -> Any:
    yield
    activate_cost_guard(None)


# --------------------------------------------------------------------------- prices


def test_usage_is_priced_per_million_tokens() -> None:
    assert PRICES.cost_of(Usage(1_000_000, 0)) == 2.0
    assert PRICES.cost_of(Usage(500, 250)) == pytest.approx((500 * 2 + 250 * 8) / 1e6)
    assert cost_of(Usage(10, 10), None) is None
    # linear: the sum of the calls' costs is the cost of the summed usage
    assert PRICES.cost_of(Usage(3, 4)) + PRICES.cost_of(Usage(5, 6)) == pytest.approx(PRICES.cost_of(Usage(8, 10)))


def test_a_pricing_file_holds_one_price_or_one_per_model(tmp_path: Path) -> None:
    single = tmp_path / "single.yaml"
    single.write_text("input_per_million: 0.15\noutput_per_million: 0.6\n")
    assert load_pricing_file(single, "anything") == Pricing(input_per_million=0.15, output_per_million=0.6)
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"gpt-4o-mini": {"input_per_million": 0.15, "output_per_million": 0.6},
                                 "gpt-4o": {"input_per_million": 2.5, "output_per_million": 10}}))
    assert load_pricing_file(table, "gpt-4o").output_per_million == 10.0
    with pytest.raises(PricingFileError, match=r"no prices for model 'other' \(it lists 'gpt-4o-mini', 'gpt-4o'\)"):
        load_pricing_file(table, "other")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("- 1\n- 2\n", "must hold a mapping"),
        ("input_per_million: -1\noutput_per_million: 1\n", "input_per_million: Input should be greater than or equal to 0"),
        ("input_per_million: '1'\noutput_per_million: 1\n", "input_per_million: Input should be a valid number"),
        ("input_per_million: 1\n", "output_per_million: Field required"),
        ("input_per_million: 1\noutput_per_million: 1\ncurrency: EUR\n", "currency: Extra inputs are not permitted"),
        ("{{{", "is not YAML or JSON"),
    ],
)
def test_a_bad_pricing_file_is_one_line_naming_it(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(content)
    with pytest.raises(PricingFileError) as caught:
        load_pricing_file(path, "m")
    assert expected in str(caught.value) and str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def _run_config(directory: Path, model: str, benchmark: str = "{benchmark: files, files: [{name: mine, path: tasks.jsonl}]}") -> Path:
    tasks_file(directory, count=3)
    (directory / "agents").mkdir(exist_ok=True)
    (directory / "agents" / "agent.yaml").write_text(
        f"kind: tiny\nmemory_strategy: deterministic_recall\nmax_steps: 4\nmodel:\n{model}", encoding="utf-8"
    )
    run = directory / "run.yaml"
    run.write_text(
        f"name: priced\nbenchmark: {benchmark}\nmemory: {{backend: inprocess}}\nagent: agents/agent.yaml\n",
        encoding="utf-8",
    )
    return run


def test_the_config_reads_a_pricing_file_beside_the_agent_config(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "prices.yaml").write_text("m: {input_per_million: 1, output_per_million: 3}\n")
    run = _run_config(tmp_path, "  model: m\n  api_key_env: null\n  pricing: prices.yaml\n")
    config = load_run_config(run)
    assert config.agent.model is not None
    assert config.agent.model.pricing == Pricing(input_per_million=1, output_per_million=3)
    assert config.to_dict()["agent"]["model"]["pricing"] == {"input_per_million": 1.0, "output_per_million": 3.0}


def test_a_missing_pricing_file_stops_the_config_naming_file_and_key(tmp_path: Path) -> None:
    run = _run_config(tmp_path, "  model: m\n  api_key_env: null\n  pricing: nowhere.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_run_config(run)
    message = str(caught.value)
    assert "agent.yaml" in message and "key 'model.pricing'" in message and "nowhere.yaml" in message


# --------------------------------------------------------------------------- the guard


def test_a_call_is_reserved_then_settled_at_its_cost(tmp_path: Path) -> None:
    guard = CostGuard(tmp_path / "spend.json", 1.0)
    first = guard.check_before_call(0.4)
    second = guard.check_before_call(0.4)
    with pytest.raises(BudgetExhausted, match=r"\$0\.0000 spent and \$0\.8000 in calls under way"):
        guard.check_before_call(0.4)  # 0.8 reserved + 0.4 would pass 1.0
    assert guard.stop_reason is not None and "--evomemory-max-cost $1 reached" in render(guard.stop_reason, "pytest")
    guard.settle(first, 0.1)
    guard.settle(second, 0.2)
    assert guard.spent_usd == pytest.approx(0.3)
    with pytest.raises(BudgetExhausted):  # once stopped, every process stops
        guard.check_before_call(0.01)


def test_a_dead_processes_reservation_is_dropped(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)
    path = tmp_path / "spend.json"
    path.write_text(json.dumps({"spent": 0.5, "reserved": {f"{dead}:1": 0.45}, "stopped": None}))
    guard = CostGuard(path, 1.0)
    guard.settle(guard.check_before_call(0.45), 0.0)  # would not fit beside the dead worker's 0.45


def test_the_most_a_call_costs_bounds_what_it_costs(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([final_answer("4")]))
    config = scripted_model_config(server, max_tokens=50)
    completion = OpenAICompatibleModel(config).complete(MESSAGES, [])
    bound = most_a_call_costs(PRICES, MESSAGES, [], 50)
    assert 0 < PRICES.cost_of(completion.usage) <= bound
    assert most_a_call_costs(PRICES, MESSAGES, [], None) > bound  # no max_tokens: a generous reply is assumed


def test_the_model_client_is_refused_once_the_cap_is_near(
    scripted_openai_server: ServerFactory, tmp_path: Path
) -> None:
    server = scripted_openai_server(Script([], then=lambda request: final_answer("4", usage={
        "prompt_tokens": 10, "completion_tokens": 100, "total_tokens": 110})))
    guard = CostGuard(tmp_path / "spend.json", 0.005)
    activate_cost_guard(guard)
    model = build_chat_model(scripted_model_config(server, max_tokens=100, pricing=PRICES.model_dump()))
    calls = 0
    with pytest.raises(BudgetExhausted):
        for _ in range(10):
            model.complete(MESSAGES, [])
            calls += 1
    assert calls == len(server.requests) and calls >= 1
    assert guard.spent_usd == pytest.approx(calls * PRICES.cost_of(Usage(10, 100)))
    assert 0.005 - most_a_call_costs(PRICES, MESSAGES, [], 100) < guard.spent_usd <= 0.005


def test_a_reply_without_usage_is_charged_the_most_it_could_cost(
    scripted_openai_server: ServerFactory, tmp_path: Path
) -> None:
    server = scripted_openai_server(Script([text("4", usage={})]))
    guard = CostGuard(tmp_path / "spend.json", 10.0)
    model = BudgetedChatModel(OpenAICompatibleModel(scripted_model_config(server)), guard, PRICES, 20)
    model.complete(MESSAGES, [])
    assert guard.spent_usd == pytest.approx(most_a_call_costs(PRICES, MESSAGES, [], 20))


def test_a_cap_over_a_model_without_prices_is_refused(scripted_openai_server: ServerFactory, tmp_path: Path) -> None:
    activate_cost_guard(CostGuard(tmp_path / "spend.json", 1.0))
    with pytest.raises(ConfigError, match=r"has no 'model\.pricing'"):
        build_chat_model(scripted_model_config(scripted_openai_server()))


def test_a_pricing_file_named_in_code_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("p.yaml").write_text("input_per_million: 1\noutput_per_million: 1\n")
    assert model_pricing(ModelConfig(pricing="p.yaml")) == Pricing(input_per_million=1, output_per_million=1)
    with pytest.raises(ConfigError, match=r"model\.pricing: cannot read the pricing file"):
        model_pricing(ModelConfig(pricing="missing.yaml"))


def _spend_from_a_process(base_url: str, path: str, results: Any) -> None:
    guard = CostGuard(Path(path), 0.05)
    # the scripted server ignores max_tokens: 200 covers its longest reply, as a real server's would
    config = ModelConfig(base_url=base_url, api_key_env=None, cache=False, max_tokens=200)
    model = BudgetedChatModel(OpenAICompatibleModel(config), guard, PRICES, 200)
    calls = 0
    try:
        for _ in range(200):
            model.complete(MESSAGES, [])
            calls += 1
    except BudgetExhausted:
        results.put(("stopped", calls))
        return
    results.put(("ran out of calls", calls))


@pytest.mark.slow
def test_processes_share_one_spend(scripted_openai_server: ServerFactory, tmp_path: Path) -> None:
    """Three processes spend against one cap: together they stay under it, and all stop."""
    server = scripted_openai_server(latency_s=0.01)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    path = tmp_path / "spend.json"
    processes = [context.Process(target=_spend_from_a_process, args=(server.base_url, str(path), results))
                 for _ in range(3)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    assert [outcome for outcome, _ in outcomes] == ["stopped"] * 3
    spent = CostGuard(path, 0.05).spent_usd
    assert spent <= 0.05
    assert spent == pytest.approx(PRICES.cost_of(Usage(**server.total_usage())))
    assert sum(calls for _, calls in outcomes) == len(server.requests)


# --------------------------------------------------------------------------- records and figures


def test_each_response_carries_its_cost_and_the_summary_adds_them(
    scripted_openai_server: ServerFactory, tmp_path: Path
) -> None:
    server = scripted_openai_server()
    run = _run_config(tmp_path, f"  model: m\n  base_url: {server.base_url}\n  api_key_env: null\n  cache: false\n"
                                "  pricing: {input_per_million: 2, output_per_million: 8}\n")
    summary = run_benchmark(load_run_config(run), tmp_path / "out")
    responses = [json.loads(line) for line in (tmp_path / "out" / "responses.jsonl").read_text().splitlines()]
    assert len(responses) == 6
    for response in responses:
        usage = response["usage"]
        assert response["cost_usd"] == pytest.approx(PRICES.cost_of(Usage(usage["prompt_tokens"], usage["completion_tokens"])))
    paid = PRICES.cost_of(Usage(**server.total_usage()))
    assert summary["overall"]["cost_usd"] == pytest.approx(paid, abs=1e-6)
    assert summary["streams"]["mine"]["cost_usd"] == pytest.approx(paid, abs=1e-6)


def test_an_unpriced_run_says_null_not_zero(scripted_openai_server: ServerFactory, tmp_path: Path) -> None:
    server = scripted_openai_server()
    run = _run_config(tmp_path, f"  model: m\n  base_url: {server.base_url}\n  api_key_env: null\n  cache: false\n")
    summary = run_benchmark(load_run_config(run), tmp_path / "out")
    assert summary["overall"]["cost_usd"] is None


class _Refusing:
    """An agent whose model refuses its n-th call, as BudgetedChatModel would."""

    def __init__(self, refuse_on: int) -> None:
        self.calls = 0
        self.refuse_on = refuse_on

    def respond(self, stimulus: Any, turn: Any) -> None:
        self.calls += 1
        if self.calls == self.refuse_on:
            raise BudgetExhausted("cap reached")
        turn.begin_step()
        turn.call_tool("final_answer", {"answer": "Feedback recorded" if stimulus.kind == "feedback" else "4"})

    def reset(self) -> None:
        pass


@pytest.mark.parametrize(("refuse_on", "recorded"), [(1, []), (2, [TaskRecord])], ids=["in the task", "in the feedback"])
def test_a_refused_call_records_no_failure_and_leaves_the_episode_unfinished(
    refuse_on: int, recorded: list[type[Record]]
) -> None:
    from pytest_evomemory.evaluation import EvoMemoryEvaluator
    from pytest_evomemory.runtime import StreamRun

    run = StreamRun(stream="s", agent=_Refusing(refuse_on), memory=None, evaluator=EvoMemoryEvaluator(),
                    memory_strategy="none", max_steps=2)
    records: list[Record] = []
    episode = Episode(run, BenchmarkSample("t1", "s", 0, "q", "4"), records.append)
    with pytest.raises(BudgetExhausted):
        episode.run_task()
        episode.finish()
    if refuse_on == 1:
        episode.finish()  # the teardown still runs: no feedback for a task that never ended
    assert [type(record) for record in records] == recorded  # no error, feedback or skip record


def test_the_progress_line_shows_the_spend_and_the_estimate_for_the_rest() -> None:
    streams = [StreamProgress("a", total=4), StreamProgress("b", total=4)]
    for stream in streams:
        stream.add({"scored": {"correct": True}, "response": {"cost_usd": 0.01, "usage": {}}})
    assert cost_text(streams) == "  cost $0.0200 (~$0.0600 more)"  # $0.02 for 2 tasks, 6 left
    assert "cost $0.0200" in streams[0].line(cost_text(streams))
    assert cost_text([StreamProgress("c", total=2)]) == ""
