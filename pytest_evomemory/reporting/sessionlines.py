"""What a session shows on the terminal, and the block a dashboard reads.

As pytest-xdist's ``TerminalDistReporter`` renders what its ``DSession`` reports,
these functions render a session: what it is about to run (:func:`header`, pytest's
header; ``evomemory run`` prints :func:`shard_lines` and :func:`resume_notes`), its
end (:func:`report`: each arm's table, thresholds and failures, the comparison of
the arms, the gain gates, what to do next) and pytest-json-report's ``evomemory``
block (:func:`json_block`). Both doors call them, so both print the same lines.

They read the session through the protocols below (:class:`SessionView` and its
parts), which the engine's :class:`~..runtime.session.Session` satisfies: the
renderers import nothing of the engine, and the engine nothing of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..analysis.summary import StreamMetrics, ThresholdResult
from ..config import Replicate, RunConfig
from ..models.identity import configured_model, describe_model, describe_ran, run_identity
from ..rundir import SCHEMA_VERSION, SIDE_RUN, ResumeState
from ..rundocs import Failure
from ..rundocs.identity import Replicate as ReplicateDoc
from ..streams import Stream
from ..streams.provenance import provenance_line
from ..util.redaction import redact_strings
from ..util.text import inert
from .lines import Line

if TYPE_CHECKING:
    from ..analysis.gain import GainResult
    from ..rundocs.compare import Comparison
    from ..rundocs.summary import Summary

# The session's end (its tables, the comparison, the JSON block) imports the terminal
# tables and the comparison's documents when it comes: ``evomemory run`` imports this
# module for its first lines, before its first model call.

# ----- what the lines read of a session (the engine's parts satisfy these)


class RunView(Protocol):
    """An arm's run: why it stopped, and what its interrupted run left (on resume)."""

    @property
    def stop_reason(self) -> str | None: ...

    @property
    def resume(self) -> ResumeState | None: ...


class ResultView(Protocol):
    """How an arm's run ended."""

    @property
    def summary(self) -> Summary: ...

    @property
    def metrics(self) -> Mapping[str, StreamMetrics]: ...

    @property
    def thresholds(self) -> Sequence[ThresholdResult]: ...

    @property
    def write_failure(self) -> str | None: ...

    @property
    def report_error(self) -> str | None: ...


class BenchmarkView(Protocol):
    @property
    def streams(self) -> Sequence[Stream]: ...


class ArmView(Protocol):
    """One arm of the session."""

    @property
    def name(self) -> str: ...

    @property
    def run_dir(self) -> Path: ...

    @property
    def run_config(self) -> RunConfig: ...

    @property
    def replicate(self) -> Replicate | None: ...

    @property
    def benchmark(self) -> BenchmarkView: ...

    @property
    def run(self) -> RunView: ...

    @property
    def started(self) -> bool: ...

    @property
    def result(self) -> ResultView | None: ...

    @property
    def summary(self) -> Summary | None: ...

    @property
    def gated(self) -> bool: ...

    @property
    def cut_short(self) -> bool: ...


class SetupView(Protocol):
    @property
    def invocation_dir(self) -> Path: ...

    @property
    def hand_picked(self) -> str | None: ...


class ShardPlanView(Protocol):
    def describe(self, index: int) -> list[str]: ...


class PlanView(Protocol):
    """The session's plan: its arms and what they are compared on."""

    @property
    def arms(self) -> Sequence[ArmView]: ...

    @property
    def baseline(self) -> ArmView: ...

    @property
    def baseline_arms(self) -> Sequence[ArmView]: ...

    @property
    def bases(self) -> Sequence[RunConfig]: ...

    @property
    def several(self) -> bool: ...

    @property
    def started(self) -> bool: ...

    @property
    def replicates(self) -> int | None: ...

    @property
    def comparison_dir(self) -> Path: ...

    @property
    def compare_dir(self) -> Path | None: ...

    @property
    def gains(self) -> Sequence[object]: ...

    @property
    def deferred_comparison(self) -> str | None: ...

    @property
    def shard_plan(self) -> ShardPlanView | None: ...

    @property
    def shard_index(self) -> int: ...

    @property
    def setup(self) -> SetupView: ...

    @property
    def flags(self) -> Callable[[Literal["resume", "min-gain"]], str]:
        """How the session's door spells the options the lines name."""


class EndView(Protocol):
    """How the session ended: its refusal, its comparison and gain verdicts."""

    @property
    def refused(self) -> str | None: ...

    @property
    def comparison(self) -> Mapping[str, Any] | None: ...

    @property
    def comparison_model(self) -> Comparison | None:
        """:attr:`comparison` as its model, when the session built it (the terminal reads it)."""
        ...

    @property
    def comparison_files(self) -> tuple[Path, Path] | None: ...

    @property
    def comparison_error(self) -> str | None: ...

    @property
    def replicate_comparison(self) -> Mapping[str, Any] | None: ...

    @property
    def replicate_files(self) -> Sequence[Path]: ...

    @property
    def gain_results(self) -> Sequence[GainResult]: ...


class SessionView(Protocol):
    @property
    def plan(self) -> PlanView: ...

    @property
    def collector(self) -> EndView: ...


# ----- before the session runs


def resume_notes(session: SessionView) -> list[str]:
    """What a resumed session tells before it runs: the streams whose newest
    memory snapshot was not trusted, and from where they continue."""
    plan = session.plan
    notes = []
    for arm in plan.arms:
        resume = arm.run.resume
        for note in resume.notes if resume is not None else ():
            notes.append(note.replace("evomemory: ", f"evomemory: [{arm.name}] ", 1) if plan.several else note)
    return notes


def header(session: SessionView) -> list[str]:
    """What the session is about to run (pytest prints it in its header)."""
    plan = session.plan
    lines = []
    if plan.replicates is not None and plan.several:
        seeds = ", ".join(str(arm.replicate.seed) for arm in plan.arms[: plan.replicates] if arm.replicate)
        lines.append(
            f"evomemory: {len(plan.bases)} arm(s) x {plan.replicates} replicates (seeds {seeds}), "
            f"baseline {plan.baseline.name!r}"
        )
    elif plan.several:
        lines.append(f"evomemory: {len(plan.arms)} arms, baseline {plan.baseline.name!r}")
    for arm in plan.arms:
        prefix = f"evomemory: [{arm.name}] " if plan.several else "evomemory: "
        streams = ", ".join(f"{s.name} ({len(s)})" for s in arm.benchmark.streams)
        agent = arm.run_config.agent
        lines += [
            f"{prefix}run {arm.run_config.name!r} from {arm.run_config.path}",
            f"{prefix}streams {streams}",
            *(f"{prefix}data {provenance_line(s)}" for s in arm.benchmark.streams if s.provenance.get("repository")),
            f"{prefix}agent {agent.kind} ({agent.memory_strategy}), memory {arm.run_config.memory.backend} "
            "(as configured; a conftest fixture may override them: the summary says what ran)",
            f"{prefix}model {describe_model(configured_model(agent.model, arm.run_config.base_dir))}",
            f"{prefix}results -> {arm.run_dir}" + (
                f" (a side run of tasks picked by {plan.setup.hand_picked}: the full run in "
                f"{arm.run_dir.parent} stays as it is)" if arm.run_dir.name == SIDE_RUN else ""
            ),
        ]
    # names and data provenance come from files; the notes are made inert where they are made
    return [inert(line) for line in lines] + shard_lines(session) + resume_notes(session)


def shard_lines(session: SessionView) -> list[str]:
    """This shard's cells and the whole plan (a shard's header; ``evomemory run``
    prints them before it runs)."""
    plan = session.plan
    if plan.shard_plan is None:
        return []
    return [inert(line) for line in plan.shard_plan.describe(plan.shard_index)]


# ----- the end


def report(session: SessionView, resume_command: str) -> list[Line]:
    """The end-of-session lines: each arm's, the comparison's, what to do next.
    ``resume_command`` is how this entry point continues (``pytest``, ``evomemory run``).
    A refused session says why, and nothing else."""
    plan, end = session.plan, session.collector
    if end.refused is not None:
        return [Line.of(f"evomemory: error: {end.refused}", "red", bold=True)]
    lines: list[Line] = []
    for arm in plan.arms:
        if arm.result is None:
            if not arm.started:
                which = "" if not plan.several else f" of arm {arm.name!r}"
                unchecked = "; no threshold was checked" if arm.gated or plan.gains else ""
                lines.append(Line.of(
                    f"evomemory: no benchmark task{which} ran; {arm.run_dir} was left as it was{unchecked}"
                ))
            continue
        lines.append(Line(f"evomemory: {arm.name}", section=True))
        lines += arm_lines(arm, plan.compare_dir)
    if plan.several and plan.started:
        lines += _replicate_lines(plan, end) if plan.replicates is not None else _comparison_lines(plan, end)
    where = plan.comparison_dir if plan.several else plan.baseline.run_dir
    if any(arm.cut_short for arm in plan.arms):
        lines.append(Line(
            f"evomemory: to continue where it stopped: {resume_command} {plan.flags('resume')}="
            f"{shown_path(where, plan.setup.invocation_dir)}",
            "yellow", bold=True,
        ))
    elif any(arm.summary is not None and any(f.crashed for f in arm.summary.failed_episodes) for arm in plan.arms):
        lines.append(Line(
            "evomemory: a test process died while running a task (the machine's failure, not the agent's); to run "
            f"it again: {resume_command} {plan.flags('resume')}={shown_path(where, plan.setup.invocation_dir)}",
            "yellow", bold=True,
        ))
    return lines


def shown_path(path: Path, invocation_dir: Path) -> str:
    """``path`` as the user would type it: relative to where the session started, if inside."""
    try:
        return str(path.relative_to(invocation_dir.resolve()))
    except ValueError:
        return str(path)


def _comparison_lines(plan: PlanView, end: EndView) -> list[Line]:
    lines = [Line(f"evomemory: {' vs '.join(arm.name for arm in plan.arms)}", section=True)]
    if end.comparison is None:
        deferred = plan.deferred_comparison is not None  # not a failure: the merge's
        lines.append(Line.of(f"evomemory: {end.comparison_error}", "plain" if deferred else "red", bold=not deferred))
        return lines + _gain_lines(plan, end)
    from .terminal import format_comparison

    built = end.comparison_model  # the model compare.json was written from: not validated again
    lines += [Line.of(line) for line in format_comparison(built if built is not None else end.comparison)]
    lines += _gain_lines(plan, end)
    if end.comparison_files is not None:
        html, json_path = end.comparison_files
        lines += [Line.of(f"comparison: {html}"), Line.of(f"comparison data: {json_path}")]
    return lines


def _replicate_lines(plan: PlanView, end: EndView) -> list[Line]:
    names = " vs ".join(arm.run_config.name for arm in plan.baseline_arms)
    lines = [Line(f"evomemory: {names}, {plan.replicates} replicate(s)", section=True)]
    if end.replicate_comparison is None:
        lines.append(Line.of(f"evomemory: {end.comparison_error}", "red", bold=True))
        return lines + _gain_lines(plan, end)
    from .terminal import format_replicates

    lines += [Line.of(line) for line in format_replicates(end.replicate_comparison)]
    lines += _gain_lines(plan, end)
    # pages as "comparison:", their JSON as "comparison data:", as a single comparison's two lines
    lines += [Line.of(f"comparison{' data' if path.suffix == '.json' else ''}: {path}") for path in end.replicate_files]
    return lines


def _gain_lines(plan: PlanView, end: EndView) -> list[Line]:
    """The gain gates' verdicts, and why the session fails when one is missed."""
    results = end.gain_results
    if plan.gains and not results:
        return [Line(
            f"evomemory: the {plan.flags('min-gain')} gate is not passed without a comparison; the session fails",
            "red", bold=True,
        )]
    lines = [Line.of(result.describe(), "red" if not result.met else "green") for result in results]
    if any(not result.complete for result in results):
        lines.append(Line("evomemory: gain gates are not passed by an incomplete run; the session fails",
                          "red", bold=True))
    elif any(not result.met for result in results):
        lines.append(Line(
            f"evomemory: {sum(not r.met for r in results)} gain gate(s) missed; the session fails",
            "red", bold=True,
        ))
    return lines


def arm_lines(arm: ArmView, compare_dir: Path | None = None) -> list[Line]:
    """An arm's table, thresholds, failures and paths, as the terminal shows them."""
    result = arm.result
    if result is None:
        return []
    from .terminal import format_categories, format_table, unstored_lines

    lines = [Line.of(line) for line in format_table(result.metrics)]
    lines += [Line.of(line) for line in format_categories(result.summary.categories)]
    lines += [Line.of(f"ran: {line}") for line in describe_ran(
        {stream: ran.written() for stream, ran in result.summary.ran.items()}
    )]
    lines += [Line.of(line, "yellow") for line in unstored_lines(result.summary)]
    completion = result.summary.completion
    if not completion.complete:
        # the reason is the shortfall itself unless something stopped the run
        why = f" ({arm.run.stop_reason})" if arm.run.stop_reason else ""
        lines.append(Line.of(
            f"evomemory: the run is incomplete: {completion.tasks_run} of "
            f"{completion.tasks_planned} planned tasks ran{why}; "
            "thresholds are not passed by an incomplete run",
            "yellow", bold=True,
        ))
    for threshold in result.thresholds:
        lines.append(Line.of(threshold.describe(), "green" if threshold.met else "red"))
    missed = sum(not t.met for t in result.thresholds)
    if missed:
        lines.append(Line(f"evomemory: {missed} {_gated(result.thresholds)}threshold(s) missed; the session fails", "red", bold=True))
    elif result.thresholds and not result.summary.thresholds_met:
        lines.append(Line("evomemory: thresholds are not passed by an incomplete run; the session fails",
                          "red", bold=True))
    failures = result.summary.failed_episodes
    for failure in failures:
        if failure.phase != "task":
            where = failure.stream + (f"/{failure.task_id}" if failure.task_id else "")
            lines.append(Line.of(f"evomemory: {failure.phase} failed at {where}: {failure.reason}", "red"))
    if failures:
        lines.append(_failed_episodes_line(failures))
    if result.write_failure:
        lines.append(Line.of(f"evomemory: {result.write_failure}", "red", bold=True))
    lines.append(Line.of(f"results: {arm.run_dir}"))
    if result.report_error:
        lines.append(Line.of(
            f"evomemory: the HTML report could not be written: {result.report_error}; the session fails "
            f"(the results are written: 'evomemory report {arm.run_dir}' renders it again)",
            "red", bold=True,
        ))
    elif result.write_failure is None:
        lines.append(Line.of(f"report: {arm.run_dir / 'report.html'}"))
        if compare_dir is not None:
            lines.append(Line.of(f"comparison: {arm.run_dir / 'compare.html'} ({compare_dir} vs this run)"))
            lines.append(Line.of(f"comparison data: {arm.run_dir / 'compare.json'}"))
    return lines


#: failed episodes a session's last lines name (the rest are in summary.json and report.html)
_NAMED_FAILURES = 3


def _failed_episodes_line(failures: Sequence[Failure]) -> Line:
    """Why a session with failed episodes fails, in both entry points: pytest lists
    them as failed tests, ``evomemory run`` has no other line saying so (its exit
    status 1 was otherwise unexplained). The first few are named with their reason."""
    named = "; ".join(_named(failure) for failure in failures[:_NAMED_FAILURES])
    more = f"; and {len(failures) - _NAMED_FAILURES} more" if len(failures) > _NAMED_FAILURES else ""
    # one episode whose task and feedback turns both failed is one failed episode
    episodes = len({(failure.stream, failure.task_id) if failure.task_id else id(failure) for failure in failures})
    return Line.of(
        f"evomemory: {episodes} failed episode(s){_how_counted(failures)}; the session fails: {named}{more} "
        "(every one, with its traceback: summary.json 'failed_episodes', report.html)",
        "red", bold=True,
    )


def _named(failure: Failure) -> str:
    """A failure's reason, with where it happened unless the reason says so itself
    (an agent's own "no final_answer within the turn limit" names no task)."""
    reason = _first_line(failure.reason)
    where = failure.stream + (f"/{failure.task_id}" if failure.task_id else "")
    if where in reason:
        return reason
    return f"{failure.phase} turn of {where}: {reason}" if failure.task_id else f"stream {where} ({failure.phase}): {reason}"


def _how_counted(failures: Sequence[Failure]) -> str:
    """What the failures did to the scores: a failed task turn is scored as wrong; a
    failed feedback turn is never scored (its task's score is what its task turn
    earned), and a stream that could not start or end holds no score of its own."""
    tasks = sum(1 for failure in failures if failure.phase == "task")
    if tasks == len(failures):
        return ", counted as wrong"
    feedback = sum(1 for failure in failures if failure.phase == "feedback")
    parts = [f"{tasks} task turn(s), counted as wrong"] if tasks else []
    if feedback:
        parts.append(f"{feedback} feedback turn(s), never scored")
    if len(failures) - tasks - feedback:
        parts.append(f"{len(failures) - tasks - feedback} starting or ending a stream")
    return f" ({'; '.join(parts)})"


def _first_line(reason: object) -> str:
    lines = str(reason).strip().splitlines()
    return lines[0] if lines else "?"


def _gated(thresholds: Sequence[ThresholdResult]) -> str:
    """``"accuracy "`` when every gate reads the accuracy, else nothing (a gate on
    LoCoMo's mean F1 says so in its own line)."""
    return "accuracy " if all(threshold.metric == "accuracy" for threshold in thresholds) else ""


def json_block(session: SessionView) -> dict[str, Any] | None:
    """The block a dashboard reads (pytest-json-report's ``evomemory`` key): one
    shape for one arm and for several (docs/artefacts.md), redacted and strict JSON
    (no bare NaN) as the run directory writes it."""
    plan, end = session.plan, session.collector
    if not plan.started:
        return None
    from ..rundocs.compare import as_comparison, as_replicates
    from ..rundocs.report import JsonReport, ReportArm, ReportIdentity

    report = JsonReport(
        schema_version=SCHEMA_VERSION,
        baseline=plan.baseline.name,
        arms=[
            ReportArm(
                name=arm.name,
                replicate=None if arm.replicate is None else ReplicateDoc.model_validate(arm.replicate.to_dict()),
                run_dir=str(arm.run_dir),
                identity=ReportIdentity.model_validate(run_identity(arm.run_config, _ran(arm.summary))),
                summary=arm.summary,
            )
            for arm in plan.arms
        ],
        comparison=None if end.comparison is None else as_comparison(end.comparison),
        gains=[result.document() for result in end.gain_results],
    )
    if plan.replicates is not None:  # a repeated session says so, null or not
        report.replicates = None if end.replicate_comparison is None else as_replicates(end.replicate_comparison)
    block: dict[str, Any] = redact_strings(report.written())
    return block


def _ran(summary: Summary | None) -> dict[str, Any] | None:
    """What ran per stream, as the JSON report's identity reads it."""
    return None if summary is None else {stream: ran.written() for stream, ran in summary.ran.items()}


__all__ = ["SessionView", "arm_lines", "header", "json_block", "report", "resume_notes", "shard_lines", "shown_path"]
