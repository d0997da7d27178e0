"""Each attempt of a model call has a total deadline (``model.timeout_s``): connect,
send and the whole reply, enforced even when the reply trickles in byte by byte
(issue 23: a 200 trickling one byte every 0.5 s with ``timeout_s: 2`` ran until it
was killed at 45 s, because HTTP clients time out each read, not the request)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pytest_evomemory.core.errors import ModelError
from pytest_evomemory.models import build_chat_model
from pytest_evomemory.models.deadline import (
    Attempt,
    AttemptCancelled,
    DeadlineExceeded,
    allow_calls,
    call_within,
    interrupt_calls,
)
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import Fault, Script, final_answer, scripted_model_config

from ..bad_input.conftest import KEY_VARIABLE, SECRET, tiny_run_config

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
TRICKLE = Fault(200, then=final_answer("4"), trickle_s=0.25)


def test_a_trickling_reply_fails_at_the_deadline_of_each_attempt(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([TRICKLE, TRICKLE], then=None))
    model = build_chat_model(scripted_model_config(server, timeout_s=1.0, max_retries=1))
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, [])
    elapsed = time.monotonic() - started
    assert 1.9 <= elapsed < 5.0  # two attempts of 1 s, not the 40 s the body would take
    message = str(caught.value)
    assert server.base_url in message and "after 2 attempts" in message
    assert "timed out after 1s (model.timeout_s" in message and "while reading the reply" in message
    assert "bytes of the reply received" in message and "raise model.timeout_s" in message
    assert len(server.requests) == 2


def test_the_next_attempt_gets_a_deadline_of_its_own(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([TRICKLE, final_answer("4")]))
    model = build_chat_model(scripted_model_config(server, timeout_s=0.6, max_retries=1))
    completion = model.complete(MESSAGES, [])
    assert completion.tool_calls[0].arguments == '{"answer": "4"}'
    assert len(server.requests) == 2


def test_an_abandoned_attempt_stops_reading(scripted_openai_server: ServerFactory) -> None:
    """The attempt the caller gave up on hangs up: the server's trickle ends at once,
    and no connection is left reading in the background."""
    server = scripted_openai_server(Script([TRICKLE], then=None))
    model = build_chat_model(scripted_model_config(server, timeout_s=0.5, max_retries=0))
    with pytest.raises(ModelError, match=r"timed out after 0\.5s"):
        model.complete(MESSAGES, [])
    settled = time.monotonic() + 2.0
    while server.in_flight and time.monotonic() < settled:
        time.sleep(0.02)
    assert server.in_flight == 0


def test_a_server_that_never_answers_fails_at_the_deadline(scripted_openai_server: ServerFactory) -> None:
    server = scripted_openai_server(Script([Fault(200, delay_s=5.0, then=final_answer("late"))], then=None))
    model = build_chat_model(scripted_model_config(server, timeout_s=0.4, max_retries=0))
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"timed out after 0\.4s .* while (connecting|waiting)"):
        model.complete(MESSAGES, [])
    assert time.monotonic() - started < 3.0  # not the 5 s the server takes


def test_call_within_returns_raises_or_gives_up() -> None:
    assert call_within(1.0, lambda attempt: 42) == 42
    with pytest.raises(KeyError):
        call_within(1.0, lambda attempt: {}["missing"])

    stopped = threading.Event()
    aborted = threading.Event()

    def slow(attempt: Attempt) -> int:
        attempt.on_cancel(aborted.set)
        try:
            while True:
                attempt.reading(1)
                time.sleep(0.01)
        except AttemptCancelled:
            stopped.set()
            raise

    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as caught:
        call_within(0.2, slow)
    assert time.monotonic() - started < 2.0
    assert caught.value.phase == "reading the reply" and caught.value.received > 0
    assert aborted.is_set() and stopped.wait(1.0)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_trickling_server_fails_the_task_in_time_through_the_plugin(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    server = scripted_openai_server(lambda request: Fault(200, then=final_answer("4"), trickle_s=0.5))
    run = tiny_run_config(pytester.path, server.base_url, model={"timeout_s": 1, "max_retries": 0})
    started = time.monotonic()
    result = pytester.runpytest_subprocess(f"--evomemory-config={run}", "-p", "no:randomly", *workers)
    elapsed = time.monotonic() - started
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    result.assert_outcomes(failed=2)
    assert "timed out after 1s (model.timeout_s" in output and "Traceback" not in output
    assert elapsed < 30  # 2 tasks x 1 s and the start-up, never the 45 s of the report
    assert Path(pytester.path / "results" / "summary.json").is_file()


def test_an_attempt_runs_on_its_callers_thread() -> None:
    """No helper thread per call (two thread wake-ups a call, each waiting for a core
    on a loaded machine); the watchdog keeps the deadline."""
    assert call_within(1.0, lambda attempt: threading.get_ident()) == threading.get_ident()


def test_the_driver_interrupts_a_call_waiting_for_headers_on_another_thread(
    scripted_openai_server: ServerFactory,
) -> None:
    """``evomemory run``'s chains run on threads no signal reaches: Ctrl-C aborts
    their calls wherever they block (here before any byte of the reply came), and
    each raises KeyboardInterrupt in its chain."""
    server = scripted_openai_server(Script([Fault(200, delay_s=60.0, then=final_answer("late"))], then=None))
    model = build_chat_model(scripted_model_config(server, timeout_s=120.0, max_retries=0))
    raised: list[BaseException] = []

    def chain() -> None:
        try:
            model.complete(MESSAGES, [])
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=chain, daemon=True)
    thread.start()
    settled = time.monotonic() + 30
    while not server.in_flight and time.monotonic() < settled:
        time.sleep(0.01)
    assert server.in_flight == 1
    interrupt_calls()
    try:
        thread.join(timeout=30)
        assert not thread.is_alive() and len(raised) == 1 and isinstance(raised[0], KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt):  # and no call starts until the driver allows it
            call_within(1.0, lambda attempt: 42)
    finally:
        allow_calls()
    assert call_within(1.0, lambda attempt: 42) == 42
