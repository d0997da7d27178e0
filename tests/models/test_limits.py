"""Endpoint limits shared by every process of a session (issue 27 item 4):
``model.max_connections`` slots and 429 / Retry-After backoff, through files in
the session's directory (models/limits.py)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_evomemory.models.limits import (
    _BLOCKED_UNTIL,
    MAX_HANDOFFS,
    SESSION_DIR_ENV,
    EndpointLimiter,
    _Waiter,
    close_session_directory,
    open_session_directory,
    session_directory,
)
from pytest_evomemory.models.openai_compat import OpenAICompatibleModel
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import Fault, Script, scripted_model_config

from ..bad_input.conftest import KEY_VARIABLE, SECRET, tasks_file

URL = "http://127.0.0.1:8000/v1"
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


class Concurrency:
    """The peak of concurrent holders, observed by the holders themselves."""

    def __init__(self, holders: int) -> None:
        self.now = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.start = threading.Barrier(holders)  # all ask at once, however slowly threads start

    def hold(self, limiter: EndpointLimiter, seconds: float) -> None:
        self.start.wait(timeout=30)
        with limiter.slot():
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            time.sleep(seconds)
            with self.lock:
                self.now -= 1


def test_threads_share_the_slots(tmp_path: Path) -> None:
    limiter = EndpointLimiter(tmp_path, URL, 2)
    seen = Concurrency(6)
    threads = [threading.Thread(target=seen.hold, args=(limiter, 0.05)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen.peak == 2


def _until_waiting(limiter: EndpointLimiter, count: int) -> None:
    """Wait for the threads to be in line (never a figure of time in an assertion)."""
    deadline = time.monotonic() + 30
    while len(limiter._line) != count:
        assert time.monotonic() < deadline, "the thread never got there"
        time.sleep(0.001)


def test_threads_of_a_process_take_a_freed_slot_in_the_order_they_asked(tmp_path: Path) -> None:
    """The chains of one ``evomemory run`` take turns: a freed slot goes, still
    locked, to the thread that has waited longest, so they all finish together."""
    limiter = EndpointLimiter(tmp_path, URL, 1)
    order: list[int] = []

    def take(number: int) -> None:
        with limiter.slot():
            order.append(number)

    threads = [threading.Thread(target=take, args=(number,)) for number in range(5)]
    with limiter.slot():
        for number, thread in enumerate(threads):
            thread.start()
            _until_waiting(limiter, number + 1)
    for thread in threads:
        thread.join(timeout=30)
    assert order == [0, 1, 2, 3, 4]
    assert EndpointLimiter(tmp_path, URL, 1)._try_slot(0)  # the last holder unlocked it


def test_a_slot_handed_on_within_a_process_is_unlocked_for_the_others_in_time(tmp_path: Path) -> None:
    """A process whose line never empties hands a slot on at most MAX_HANDOFFS times
    in a row; then the slot is unlocked, so another process (here another limiter on
    the same files, which ``flock`` excludes as it excludes a process) can take it."""
    limiter, other = EndpointLimiter(tmp_path, URL, 1), EndpointLimiter(tmp_path, URL, 1)
    index = limiter._acquire()
    waiters = [_Waiter() for _ in range(MAX_HANDOFFS + 2)]
    limiter._line.extend(waiters)
    for handed in range(MAX_HANDOFFS):
        limiter._release(index)
        assert waiters[handed].slot == index and waiters[handed].ready.is_set()
        assert not other._try_slot(index)  # still locked: handed on, not freed
    limiter._release(index)
    assert waiters[MAX_HANDOFFS].slot is None and len(limiter._line) == 2
    assert other._try_slot(index)


def test_no_cap_means_no_waiting(tmp_path: Path) -> None:
    limiter = EndpointLimiter(tmp_path, URL, None)
    seen = Concurrency(4)
    threads = [threading.Thread(target=seen.hold, args=(limiter, 0.1)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen.peak == 4
    assert not list(limiter.directory.glob("slot-*"))


def test_endpoints_have_slots_of_their_own(tmp_path: Path) -> None:
    first, second = EndpointLimiter(tmp_path, URL, 1), EndpointLimiter(tmp_path, URL + "/other", 1)
    with first.slot(), second.slot():  # would wait for ever if they shared one
        assert first.directory != second.directory


def _request_through_the_client(base_url: str, directory: str, count: int) -> None:
    os.environ[SESSION_DIR_ENV] = directory
    from pytest_evomemory.config import ModelConfig

    config = ModelConfig(base_url=base_url, api_key_env=None, cache=False, max_connections=2, timeout_s=10)
    model = OpenAICompatibleModel(config)
    for _ in range(count):
        model.complete(MESSAGES, [])


@pytest.mark.slow
def test_processes_share_the_cap_at_the_server(scripted_openai_server: ServerFactory, tmp_path: Path) -> None:
    """Four processes, each free to send at once, never have more than
    ``max_connections`` requests at the server together."""
    server = scripted_openai_server(latency_s=0.1)
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_request_through_the_client, args=(server.base_url, str(tmp_path), 3))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    assert len(server.requests) == 12
    assert server.in_flight_max == 2


def test_a_holder_that_dies_frees_its_slot(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from pytest_evomemory.models.limits import EndpointLimiter\n"
        f"limiter = EndpointLimiter(Path({str(tmp_path)!r}), {URL!r}, 1)\n"
        "with limiter.slot():\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        limiter = EndpointLimiter(tmp_path, URL, 1)
        assert not limiter._try_slot(0)  # taken while the holder lives
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        with limiter.slot():
            assert time.monotonic() - started < 1.0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_published_backoff_is_waited_out_by_every_limiter(tmp_path: Path) -> None:
    waits: list[float] = []
    publisher = EndpointLimiter(tmp_path, URL, None)
    other = EndpointLimiter(tmp_path, URL, None, sleep=waits.append)
    publisher.block_for(5.0)
    publisher.block_for(0.1)  # an earlier end never shortens a block
    assert other.wait_if_blocked(longest_s=60) == waits[0]
    assert 4.5 < waits[0] <= 5.0
    assert other.wait_if_blocked(longest_s=0.5) == 0.5  # never longer than the cap
    assert EndpointLimiter(tmp_path, URL + "/other", None).blocked_until() == 0.0


def test_a_429_makes_the_other_callers_wait(scripted_openai_server: ServerFactory) -> None:
    """One caller gets 429 with Retry-After: 0.4; another caller of the same endpoint,
    which never saw a 429, sends its next request only once the 0.4 s are over."""
    arrivals: list[tuple[str, float]] = []
    script = Script([Fault(429, retry_after=0.4)])

    def policy(request: dict[str, object]) -> object:
        arrivals.append((str(request["messages"][0]["content"]), time.monotonic()))  # type: ignore[index]
        return script(request)

    server = scripted_openai_server(policy)
    config = scripted_model_config(server, max_retries=2, retry_backoff_max_s=5.0)
    limited, other = OpenAICompatibleModel(config), OpenAICompatibleModel(config)
    limited.complete([{"role": "user", "content": "first"}], [])
    other.complete([{"role": "user", "content": "second"}], [])
    (_, refused), (_, retried), (_, second) = arrivals
    assert retried - refused >= 0.4
    assert second - refused >= 0.39  # waited out the first caller's block without a 429 of its own
    assert len(server.requests) == 3


def test_the_session_directory_is_inherited_or_made_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SESSION_DIR_ENV, raising=False)
    made, created = open_session_directory()
    assert created and made.is_dir() and os.environ[SESSION_DIR_ENV] == str(made)
    assert session_directory() == made
    assert open_session_directory() == (made, False)  # a nested driver reuses it
    close_session_directory(made, created)
    assert not made.exists() and SESSION_DIR_ENV not in os.environ
    private = session_directory()
    assert private.is_dir() and session_directory() == private


@pytest.mark.slow
def test_the_cap_holds_across_xdist_workers(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user runs it: three workers, each with its own stream of independent tasks,
    ``max_connections: 1``: the server never sees two requests at once."""
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    monkeypatch.delenv(SESSION_DIR_ENV, raising=False)
    server = scripted_openai_server(latency_s=0.05)
    for name in ("a", "b", "c"):
        tasks_file(pytester.path, count=3, name=f"{name}.jsonl")
    files = ", ".join(f"{{name: {name}, path: {name}.jsonl}}" for name in ("a", "b", "c"))
    (pytester.path / "run.yaml").write_text(
        "name: capped\noutput_dir: results\n"
        f"benchmark: {{benchmark: files, files: [{files}]}}\n"
        "memory: {backend: inprocess}\n"
        "agent:\n  kind: tiny\n  memory_strategy: none\n  max_steps: 4\n  model:\n"
        f"    model: scripted-model\n    base_url: {server.base_url}\n    api_key_env: {KEY_VARIABLE}\n"
        "    cache: false\n    max_connections: 1\n",
        encoding="utf-8",
    )
    result = pytester.runpytest_subprocess("--evomemory-config=run.yaml", "-p", "no:randomly", "-n", "3")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=9)
    assert len(server.requests) == 18  # a task and a feedback turn each
    assert server.in_flight_max == 1


def test_a_closed_limiter_opens_its_files_again_when_used(tmp_path: Path) -> None:
    """A process with many endpoints closes the idle files of the oldest limiters."""
    limiter = EndpointLimiter(tmp_path, URL, 1)
    with limiter.slot():
        limiter.close()  # the held slot stays held
        assert not EndpointLimiter(tmp_path, URL, 1)._try_slot(0)
    limiter.close()
    limiter.block_for(5.0)
    assert limiter.blocked_until() > time.time() + 4
    with limiter.slot():
        pass


def test_an_older_versions_text_file_beside_the_mapped_record_changes_nothing(tmp_path: Path) -> None:
    """Earlier versions kept the backoff in a text file they truncated before each
    write; a read of a mapped page past the end of a truncated file kills the process
    (SIGBUS). The mapped record has a name of its own, so an older version sharing the
    session directory truncates only its own file."""
    limiter = EndpointLimiter(tmp_path, URL, None)
    until = limiter.block_for(5.0)
    old = limiter.directory / "blocked-until"
    assert _BLOCKED_UNTIL != old.name
    old.write_text("")  # what an older version's write starts with
    os.truncate(old, 0)
    assert limiter.blocked_until() == until
    limiter.close()


def test_a_backoff_is_read_from_the_mapped_record_and_a_torn_one_is_no_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look before every request reads the mapped record, no system call; a
    writer rewrites it in place (the mapping never outlives the file's bytes), and a
    look that catches a rewrite half done (two different halves) is no block."""
    reader = EndpointLimiter(tmp_path, URL, None)
    assert reader.blocked_until() == 0.0
    writer = EndpointLimiter(tmp_path, URL, None)
    until = writer.block_for(30.0)
    reads: list[object] = []
    real_pread = os.pread

    def counting(*args: object) -> bytes:
        reads.append(args)
        return real_pread(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "pread", counting)
    assert reader.blocked_until() == until
    monkeypatch.undo()
    assert reads == []
    path = writer.directory / _BLOCKED_UNTIL
    assert path.stat().st_size == 64
    half = f"{until:.6f} {until + 1:.6f}".encode().ljust(64)
    os.pwrite(writer._blocked_file(), half, 0)
    assert reader.blocked_until() == 0.0
    writer.block_for(60.0)
    assert reader.blocked_until() > until
    reader.close()
    assert reader.blocked_until() > until  # opened and mapped again


def test_a_file_system_that_cannot_map_the_record_has_it_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mmap

    def refused(*args: object, **kwargs: object) -> mmap.mmap:
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refused)
    writer = EndpointLimiter(tmp_path, URL, None)
    reader = EndpointLimiter(tmp_path, URL, None)
    assert reader.blocked_until() == 0.0
    until = writer.block_for(30.0)
    assert reader.blocked_until() == until


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_retired_limiter_keeps_no_file_open_after_its_use(tmp_path: Path) -> None:
    """A limiter retired by :func:`endpoint_limiter` (the oldest past its bound) is
    still used by the models holding it; nothing closes it again, so whatever it
    opens for a request is closed after that request: held, refused and backoff
    files alike."""
    limiter = EndpointLimiter(tmp_path, URL, 2)
    with limiter.slot():
        pass
    limiter.blocked_until()
    limiter.close()
    before = _open_descriptors()
    other = EndpointLimiter(tmp_path, URL, 2)
    with other.slot(), other.slot():  # both slots held elsewhere: the retired one's looks are refused
        assert limiter._take_free() is None
    other.close()
    assert _open_descriptors() - before == set()
    before = _open_descriptors()
    with limiter.slot():
        assert len(_open_descriptors() - before) == 1  # the held slot's file, for as long as it is held
    until = limiter.block_for(5.0)
    assert limiter.blocked_until() == until
    assert other.blocked_until() == until  # published to the others as before
    assert _open_descriptors() - before == set()
