"""One stream's live state and the one driver of an episode, with no pytest in sight.

    task  ->  unscored corrective feedback  ->  agent state reset  ->  next task

:class:`StreamRun` owns one stream's memory system and agent and delivers stimuli;
:class:`Episode` is the only code that drives an episode through those three steps
and turns each outcome into a record. The pytest plugin calls its two phases from
the test body (:meth:`Episode.run_task`) and the episode fixture's teardown
(:meth:`Episode.finish`); :func:`run_episode` calls them back to back for every
other entry point (``run_benchmark``, ``evomemory run``). The runtime observes every
tool call and memory operation itself, so the records in
:class:`~pytest_evomemory.core.types.AgentResponse` do not depend on the agent reporting
honestly.

A static-memory stream (LoCoMo, ``Stream.feedback`` false) has no feedback step:
its episode is task -> reset, and its memory is written once, before the first
task, by the ingestion phase (:mod:`.ingestion`, :meth:`StreamRun.prepare_memory`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..agents.base import Agent
from ..analysis.recall import recall_similarity
from ..config.pricing import Pricing, cost_of
from ..core.errors import (
    ArtefactWriteError,
    BudgetExhausted,
    EpisodeError,
    EvoMemoryError,
    MemoryBackendError,
    ModelError,
    ProtocolViolation,
    named,
)
from ..core.factories import user_frames
from ..core.tools import Tool
from ..core.types import (
    FEEDBACK_ACKNOWLEDGEMENT,
    INGESTION_ACKNOWLEDGEMENT,
    AgentResponse,
    BenchmarkSample,
    ConversationSession,
    ScoredItem,
    Stimulus,
    TaskView,
)
from ..evaluation.evomemory import EvoMemoryEvaluator
from ..memory.base import RecordRejected
from ..memory.snapshot import ResumeRefused, StreamSnapshots
from ..memory.tools import tool_role
from ..models.context import StimulusRef, answering
from ..rundocs import Score
from ..streams.base import IngestMode
from . import ingestion
from .feedback import QuoteAnswer, render_feedback
from .memory import ObservedMemory, OperationCounts, mark
from .records import (
    FeedbackRecord,
    IngestionRecord,
    Record,
    TaskRecord,
    WriteFailedRecord,
    error_record,
    feedback_error_record,
    feedback_skipped_record,
    write_failed_record,
)
from .signals import shield_interrupts
from .turn import RuntimeTurn


class AgentStopped(EpisodeError):
    """The agent's ``reset`` failed: its state is unknown (it may still hold the answer
    of the task before), so no further turn of the stream is given to it."""


@dataclass
class TaskOutcome:
    """What a task turn produced: the response and the score of its answer."""

    sample: BenchmarkSample
    response: AgentResponse
    scored: ScoredItem


@dataclass
class StreamRun:
    """One stream's live state: its memory system, agent and evaluator.

    ``memory`` is the stream's own backend (wrapped for counting); it persists
    across every episode of the stream and is reset and closed by :meth:`close`.
    """

    stream: str
    agent: Agent
    memory: ObservedMemory | None
    evaluator: EvoMemoryEvaluator
    memory_strategy: str
    max_steps: int
    closed: bool = False
    #: Set after the memory backend (or the agent's reset) failed: the rest of the
    #: stream fails at once instead of running episodes against a memory, or an agent,
    #: in an unknown state.
    broken: str | None = None
    #: What the rest of the stream fails with once ``broken`` is set: the memory's
    #: failure, or :class:`AgentStopped` after the agent's reset failed.
    broken_by: type[EpisodeError | MemoryBackendError] = MemoryBackendError
    #: Where the memory is saved after each completed episode (resume), if anywhere.
    snapshots: StreamSnapshots | None = None
    #: Set by :meth:`prepare_memory`, before the first episode this process runs.
    prepared: bool = False
    #: What was built for this stream (see :mod:`pytest_evomemory.models.identity`).
    identity: dict[str, Any] = field(default_factory=dict)
    #: How the feedback quotes the source's own answer (the stream declares it).
    quote_answer: QuoteAnswer | None = None
    #: The model's prices: each response's ``cost_usd`` (None: not priced).
    pricing: Pricing | None = None
    # ---- conversation streams (LoCoMo; runtime/ingestion.py) ----
    #: Whether each task is followed by corrective feedback (``Stream.feedback``).
    feedback: bool = True
    #: The conversation ingested before the first task (``Stream.sessions``).
    sessions: tuple[ConversationSession, ...] = ()
    #: Who ingests it: ``memory`` (its own ingest) or ``agent`` (ingestion turns).
    ingest: IngestMode = "memory"
    #: Task turns carry the whole conversation (agent config ``full_context``).
    full_context: bool = False

    def _turn_tools(self) -> list[Tool]:
        if self.memory_strategy == "tool_use" and self.memory is not None:
            return list(self.memory.tools())
        return []

    def deliver(self, stimulus: Stimulus, task_id: str) -> AgentResponse:
        """One agent turn. A failed turn raises an :class:`EvoMemoryError` whose
        ``response`` is what the turn produced up to the failure."""
        __tracebackhide__ = True
        if self.closed:
            raise EpisodeError(f"stream {self.stream!r} was already torn down")
        if self.broken is not None:
            raise self.broken_by(f"stream {self.stream!r} stopped: {self.broken}")
        try:
            tools = self._turn_tools()
        except MemoryBackendError as error:  # what it declares cannot be offered: the memory failed
            self.broken = f"the memory backend failed at {stimulus.kind} {task_id}: {error}"
            raise
        turn = RuntimeTurn(tools, self.max_steps, task=f"{self.stream}/{task_id}")
        roles = tuple((tool.name, role) for tool in tools if (role := tool_role(tool)) is not None)
        before = mark(self.memory)
        started = time.perf_counter()
        failure: BaseException | None = None
        try:
            with answering(StimulusRef(self.stream, task_id, stimulus.kind, roles)):
                self.agent.respond(stimulus, turn)
        except BaseException as error:  # recorded below, then re-raised
            failure = error
        if failure is None and turn.refused is not None:  # the agent caught the turn's own error and went on
            refused = turn.refused
            failure = type(refused)(f"{refused}; the agent caught this error and went on, the turn fails all the same")
        seconds = time.perf_counter() - started
        after = mark(self.memory)
        violation: str | None = None
        if failure is None and not turn.finished:
            violation = "the agent ended its turn without calling final_answer"
        elif isinstance(failure, ProtocolViolation):
            violation = str(failure)
        elif failure is None and stimulus.kind != "task":
            expected = FEEDBACK_ACKNOWLEDGEMENT if stimulus.kind == "feedback" else INGESTION_ACKNOWLEDGEMENT
            if turn.final_answer != expected:
                violation = (
                    f'{stimulus.kind} turn ended with final_answer({turn.final_answer!r}) instead of '
                    f'final_answer("{expected}")'
                )
        response = AgentResponse(
            stream=self.stream,
            task_id=task_id,
            kind=stimulus.kind,
            final_answer=turn.final_answer,
            agent_turns=max(turn.steps, 1),
            tool_calls=tuple(turn.tool_calls),
            messages=tuple(turn.messages),
            usage=turn.usage,
            memory_retains=after.counts.retains - before.counts.retains,
            memory_recalls=after.counts.recalls - before.counts.recalls,
            seconds=seconds,
            protocol_violation=violation,
            memory_writes=tuple(self.memory.writes[before.writes:after.writes]) if self.memory else (),
            memory_recalled=(
                tuple(self.memory.recalled[before.recalled:after.recalled]) if self.memory else ()
            ),
            cost_usd=cost_of(turn.usage, self.pricing),
            memory_unstored=max(after.counts.unstored - before.counts.unstored, 0),  # a count that went back: none
        )
        if isinstance(failure, BudgetExhausted):
            raise failure  # the session stops before the call: not a failure of this turn
        if isinstance(failure, MemoryBackendError) and not isinstance(failure, RecordRejected):
            self.broken = f"the memory backend failed at {stimulus.kind} {task_id}: {failure}"
        if isinstance(failure, EpisodeError | MemoryBackendError):
            failure.response = response
            raise failure
        if failure is not None and not isinstance(failure, KeyboardInterrupt):
            # the user's code failed the turn, however it did: an exception, sys.exit(), a
            # BaseException subclass of its own (a library's cancellation, a test framework's)
            raise EpisodeError(
                f"{stimulus.kind} turn of {self.stream}/{task_id} failed: "
                f"{type(failure).__name__}: {failure}{user_frames(failure)}",
                response=response,
            ) from failure
        if failure is not None:
            shield_interrupts()  # the session ends as interrupted: a second Ctrl-C must not cut that short
            raise failure  # KeyboardInterrupt (Ctrl-C, SIGTERM): not ours to record
        if violation and stimulus.kind == "task":
            raise ProtocolViolation(f"{self.stream}/{task_id}: {violation}", response=response)
        return response

    def run_task(self, sample: BenchmarkSample) -> TaskOutcome:
        """Deliver the task, then score its ``final_answer`` (the only scored item)."""
        __tracebackhide__ = True
        response = self.deliver(self._task_view(sample), sample.task_id)
        try:
            scored = self.evaluator.score_response(sample, response)
        except EvoMemoryError as error:
            error.response = response
            raise
        scored = ingestion.with_evidence(sample, response, scored, memory=self.memory is not None)
        return TaskOutcome(sample, response, scored)

    def _task_view(self, sample: BenchmarkSample) -> TaskView:
        view = sample.task_view()
        return dataclasses.replace(view, conversation=self.sessions) if self.full_context else view

    def give_feedback(self, sample: BenchmarkSample, submitted: str | None) -> AgentResponse:
        """Deliver the unscored corrective feedback in the same conversation."""
        __tracebackhide__ = True
        return self.deliver(render_feedback(sample, submitted, self.quote_answer), sample.task_id)

    def reset_agent(self, task_id: str | None = None) -> None:
        """Clear the agent's conversation. No model call, no record, no memory access.

        A reset that fails leaves the agent's state unknown: its conversation may still
        hold the feedback (the answer) of the task before, so the rest of the stream
        fails at once (:class:`AgentStopped`) rather than run tasks on it."""
        __tracebackhide__ = True
        if self.broken is not None and self.broken_by is AgentStopped:
            return  # no turn was given to it since its reset failed
        before = self.memory.counts.copy() if self.memory is not None else None
        try:
            self.agent.reset()
        except KeyboardInterrupt:
            raise  # Ctrl-C, SIGTERM: the session ends as interrupted
        except BaseException as error:
            reason = f"{self._reset_named(task_id)} failed: {type(error).__name__}: {error}{user_frames(error)}"
            self.broken, self.broken_by = reason, AgentStopped
            raise AgentStopped(f"{reason}; the rest of the stream is not run on an agent whose state "
                               "is unknown (fix its reset)") from error
        if before is not None and self.memory is not None and self.memory.counts != before:
            # what it did reached the memory outside any turn: no response holds it
            raise ProtocolViolation(
                f"{self._reset_named(task_id)} used the memory ({_operations(before, self.memory.counts)}); reset must "
                "clear the agent's conversation only: retain in the feedback turn, recall in the task turn"
            )

    def _reset_named(self, task_id: str | None) -> str:
        """The reset as a message names it: after which task, or in which stream."""
        return f"the agent's reset {f'after {self.stream}/{task_id}' if task_id is not None else f'in stream {self.stream!r}'}"

    def prepare_memory(self, completed: int | None, record: RecordSink | None = None) -> None:
        """Before the first episode this process runs in the stream.

        ``None``: the stream starts from its first task, so snapshots an earlier run
        left in the directory are removed. A number: continue after that many
        completed episodes, restoring the memory's own snapshot of that moment
        (resume, or an xdist worker taking over a crashed worker's stream); a memory
        that cannot be restored exactly refuses (ResumeRefused), it is never rebuilt
        by calling its tools on the agent's behalf.

        A conversation stream ingests its sessions here (:meth:`_prepare_conversation`);
        ``record`` receives the ingestion turns' records.
        """
        self.prepared = True
        if self.sessions and self.memory is not None:
            self._prepare_conversation(completed, record)
            return
        if self.memory is None or self.snapshots is None:
            if completed and self.memory is not None:
                raise ResumeRefused(
                    f"stream {self.stream!r}: {completed} episode(s) were completed, but this run keeps "
                    f"no memory snapshots; run again without {named('resume')}"
                )
            return
        if completed is None or completed == 0:
            self.snapshots.clear()
            return
        self.snapshots.restore(self.memory.backend, completed)
        self.memory.restored()

    # ---- conversation streams: ingestion before the first question (runtime/ingestion.py) ----

    def _prepare_conversation(self, completed: int | None, record: RecordSink | None) -> None:
        """Ingest the conversation, or restore a snapshot that holds it (never both)."""
        assert self.memory is not None
        snapshots = self.snapshots
        # verified, as the resume plan verifies it (runtime/session.py): a slot 0 that does
        # not verify is never restored; the conversation is ingested again
        saved = snapshots is not None and snapshots.intact(0)
        if ingestion.plan(completed, saved) == "restore":
            if snapshots is None:
                raise ResumeRefused(
                    f"stream {self.stream!r}: the conversation was ingested in an earlier run, but this run "
                    f"keeps no memory snapshots; run again without {named('resume')}"
                )
            snapshots.restore_saved(self.memory.backend, completed or 0)
            self.memory.restored()
            return
        if snapshots is not None:
            snapshots.clear()
        records: list[Record] = []
        try:
            if self.ingest == "agent":
                ingestion.ingest_by_agent(self.sessions, self.deliver, self.reset_agent, records)
            else:
                for session in self.sessions:
                    self.memory.ingest(session)
        except EvoMemoryError as error:
            if error.response is not None:  # the failed turn happened too: it is counted
                records.append(IngestionRecord(response=error.response.document()))
            self.broken = f"the conversation could not be ingested: {error}"
            _emit(records, record)
            raise
        # Saved before the records leave: a run killed in between restores the
        # ingested memory (and lacks only the ingestion turns' records); the other
        # order would ingest twice and journal the turns twice. A snapshot that
        # cannot be written is the run's write failure, as in episode_completed.
        if snapshots is not None:
            try:
                snapshots.save(self.memory.backend, 0)
            except (OSError, ArtefactWriteError) as error:
                self.snapshots = None
                records.append(write_failed_record(self.stream, error))
        _emit(records, record)

    def episode_completed(self, sample: BenchmarkSample) -> WriteFailedRecord | None:
        """Save the memory as it is after this episode, so a resume can continue
        from exactly here (the memory's own snapshot; nothing is replayed).

        A snapshot that cannot be written (a full disk) is the run's write failure,
        not the episode's: the record says so, the session stops, and nothing more
        is saved for this stream (a resume continues from the last intact one)."""
        if self.snapshots is not None and self.memory is not None and self.broken is None:
            try:
                self.snapshots.save(self.memory.backend, sample.position + 1)
            except (OSError, ArtefactWriteError) as error:
                snapshots, self.snapshots = self.snapshots, None
                with contextlib.suppress(OSError, ArtefactWriteError):  # the save's own error is the one said
                    snapshots.release()
                return write_failed_record(self.stream, error)
            except EvoMemoryError:
                raise
            except Exception as error:  # the memory's own snapshot() failed: the memory's failure
                self.broken = (
                    f"the memory backend failed to save its snapshot after {self.stream}/{sample.task_id}: "
                    f"{type(error).__name__}: {error}{user_frames(error)}"
                )
                raise MemoryBackendError(
                    f"{self.broken}; a memory whose snapshot() cannot work must not offer snapshot and restore "
                    "(docs/memory.md, 'What a memory system must offer for resume')"
                ) from error
        return None

    def close(self) -> None:
        """Stream teardown: empty and close the memory system."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.snapshots is not None:
                self.snapshots.release()
        finally:  # a log that fails to close (ArtefactWriteError) leaves no memory open
            if self.memory is not None:
                try:
                    self.memory.reset()
                finally:
                    self.memory.close()


def _operations(before: OperationCounts, after: OperationCounts) -> str:
    """What reached the memory between two counts, as a message says it: ``1 retain, 2 recalls``."""
    done = [(after.retains - before.retains, "retain"), (after.recalls - before.recalls, "recall"),
            (after.forgets - before.forgets, "forget"), (after.other - before.other, "other operation")]
    return ", ".join(f"{count} {name}{'s' if count != 1 else ''}" for count, name in done if count)


RecordSink = Callable[[Record], None]


def _emit(records: Iterable[Record], sink: RecordSink | None) -> None:
    for entry in records:
        if sink is not None:
            sink(entry)


def user_traceback(error: BaseException) -> str | None:
    """The traceback text of the user's own exception behind ``error``, if any."""
    cause = error.__cause__
    if cause is None or isinstance(cause, EvoMemoryError):
        return None
    return "".join(traceback.format_exception(cause)).rstrip()


def feedback_impossible(failure: EvoMemoryError) -> str | None:
    """Why no feedback turn can follow a task turn that failed this way (else None).

    The endpoint still down after its retries, or a memory in an unknown state, would
    fail the feedback turn too; every other failure still gets its feedback, so the
    agent keeps the learning signal on exactly the tasks it failed.
    """
    if isinstance(failure, ModelError) or isinstance(failure.__cause__, ModelError):
        return f"the model endpoint failed in the task turn: {failure.__cause__ or failure}"
    if isinstance(failure, MemoryBackendError):
        return f"the memory backend failed: {failure}"
    if isinstance(failure, AgentStopped):
        return str(failure)
    return None


class Episode:
    """The one driver of an episode: task, feedback, reset, every outcome recorded.

    :meth:`run_task` delivers and scores the task (a task record, or an error
    record that keeps the failed turn's response); :meth:`finish` gives the feedback
    (after a failed task turn too, with "no answer" as the submitted answer, unless
    the failure makes a feedback turn impossible, which is then recorded as skipped)
    and always resets the agent. Failures are recorded, then re-raised.
    """

    def __init__(self, run: StreamRun, sample: BenchmarkSample, record: RecordSink) -> None:
        self.run = run
        self.sample = sample
        self.record = record
        self.outcome: TaskOutcome | None = None
        self.failure: EvoMemoryError | None = None
        self._task_ended = False

    def run_task(self) -> TaskOutcome:
        __tracebackhide__ = True
        try:
            self.outcome = self.run.run_task(self.sample)
        except BudgetExhausted:
            raise  # the task did not end: nothing is recorded, a resume runs it
        except EvoMemoryError as error:
            self.failure = error
            self._task_ended = True
            response = error.response.document() if error.response is not None else None
            self.record(error_record(self.sample, str(error), response, user_traceback(error)))
            raise
        self._task_ended = True
        self.record(TaskRecord(response=self.outcome.response.document(), scored=self._scored(self.outcome)))
        return self.outcome

    def _scored(self, outcome: TaskOutcome) -> Score:
        """The score, and how similar the task was to what its recalls returned
        (analysis/similarity.py: the gain-versus-similarity analysis reads it)."""
        response = outcome.response
        return outcome.scored.document(
            recall_similarity(self.sample.prompt, response.memory_recalled, response.memory_recalls)
        )

    def finish(self) -> None:
        """Feedback, then reset; a task turn that never ended (Ctrl-C) gets no feedback."""
        __tracebackhide__ = True
        try:
            if self._task_ended:
                try:
                    if self.run.feedback:  # a static-memory stream's episode is task -> reset
                        self._give_feedback()
                finally:
                    self._completed()
        finally:
            self._reset()

    def _completed(self) -> None:
        """The memory's snapshot of the finished episode; its own failure is recorded
        against this task, as a failure of the episode (:meth:`StreamRun.episode_completed`)."""
        __tracebackhide__ = True
        try:
            write_failed = self.run.episode_completed(self.sample)
        except MemoryBackendError as error:
            self.record(feedback_error_record(self.sample, str(error), None, user_traceback(error)))
            raise
        if write_failed is not None:
            self.record(write_failed)

    def _reset(self) -> None:
        """Reset the agent; a reset that fails is recorded against this task (its
        episode failed after its feedback), and stops the stream (:meth:`StreamRun.reset_agent`)."""
        __tracebackhide__ = True
        try:
            self.run.reset_agent(self.sample.task_id)
        except EpisodeError as error:  # its reset failed (AgentStopped), or used the memory
            self.record(feedback_error_record(self.sample, str(error), None, user_traceback(error)))
            raise

    def _give_feedback(self) -> None:
        __tracebackhide__ = True
        if self.failure is not None:
            reason = feedback_impossible(self.failure)
            if reason is not None:
                self.record(feedback_skipped_record(self.sample, reason))
                return
        submitted = self.outcome.response.final_answer if self.outcome is not None else None
        try:
            response = self.run.give_feedback(self.sample, submitted)
        except BudgetExhausted:
            raise  # no feedback recorded: the episode is not complete, a resume runs it again
        except EvoMemoryError as error:
            failed = error.response.document() if error.response is not None else None
            self.record(feedback_error_record(self.sample, str(error), failed, user_traceback(error)))
            raise
        self.record(FeedbackRecord(response=response.document()))


def run_episode(run: StreamRun, sample: BenchmarkSample, record: RecordSink) -> TaskOutcome | None:
    """Drive one whole episode outside pytest; failures are recorded, not raised."""
    return drive(Episode(run, sample, record))


def drive(episode: Episode) -> TaskOutcome | None:
    """Task, then feedback and reset, back to back; failures are recorded, not raised."""
    try:
        episode.run_task()
    except EvoMemoryError:
        pass  # recorded by the episode
    try:
        episode.finish()
    except EvoMemoryError:
        pass
    return episode.outcome


def run_stream(
    run: StreamRun, samples: Iterable[BenchmarkSample], record: RecordSink | None = None
) -> Iterator[TaskOutcome]:
    """Run a whole stream, one :class:`Episode` per sample, for code that iterates.

    Yields each task's outcome; the first failed episode (after its feedback and
    reset) ends the iteration with its error. The stream is closed when the iterator
    finishes or is closed early. (:func:`run_episode` records failures and goes on.)
    """
    sink: RecordSink = record or (lambda _record: None)
    try:
        for sample in samples:
            episode = Episode(run, sample, sink)
            try:
                outcome = episode.run_task()
            finally:
                episode.finish()
            yield outcome
    finally:
        run.close()
