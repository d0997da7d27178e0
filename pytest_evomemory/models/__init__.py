"""Chat models: the protocol, the OpenAI-compatible client, the response cache."""

from .base import ChatCompletion, ChatModel, ModelToolCall
from .factory import build_chat_model, check_agent_environment

__all__ = ["ChatCompletion", "ChatModel", "ModelToolCall", "build_chat_model", "check_agent_environment"]
