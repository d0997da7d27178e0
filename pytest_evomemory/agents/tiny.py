"""TinyAgent: a small tool-using LLM agent over any ChatModel.

It is deliberately plain (one conversation, a tool loop, no planning) so that the
benchmark measures the model and its memory, not agent cleverness. Its three
memory strategies are the three names of docs/design.md:

* ``none``: no memory at all; only ``final_answer`` is offered.
* ``deterministic_recall`` (ExpRAG): before each task the agent recalls the
  memory config's top-k experiences and puts them in the prompt, most similar
  first; in the feedback turn it retains (task, its answer, the correct answer).
* ``tool_use``: the model is offered exactly the turn's tools (the memory
  system's, registered by the runtime) and decides itself when to use them.

The paper's reference methods are presets of this one agent (``kind`` in the
agent config; docs/reference-agents.md), because they differ only in what is
recalled before a task, what is kept after its feedback and how the turn loops:

* ``exprag``: ``deterministic_recall`` of the memory's top-k most similar
  experiences; retains the labelled experience (task, answer, correct answer, the
  agent's own verdict) after feedback.
* ``exprecent``: the same, but recalls the memory's k most recently retained
  experiences (:class:`~pytest_evomemory.memory.base.RecencyRecall`): the window
  lives in the memory, since the agent's state is reset after every task.
* ``remem``: ``tool_use`` with the think / act / refine-memory loop: a reply
  without a tool call is a *think* step (the loop goes on), a memory tool call
  (recall, retain, update, forget) *refines* memory, ``final_answer`` *acts*.

``retain_policy: successes_only`` keeps only experiences whose answer the agent
judged correct from the feedback (:mod:`.verdict`): a deterministic agent then
retains nothing, a tool-using one is offered no storing tool in that feedback turn.

It speaks one of three protocols (agent config key ``protocol``): ``tools``
(native tool calls), ``text`` (the paper's "Rationale: ... / Final Answer: ..."
format with memory operations as labelled lines, see :mod:`.textproto`) for
servers and models without tool calling, and ``auto``, which offers tools and
switches to text for good at the first reply that comes back without a tool call.

Every message sent or received, tool call and token count goes through the
:class:`~pytest_evomemory.agents.base.Turn`, so the transcript is the runtime's;
text-protocol operations are run through ``Turn.call_tool`` like native calls.
"""

from __future__ import annotations

import re
from typing import Any

from ..config import DEFAULT_CONTEXT_WINDOW, AgentConfig
from ..core.errors import ConfigError, EpisodeError
from ..core.tools import FINAL_ANSWER_TOOL
from ..core.types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    INGESTION_ACKNOWLEDGEMENT,
    IngestionStimulus,
    Stimulus,
    TaskView,
    ToolSpec,
    UserStimulus,
)
from ..memory.base import MemorySystem, RecencyRecall, supports_recency
from ..memory.ingestion import turn_record
from ..models.base import ChatCompletion, ChatModel, ModelToolCall
from ..util.text import normalize
from . import prompts, textproto
from .base import Turn
from .baseline import recall_query
from .verdict import judged_correct


class TinyAgent:
    """One conversation per task, kept through its feedback turn, cleared by reset."""

    def __init__(
        self,
        config: AgentConfig,
        memory: MemorySystem | None,
        model: ChatModel | None = None,
    ) -> None:
        if config.model is None and model is None:
            raise ConfigError(f"agent kind {config.kind!r} needs a 'model' section in the agent config")
        if config.memory_strategy == "deterministic_recall" and memory is None:
            raise ConfigError(f"{config.kind} with memory_strategy 'deterministic_recall' needs a memory system")
        self.config = config
        self.strategy = config.memory_strategy
        # Only deterministic_recall touches memory directly; the others never see it.
        self.memory = memory if self.strategy == "deterministic_recall" else None
        #: ExpRecent: recall the memory's most recent records instead of the most similar.
        self.recent = config.kind == "exprecent"
        #: ReMem: a reply without a tool call is a think step, not a protocol slip.
        self.remem = config.kind == "remem"
        if self.recent and self.memory is not None and not supports_recency(self.memory):
            raise ConfigError(
                f"agent kind 'exprecent' needs a memory with recent(limit) (the k most recently retained "
                f"records); {type(getattr(self.memory, 'backend', self.memory)).__name__} has none: use a "
                "built-in backend (inprocess, dense, sqlite, postgres, mem0, langmem) or add the method (docs/memory.md)"
            )
        if model is None:
            from ..models.factory import build_chat_model

            assert config.model is not None
            model = build_chat_model(config.model)
        self.model = model
        self.protocol = config.protocol
        #: The protocol in use now: ``auto`` starts with tools and may fall back.
        self.mode: str = "text" if config.protocol == "text" else "tools"
        self._conversation: list[dict[str, Any]] = []
        self._task: TaskView | None = None

    @property
    def system_prompt(self) -> str:
        """The tools protocol's system prompt (the text one depends on the turn's tools)."""
        return prompts.system_prompt(self.config.system_prompt, self.strategy, self.remem)

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        if isinstance(stimulus, IngestionStimulus):
            self._ingest(stimulus, turn)
            return
        feedback = isinstance(stimulus, UserStimulus)
        offered = prompts.feedback_tools(turn.tools) if feedback else list(turn.tools)
        if isinstance(stimulus, TaskView):
            self._start_task(stimulus, turn)
        else:
            if not self._keeps(stimulus):
                # successes_only after a judged failure: nothing of this task is stored.
                offered = [spec for spec in offered if spec.name not in prompts.STORING_TOOLS]
            self._start_feedback(stimulus, turn)
        self._loop(turn, offered, feedback=feedback)

    def _keeps(self, feedback: UserStimulus) -> bool:
        """Whether this task's experience is one the agent keeps (retain_policy)."""
        return self.config.retain_policy == "all" or self._judged_correct(feedback)

    def _judged_correct(self, feedback: UserStimulus) -> bool:
        """The agent's own verdict from the feedback it sees (never the score)."""
        choices = self._task.choices if self._task is not None else ()
        return judged_correct(feedback.submitted_answer, feedback.target, choices)

    def reset(self) -> None:
        self._conversation = []
        self._task = None

    # ------------------------------------------------------------------ stimuli

    def _system(self, turn: Turn) -> str:
        if self.mode == "text":
            return prompts.text_system_prompt(self.config.system_prompt, self.strategy, turn.tools, self.remem)
        return self.system_prompt

    def _start_task(self, task: TaskView, turn: Turn) -> None:
        self._conversation = []
        self._task = task
        prompt = task.prompt
        if self.memory is not None:
            # No top_k: the memory config owns how many experiences come back.
            prompt = self._with_experiences(task.prompt, recall_query(task))
        if self.config.full_context and task.conversation:
            model = self.config.model
            budget = prompts.context_budget(
                model.context_tokens if model else DEFAULT_CONTEXT_WINDOW, model.max_tokens if model else None, prompt
            )
            prompt = prompts.with_conversation(prompt, task.conversation, budget)
        self._append({"role": "system", "content": self._system(turn)}, turn)
        self._append({"role": "user", "content": prompt}, turn)

    def _with_experiences(self, prompt: str, query: str) -> str:
        """``prompt`` after the experiences memory gives back: the most recent
        (ExpRecent), else those recalled for ``query`` (the question alone where the
        stream gives it, see :func:`.baseline.recall_query`)."""
        assert self.memory is not None
        if self.recent and isinstance(self.memory, RecencyRecall):  # checked in __init__
            return prompts.with_recent_memories(prompt, self.memory.recent())
        return prompts.with_memories(prompt, self.memory.recall(query))

    def _start_feedback(self, feedback: UserStimulus, turn: Turn) -> None:
        if self.memory is not None and self._task is not None and self._keeps(feedback):
            correct = self._judged_correct(feedback)
            experience = prompts.experience_text(
                self._task.prompt,
                feedback.submitted_answer,
                feedback.target,
                self.config.experience_format,
                correct,
            )
            self.memory.retain(
                experience, {"task_id": feedback.task_id, "stream": feedback.stream, "correct": correct}
            )
        if not self._conversation:  # feedback without its task (a reset in between)
            self._append({"role": "system", "content": self._system(turn)}, turn)
        content = feedback.content
        if self.mode == "text":
            content += "\n" + prompts.TEXT_FEEDBACK_REMINDER
        self._append({"role": "user", "content": content}, turn)

    def _ingest(self, stimulus: IngestionStimulus, turn: Turn) -> None:
        """An ingestion turn (LoCoMo, ``ingest: agent``). ExpRAG style
        (``deterministic_recall``) retains every turn as its own record, with no
        model call; ``tool_use`` lets the model decide what to retain."""
        self._conversation = []
        self._task = None
        if self.strategy != "tool_use":
            turn.add_message({"role": "user", "content": stimulus.content})
            if self.memory is not None:
                for dialogue in stimulus.session.turns:
                    self.memory.retain(*turn_record(stimulus.session, dialogue))
            turn.add_message({"role": "assistant", "content": INGESTION_ACKNOWLEDGEMENT})
            turn.call_tool(FINAL_ANSWER_TOOL.name, {"answer": INGESTION_ACKNOWLEDGEMENT})
            return
        self._append({"role": "system", "content": self._system(turn)}, turn)
        content = stimulus.content
        if self.mode == "text":
            content += "\n" + prompts.TEXT_INGESTION_REMINDER
        self._append({"role": "user", "content": content}, turn)
        self._loop(turn, prompts.feedback_tools(turn.tools, prompts.INGESTION_TOOL), feedback=True,
                   acknowledgement=INGESTION_ACKNOWLEDGEMENT)

    # ------------------------------------------------------------------ the loop

    def _loop(
        self, turn: Turn, offered: list[ToolSpec], *, feedback: bool, acknowledgement: str = FEEDBACK_ACKNOWLEDGEMENT
    ) -> None:
        nudged = False
        stopped: list[str] = []  # the finish reasons of replies the server ended early
        while not turn.finished:
            try:
                turn.begin_step()  # raises EpisodeError past max_steps
            except EpisodeError as error:
                raise EpisodeError(f"{error}{self._stopped_early(stopped)}") from None
            tools = [] if self.mode == "text" else [spec.to_openai() for spec in offered]
            completion = self.model.complete(self._conversation, tools)
            if completion.finish_reason in _STOPPED_EARLY:
                stopped.append(completion.finish_reason)
            turn.record_usage(completion.usage)
            self._append(completion.to_message(), turn, cached=completion.cached, model=completion.model,
                         stopped=completion.finish_reason if completion.finish_reason in _STOPPED_EARLY else None)
            if completion.tool_calls:
                self._run_tools(completion, turn)
                continue
            if self.remem and self.protocol == "tools" and (completion.content or "").strip():
                # ReMem's think step: the reasoning stays in the conversation, the loop goes on
                # (bounded by max_steps, like every step).
                self._append({"role": "user", "content": self._remem_continue(feedback)}, turn)
                continue
            fell_back = self.protocol == "auto" and self.mode == "tools"
            if fell_back:
                # The server answered without a tool call: it may have no tool
                # calling at all, so the rest of this stream speaks text.
                self.mode = "text"
            if self.mode == "text" and self._run_text(
                completion.content or "", offered, turn, feedback=feedback, acknowledgement=acknowledgement
            ):
                continue
            if nudged:
                empty = not (completion.content or "").strip()
                raise EpisodeError(self._give_up_message(empty) + self._stopped_early(stopped))
            nudged = True
            self._append({"role": "user", "content": self._nudge(turn, feedback, fell_back, acknowledgement)}, turn)

    @staticmethod
    def _remem_continue(feedback: bool) -> str:
        return prompts.REMEM_FEEDBACK_CONTINUE if feedback else prompts.REMEM_CONTINUE

    def _nudge(self, turn: Turn, feedback: bool, fell_back: bool, acknowledgement: str) -> str:
        ingestion = acknowledgement == INGESTION_ACKNOWLEDGEMENT
        if self.mode == "tools":
            if ingestion:
                return prompts.INGESTION_NUDGE
            return prompts.FEEDBACK_NUDGE if feedback else prompts.NUDGE
        if fell_back:  # the model has not been told the text format yet
            return prompts.text_fallback(turn.tools, feedback=feedback)
        if ingestion:
            return prompts.TEXT_INGESTION_NUDGE
        return prompts.TEXT_FEEDBACK_NUDGE if feedback else prompts.TEXT_NUDGE

    def _give_up_message(self, empty: bool) -> str:
        """Why the turn ends: a reply without the final answer after the nudge.
        ``empty``: that reply held neither text nor a tool call (a null content)."""
        if self.mode == "text":
            return (
                "the model's reply was empty again after being asked for 'Final Answer: <answer>'; "
                f"with agent protocol {self.protocol!r} every turn must end with a non-empty reply"
            )
        answered = "gave an empty reply (no text, no tool call)" if empty else "answered in plain text"
        return (
            f"the model {answered} again after being asked to call "
            "final_answer; it must end every turn with a final_answer tool call "
            "(for a server without tool calling, set the agent config key 'protocol' to 'text' or 'auto')"
        )

    def _stopped_early(self, reasons: list[str]) -> str:
        """Why the turn's replies may have failed it: a reply cut off at the token
        limit ends mid-sentence or mid-call (its arguments are not JSON), which the
        turn's own failure (no final_answer) would otherwise hide."""
        if not reasons:
            return ""
        parts = []
        cut = reasons.count("length")
        if cut:
            limit = self.config.model.max_tokens if self.config.model is not None else None
            where = f"model.max_tokens ({limit:,})" if limit is not None else "the server's token limit"
            parts.append(f"{cut} cut off at {where} (finish_reason 'length'): raise the limit")
        filtered = reasons.count("content_filter")
        if filtered:
            parts.append(f"{filtered} stopped by the server's content filter (finish_reason 'content_filter')")
        return f"; of the model's replies in this turn, {' and '.join(parts)}"

    def _run_tools(self, completion: ChatCompletion, turn: Turn) -> None:
        # final_answer last: a model that emits [final_answer, retain] in one message
        # means both, and the turn would refuse retain after it ended.
        if len(completion.tool_calls) == 1:  # most replies: nothing to order
            call = completion.tool_calls[0]
            self._append(_tool_message(call, turn.call_tool(call.name, call.arguments)), turn)
            return
        ordered = sorted(completion.tool_calls, key=lambda call: call.name == FINAL_ANSWER_TOOL.name)
        results = {id(call): turn.call_tool(call.name, call.arguments) for call in ordered}
        # Tool results go back in the order the model made the calls.
        for call in completion.tool_calls:
            self._append(_tool_message(call, results[id(call)]), turn)

    def _run_text(
        self, text: str, offered: list[ToolSpec], turn: Turn, *, feedback: bool,
        acknowledgement: str = FEEDBACK_ACKNOWLEDGEMENT,
    ) -> bool:
        """Run what a text reply says; False only for an empty reply.

        Memory operations run first, in order, then the final answer, as with
        native calls. A reply with operations and no ``Final Answer:`` goes on:
        the results go back as one user message.
        """
        reply = textproto.parse_reply(text, offered)
        results = [(call.name, turn.call_tool(call.name, call.arguments)) for call in reply.calls]
        final = reply.final_answer
        if final is None and not results and text.strip():
            # No label: the reply as a whole is the answer, as the paper scores a
            # single-turn response (its evaluators read the answer at the end).
            final = text.strip()
        if final is not None:
            turn.call_tool(FINAL_ANSWER_TOOL.name, {"answer": _answer(final, feedback=feedback, acknowledgement=acknowledgement)})
        elif results:
            shown = "\n".join(f"Result of {name}: {result}" for name, result in results)
            self._append({"role": "user", "content": shown}, turn)
        return final is not None or bool(results)

    def _append(
        self, message: dict[str, Any], turn: Turn, *, cached: bool = False, model: str | None = None,
        stopped: str | None = None,
    ) -> None:
        """Into the conversation as sent; into the transcript with whether the reply
        was replayed, the model name the server reported (what answered), and why
        the server ended it early (``finish_reason`` ``length``: a reply cut off at
        ``max_tokens``, which the transcript would otherwise show as if whole)."""
        self._conversation.append(message)
        if not cached and not model and not stopped:
            turn.add_message(message)
            return
        noted = dict(message)  # the notes after the message's own keys (or in their place)
        if cached:
            noted["cached"] = True
        if model:
            noted["model"] = model
        if stopped:
            noted["finish_reason"] = stopped
        turn.add_message(noted)


#: Finish reasons of a reply the server ended before the model did.
_STOPPED_EARLY = frozenset({"length", "content_filter"})


def _answer(text: str, *, feedback: bool, acknowledgement: str = FEEDBACK_ACKNOWLEDGEMENT) -> str:
    """A text final answer; in a feedback (or ingestion) turn the acknowledgement is
    recognised through case, quotes and a trailing period (the tools protocol's
    schema admits only the exact text; a text reply cannot be constrained)."""
    if feedback and _words(text) == _words(acknowledgement):
        return acknowledgement
    return text


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", normalize(text))


def _tool_message(call: ModelToolCall, result: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": result}
