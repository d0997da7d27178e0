"""What a process that runs streams imports before its first model call, and what
the xdist controller, which runs none, does not import at all.

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
from pathlib import Path

#: The documents of the session's end: the comparison (compare.json, replicates.json)
#: and pytest-json-report's session block; and the reporting that writes them.
END_OF_SESSION = (
    "pytest_evomemory.rundocs.compare",
    "pytest_evomemory.rundocs.report",
    "pytest_evomemory.reporting.compare",
    "pytest_evomemory.reporting.terminal",
    "pytest_evomemory.analysis.power",
)


#: What a run needs only at its end, where it writes summary.json (the serial driver
#: and the controller load it on their load-ahead thread once the streams are under
#: way): summary.json's models, the categories' table and its intervals; and a
#: sharded run's plan. An xdist worker, which summarizes nothing, never imports them.
AT_THE_END = (
    "pytest_evomemory.rundocs.summary",
    "pytest_evomemory.analysis.categories",
    "pytest_evomemory.analysis.clustered",
    "pytest_evomemory.runtime.shards",
)


#: What only a process that calls a model or ranks a memory needs: the HTTP stack
#: (h11, which reads the direct connection's replies; ssl; the standard library's
#: client; httpx2 behind a proxy or for a memory library's metered calls) and numpy
#: (an in-process memory's first record imports it).
WORKER_ONLY = ("h11", "http.client", "ssl", "httpx2", "numpy")


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
    assert [name for name in (*END_OF_SESSION, *AT_THE_END) if name in loaded] == []


def test_the_run_command_imports_none_of_the_session_end_before_it_runs() -> None:
    loaded = _loaded_after("import pytest_evomemory.cli.run")
    assert "pytest_evomemory.runtime.session" in loaded
    assert [name for name in (*END_OF_SESSION, *AT_THE_END) if name in loaded] == []


def test_the_controller_imports_summary_documents_only_for_the_end() -> None:
    """The controller's start-up (its hooks, the progress lines) imports no
    summary.json model; loading the end ahead (``prepare_finish``) does."""
    loaded = _loaded_after(
        "import pytest_evomemory.plugin.activate, pytest_evomemory.plugin.controller, pytest_evomemory.plugin.progress\n"
        "        started = set(sys.modules)\n"
        "        from pytest_evomemory.runtime.run import prepare_finish\n"
        "        assert not {'pytest_evomemory.rundocs.summary'} & started, 'imported at start-up'\n"
        "        prepare_finish(None)"
    )
    assert "pytest_evomemory.rundocs.summary" in loaded


def test_the_controller_checks_the_endpoint_without_the_http_stack() -> None:
    """What pytest_configure does in the xdist controller before it starts the workers:
    the runtime and the controller's hooks imported, an agent's endpoint environment
    checked (base URL, key variable, proxies)."""
    loaded = _loaded_after(
        "import pytest_evomemory.plugin.activate, pytest_evomemory.plugin.controller\n"
        "        from pytest_evomemory.config import AgentConfig\n"
        "        from pytest_evomemory.models.factory import check_agent_environment\n"
        "        check_agent_environment(AgentConfig.model_validate(\n"
        "            {'kind': 'tiny', 'model': {'base_url': 'http://127.0.0.1:9/v1', 'api_key_env': None}}))"
    )
    assert "pytest_evomemory.models.endpoint" in loaded
    assert [name for name in WORKER_ONLY if name in loaded] == []


def test_an_in_process_memory_opens_and_recalls_empty_without_numpy(tmp_path: Path) -> None:
    """A stream's memory opens empty: its first recall comes before its first record."""
    loaded = _loaded_after(
        "from pathlib import Path\n"
        "        from pytest_evomemory.config import MemoryConfig\n"
        "        from pytest_evomemory.memory import build_memory\n"
        "        from pytest_evomemory.memory.base import MemoryContext\n"
        f"        memory = build_memory(MemoryConfig(), MemoryContext('s', Path({str(tmp_path)!r}), 'run'))\n"
        "        assert memory.recall('what is the capital of France') == []"
    )
    assert "pytest_evomemory.memory.inprocess" in loaded
    assert "numpy" not in loaded


def test_a_stream_opens_without_numpy_or_httpx2(tmp_path: Path) -> None:
    """A stream's agent, model client and in-process memory built, as a worker or a
    chain does before its first call: the memory libraries' metered transport (httpx2)
    is imported only when a library asks for it, numpy at the memory's first record."""
    config = tmp_path / "run.yaml"
    config.write_text(
        "name: probe\n"
        "benchmark: {benchmark: sample}\n"
        "agent: {kind: tiny, model: {model: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: null}}\n"
        "memory: {backend: inprocess}\n",
        encoding="utf-8",
    )
    loaded = _loaded_after(
        "from pathlib import Path\n"
        "        from pytest_evomemory.configs.load import load_run_config\n"
        "        from pytest_evomemory.runtime.run import BenchmarkRun\n"
        f"        run = BenchmarkRun(load_run_config(Path({str(config)!r})), Path({str(tmp_path / 'out')!r}))\n"
        "        run.open_stream(run.stream_order[0])"
    )
    assert "pytest_evomemory.memory.inprocess" in loaded and "pytest_evomemory.models.openai_compat" in loaded
    assert [name for name in ("httpx2", "numpy") if name in loaded] == []


def test_every_public_document_name_resolves_from_the_module_that_declares_it() -> None:
    """rundocs/__init__ lists each public name three times (for mypy, for its lazy
    import, for ``__all__``): the lists must agree, and each name must be the object
    its home module declares."""
    import importlib

    import pytest_evomemory.rundocs as rundocs

    homes = rundocs._HOMES
    assert set(homes) == set(rundocs.__all__)
    for name, home in homes.items():
        assert getattr(rundocs, name) is getattr(importlib.import_module(f"pytest_evomemory.rundocs.{home}"), name)
    source = Path(rundocs.__file__).read_text(encoding="utf-8")
    typed = source[source.index("if TYPE_CHECKING:"):source.index("#: The module that declares each name")]
    for name in homes:
        assert f" {name}," in typed or f" {name}\n" in typed or f"    {name},\n" in typed, name
