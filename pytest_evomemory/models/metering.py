"""The memory libraries' own model calls under the session's cost cap.

With ``infer: true`` Mem0 and LangMem call their chat model through their own
OpenAI clients (Mem0's ``openai.OpenAI``, LangChain's ``ChatOpenAI``), not through
the agent's. Both clients take an ``httpx2.Client``, and an ``httpx2.Client`` takes a
transport: :class:`MeteredTransport` sits there, under the library, and treats each
``/chat/completions`` request as the agent's model client treats a call under
``--evomemory-max-cost`` (:class:`~..models.budget.BudgetedChatModel`): before
the request, the most it can cost (its bytes as prompt tokens, its ``max_tokens``
of reply) is reserved with the session's :class:`~..models.budget.CostGuard`, or the
request is refused; after it, the reservation is replaced by what the usage the
server reports costs at the library model's price. So one cap, shared by every
process of the session, holds the agent's and the library's spend together.

A refused request is not sent: the transport answers it itself with ``402 Payment
Required`` (which the clients do not retry), and keeps the refusal
(:class:`~..core.errors.BudgetExhausted`); the library may raise, wrap or (Mem0's
extraction) swallow the error, so the backend raises the refusal again when the
library returns (:meth:`MeteredTransport.raise_refusal`), and the session stops as
it does for the agent's own calls.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx2

from ..config.pricing import Pricing
from ..core.errors import BudgetExhausted, ConfigError
from ..core.types import Usage
from .budget import CostGuard, active_cost_guard, most_a_call_costs

#: The path suffix of the OpenAI-compatible chat endpoint (the only calls that cost).
CHAT_PATH = "/chat/completions"


class MeteredTransport(httpx2.BaseTransport):
    """An httpx transport that asks the cost guard before each chat request it sends."""

    def __init__(
        self, guard: CostGuard, pricing: Pricing, max_tokens: int, inner: httpx2.BaseTransport | None = None
    ) -> None:
        self.guard = guard
        self.pricing = pricing
        #: The reply tokens assumed when a request names no ``max_tokens``.
        self.max_tokens = max_tokens
        self.inner = inner if inner is not None else httpx2.HTTPTransport()
        #: The first refusal, raised again by the backend when the library returns.
        self.refusal: BudgetExhausted | None = None
        #: What the metered calls used, summed (for the backend's own figures).
        self.usage = Usage(0, 0)
        self.calls = 0
        self._lock = threading.Lock()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith(CHAT_PATH):
            return self.inner.handle_request(request)
        estimate = self._most(request)
        try:
            reservation = self.guard.check_before_call(estimate)
        except BudgetExhausted as refusal:
            with self._lock:
                self.refusal = self.refusal or refusal
            # Answered here, as "402 Payment Required": a client retries a raised error
            # (with back-off sleeps) but not a 402, and nothing is sent.
            body = {"error": {"message": str(refusal), "type": "evomemory_cost_cap", "code": "cost_cap"}}
            return httpx2.Response(402, json=body, request=request)
        cost = 0.0
        try:
            response = self.inner.handle_request(request)
            response.read()
            if response.status_code < 400:
                usage = _usage(response.content)
                # A server that reports no usage is charged the most the call could cost.
                cost = self.pricing.cost_of(usage) if usage.total_tokens else estimate
                with self._lock:
                    self.calls += 1
                    self.usage = self.usage + usage
            return response
        finally:
            self.guard.settle(reservation, cost)

    def raise_refusal(self) -> None:
        """Raise the refusal the library's client met, if any (it may have swallowed it)."""
        if self.refusal is not None:
            raise self.refusal

    def close(self) -> None:
        self.inner.close()

    def _most(self, request: httpx2.Request) -> float:
        try:
            body: Any = json.loads(request.read() or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        tools = body.get("tools") if isinstance(body.get("tools"), list) else []
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        reply = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else self.max_tokens
        # every byte of the request counts, whatever its fields (a response_format schema too)
        extra = {key: value for key, value in body.items() if key not in ("messages", "tools")}
        return most_a_call_costs(self.pricing, [*messages, {"request": extra}], tools, reply)


def _usage(content: bytes) -> Usage:
    try:
        body = json.loads(content or b"{}")
    except ValueError:
        return Usage(0, 0)
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return Usage(0, 0)

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    return Usage(count("prompt_tokens"), count("completion_tokens"))


def session_meter(pricing: Pricing | None, max_tokens: int, what: str) -> MeteredTransport | None:
    """A transport for a library's chat client under the session's cost cap, or None
    when the session has no cap. ``pricing`` is the library model's price; without one
    a cap cannot be kept (the session's preflight refuses that before any task).

    The runtime hands this function to the memory backends in their
    :class:`~..memory.base.MemoryContext` (``meter``): the memory layer does not
    import this one."""
    guard = active_cost_guard()
    if guard is None:
        return None
    if pricing is None:
        raise ConfigError(
            f"{guard.flag} needs the price of {what}; set its llm.pricing: "
            "{input_per_million: ..., output_per_million: ...}", key="llm.pricing", option="max-cost",
        )
    return MeteredTransport(guard, pricing, max_tokens)


__all__ = ["CHAT_PATH", "MeteredTransport", "session_meter"]
