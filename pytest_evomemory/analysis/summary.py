"""Turn the run's records into per-stream and overall metrics.

Accuracy counts only original task turns; a task whose episode failed counts as
wrong (it is in the denominator), so an unreachable model can never raise a score.
Stimulus, turn, token and memory counts include the feedback turns.

Every accuracy carries its 95 % Wilson interval (:mod:`.stats`): streams of 12 to
30 tasks make a bare percentage misleading. A stream whose scorer reports
a figure its match mode declares (ToolBench's "API", the paper's column beside
"Acc.") reports it too; scored items with a ``group`` (MMLU-Pro's category) get a per-group
breakdown. Responses served from the response cache are counted (:func:`is_cached`),
so a fast re-run is never mistaken for the model's speed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from ..evaluation.modes import MATCH_MODES, Metric, headline_metric
from ..rundocs import Response, Score
from ..rundocs.base import tolerant
from ..rundocs.records import as_response, as_score
from .stats import FAILED_IS_WRONG, Proportion

#: How summary.json's ``methods`` names the computation behind each interval it
#: holds (as compare.json's and replicates.json's do), in words a reader can cite.
METHODS = {
    "accuracy_ci": "95% Wilson score interval (Wilson 1927) of each accuracy and share (groups, a figure's "
    "<name>_accuracy_ci)",
    "categories_ci": "95% Wilson interval of the mean figure (LoCoMo's F1) on the effective number of tasks: design "
    "effect of the scores with half a pseudo-outcome at 0 and at 1, Student's t with tasks - 1 degrees of freedom "
    "(docs/statistics.md)",
    "denominator": FAILED_IS_WRONG,
}

if TYPE_CHECKING:
    # summary.json's models: built into documents only where a summary is written
    # (imported there), not in an xdist worker, which counts but never summarizes
    from ..rundocs.summary import GroupSummary, StreamSummary, Summary, Threshold


def _is_assistant(message: object) -> TypeGuard[Mapping[str, Any]]:
    # a dict first: an ABC isinstance check per message cost more than the rest
    return (type(message) is dict or isinstance(message, Mapping)) and message.get("role") == "assistant"


def _assistant_messages(messages: Sequence[Any] | None) -> list[Mapping[str, Any]]:
    return [m for m in messages or () if _is_assistant(m)]


def is_cached(response: Response | Mapping[str, Any], messages: Sequence[Any] | None = None) -> bool:
    """Whether a response was served from the response cache.

    A response may say so itself (``"cached": true``); otherwise it is cached when
    it made model calls and every one was replayed: the cache marks each replayed
    assistant message ``"cached": true``. ``messages`` defaults to the response's
    own (responses.jsonl omits them; pass the transcript's).
    """
    typed = as_response(response)
    if typed.cached:
        return True
    called = False
    for message in (typed.messages if messages is None else messages) or ():
        if _is_assistant(message):
            if not message.get("cached"):
                return False  # one live call: no need to read on
            called = True
    return called


def cache_counts(response: Response | Mapping[str, Any]) -> tuple[int, int]:
    """(model calls, of which served from the response cache) of one response record.

    The response cache marks each replayed assistant message ``"cached": true``
    (:mod:`pytest_evomemory.models.cache`, via TinyAgent); agents that call no
    model, or mark nothing, count as zero calls.
    """
    calls = _assistant_messages(as_response(response).messages)
    return len(calls), sum(1 for m in calls if m.get("cached"))


def _interval(proportion: Proportion) -> list[float] | None:
    interval = proportion.interval
    return None if interval is None else [round(interval[0], 6), round(interval[1], 6)]


@dataclass
class GroupMetrics:
    """Accuracy of the tasks of one group (e.g. one MMLU-Pro category) in a stream."""

    tasks: int = 0
    correct: int = 0

    def document(self) -> GroupSummary:
        from ..rundocs.summary import GroupSummary

        proportion = Proportion(self.correct, self.tasks)
        return GroupSummary(
            tasks=self.tasks, correct=self.correct, accuracy=proportion.estimate, accuracy_ci=_interval(proportion)
        )


def counted(response: Response | Mapping[str, Any]) -> Response:
    """The part of a response the summary counts (:class:`ResponseTally` counts it
    as each response arrives): the rest (messages, recalled hits, tool arguments) is
    in responses.jsonl and the transcripts."""
    typed = response if isinstance(response, Response) else tolerant(Response, response)
    return typed.model_copy(update={
        "messages": None, "final_answer": None, "memory_writes": [], "memory_recalled": [],
        "tool_calls": [call.model_copy(update={"arguments": {}, "result": None}) for call in typed.tool_calls],
        "cached": is_cached(typed),
    })


@dataclass
class StreamMetrics:
    """Counters for one stream (or, for ``overall``, all of them together)."""

    stream: str
    tasks: int = 0
    correct: int = 0
    errors: int = 0
    stimuli: int = 0
    feedback_turns: int = 0
    agent_turns: int = 0
    tool_calls: int = 0
    memory_retains: int = 0
    memory_recalls: int = 0
    #: retains the memory stored nothing for (a response's ``memory_unstored``)
    memory_unstored: int = 0
    protocol_violations: int = 0
    cached_responses: int = 0
    #: Figures the streams' match modes declare beyond accuracy (ToolBench's "API",
    #: LoCoMo's F1): name -> tasks whose score has the figure's detail true (a share),
    #: or the sum of the detail's values (a mean; see
    #: :class:`pytest_evomemory.evaluation.modes.Metric`), and name -> its label.
    figures: dict[str, int] = field(default_factory=dict)
    figure_sums: dict[str, float] = field(default_factory=dict)
    figure_labels: dict[str, str] = field(default_factory=dict)
    groups: dict[str, GroupMetrics] = field(default_factory=dict)
    #: The headline figure of each scored item's match mode by name (None: accuracy),
    #: as :attr:`headline` decides it.
    headlines: dict[str | None, Metric | None] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    curve: list[float] = field(default_factory=list)
    #: The responses' ``cost_usd`` summed (model.pricing); None when none is priced.
    cost_usd: float | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.tasks if self.tasks else None

    @property
    def accuracy_ci(self) -> tuple[float, float] | None:
        """95 % Wilson interval of :attr:`accuracy`."""
        return Proportion(self.correct, self.tasks).interval

    def figure(self, name: str) -> float | None:
        """The share of tasks with figure ``name``, or its mean over the tasks for a
        mean figure (None when no task carries it)."""
        total = self.figure_sums.get(name) if name in self.figure_sums else self.figures.get(name)
        return None if total is None or not self.tasks else total / self.tasks

    @property
    def headline(self) -> Metric | None:
        """The mean figure every scored item's match mode reports as its headline
        (LoCoMo's F1, :attr:`~pytest_evomemory.evaluation.modes.MatchModeSpec.headline`);
        None when it is the accuracy, or when the items' modes disagree (no one mean
        would be the figure of them all). The one place a gate, a summary and a
        comparison learn what a stream is judged on."""
        if len(self.headlines) != 1:
            return None
        return next(iter(self.headlines.values()))

    def note_headline(self, mode: object) -> None:
        """Record the headline of a scored item's match mode (see :attr:`headline`)."""
        headline = headline_metric(mode)
        self.headlines[None if headline is None else headline.name] = headline

    def headline_figure(self) -> tuple[str, str, float | None]:
        """``(key, label, value)`` of the headline: ``("accuracy", "accuracy", 0.6)``,
        or ``("f1_mean", "mean F1", 0.43)``; ``key`` is the figure's key in the
        stream's summary (``summary.json``)."""
        metric = self.headline
        if metric is None:
            return "accuracy", "accuracy", self.accuracy
        # a failed episode counts 0, also when no task carries the figure at all
        total = self.figure_sums.get(metric.name, 0.0)
        return f"{metric.name}_mean", f"mean {metric.label}", total / self.tasks if self.tasks else None

    def add_outcome(self, scored: Score | Mapping[str, Any], *, with_groups: bool = True) -> None:
        """Count one scored item; a failed episode is a wrong answer and no API match."""
        outcome = as_score(scored)
        self.tasks += 1
        self.note_headline(outcome.match_mode)
        correct = not outcome.error and outcome.correct
        if outcome.error:
            self.errors += 1
        elif correct:
            self.correct += 1
        details = outcome.details
        if details:
            for metric in _declared_metrics(outcome.match_mode):
                if metric.detail not in details:
                    continue
                value = details[metric.detail]
                if metric.kind == "mean":
                    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
                    self.figure_sums[metric.name] = self.figure_sums.get(metric.name, 0.0) + number
                else:
                    self.figures[metric.name] = self.figures.get(metric.name, 0) + bool(value)
                self.figure_labels[metric.name] = metric.label
        group = outcome.group
        if with_groups and group is not None:
            counts = self.groups.setdefault(str(group), GroupMetrics())
            counts.tasks += 1
            counts.correct += correct

    def add_response(self, counted_response: Response | Mapping[str, Any], cached: bool | None = None) -> None:
        """Count one response; ``cached``: :func:`is_cached` of it, when the caller
        already knows (it walks the response's messages)."""
        response = as_response(counted_response)
        self.stimuli += 1
        if response.kind == "feedback":
            self.feedback_turns += 1
        self.agent_turns += _whole(response.agent_turns)
        self.tool_calls += len(response.tool_calls)
        self.memory_retains += _whole(response.memory_retains)
        self.memory_recalls += _whole(response.memory_recalls)
        self.memory_unstored += _whole(response.memory_unstored)
        self.protocol_violations += 1 if response.protocol_violation else 0
        self.cached_responses += 1 if (is_cached(response) if cached is None else cached) else 0
        self.prompt_tokens += _whole(response.usage.prompt_tokens)
        self.completion_tokens += _whole(response.usage.completion_tokens)
        seconds = response.seconds
        self.seconds += float(seconds) if isinstance(seconds, int | float) and math.isfinite(seconds) else 0.0
        cost = response.cost_usd
        if isinstance(cost, int | float) and not isinstance(cost, bool) and abs(cost) < 1e300:
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)

    def add_tally(self, tally: StreamMetrics) -> None:
        """Count responses another StreamMetrics counted (a :class:`ResponseTally`'s)."""
        for name in _RESPONSE_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(tally, name))
        if tally.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + tally.cost_usd

    def document(self) -> StreamSummary:
        """The stream's metrics as summary.json holds them."""
        from ..rundocs.summary import Headline, PerStimulus, StreamSummary

        total_tokens = self.prompt_tokens + self.completion_tokens
        per = (lambda value: value / self.stimuli) if self.stimuli else (lambda value: None)
        key, label, value = self.headline_figure()
        return StreamSummary(
            stream=self.stream,
            tasks=self.tasks,
            correct=self.correct,
            errors=self.errors,
            accuracy=self.accuracy,
            accuracy_ci=_interval(Proportion(self.correct, self.tasks)),
            figures=dict(self.figure_labels),
            **self._figure_fields(),
            # what the stream is judged on (the gates read it; see :attr:`headline`)
            headline=Headline(metric=key, label=label, value=value),
            groups={name: group.document() for name, group in self.groups.items()},
            stimuli=self.stimuli,
            feedback_turns=self.feedback_turns,
            agent_turns=self.agent_turns,
            tool_calls=self.tool_calls,
            memory_retains=self.memory_retains,
            memory_recalls=self.memory_recalls,
            memory_unstored=self.memory_unstored or None,
            protocol_violations=self.protocol_violations,
            cached_responses=self.cached_responses,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            total_tokens=total_tokens,
            seconds=round(self.seconds, 6),
            cost_usd=None if self.cost_usd is None else round(self.cost_usd, 6),
            per_stimulus=PerStimulus(
                tokens=per(total_tokens), agent_turns=per(self.agent_turns), seconds=per(self.seconds)
            ),
            learning_curve=self.curve,
        )

    def _figure_fields(self) -> dict[str, Any]:
        """``<name>_matches``, ``<name>_accuracy``, ``<name>_accuracy_ci`` per figure (a
        mean figure's ``<name>_sum`` and ``<name>_mean``), for tables that show them
        (``API / Acc.``)."""
        fields: dict[str, Any] = {}
        for name, matches in self.figures.items():
            fields[f"{name}_matches"] = matches
            fields[f"{name}_accuracy"] = self.figure(name)
            fields[f"{name}_accuracy_ci"] = _interval(Proportion(matches, self.tasks))
        for name, total in self.figure_sums.items():
            fields[f"{name}_sum"] = round(total, 6)
            fields[f"{name}_mean"] = self.figure(name)
        return fields


def shared_headline(scored: Iterable[Score | Mapping[str, Any]]) -> Metric | None:
    """The headline mean figure every item of ``scored`` shares (LoCoMo's F1), by
    :attr:`StreamMetrics.headline`'s rule; None for accuracy (a comparison of runs
    asks this of the scored items it pairs)."""
    metrics = StreamMetrics("headline")
    for item in scored:
        metrics.note_headline(as_score(item).match_mode)
    return metrics.headline


def _declared_metrics(mode: object) -> tuple[Metric, ...]:
    """The figures the scored item's match mode declares (none for an unknown mode)."""
    if not isinstance(mode, str) or mode not in MATCH_MODES:
        return ()
    return MATCH_MODES.get(mode).metrics


def _whole(value: object) -> int:
    """A count as a whole number; 0 for one that is not a finite number (a record an
    agent, or a hand, damaged: the totals stay numbers and the run still ends)."""
    if type(value) is int:  # the common case: six per response counted, at a run's end read again
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value) if math.isfinite(value) else 0


#: What the summary reads of a scored item (:meth:`StreamMetrics.add_outcome`, the
#: failed episodes, :func:`.categories.category_table`), besides the details
#: :func:`outcome` keeps.
_OUTCOME = ("stream", "task_id", "position", "correct", "error", "traceback", "match_mode", "group", "value")
#: A detail the categories table reads whatever the mode declares (LoCoMo's).
_EVIDENCE_RECALL = "evidence_recall"


def outcome(scored: Score | Mapping[str, Any]) -> Score:
    """The part of a scored item the summary counts, for a collector that holds every
    score of the session: the answer, extraction, reason and the details no figure
    reads are in scores.jsonl (held whole, they were ~0.5 KB a task, LoCoMo's
    stems and evidence more)."""
    typed = as_score(scored)
    given = typed.model_fields_set
    kept = {name: getattr(typed, name) for name in _OUTCOME if name in given}
    wanted = {metric.detail for metric in _declared_metrics(typed.match_mode)}
    details = {key: value for key, value in typed.details.items() if key in wanted or key == _EVIDENCE_RECALL}
    if details:  # none: nothing reads them (an empty dict a task adds up)
        kept["details"] = details
    # the empty details given, not made by the field's factory: pydantic inspects a
    # factory's signature on every construction, a third of this function's time
    # (the fields set stay the ones given)
    return Score.model_construct(set(kept), **{"details": {}, **kept})


#: What :meth:`StreamMetrics.add_response` counts (besides ``cost_usd``, None until priced).
_RESPONSE_FIELDS = ("stimuli", "feedback_turns", "agent_turns", "tool_calls", "memory_retains", "memory_recalls",
                    "memory_unstored", "protocol_violations", "cached_responses", "prompt_tokens", "completion_tokens", "seconds")


class ResponseTally:
    """The responses' figures counted as they arrive, per stream and overall, for a
    collector that sees every response of a session: what :func:`summarize` counts
    of them, without keeping them (kept, even as :func:`counted` figures, they grew
    a long run's memory by ~1 KB a task)."""

    def __init__(self) -> None:
        self.streams: dict[str, StreamMetrics] = {}
        self.overall = StreamMetrics("overall")

    @classmethod
    def of(cls, responses: Iterable[Response | Mapping[str, Any]]) -> ResponseTally:
        tally = cls()
        for response in responses:
            tally.add(response)
        return tally

    def add(self, response: Response | Mapping[str, Any], cached: bool | None = None) -> None:
        """Count ``response`` for its stream and overall; ``cached``: :func:`is_cached`
        of it, when the caller already knows (else worked out here, once)."""
        # StreamMetrics.add_response reads nothing counted() blanks out (and counts a
        # response as cached exactly when counted() would say so): a typed response
        # is counted as it is, without copying it and each of its tool calls
        figures = response if isinstance(response, Response) else counted(response)
        if cached is None:
            cached = is_cached(figures)
        name = figures.stream
        tally = self.streams.get(name)
        if tally is None:
            tally = self.streams[name] = StreamMetrics(name)
        tally.add_response(figures, cached)
        self.overall.add_response(figures, cached)


def summarize(
    stream_order: Sequence[str],
    outcomes: Iterable[Score | Mapping[str, Any]],
    responses: Iterable[Response | Mapping[str, Any]] | ResponseTally,
) -> dict[str, StreamMetrics]:
    """Metrics keyed by stream name (in stream order), plus ``"overall"``.

    ``outcomes`` are scored items (``{"stream", "position", "correct", ...}``)
    with ``"error"`` set for failed episodes. ``responses`` are AgentResponse dicts.
    """
    metrics = {name: StreamMetrics(name) for name in stream_order}
    overall = StreamMetrics("overall")
    ordered = sorted(map(as_score, outcomes), key=lambda o: (_index(stream_order, o.stream), o.position))
    for outcome in ordered:
        stream = metrics.setdefault(outcome.stream, StreamMetrics(outcome.stream))
        stream.add_outcome(outcome)
        # Groups belong to their stream (a category is not comparable across streams),
        # and a figure such as ToolBench's API to the streams that have one: overall has neither.
        overall.add_outcome(outcome, with_groups=False)
        stream.curve.append(round(stream.correct / stream.tasks, 6))
    tally = responses if isinstance(responses, ResponseTally) else ResponseTally.of(responses)
    for name, per_stream in tally.streams.items():
        metrics.setdefault(name, StreamMetrics(name)).add_tally(per_stream)
    overall.add_tally(tally.overall)
    for stream_metrics in metrics.values():
        stream_metrics.groups = dict(sorted(stream_metrics.groups.items()))
    overall.curve = []
    # The overall row keeps a figure only when it is the headline of every scored
    # item (LoCoMo's mean F1 over all questions, the figure the paper reports).
    headline = overall.headline
    overall.figures = {}
    overall.figure_sums = {name: total for name, total in overall.figure_sums.items()
                           if headline is not None and name == headline.name}
    overall.figure_labels = {name: label for name, label in overall.figure_labels.items() if name in overall.figure_sums}
    metrics["overall"] = overall
    return metrics


#: The counts of a stream's summary that its records alone determine: a finished
#: run's summary.json and its records agree on each (the summary is made from them).
#: Those of the scores, and those of the responses.
SCORE_COUNTS = ("tasks", "correct", "errors")
#: Not ``cached_responses``: responses.jsonl says ``cached`` on each replayed response
#: (the collector adds it), but a run written before it did marks replies only on the
#: assistant messages in its transcripts, and must still resume and merge.
RESPONSE_COUNTS = ("stimuli", "feedback_turns", "agent_turns", "tool_calls", "memory_retains", "memory_recalls",
                   "protocol_violations")
RECORD_COUNTS = (*SCORE_COUNTS, *RESPONSE_COUNTS)


def records_disagree(
    summary: Summary, metrics: Mapping[str, StreamMetrics], counts: Sequence[str] = RECORD_COUNTS
) -> str | None:
    """Where a finished run's summary.json and the ``metrics`` counted from its records
    differ (the first stream and count), else None: a record file emptied, cut,
    edited or copied from another run after the run ended. A count the summary does
    not hold (an older writer's) is not compared, nor a run whose writing failed
    (``write_failure``: its summary counts what the records could not keep)."""
    if summary.write_failure:
        return None
    streams = summary.streams
    names = [*streams, *(name for name in metrics if name != "overall" and name not in streams)]
    for name in names:
        written = streams.get(name)
        counted_here = metrics.get(name)
        for key in counts:
            if written is not None and key not in written.model_fields_set:
                continue
            want = getattr(written, key) if written is not None else 0
            got = getattr(counted_here, key) if counted_here is not None else 0
            if want != got:
                return f"stream {str(name)[:80]!r}: summary.json counts {key} {want!r}, the records {got}"
    return None


def _index(order: Sequence[str], name: str) -> int:
    return order.index(name) if name in order else len(order)


@dataclass(frozen=True)
class ThresholdResult:
    """One gate: the scope's headline figure (:meth:`StreamMetrics.headline_figure`:
    the accuracy, or LoCoMo's mean F1) against its minimum. ``accuracy`` is the
    scope's accuracy whatever the gate reads, so a summary shows both."""

    scope: str
    minimum: float
    value: float | None
    metric: str = "accuracy"
    label: str = "accuracy"
    accuracy: float | None = None

    @property
    def met(self) -> bool:
        return self.value is not None and self.value >= self.minimum

    def describe(self) -> str:
        verdict = "met" if self.met else "MISSED"
        if self.metric == "accuracy":
            shown = "n/a (no tasks ran)" if self.value is None else f"{self.value:.1%}"
            return f"{verdict}: {self.scope} accuracy {shown}, minimum {self.minimum:.1%}"
        shown = "n/a (no tasks ran)" if self.value is None else f"{self.value:.3f}"
        return f"{verdict}: {self.scope} {self.label} {shown}, minimum {self.minimum:.3f} (gated on {self.label}, not accuracy)"

    def document(self) -> Threshold:
        from ..rundocs.summary import Threshold

        return Threshold(scope=self.scope, metric=self.metric, label=self.label, minimum=self.minimum,
                         value=self.value, accuracy=self.accuracy, met=self.met)


def threshold_result(scope: str, minimum: float, metrics: StreamMetrics | None) -> ThresholdResult:
    """The gate of ``scope`` at ``minimum``: it reads the headline figure the scope's
    match modes declare (accuracy unless a mode names a mean figure)."""
    if metrics is None:
        return ThresholdResult(scope, minimum, None)
    key, label, value = metrics.headline_figure()
    return ThresholdResult(scope, minimum, value, key, label, metrics.accuracy)


def check_thresholds(
    metrics: Mapping[str, StreamMetrics],
    overall: float | None,
    per_stream: Mapping[str, float],
) -> list[ThresholdResult]:
    """Compare each scope's headline figure with its minimum (streams first, then overall)."""
    results = [threshold_result(name, minimum, metrics.get(name)) for name, minimum in per_stream.items()]
    if overall is not None:
        results.append(threshold_result("overall", overall, metrics["overall"]))
    return results
