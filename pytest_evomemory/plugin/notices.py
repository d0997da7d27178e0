"""Lines the plugin writes while a test is running, past pytest's output capture.

During a stream fixture's setup pytest captures stdout and stderr (at the file
descriptor), so a line printed there would only show if the task failed. A notice
that something is being waited for must show while it is waited for: it is written
to the real stderr with capturing suspended (in an xdist worker too, whose stderr
is the controller's terminal).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import nullcontext

import pytest

from ..redaction import shown
from ..runtime.lines import memory_wait_line


def write_past_capture(config: pytest.Config, line: str) -> None:
    """``line`` on the real stderr now, redacted and inert."""
    capture = config.pluginmanager.getplugin("capturemanager")
    suspended = capture.global_and_fixture_disabled() if capture is not None else nullcontext()
    with suspended:
        sys.stderr.write(shown(line) + "\n")
        sys.stderr.flush()


def memory_wait_notice(config: pytest.Config, stream: str, timeout_s: float) -> Callable[[float, str], None]:
    """The ``on_wait`` of stream ``stream``'s memory factory (see
    :func:`..memory.factory.open_with_timeout`)."""

    def notice(elapsed_s: float, name: str) -> None:
        write_past_capture(config, memory_wait_line(stream, elapsed_s, name, timeout_s))

    return notice


__all__ = ["memory_wait_notice", "write_past_capture"]
