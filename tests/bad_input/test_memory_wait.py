"""A memory factory that hangs: the screen says what is being waited for.

``open_timeout_s`` (120 s by default) ends a factory that never returns; until
then, every 10 s (a quarter of the timeout when shorter), a line names the stream,
the factory and the time waited, so two silent minutes do not look like a hang of
the plugin itself.
"""

from __future__ import annotations

import threading
import time

import pytest

from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.memory.factory import WAIT_NOTICE_EVERY_S, open_with_timeout
from pytest_evomemory.memory.inprocess import InProcessMemory

from .conftest import assert_no_internal_error


def test_a_slow_factory_is_announced_while_it_is_waited_for() -> None:
    heard: list[tuple[float, str]] = []
    memory = InProcessMemory()

    def slow() -> InProcessMemory:
        time.sleep(0.45)
        return memory

    assert open_with_timeout(slow, 1.0, "my_pkg:open_mem", on_wait=lambda s, n: heard.append((s, n))) is memory
    assert [name for _, name in heard] == ["my_pkg:open_mem"] * len(heard)
    assert 1 <= len(heard) <= 2  # every 0.25 s (a quarter of the timeout) until it returned
    assert all(0.2 < elapsed < 0.5 for elapsed, _ in heard)


def test_a_fast_factory_is_not_announced_and_a_hung_one_still_times_out() -> None:
    heard: list[float] = []
    memory = InProcessMemory()
    assert open_with_timeout(lambda: memory, 5, "f", on_wait=lambda s, n: heard.append(s)) is memory
    assert heard == []
    release = threading.Event()
    with pytest.raises(MemoryBackendError, match=r"memory factory hung did not return within 0\.4 s"):
        open_with_timeout(lambda: (release.wait(5), memory)[1], 0.4, "hung", on_wait=lambda s, n: heard.append(s))
    release.set()
    assert len(heard) == 3 and heard == sorted(heard) and heard[-1] < 0.4
    assert WAIT_NOTICE_EVERY_S == 10.0


HANGING_MEMORY = """
import time

import pytest

from pytest_evomemory.memory.inprocess import InProcessMemory


def open_slowly(config, context):
    time.sleep(1.2)
    return InProcessMemory()


@pytest.fixture(scope="session")
def evomemory_memory_factory():
    return open_slowly
"""


@pytest.mark.parametrize("workers", [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)], ids=["serial", "xdist"])
def test_the_wait_is_on_the_screen_while_pytest_captures(pytester: pytest.Pytester, workers: list[str]) -> None:
    from ..conftest import SAMPLE_MEMORY_RUN

    pytester.makeconftest(HANGING_MEMORY)
    result = pytester.runpytest_subprocess(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-set=memory.open_timeout_s=2",
        "--evomemory-limit=1", "--evomemory-stream=sample_facts", "-p", "no:randomly", *workers,
    )
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines([
        "evomemory: stream 'sample_facts': still waiting for memory factory conftest:open_slowly to open its "
        "memory (* s; given up at 2 s, the memory config's open_timeout_s)",
    ])
