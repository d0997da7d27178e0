"""``evomemory data fetch|verify|where``: the benchmark's upstream files, ahead of a run.

CI wants the data in its cache and checked before a run spends any model time, and an
air-gapped machine wants to know where to copy the files. The three subcommands use
exactly the code a run uses (:mod:`pytest_evomemory.streams.evomemory`, and for
``--benchmark locomo`` :mod:`pytest_evomemory.streams.locomo.materialize`), so a
file that passes ``verify`` is a file the run accepts. LoCoMo's ten conversations
live in one pinned file: each selected conversation gets its line, naming that file.

Exit status of fetch and verify (where exits 0 whatever it finds, 2 on a usage error):
0 every selected stream is in place and accepted; 1 at least one is
missing, refused (its hash differs from the pin or from the recorded one, or it does
not parse) or could not be downloaded, one line on stderr per stream; 2 usage error
(unknown stream, unreadable run config, a benchmark without upstream files).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigError, DataError
from ..streams import upstream_benchmarks
from ..util.text import quoted_with_suggestions
from .common import USAGE_ERROR

if TYPE_CHECKING:
    from ..streams import BenchmarkSource
    from ..streams.evomemory import HubStream
    from ..streams.locomo import LocomoBenchmark

#: The benchmark whose files a command without ``--benchmark`` or ``--config`` means.
DEFAULT_BENCHMARK = "evomemory_single_turn"

PROG = "evomemory data"
OK = 0
DATA_PROBLEM = 1


def add_parser(commands: Any) -> None:
    """Register ``data`` on the ``evomemory`` command's subparsers."""
    data = commands.add_parser(
        "data",
        help="download, verify or locate the benchmark's upstream data files",
        description="The upstream files of the evomemory_single_turn streams, or of LoCoMo's conversations "
        "(--benchmark locomo): download them into the "
        "cache (fetch), check their hashes without network (verify), or print where they live (where). "
        "Exit status of fetch and verify: 0 all selected streams are fine, 1 a file is missing, refused or "
        "failed to download; where exits 0 whatever it finds (it prints present or missing); 2 usage error.",
    )
    actions = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    for name, text in (
        ("fetch", "download what is missing and verify every file (the network is used only if needed)"),
        ("verify", "check every file against its pinned hash (or recorded one); never downloads"),
        ("where", "print the data directory and each stream's file path"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument(
            "--data-dir",
            metavar="DIR",
            type=Path,
            default=None,
            help="the data directory (default: what a run would use: $EVOMEMORY_DATA_DIR, else "
            "--config's data_dir, else the per-user cache)",
        )
        action.add_argument(
            "--config",
            metavar="RUN_CONFIG",
            type=Path,
            default=None,
            help="a run config: use its benchmark's data_dir and stream selection",
        )
        action.add_argument(
            "--stream",
            metavar="NAME",
            action="append",
            default=None,
            help="only this stream (repeatable; default: all); for LoCoMo a conversation such as conv-26",
        )
        action.add_argument(
            "--benchmark",
            choices=upstream_benchmarks(),  # the registry's benchmarks with upstream files
            default=None,
            help=f"whose files (default: --config's benchmark, else {DEFAULT_BENCHMARK})",
        )


def main(args: argparse.Namespace) -> int:
    """Carry out ``evomemory data ...``; returns the exit status."""
    from ..streams import get_source
    from ..streams.locomo import LocomoBenchmark

    try:
        benchmark, configured, base_dir, selected = _chosen(args)
        source = get_source(benchmark)
        if isinstance(source, LocomoBenchmark):
            return _locomo(args, source, configured, base_dir, selected)
        data_dir, streams = _selection(benchmark, source, configured, base_dir, selected, args.data_dir)
    except ConfigError as error:
        _error(str(error))
        return USAGE_ERROR
    if args.data_command == "where":
        return _where(data_dir, streams)
    return _check(data_dir, streams, download=args.data_command == "fetch")


def _chosen(args: argparse.Namespace) -> tuple[str, str | None, Path, list[str] | None]:
    """(benchmark, the config's data_dir, the directory it is relative to, the streams selected)."""
    from ..configs import resolve_run_config
    from ..configs.load import load_run_config

    configured: str | None = None
    base_dir = Path.cwd()
    benchmark = args.benchmark or DEFAULT_BENCHMARK
    selected: list[str] | None = args.stream
    if args.config is not None:
        config = load_run_config(resolve_run_config(str(args.config), Path.cwd()))
        configured, base_dir = config.benchmark.data_dir, config.base_dir
        if args.benchmark is not None and args.benchmark != config.benchmark.benchmark:
            raise ConfigError(
                f"--benchmark {args.benchmark} but {args.config} runs benchmark {config.benchmark.benchmark!r}; "
                "give one of them"
            )
        benchmark = config.benchmark.benchmark
        if selected is None:
            selected = config.benchmark.streams
    return benchmark, configured, base_dir, selected


def _unknown(selected: list[str] | None, available: list[str]) -> None:
    unknown = [name for name in selected or () if name not in available]
    if unknown:
        raise ConfigError(
            f"unknown stream(s) {quoted_with_suggestions(unknown, available)}; available: {', '.join(available)}"
        )


def _selection(
    benchmark: str,
    source: BenchmarkSource,
    configured: str | None,
    base_dir: Path,
    selected: list[str] | None,
    data_dir: Path | None,
) -> tuple[Path, list[HubStream]]:
    from ..streams.evomemory import HubBenchmark
    from ..streams.evomemory.materialize import resolve_data_dir

    if not isinstance(source, HubBenchmark):
        raise ConfigError(f"benchmark {benchmark!r} has no upstream data files to fetch")
    available = dict(source.streams)
    _unknown(selected, list(available))
    streams = [stream for name, stream in available.items() if selected is None or name in selected]
    if data_dir is not None:
        return data_dir.expanduser().resolve(), streams
    return resolve_data_dir(configured, base_dir), streams


def _locomo(
    args: argparse.Namespace, source: LocomoBenchmark, configured: str | None, base_dir: Path, selected: list[str] | None
) -> int:
    """``evomemory data ... --benchmark locomo``: the one pinned file of the ten
    conversations, one line per selected conversation."""
    from ..streams.locomo.materialize import local_path, materialize, resolve_data_dir, verify

    _unknown(selected, list(source.names))
    names = [name for name in source.names if selected is None or name in selected]
    data_dir = args.data_dir.expanduser().resolve() if args.data_dir is not None else resolve_data_dir(configured, base_dir)
    path = local_path(source.source, data_dir)
    if args.data_command == "where":
        print(f"data_dir\t{data_dir}")
        for name in names:
            print(f"{name}\t{path}\t{'present' if path.is_file() else 'missing'}")
        return OK
    try:
        path, conversations = (materialize if args.data_command == "fetch" else verify)(source.source, data_dir)
    except DataError as error:
        _error(str(error))
        return DATA_PROBLEM
    questions = {conversation.sample_id: len(conversation.questions) for conversation in conversations}
    for name in names:
        print(f"{name}\tverified\tsha256 {source.source.sha256}\t{questions.get(name, 0)} questions\t{path}")
    return OK


def _where(data_dir: Path, streams: list[HubStream]) -> int:
    from ..streams.evomemory.materialize import stream_file

    print(f"data_dir\t{data_dir}")
    for stream in streams:
        path = stream_file(stream, data_dir)
        print(f"{stream.name}\t{path}\t{'present' if path.is_file() else 'missing'}")
    return OK


def _check(data_dir: Path, streams: list[HubStream], download: bool) -> int:
    from ..streams.evomemory.hub import HubAccess
    from ..streams.evomemory.materialize import materialize, verify

    status = OK
    access = HubAccess()  # the hub is probed once, not once per stream
    for stream in streams:
        try:
            local, records = materialize(stream, data_dir, access) if download else verify(stream, data_dir)
        except DataError as error:
            _error(str(error))
            status = DATA_PROBLEM
            continue
        pin = "verified" if local.verified else "unverified (no pinned hash; sha256 recorded)"
        print(f"{stream.name}\t{pin}\tsha256 {local.sha256}\t{len(records)} rows\t{local.path}")
    return status


def _error(message: str) -> None:
    from ..options import render
    from ..util.redaction import shown

    print(shown(render(f"{PROG}: error: {message}", "cli")), file=sys.stderr)  # may quote a download server or a data file
