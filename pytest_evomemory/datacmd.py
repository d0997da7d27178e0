"""``evomemory data fetch|verify|where``: the benchmark's upstream files, ahead of a run.

CI wants the data in its cache and checked before a run spends any model time, and an
air-gapped machine wants to know where to copy the files. The three subcommands use
exactly the code a run uses (:mod:`pytest_evomemory.streams.evomemory`), so a
file that passes ``verify`` is a file the run accepts.

Exit status: 0 every selected stream is in place and accepted; 1 at least one is
missing, refused (its hash differs from the pin or from the recorded one, or it does
not parse) or could not be downloaded, one line on stderr per stream; 2 usage error
(unknown stream, unreadable run config, a benchmark without upstream files).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError, DataError

if TYPE_CHECKING:
    from .streams.evomemory import HubStream

PROG = "evomemory data"
OK = 0
DATA_PROBLEM = 1
USAGE_ERROR = 2


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``data`` on the ``evomemory`` command's subparsers."""
    data = commands.add_parser(
        "data",
        help="download, verify or locate the benchmark's upstream data files",
        description="The upstream files of the evomemory_single_turn streams: download them into the "
        "cache (fetch), check their hashes without network (verify), or print where they live (where). "
        "Exit status: 0 all selected streams are fine, 1 a file is missing, refused or failed to "
        "download, 2 usage error.",
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
            help="only this stream (repeatable; default: all)",
        )


def run(args: argparse.Namespace) -> int:
    """Carry out ``evomemory data ...``; returns the exit status."""
    try:
        data_dir, streams = _selection(args)
    except ConfigError as error:
        _error(str(error))
        return USAGE_ERROR
    if args.data_command == "where":
        return _where(data_dir, streams)
    return _check(data_dir, streams, download=args.data_command == "fetch")


def _selection(args: argparse.Namespace) -> tuple[Path, list[HubStream]]:
    from .configload import load_run_config
    from .configs import resolve_run_config
    from .streams import get_source
    from .streams.evomemory import HubBenchmark
    from .streams.evomemory.materialize import resolve_data_dir

    configured: str | None = None
    base_dir = Path.cwd()
    benchmark = "evomemory_single_turn"
    selected: list[str] | None = args.stream
    if args.config is not None:
        config = load_run_config(resolve_run_config(str(args.config), Path.cwd()))
        configured, base_dir = config.benchmark.data_dir, config.base_dir
        benchmark = config.benchmark.benchmark
        if selected is None:
            selected = config.benchmark.streams
    source = get_source(benchmark)
    if not isinstance(source, HubBenchmark):
        raise ConfigError(f"benchmark {benchmark!r} has no upstream data files to fetch")
    available = dict(source.streams)
    unknown = [name for name in selected or () if name not in available]
    if unknown:
        raise ConfigError(
            f"unknown stream(s) {', '.join(map(repr, unknown))}; available: {', '.join(available)}"
        )
    streams = [stream for name, stream in available.items() if selected is None or name in selected]
    if args.data_dir is not None:
        data_dir = args.data_dir.expanduser().resolve()
    else:
        data_dir = resolve_data_dir(configured, base_dir)
    return data_dir, streams


def _where(data_dir: Path, streams: list[HubStream]) -> int:
    from .streams.evomemory.materialize import stream_file

    print(f"data_dir\t{data_dir}")
    for stream in streams:
        path = stream_file(stream, data_dir)
        print(f"{stream.name}\t{path}\t{'present' if path.is_file() else 'missing'}")
    return OK


def _check(data_dir: Path, streams: list[HubStream], download: bool) -> int:
    from .streams.evomemory.hub import HubAccess
    from .streams.evomemory.materialize import materialize, verify

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
    from .redaction import shown

    print(shown(f"{PROG}: error: {message}"), file=sys.stderr)  # may quote a download server or a data file
