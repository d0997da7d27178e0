"""Test helpers for agents, benchmarks and downstream repositories (no model needed)."""

from .scripted_server import (
    Fault,
    Script,
    ScriptedServer,
    echo_policy,
    final_answer,
    make_echo_policy,
    memory_library_policy,
    scripted_model_config,
    text,
    tool_call,
    tool_calls,
)

__all__ = [
    "Fault",
    "Script",
    "ScriptedServer",
    "echo_policy",
    "final_answer",
    "make_echo_policy",
    "memory_library_policy",
    "scripted_model_config",
    "text",
    "tool_call",
    "tool_calls",
]
