"""TinyAgent: a small tool-using LLM agent over any ChatModel.

It is deliberately plain (one conversation, a tool loop, no planning) so that the
benchmark measures the model and its memory, not agent cleverness. Its three
memory strategies are the three DESIGN.md names:

* ``none``: no memory at all; only ``final_answer`` is offered.
* ``deterministic_recall`` (ExpRAG): before each task the agent recalls the
  memory config's top-k experiences and puts them in the prompt, most similar
  first; in the feedback turn it retains (task, its answer, the correct answer).
* ``tool_use``: the model is offered exactly the turn's tools (the memory
  system's, registered by the runtime) and decides itself when to use them.

Every message sent or received, tool call and token count goes through the
:class:`~pytest_evomemory.agents.base.Turn`, so the transcript is the runtime's.
"""

from __future__ import annotations

from typing import Any

from ..config import AgentConfig
from ..errors import ConfigError, EpisodeError
from ..memory.base import MemorySystem
from ..models.base import ChatCompletion, ChatModel, ModelToolCall
from ..tools import FINAL_ANSWER_TOOL
from ..types import Stimulus, TaskView, UserStimulus
from . import prompts
from .base import Turn


class TinyAgent:
    """One conversation per task, kept through its feedback turn, cleared by reset."""

    def __init__(
        self,
        config: AgentConfig,
        memory: MemorySystem | None,
        model: ChatModel | None = None,
    ) -> None:
        if config.model is None and model is None:
            raise ConfigError("agent kind 'tiny' needs a 'model' section in the agent config")
        if config.memory_strategy == "deterministic_recall" and memory is None:
            raise ConfigError("tiny with memory_strategy 'deterministic_recall' needs a memory system")
        self.config = config
        self.strategy = config.memory_strategy
        # Only deterministic_recall touches memory directly; the others never see it.
        self.memory = memory if self.strategy == "deterministic_recall" else None
        if model is None:
            from ..models.factory import build_chat_model

            assert config.model is not None
            model = build_chat_model(config.model)
        self.model = model
        self.system_prompt = prompts.system_prompt(config.system_prompt, self.strategy)
        self._conversation: list[dict[str, Any]] = []
        self._task: TaskView | None = None

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        if isinstance(stimulus, TaskView):
            self._start_task(stimulus, turn)
        else:
            self._start_feedback(stimulus, turn)
        self._tool_loop(turn, feedback=isinstance(stimulus, UserStimulus))

    def reset(self) -> None:
        self._conversation = []
        self._task = None

    # ------------------------------------------------------------------ stimuli

    def _start_task(self, task: TaskView, turn: Turn) -> None:
        self._conversation = []
        self._task = task
        prompt = task.prompt
        if self.memory is not None:
            # No top_k: the memory config owns how many experiences come back.
            prompt = prompts.with_memories(prompt, self.memory.recall(task.prompt))
        self._append({"role": "system", "content": self.system_prompt}, turn)
        self._append({"role": "user", "content": prompt}, turn)

    def _start_feedback(self, feedback: UserStimulus, turn: Turn) -> None:
        if self.memory is not None and self._task is not None:
            experience = prompts.experience_text(
                self._task.prompt, feedback.submitted_answer, feedback.target
            )
            self.memory.retain(experience, {"task_id": feedback.task_id, "stream": feedback.stream})
        if not self._conversation:  # feedback without its task (a reset in between)
            self._append({"role": "system", "content": self.system_prompt}, turn)
        self._append({"role": "user", "content": feedback.content}, turn)

    # ------------------------------------------------------------------ the loop

    def _tool_loop(self, turn: Turn, *, feedback: bool) -> None:
        tools = [spec.to_openai() for spec in turn.tools]
        nudged = False
        while not turn.finished:
            turn.begin_step()  # raises EpisodeError past max_steps
            completion = self.model.complete(self._conversation, tools)
            turn.record_usage(completion.usage)
            self._append(completion.to_message(), turn, cached=completion.cached)
            if completion.tool_calls:
                self._run_tools(completion, turn)
                continue
            if nudged:
                raise EpisodeError(
                    "the model answered in plain text again after being asked to call "
                    "final_answer; it must end every turn with a final_answer tool call"
                )
            nudged = True
            self._append(
                {"role": "user", "content": prompts.FEEDBACK_NUDGE if feedback else prompts.NUDGE}, turn
            )

    def _run_tools(self, completion: ChatCompletion, turn: Turn) -> None:
        # final_answer last: a model that emits [final_answer, retain] in one message
        # means both, and the turn would refuse retain after it ended.
        ordered = sorted(completion.tool_calls, key=lambda call: call.name == FINAL_ANSWER_TOOL.name)
        results = {id(call): turn.call_tool(call.name, call.arguments) for call in ordered}
        # Tool results go back in the order the model made the calls.
        for call in completion.tool_calls:
            self._append(_tool_message(call, results[id(call)]), turn)

    def _append(self, message: dict[str, Any], turn: Turn, *, cached: bool = False) -> None:
        self._conversation.append(message)
        turn.add_message({**message, "cached": True} if cached else message)


def _tool_message(call: ModelToolCall, result: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": result}
