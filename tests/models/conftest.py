"""The model client's tests share the agents' scripted server and isolated cache."""

from __future__ import annotations

from ..agents.conftest import isolated_cache, scripted_openai_server

__all__ = ["isolated_cache", "scripted_openai_server"]
