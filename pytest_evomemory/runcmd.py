"""``evomemory run``: a benchmark run without pytest, through the same engine.

For users of the original harness (a command, a config, an output directory) and
for scripts. It writes the same artefacts, applies the same thresholds and uses
pytest's exit codes, so CI can switch between it and the plugin freely:

    0  every task ran, thresholds met, no failed episode
    1  a threshold missed, an episode failed, or results could not be written
    2  interrupted (Ctrl-C, SIGTERM) or stopped by --max-errors
    4  usage error: bad config, data or options (nothing was run)

Streams run one after another in this process; for parallel streams use the
plugin (``pytest -n N``).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 2
EXIT_USAGE = 4


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a benchmark without pytest (same engine, artefacts and exit codes)",
        description="Run a benchmark from a run config, serially, without pytest.",
    )
    run.add_argument(
        "--config", metavar="PATH|NAME", required=True,
        help="run config (YAML path, or a built-in config's name such as sample_memory)",
    )
    run.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], dest="settings",
        help="override one config key, e.g. agent.model.model=gpt-4o-mini (repeatable; recorded in run.json)",
    )
    run.add_argument(
        "--output-dir", metavar="DIR", default=None,
        help="where the run's artefacts go (default: the config's output_dir, else evomemory-results/<run name>)",
    )
    run.add_argument("--limit", metavar="N", type=int, default=None, help="run only the first N tasks of each stream")
    run.add_argument(
        "--stream", metavar="NAME", action="append", default=[],
        help="run only this stream (repeatable); default: every stream of the benchmark",
    )
    run.add_argument(
        "--min-accuracy", metavar="[STREAM=]FRACTION", action="append", default=[],
        help="fail (exit 1) if overall (or STREAM's) accuracy is below FRACTION; repeatable",
    )
    run.add_argument("--resume", action="store_true", help="continue the interrupted run in the output directory")
    run.add_argument("--max-errors", metavar="N", type=int, default=None, help="stop after N failed episodes")
    run.add_argument("-q", "--quiet", action="store_true", help="no per-task progress lines")


def main(args: argparse.Namespace) -> int:
    from .config import load_run_config
    from .configs import resolve_run_config
    from .errors import ConfigError, EvoMemoryError
    from .redaction import shown
    from .reporting.terminal import format_table
    from .rundir import check_output_dir, default_run_dir
    from .runtime import BenchmarkRun, execute, parse_min_accuracy

    try:
        config = load_run_config(resolve_run_config(args.config, Path.cwd()), args.settings).with_overrides(
            limit=args.limit, streams=args.stream
        )
        output = args.output_dir or config.output_dir
        run_dir = check_output_dir(Path(output) if output else default_run_dir(config.name, Path.cwd()))
        benchmark = BenchmarkRun(config, run_dir)
        min_overall, min_streams = parse_min_accuracy(args.min_accuracy, benchmark.stream_order)
        if args.max_errors is not None and args.max_errors < 1:
            raise ConfigError(f"--max-errors must be at least 1, got {args.max_errors}")
    except EvoMemoryError as error:
        print(shown(f"evomemory: error: {error}"), file=sys.stderr)
        return EXIT_USAGE
    previous = _catch_sigterm()
    try:
        result = execute(
            benchmark, resume=args.resume, command=sys.argv,
            min_overall=min_overall, min_streams=min_streams, max_errors=args.max_errors,
            progress=None if args.quiet else _progress,
        )
    except EvoMemoryError as error:
        print(shown(f"evomemory: error: {error}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before the first task started: nothing to summarize
        print("evomemory: interrupted before any task ran", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        _restore_sigterm(previous)
    for line in format_table(result.metrics):
        print(line)
    completion = result.summary["completion"]
    for threshold in result.thresholds:
        print(shown(threshold.describe()))
    if result.artefacts_lost:
        print(shown(f"evomemory: {result.artefacts_lost}"), file=sys.stderr)
    print(f"results: {run_dir}")
    if not completion["complete"]:  # every planned task runs unless the run was stopped
        print(shown(f"evomemory: the run is incomplete ({completion['reason']})"), file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if result.summary["passed"] and not result.artefacts_lost else EXIT_FAILED


def _progress(record: Mapping[str, Any]) -> None:
    scored = record.get("scored")
    if scored is not None:
        verdict = "error" if scored.get("error") else ("correct" if scored.get("correct") else "wrong")
        print(f"{scored['stream']}/{scored['task_id']} [{int(scored['position']) + 1}] {verdict}", flush=True)


_TERMINATED: list[bool] = []


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """The first SIGTERM ends the run as Ctrl-C does; a repeated one must not
    interrupt the summary being written."""
    if _TERMINATED:
        return
    _TERMINATED.append(True)
    raise KeyboardInterrupt("SIGTERM")


def _catch_sigterm() -> Any:
    _TERMINATED.clear()
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        return None


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
