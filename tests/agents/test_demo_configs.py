"""The demo's arms: the memory arm and the control differ in memory and nothing else,
and scripts/demo runs exactly the configs the README names."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_evomemory.configs import RUNS_DIR as RUNS
from pytest_evomemory.configs.load import load_run_config

ROOT = Path(__file__).resolve().parents[2]


def test_the_control_arm_is_the_memory_arm_without_memory() -> None:
    memory = load_run_config(RUNS / "sample_tinyagent_local.yaml")
    control = load_run_config(RUNS / "sample_tinyagent_local_no_memory.yaml")
    assert (memory.agent.memory_strategy, control.agent.memory_strategy) == ("deterministic_recall", "none")
    assert memory.agent.experience_format == "answer_only"
    assert memory.agent.model == control.agent.model  # the same model, settings and all
    assert memory.agent.model is not None and memory.agent.model.provider == "local"
    assert memory.agent.model.model_path is None  # the bundled SmolLM2 model
    same = {"kind", "protocol", "max_steps", "system_prompt"}
    assert {key: getattr(memory.agent, key) for key in same} == {key: getattr(control.agent, key) for key in same}
    assert memory.benchmark == control.benchmark


def test_scripts_demo_runs_the_four_arms_then_compares_them() -> None:
    script = (ROOT / "scripts" / "demo").read_text(encoding="utf-8")
    arms = re.search(r"ARMS=\(([^)]*)\)", script)
    assert arms is not None
    names = arms.group(1).split()
    # control, two memory methods of the same agent (ExpRAG, ExpRecent: the factor), the model-free reference
    assert names == ["sample_tinyagent_local_no_memory", "sample_tinyagent_local", "sample_exprecent_local", "sample_memory"]
    for name in names:
        assert (RUNS / f"{name}.yaml").is_file(), name
    # one pytest session with every arm (the first is the baseline): the session compares them
    lines = script.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("exec ") and "-m pytest" in line
                 and "ARMS" in " ".join(lines[index:index + 2]))
    command = " ".join(lines[start:start + 2])
    assert '"${ARMS[@]/#/--evomemory-config=}"' in command
    assert '-n "${EVOMEMORY_DEMO_WORKERS:-auto}"' in command  # one worker per core, each model on one thread
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in names)
