"""Agents: the protocol, the built-in agents and the factory that picks one."""

from .base import Agent, AgentFactory, Turn
from .factory import build_agent

__all__ = ["Agent", "AgentFactory", "Turn", "build_agent"]
