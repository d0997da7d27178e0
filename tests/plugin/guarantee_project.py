"""A user's project for the run-directory guarantee tests: an agent that can be told,
through the environment, to fail, interrupt, crash or wait at a chosen stimulus.

``ACTIONS`` is a JSON object ``{"<task id>/<kind>": "<action>"}``; every stimulus is
logged to ``calls.log`` as ``<stream>/<task id>/<kind>``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

AGENT = '''
import json, os, signal, time
from pytest_evomemory.agents.baseline import RecallBaselineAgent

# A process started in the background by a non-interactive shell inherits SIGINT
# as ignored; restore what an interactive user's Ctrl-C meets.
signal.signal(signal.SIGINT, signal.default_int_handler)


def deep_user_helper(stimulus):
    raise RuntimeError("boom in " + stimulus.task_id)


class Scripted(RecallBaselineAgent):
    def respond(self, stimulus, turn):
        key = f"{stimulus.task_id}/{stimulus.kind}"
        with open(os.path.join(os.environ.get("PROJECT", "."), "calls.log"), "a") as log:
            log.write(f"{stimulus.stream}/{key}\\n")
        action = json.loads(os.environ.get("ACTIONS", "{}")).get(key)
        if action == "raise":
            deep_user_helper(stimulus)
        elif action == "interrupt":
            raise KeyboardInterrupt
        elif action == "exit":
            os._exit(3)
        elif action == "wait":
            open(os.path.join(os.environ.get("PROJECT", "."), "waiting"), "w").close()
            while True:
                time.sleep(0.05)
        elif action == "surrogate":  # lone surrogates (invalid UTF-8) in a tool call and the reply
            self._current_task = stimulus  # its feedback is stored as usual
            turn.begin_step()
            turn.call_tool("retain", {"content": "lone\\ud800 and \\udcff"})
            turn.call_tool("final_answer", {"answer": "lone\\ud800 and \\udcff"})
            return
        elif action == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().respond(stimulus, turn)


def create(config, memory):
    return Scripted(config, memory)
'''

#: Six tasks: three per sample stream.
RUN = """
name: {name}
benchmark: {{benchmark: sample, limit: 3}}
agent: {{kind: "scripted_agent:create", memory_strategy: deterministic_recall}}
memory: {{backend: inprocess}}
"""


def make_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str = "g") -> Path:
    pytester.makepyfile(scripted_agent=AGENT)
    pytester.syspathinsert()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("PROJECT", str(pytester.path))
    (pytester.path / "run.yaml").write_text(RUN.format(name=name), encoding="utf-8")
    return pytester.path


def calls(project: Path) -> list[str]:
    path = project / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def start_pytest(project: Path, *args: str) -> subprocess.Popen[bytes]:
    """pytest in the background, as a CI job or a second terminal runs it."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def wait_for(path: Path, process: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"pytest ended early: {process.stdout.read().decode() if process.stdout else ''}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.05)


def importable_by_xdist_workers(pytester: pytest.Pytester) -> None:
    """Let ``-n`` workers of an in-process session import the project's modules: they
    take the sys.path this test process started with (not PYTHONPATH), then pytest's
    ``pythonpath`` setting, which this ini gives them."""
    pytester.makeini("[pytest]\npythonpath = .\n")
