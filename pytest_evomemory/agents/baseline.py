"""RecallBaselineAgent: a model-free agent that learns only through memory.

It is the offline default and the sanity check of the whole protocol: it can only
answer a task correctly if the stream's memory holds the corrective feedback of an
earlier, similar task, which is exactly what ExpRAG does with a retriever and no
LLM. With ``memory_strategy: none`` it always gives its fallback answer, so the
gap between the two runs is the effect of memory.

On a conversation stream (LoCoMo) it stores each ingested turn as the built-in
memories do (``ingest: agent``), and answers a question with the text of the
most similar remembered turn when no remembered experience is close enough: a
retrieval-only baseline whose token F1 measures what the recall found.
"""

from __future__ import annotations

from ..config import AgentConfig
from ..core import boundedread
from ..core.errors import ConfigError
from ..core.types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    INGESTION_ACKNOWLEDGEMENT,
    IngestionStimulus,
    Stimulus,
    TaskView,
)
from ..memory.base import MemorySystem
from ..memory.ingestion import dialogue_text, turn_record
from ..util.text import similarity
from .base import Turn

_TASK = "Task: "
_ANSWER = "\nCorrect answer: "


def experience_record(task_prompt: str, target: str) -> str:
    """How this agent writes one experience into memory (ExpRAG's task + feedback)."""
    return f"{_TASK}{task_prompt}{_ANSWER}{target}"


def parse_experience(content: str) -> tuple[str, str] | None:
    """Split a record written by :func:`experience_record`; ``None`` for other records."""
    if not content.startswith(_TASK) or _ANSWER not in content:
        return None
    task, _, answer = content[len(_TASK):].rpartition(_ANSWER)
    return task, answer


class RecallBaselineAgent:
    """Answers from the most similar remembered experience, else a fixed fallback."""

    def __init__(self, config: AgentConfig, memory: MemorySystem | None) -> None:
        strategy = config.memory_strategy
        if strategy == "deterministic_recall" and memory is None:
            raise ConfigError("recall_baseline with deterministic_recall needs a memory system")
        self.strategy = strategy
        self.memory = memory if strategy == "deterministic_recall" else None
        self.threshold = config.baseline.similarity_threshold
        self.fallback = config.baseline.fallback_answer
        self._current_task: TaskView | None = None

    def respond(self, stimulus: Stimulus, turn: Turn) -> None:
        turn.begin_step()
        if isinstance(stimulus, TaskView):
            self._current_task = stimulus
            answer = self._answer_from_memory(stimulus.prompt, turn, recall_query(stimulus))
            turn.add_message({"role": "user", "content": stimulus.prompt})
            turn.add_message({"role": "assistant", "content": answer})
            turn.call_tool("final_answer", {"answer": answer})
            return
        if isinstance(stimulus, IngestionStimulus):
            self._ingest(stimulus, turn)
            return
        turn.add_message({"role": "user", "content": stimulus.content})
        if self._current_task is not None and self.strategy != "none":
            record = experience_record(self._current_task.prompt, stimulus.target)
            if self.memory is not None:
                self.memory.retain(record, {"task_id": stimulus.task_id})
            else:
                turn.call_tool("retain", {"content": record})
        turn.add_message({"role": "assistant", "content": FEEDBACK_ACKNOWLEDGEMENT})
        turn.call_tool("final_answer", {"answer": FEEDBACK_ACKNOWLEDGEMENT})

    def reset(self) -> None:
        self._current_task = None

    def _ingest(self, stimulus: IngestionStimulus, turn: Turn) -> None:
        """Remember every turn of the session as its own record (none without memory)."""
        turn.add_message({"role": "user", "content": stimulus.content})
        if self.strategy != "none":
            for dialogue in stimulus.session.turns:
                content, metadata = turn_record(stimulus.session, dialogue)
                if self.memory is not None:
                    self.memory.retain(content, metadata)
                else:
                    turn.call_tool("retain", {"content": content})
        turn.add_message({"role": "assistant", "content": INGESTION_ACKNOWLEDGEMENT})
        turn.call_tool("final_answer", {"answer": INGESTION_ACKNOWLEDGEMENT})

    def _answer_from_memory(self, prompt: str, turn: Turn, query: str) -> str:
        if self.strategy == "none":
            return self.fallback
        if self.memory is not None:
            contents = [hit.content for hit in self.memory.recall(query)]
        else:
            result = turn.call_tool("recall", {"query": query})
            try:
                contents = [str(item["content"]) for item in boundedread.loads(result, depth=boundedread.MAX_ARTEFACT_DEPTH)]
            except (ValueError, TypeError, KeyError):
                contents = []
        best_answer: str | None = None
        best_similarity = self.threshold
        for content in contents:
            experience = parse_experience(content)
            if experience is None:
                continue
            closeness = similarity(prompt, experience[0])
            if closeness >= best_similarity:
                best_answer, best_similarity = experience[1], closeness
        if best_answer is None:  # no experience: the most similar remembered turn, if any
            best_answer = next((said for content in contents if (said := dialogue_text(content)) is not None), None)
        return self.fallback if best_answer is None else best_answer


def recall_query(task: TaskView) -> str:
    """What to look for in memory: the question alone where the stream gives it
    (LoCoMo's ``question`` metadata), else the whole prompt."""
    question = task.metadata.get("question")
    return question if isinstance(question, str) and question.strip() else task.prompt
