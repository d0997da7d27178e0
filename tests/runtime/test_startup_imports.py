"""What a process that runs streams imports before its first model call.

Every xdist worker and every ``evomemory run`` imports the runtime and the plugin's
worker side before it starts; on two cores, five pytest processes' start-up is the
critical path of a parallel run (docs/performance.md, "Start-up"). The session's end
(its JSON block, the comparison of arms) runs once, in one process, after the last
call: its documents must not be imported at start-up. Checked in a fresh interpreter
(this test process has imported everything), by module name, never by time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

#: The documents of the session's end: the comparison (compare.json, replicates.json)
#: and pytest-json-report's session block; and the reporting that writes them.
END_OF_SESSION = (
    "pytest_evomemory.rundocs.compare",
    "pytest_evomemory.rundocs.report",
    "pytest_evomemory.reporting.compare",
    "pytest_evomemory.reporting.terminal",
    "pytest_evomemory.analysis.power",
)


def _loaded_after(imports: str) -> list[str]:
    code = textwrap.dedent(f"""
        import json, sys
        {imports}
        print(json.dumps(sorted(sys.modules)))
    """)
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_a_worker_imports_none_of_the_session_end_before_it_runs() -> None:
    """What pytest_configure imports in a worker (the runtime, the worker's hooks and
    the JSON report's per-task metadata), then a task's metadata built."""
    loaded = _loaded_after(
        "import pytest_evomemory.plugin.activate, pytest_evomemory.plugin.worker, pytest_evomemory.plugin.reporters\n"
        "        from pytest_evomemory.rundocs.taskmeta import TaskMetadata\n"
        "        TaskMetadata(stream='s', task_id='t').written()"
    )
    assert "pytest_evomemory.runtime.session" in loaded  # the check sees what it imports
    assert [name for name in END_OF_SESSION if name in loaded] == []


def test_the_run_command_imports_none_of_the_session_end_before_it_runs() -> None:
    loaded = _loaded_after("import pytest_evomemory.cli.run")
    assert "pytest_evomemory.runtime.session" in loaded
    assert [name for name in END_OF_SESSION if name in loaded] == []
