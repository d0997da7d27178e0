"""Task order as an experimental factor: ``benchmark.order`` and where it comes from.

The paper runs every method on one fixed order per dataset and studies sequence
robustness by running the same stream easy-to-hard and hard-to-easy. Here a stream's
tasks are first selected (``streams``, ``limit``, MMLU-Pro's categories: always on the
source order), then put in the configured order, so two orders of one stream hold
exactly the same tasks and their results pair task by task:

* ``given``: the source's order (the default; DESIGN.md's fixed order).
* ``shuffle``: a permutation drawn from ``order_seed`` (default ``seed``) and the
  stream's name, the same on every machine and xdist worker.
* ``easy_to_hard`` / ``hard_to_easy``: by difficulty, ties kept in the source order.
  Difficulty comes from ``order_from`` (finished run directories: 1 minus the share
  of them that solved the task) or else from the source (:data:`SOURCE_DIFFICULTY`);
  a stream with neither is refused before any model call, and so is a stream of
  several tasks that are all equally difficult (a reference run that solved none or
  all of them): it could only run in the source order, the same in both directions.

Each stream's order is recorded in run.json (``streams[].order``: kind, seed, where
the difficulty came from, and a hash of the task ids in order), and a resume whose
order differs from the interrupted run's is refused (:func:`check_resume_order`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import BenchmarkConfig
from ..core.errors import ConfigError, ReportError, named
from ..core.types import BenchmarkSample
from ..rundir import RunDirError, open_finished_run
from ..rundocs import RunFile, StreamOrder
from ..rundocs.run import task_order_digest
from ..streams import Stream

#: Where each built-in stream's own difficulty comes from (``metadata.difficulty``,
#: set by its converter); any other stream reads a user's ``metadata.difficulty``.
SOURCE_DIFFICULTY: Mapping[str, str] = {
    "aime_2024": "source: the problem's number in its exam (1-15, from 'url' .../Problem_N)",
    "gpqa_diamond": (
        "source: mean of GPQA's 'Writer's Difficulty Estimate', 'Question Difficulty_EV_1' and "
        "'Question Difficulty_EV_2' (1 easy undergraduate .. 4 post-graduate)"
    ),
}
JSONL_DIFFICULTY = "source: the task's metadata.difficulty"


def order_streams(streams: Sequence[Stream], config: BenchmarkConfig, base_dir: Path, source: str) -> list[Stream]:
    """The streams with their tasks in ``config.order`` (positions renumbered from 0),
    each carrying the description of its order (:attr:`Stream.order`)."""
    solve_rates = _reference_difficulties(config, base_dir, source) if config.order_from is not None else None
    ordered: list[Stream] = []
    for stream in streams:
        in_order, described = _order_one(stream, config, solve_rates, source)
        samples = tuple(replace(sample, position=index) for index, sample in enumerate(in_order))
        digest = task_order_digest(sample.task_id for sample in samples)
        ordered.append(replace(stream, samples=samples, order=described.model_copy(update={"tasks_sha256": digest})))
    return ordered


def _order_one(
    stream: Stream,
    config: BenchmarkConfig,
    solve_rates: Mapping[tuple[str, str], float] | None,
    source: str,
) -> tuple[list[BenchmarkSample], StreamOrder]:
    samples = list(stream.samples)
    kind = config.order
    if kind == "given":
        return samples, StreamOrder(kind=kind)
    if kind == "shuffle":
        seed = config.seed if config.order_seed is None else config.order_seed
        random.Random(f"{seed}/{stream.name}").shuffle(samples)
        return samples, StreamOrder(kind=kind, seed=seed)
    if solve_rates is not None:
        difficulty = {s.task_id: solve_rates.get((stream.name, s.task_id)) for s in samples}
        missing = [task for task, value in difficulty.items() if value is None]
        if missing:
            raise ConfigError(
                f"{source}: key 'order_from': the reference run(s) have no result for {len(missing)} task(s) of "
                f"stream {stream.name!r} (e.g. {', '.join(map(repr, missing[:3]))}); give runs that ran the same "
                "tasks (same streams, limit and categories)",
                source=source, key="order_from",
            )
        where = f"order_from: 1 - share of {_run_count(config)} reference run(s) that solved the task"
    else:
        difficulty = {s.task_id: _number(s.metadata.get("difficulty")) for s in samples}
        missing = [task for task, value in difficulty.items() if value is None]
        if missing:
            raise ConfigError(
                f"{source}: key 'order': {kind} needs each task's difficulty, and stream {stream.name!r} has none "
                f"for {len(missing)} task(s) (e.g. {', '.join(map(repr, missing[:3]))}); its source records no "
                "difficulty, so give 'order_from: <a finished run directory>' to order by how often tasks were "
                "solved (or set metadata.difficulty in a JSONL stream)",
                source=source, key="order",
            )
        where = SOURCE_DIFFICULTY.get(stream.name, JSONL_DIFFICULTY)
    _refuse_all_tied(stream.name, kind, difficulty, where, solve_rates is not None, source)
    sign = 1.0 if kind == "easy_to_hard" else -1.0
    # sorted() is stable: equally difficult tasks keep the source order, in both directions
    samples.sort(key=lambda sample: sign * float(difficulty[sample.task_id] or 0.0))
    return samples, StreamOrder(kind=kind, difficulty=where)


def _refuse_all_tied(
    stream: str, kind: str, difficulty: Mapping[str, float | None], where: str, from_runs: bool, source: str
) -> None:
    """Refuse a difficulty order of a stream whose tasks are all equally difficult:
    it would run them in the source order, exactly as the opposite order does, and
    the comparison of the two would read "no difference" about an order never varied."""
    values = set(difficulty.values())
    if len(difficulty) < 2 or len(values) != 1:
        return
    (value,) = values
    if from_runs:
        why = (
            f"the reference run(s) solved {'none' if value == 1.0 else 'all' if value == 0.0 else 'the same share'} "
            f"of its {len(difficulty)} tasks, so every task is equally difficult"
        )
        fix = "give 'order_from' runs that solved some tasks and missed others (e.g. a stronger or weaker arm)"
    else:
        why = f"every one of its {len(difficulty)} tasks has difficulty {value:g} ({where})"
        fix = "select tasks that differ in difficulty (another 'limit'), or use 'order_from' runs"
    key = "order_from" if from_runs else "order"
    raise ConfigError(
        f"{source}: key '{key}': {kind} cannot order stream {stream!r}: {why}; it would run the tasks in the "
        f"source order, as the opposite order would; {fix}",
        source=source, key=key,
    )


def _run_count(config: BenchmarkConfig) -> int:
    return len(config.order_from) if isinstance(config.order_from, list) else 1


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _reference_difficulties(config: BenchmarkConfig, base_dir: Path, source: str) -> dict[tuple[str, str], float]:
    """``(stream, task_id) -> 1 - solve rate`` over the reference runs (a failed
    episode counts as not solved), read checked as a report reads them (:mod:`..rundir`)."""
    given = config.order_from
    directories = given if isinstance(given, list) else [given] if given is not None else []
    solved: dict[tuple[str, str], list[bool]] = {}
    for directory in directories:
        path = Path(directory).expanduser()
        path = path if path.is_absolute() else base_dir / path
        try:
            # read whole here: a damaged file, or one not adding up to its summary, is refused here too
            scores = list(open_finished_run(path, ReportError).scores())
        except (ReportError, RunDirError) as error:
            raise ConfigError(f"{source}: key 'order_from': {error}", source=source, key="order_from") from None
        for scored in scores:
            solved.setdefault((scored.stream, scored.task_id), []).append(scored.correct and not scored.error)
    return {key: 1.0 - sum(outcomes) / len(outcomes) for key, outcomes in solved.items()}


def check_resume_order(
    recorded_run: RunFile | Mapping[str, Any], streams: Sequence[Stream], run_dir: Path
) -> None:
    """Refuse to resume a stream whose task order differs from the interrupted run's.

    The config fingerprint already covers ``order``, ``order_seed`` and ``order_from``;
    this also catches a reference run that changed behind the same path. A run.json
    from before orders were recorded ran its streams in the given order.
    """
    document = recorded_run if isinstance(recorded_run, RunFile) else RunFile.model_validate(recorded_run)
    recorded = {entry.name: entry for entry in document.streams}
    for stream in streams:
        if stream.name not in recorded:
            continue
        entry = recorded[stream.name]
        was = entry.order if "order" in entry.model_fields_set else StreamOrder()
        now = stream.order
        if not was.model_fields_set:
            if now.named == "given":
                continue
            was = StreamOrder(kind="given")
        if was.tasks_sha256 not in (None, now.tasks_sha256) or was.kind != now.kind:
            raise RunDirError(
                f"{named('resume')} {run_dir}: stream {stream.name!r} would run its tasks in another order "
                f"than the interrupted run ({_described(was)} then, {_described(now)} now); the remaining tasks "
                "would follow a different history, so resume with the same order (and the same order_from "
                "runs), or start a new run in another output directory",
                option="resume",
            )


def _described(order: StreamOrder) -> str:
    parts = [order.named]
    if order.seed is not None:
        parts.append(f"seed {order.seed}")
    if order.tasks_sha256:
        parts.append(f"tasks {order.tasks_sha256[:12]}")
    return " ".join(parts)


__all__ = ["SOURCE_DIFFICULTY", "check_resume_order", "order_streams", "task_order_digest"]
