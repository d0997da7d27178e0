"""``--evomemory-max-cost`` (``evomemory run --max-cost``): stop the session before a
model call could pass the cap.

The spend is shared by every process of the session (all pytest-xdist workers)
through one small JSON file, read and written under ``flock``:

    {"spent": 0.8125, "reserved": {"4711:12": 0.0031}, "stopped": null}

Before each call the model client asks :meth:`CostGuard.check_before_call` with
the most the call can cost (:func:`most_a_call_costs`: every byte of the request
counted as a prompt token, which no tokenizer exceeds, and ``max_tokens`` of
reply). If what is spent, plus what calls in flight elsewhere may still spend,
plus this call's most would pass the cap, the call is not made:
:class:`~pytest_evomemory.core.errors.BudgetExhausted` stops the session, and the task
is left for a resume. Otherwise the most is reserved, and replaced by the call's
actual cost (priced from the usage it reports) when it returns. So the cap holds
in the middle of a stream and across workers, at the price of stopping up to one
call's most early. A worker that dies leaves a reservation that the next look
drops (its process no longer exists).

The file belongs to one session, not to the directory it sits in: the driver makes
a new one (:func:`open_spend_file`) and names it in :data:`SPEND_FILE_ENV` for the
workers it starts. A session directory shared on purpose (several shards on one
machine, ``EVOMEMORY_SESSION_DIR`` set by the user) shares connection slots, never
a spend: otherwise a resume would find the earlier session's cap already reached.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config.pricing import Pricing
from ..core import boundedread
from ..core.errors import BudgetExhausted, ConfigError, named
from .base import ChatCompletion, ChatModel

#: The environment variable naming the session's spend file, for the workers it starts.
SPEND_FILE_ENV = "EVOMEMORY_SPEND_FILE"

#: Reply tokens assumed for a call whose config sets no ``max_tokens`` (the server's
#: own limit applies then, which we cannot know); set ``max_tokens`` for a tight cap.
UNBOUNDED_REPLY_TOKENS = 4096


def most_a_call_costs(
    pricing: Pricing,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    max_tokens: int | None,
) -> float:
    """An upper bound of one call's cost: the request's UTF-8 bytes as prompt tokens
    (a token is at least one byte) and ``max_tokens`` as reply tokens."""
    request = json.dumps({"messages": list(messages), "tools": list(tools)}, ensure_ascii=False, default=str)
    prompt_bound = len(request.encode("utf-8", errors="surrogatepass"))
    return pricing.most_for(prompt_bound, max_tokens if max_tokens is not None else UNBOUNDED_REPLY_TOKENS)


class CostGuard:
    """The session's spend against its cap, shared through ``path``."""

    def __init__(self, path: Path, cap_usd: float) -> None:
        if not cap_usd > 0:
            raise ValueError(f"the cost cap must be above 0, got {cap_usd}")
        self.path = path
        self.cap_usd = cap_usd
        #: the cap's option in messages (the door that shows one spells it)
        self.flag = named("max-cost")
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()  # flock is per open file; threads of one process also take this

    # ------------------------------------------------------------------ the shared file

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The shared state under an exclusive lock; written back when the block ends."""
        with self._lock, open(self.path, "a+", encoding="utf-8") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            handle.seek(0)
            state = _parse(handle.read(boundedread.CACHE_BYTES))
            try:
                yield state
            finally:  # a refusal raises out of the block, and must still be written
                handle.seek(0)
                handle.truncate()
                json.dump(state, handle)
                handle.flush()

    def _read(self) -> dict[str, Any]:
        try:
            return _parse(boundedread.read_text(self.path, limit=boundedread.CACHE_BYTES, what="the spend file"))
        except (OSError, boundedread.UnreadableFile):
            return _parse("")

    # ------------------------------------------------------------------ the guard

    def check_before_call(self, estimate: float) -> str:
        """Reserve ``estimate`` dollars for a call about to be made, or raise
        :class:`BudgetExhausted` (and mark the session stopped) when it could pass
        the cap. Returns the reservation to :meth:`settle` after the call."""
        with self._state() as state:
            reserved = _live_reservations(state)
            committed = state["spent"] + sum(reserved.values())
            if state["stopped"] or committed + estimate > self.cap_usd:
                if not state["stopped"]:
                    state["stopped"] = (
                        f"{self.flag} ${self.cap_usd:g} reached: ${state['spent']:.4f} spent"
                        + (f" and ${sum(reserved.values()):.4f} in calls under way" if reserved else "")
                        + f"; the next call could cost up to ${estimate:.4f}"
                    )
                raise BudgetExhausted(
                    f"{state['stopped']}; the session stops before that call (every completed task is kept; "
                    f"resume the run with a higher {self.flag} to go on)",
                    spent_usd=float(state["spent"]), cap_usd=self.cap_usd,
                )
            reservation = f"{os.getpid()}:{next(self._numbers)}"
            reserved[reservation] = estimate
            state["reserved"] = reserved
        return reservation

    def settle(self, reservation: str, cost: float) -> None:
        """Replace the reservation by what the call cost (0 for a call that failed)."""
        with self._state() as state:
            reserved = _live_reservations(state)
            reserved.pop(reservation, None)
            state["reserved"] = reserved
            state["spent"] = float(state["spent"]) + max(0.0, cost)

    @property
    def spent_usd(self) -> float:
        return float(self._read()["spent"])

    @property
    def stop_reason(self) -> str | None:
        """Why the session stopped (once any process refused a call), else ``None``."""
        reason = self._read()["stopped"]
        return str(reason) if reason else None

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)


def open_spend_file(directory: Path) -> tuple[Path, str | None]:
    """For a driver starting a session with a cap: a new spend file in ``directory``,
    named in :data:`SPEND_FILE_ENV` (xdist workers inherit it), and the value the
    variable had before (restored by :func:`close_spend_file`)."""
    before = os.environ.get(SPEND_FILE_ENV)
    path = directory / f"spend-{uuid.uuid4().hex}.json"
    os.environ[SPEND_FILE_ENV] = str(path)
    return path, before


def close_spend_file(path: Path, before: str | None) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
    if os.environ.get(SPEND_FILE_ENV) == str(path):
        if before is None:
            del os.environ[SPEND_FILE_ENV]
        else:
            os.environ[SPEND_FILE_ENV] = before


def inherited_spend_file(directory: Path) -> Path:
    """For a worker: the spend file its driver named, else one of its own in
    ``directory`` (a worker on another host limits only itself)."""
    named = os.environ.get(SPEND_FILE_ENV)
    return Path(named) if named else directory / f"spend-{os.getpid()}.json"


def _parse(text: str) -> dict[str, Any]:
    """The state in ``text``; damaged or missing parts read as nothing spent, nothing reserved."""
    try:
        data = boundedread.loads(text) if text.strip() else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    spent = data.get("spent")
    reserved = data.get("reserved")
    return {
        "spent": _amount(spent),
        "reserved": {
            str(key): _amount(value) for key, value in (reserved.items() if isinstance(reserved, dict) else ())
            if isinstance(value, int | float)
        },
        "stopped": data.get("stopped") if isinstance(data.get("stopped"), str) else None,
    }


def _amount(value: object) -> float:
    """A recorded amount of dollars: a finite number at least 0, else 0 (damage is
    nothing spent; a 400-digit integer would not even convert to a float)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return 0.0
    try:
        amount = float(value)
    except OverflowError:
        return 0.0
    return amount if 0 <= amount < float("inf") else 0.0


def _live_reservations(state: Mapping[str, Any]) -> dict[str, float]:
    """Reservations whose process still exists (a dead worker's are dropped)."""
    live: dict[str, float] = {}
    for key, value in dict(state["reserved"]).items():
        pid = key.partition(":")[0]
        if pid.isdigit() and _alive(int(pid)):
            live[key] = value
    return live


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but another user's
        return True
    return True


class BudgetedChatModel:
    """A ChatModel that asks the :class:`CostGuard` before every call it makes.

    It sits under the response cache (a replayed reply costs nothing and is never
    refused) and over the provider, so every request that could be billed is
    checked, in the middle of a stream too.
    """

    def __init__(self, inner: ChatModel, guard: CostGuard, pricing: Pricing, max_tokens: int | None) -> None:
        self.inner = inner
        self.guard = guard
        self.pricing = pricing
        self.max_tokens = max_tokens

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ChatCompletion:
        estimate = most_a_call_costs(self.pricing, messages, tools, self.max_tokens)
        reservation = self.guard.check_before_call(estimate)
        cost = 0.0
        try:
            completion = self.inner.complete(messages, tools)
            usage = completion.usage
            # A server that reports no usage is charged the most the call could cost.
            cost = self.pricing.cost_of(usage) if usage.total_tokens else estimate
            return completion
        finally:
            self.guard.settle(reservation, cost)

    def __getattr__(self, name: str) -> Any:  # endpoint, config, ... of the provider
        return getattr(self.inner, name)


# --------------------------------------------------------------------------- the session's guard

_ACTIVE: CostGuard | None = None


def activate_cost_guard(guard: CostGuard | None) -> None:
    """Make ``guard`` the one every model client built in this process consults
    (``None``: no cap). Set by the driver of a session in each of its processes."""
    global _ACTIVE
    _ACTIVE = guard


def active_cost_guard() -> CostGuard | None:
    return _ACTIVE


def guarded(model: ChatModel, pricing: Pricing | None, max_tokens: int | None, what: str) -> ChatModel:
    """``model`` under the session's cost cap, if there is one."""
    guard = _ACTIVE
    if guard is None:
        return model
    if pricing is None:
        raise ConfigError(
            f"{guard.flag} needs the price of every model it caps; {what} has no 'model.pricing': "
            "add pricing: {input_per_million: ..., output_per_million: ...} to its agent config "
            "(0 and 0 for a model that costs nothing)",
            key="model.pricing", option="max-cost",
        )
    return BudgetedChatModel(model, guard, pricing, max_tokens)


__all__ = [
    "SPEND_FILE_ENV",
    "BudgetedChatModel",
    "CostGuard",
    "activate_cost_guard",
    "active_cost_guard",
    "close_spend_file",
    "guarded",
    "inherited_spend_file",
    "most_a_call_costs",
    "open_spend_file",
]
