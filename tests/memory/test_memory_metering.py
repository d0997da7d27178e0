"""The memory libraries' own model calls under the cost cap (``infer: true``).

Mem0 and LangMem call their chat model through their own OpenAI clients; the
backends give those clients an ``httpx2.Client`` whose transport
(:class:`~pytest_evomemory.models.metering.MeteredTransport`) reserves each chat
request's most with the session's cost guard and settles it at the price of the
library's model. Against the scripted server on 127.0.0.1:

* the transport charges what the server's usage costs, passes other requests
  (embeddings) through unmetered, and refuses a request that could pass the cap
  before it leaves the process;
* the library's price is ``<backend>.llm.pricing``, else the agent's when the
  library calls the agent's own model;
* a real Mem0 and LangMem with ``infer: true``, under a cap, are metered; a refused
  extraction stops the memory with :class:`BudgetExhausted` (which Mem0 would
  otherwise log and swallow), and never reaches the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.config.pricing import Pricing
from pytest_evomemory.configs.load import validate_memory
from pytest_evomemory.core.errors import BudgetExhausted, ConfigError
from pytest_evomemory.core.types import Usage
from pytest_evomemory.memory import build_memory
from pytest_evomemory.memory.base import MemoryContext
from pytest_evomemory.memory.libraries import ChatEndpoint, chat_pricing, metered_client
from pytest_evomemory.models.budget import CostGuard, activate_cost_guard
from pytest_evomemory.models.metering import MeteredTransport, session_meter
from pytest_evomemory.options import render
from pytest_evomemory.testing.scripted_server import (
    ScriptedServer,
    langmem_conversation,
    mem0_new_messages,
    memory_library_policy,
    scripted_model_config,
)

from .conftest import skip_without_extra

PRICE = Pricing(input_per_million=1000.0, output_per_million=2000.0)


def _facts(text: str) -> list[str]:
    return [f"Fact: {line.strip()}" for line in text.splitlines() if "teal" in line]


@pytest.fixture
def guard(tmp_path: Path) -> Iterator[Any]:
    """``guard(cap)``: the session's cost guard, active in this process while the test runs."""

    def make(cap: float) -> CostGuard:
        made = CostGuard(tmp_path / "spend.json", cap)
        activate_cost_guard(made)
        return made

    yield make
    activate_cost_guard(None)


def _openai(server: ScriptedServer, meter: MeteredTransport) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=server.base_url, api_key="no-key", http_client=metered_client(meter), max_retries=0)


def test_the_transport_charges_the_usage_at_the_librarys_price_and_meters_only_chat(guard: Any) -> None:
    cap = guard(100.0)
    meter = MeteredTransport(cap, PRICE, max_tokens=50)
    with ScriptedServer() as server:
        client = _openai(server, meter)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello there"}], max_tokens=20)
        client.embeddings.create(model="e", input=["not a chat call"])
        served = server.requests[0].usage
    usage = Usage(served["prompt_tokens"], served["completion_tokens"])
    assert cap.spent_usd == pytest.approx(PRICE.cost_of(usage)) and cap.spent_usd > 0
    assert (meter.calls, meter.usage) == (1, usage)  # the embeddings request was not metered
    meter.raise_refusal()  # nothing was refused


def test_a_request_that_could_pass_the_cap_never_leaves_the_process(guard: Any) -> None:
    # 200 reply tokens at $2,000 a million: $0.40 at most, over a $0.30 cap
    cap = guard(0.30)
    meter = MeteredTransport(cap, PRICE, max_tokens=200)
    from openai import APIStatusError

    with ScriptedServer() as server:
        client = _openai(server, meter)
        with pytest.raises(APIStatusError, match="reached") as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert server.requests == []
    assert raised.value.status_code == 402  # answered in the process: no retry, nothing sent
    with pytest.raises(BudgetExhausted) as refusal:
        meter.raise_refusal()
    assert re.search(r"--evomemory-max-cost \$0.3 reached", render(str(refusal.value), "pytest"))
    assert cap.spent_usd == 0 and cap.stop_reason is not None


def test_the_librarys_price_is_its_own_else_the_agents_for_the_agents_model() -> None:
    agent = ModelConfig(model="gpt-x", base_url="http://127.0.0.1:9/v1", pricing=PRICE)
    own = Pricing(input_per_million=1.0, output_per_million=1.0)
    assert chat_pricing(None, agent) == PRICE  # the agent's model on its endpoint: the agent's price
    assert chat_pricing(ChatEndpoint(model="gpt-x"), agent) == PRICE
    assert chat_pricing(ChatEndpoint(model="other"), agent) is None  # another model: unknown
    assert chat_pricing(ChatEndpoint(base_url="http://127.0.0.1:8/v1"), agent) is None  # another server
    assert chat_pricing(ChatEndpoint(model="other", pricing=own), agent) == own
    assert chat_pricing(None, ModelConfig(model="gpt-x", base_url="http://127.0.0.1:9/v1")) is None


def test_opening_an_unpriced_library_model_under_a_cap_is_refused(guard: Any, tmp_path: Path) -> None:
    skip_without_extra("mem0")
    guard(5.0)
    with ScriptedServer() as server:
        config = validate_memory(
            {"backend": "mem0", "embedder": "hashing", "mem0": {"infer": True, "llm": {"model": "another"}}}, "memory.yaml"
        )
        with pytest.raises(ConfigError) as unpriced:
            build_memory(config, MemoryContext("s1", tmp_path, "r", scripted_model_config(server), session_meter))
        assert re.search(r"--evomemory-max-cost needs the price of backend 'mem0'.s model",
                         render(str(unpriced.value), "pytest"))


@pytest.mark.parametrize("backend", ["mem0", "langmem"])
def test_a_librarys_extraction_is_metered_and_a_refused_one_stops_the_memory(
    backend: str, guard: Any, tmp_path: Path
) -> None:
    skip_without_extra(backend)
    with ScriptedServer(memory_library_policy(_facts)) as server:
        agent = scripted_model_config(server).model_copy(update={"pricing": PRICE})
        config = validate_memory({"backend": backend, "embedder": "hashing", backend: {"infer": True}}, "memory.yaml")
        cap = guard(1000.0)
        memory = build_memory(config, MemoryContext("s1", tmp_path, "r", agent, session_meter))
        try:
            memory.retain("Task: what colour are the post boxes?\nCorrect answer: teal")
            extraction = [r for r in server.requests if mem0_new_messages(r.body) or langmem_conversation(r.body)]
            assert extraction, [r.body for r in server.requests]
            spent = cap.spent_usd
            charged = sum(PRICE.cost_of(Usage(r.usage["prompt_tokens"], r.usage["completion_tokens"])) for r in extraction)
            assert spent == pytest.approx(charged) and spent > 0
            assert [hit.content for hit in memory.recall("Fact: Correct answer: teal")]  # what the model extracted
            # a cap the next extraction could pass: refused before it is sent, and the memory says so
            cap.cap_usd = spent + 0.01
            before = len(server.requests)
            with pytest.raises(BudgetExhausted, match="reached"):
                memory.retain("Task: what colour is the ferry?\nCorrect answer: teal too")
            assert len(server.requests) == before
        finally:
            memory.close()


def test_the_usage_of_a_reply_without_usage_is_charged_at_its_most(guard: Any) -> None:
    cap = guard(100.0)
    meter = MeteredTransport(cap, PRICE, max_tokens=10)

    class NoUsage:
        def handle_request(self, request: Any) -> Any:
            import httpx2

            body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
            return httpx2.Response(200, content=json.dumps(body).encode(), request=request)

        def close(self) -> None: ...

    meter.inner = NoUsage()  # type: ignore[assignment]
    from openai import OpenAI

    client = OpenAI(base_url="http://127.0.0.1:9/v1", api_key="no-key", http_client=metered_client(meter), max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=10)
    assert cap.spent_usd > PRICE.most_for(0, 10)  # the request's bytes as prompt tokens, and max_tokens of reply
