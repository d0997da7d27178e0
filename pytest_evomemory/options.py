"""Every option of a benchmark session, declared once for both entry points.

``pytest --evomemory-limit=5`` and ``evomemory run --limit 5`` are the same option:
its help, metavar and check live here, and each entry point adds it with its own
spelling (:func:`add_options`, as pytest-benchmark declares its display options
once for its plugin and its CLI). The engine names an option by identity
(:func:`.core.errors.named`); :func:`flag` is the one place an option is spelled for a
door, and each door fills the messages it catches with :func:`render`, so the CLI
never answers in the plugin's words. :func:`read_options` turns either entry
point's parsed values into one :class:`SessionOptions`, the only thing a :class:`~.runtime.session.Session`
is told about the command line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .core.errors import NAMED, ConfigError, EvoMemoryError, OptionName

Kind = Literal["flag", "text", "list", "count", "dollars", "shard", "choice"]
Entry = Literal["pytest", "cli"]


#: What a gain gate compares, in every door's help (--evomemory-min-gain, evomemory
#: run|compare|merge --min-gain): the figure each stream is judged on.
GAIN_FIGURE = "accuracy (for a stream whose match mode declares a headline mean, LoCoMo's mean F1)"


#: The range of each count, in one place: the option at every door (``--evomemory-*``,
#: ``evomemory run``), the config key that sets the same thing (:mod:`.config` uses
#: these), and what a resume or merge accepts from an artefact (:mod:`.rundir`).
MAX_REPEATS = 100
#: Tasks per stream (``limit``): no stream holds more; a larger number is a typo.
MAX_LIMIT = 100_000_000
#: Failed episodes before the session stops (``max-errors``).
MAX_ERRORS = 100_000_000


def count_problem(value: object, maximum: int) -> str | None:
    """Why ``value`` is not a whole number from 1 to ``maximum``, or None: the one
    check of a count, whatever door or artefact it came through."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return "must be at least 1"
    text = str(value).strip()
    digits = text.lstrip("+-")
    if not (digits.isascii() and digits.isdigit()):
        return "must be at least 1"
    significant = digits.lstrip("0")
    if text.startswith("-") or not significant:
        return "must be at least 1"
    if len(significant) > len(str(maximum)) or int(significant) > maximum:
        return f"must be at most {maximum:,}"
    return None


@dataclass(frozen=True)
class Option:
    """One option: ``name`` is its identity, its spelling after the entry point's prefix."""

    name: OptionName
    help: str
    kind: Kind = "text"
    metavar: str | None = None
    #: the entry points that offer it (the CLI has no ini file; pytest has its own -q)
    entries: tuple[Entry, ...] = ("pytest", "cli")
    #: what a count counts, for its error message
    counts: str = ""
    #: a choice's values, the first its default
    choices: tuple[str, ...] = ()
    #: a count's largest value (the config key's, where one sets the same thing)
    maximum: int = MAX_LIMIT

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


#: What a gain gate requires to be met (``min-gain-by``; :mod:`.analysis.gain`), the
#: default first: the point estimate reaches the margin, the 95 % interval's lower
#: bound does, or the estimate does and the paired test's p is below 0.05.
GAIN_REQUIRES = ("estimate", "lower-bound", "p-value")

#: What a shard's cell is (``shard-by``; :mod:`.runtime.shards`): a stream with every
#: arm's run of it (the default), or one arm's run of one stream.
SHARD_UNITS = ("stream", "arm")

#: The chains ``evomemory run`` drives at once when ``chains`` is not given (fewer when
#: the session has fewer): model calls are I/O, so a chain costs a thread and its
#: agent and memory, and 16 keep a 2-core machine busy with 100 ms calls
#: (benchmarks/bench_grid.py) without opening more connections than an API allows
#: by default; ``model.max_connections`` bounds the requests whatever this is.
DEFAULT_CHAINS = 16

OPTIONS: tuple[Option, ...] = (
    Option(
        "config", metavar="PATH|NAME", kind="list",
        help="run config (YAML path, or a built-in config's name such as sample_memory) naming the "
        "benchmark, agent and memory configs. Repeat it to run several arms in one session, the first "
        "being the baseline of their comparison",
    ),
    Option(
        "set", metavar="KEY=VALUE", kind="list",
        help="override one config key, e.g. agent.model.model=gpt-4o-mini (VALUE is YAML); "
        "repeatable, validated like the config, recorded in run.json",
    ),
    Option("output-dir", metavar="DIR", help="where the run's artefacts go (default: evomemory-results/<run name>; "
           "with several arms, the directory holding one directory per arm and their comparison)"),
    Option("limit", metavar="N", kind="count", counts="tasks per stream", maximum=MAX_LIMIT,
           help="run only the first N tasks of each stream (overrides the benchmark config)"),
    Option("stream", metavar="NAME", kind="list",
           help="run only this stream (repeatable); default: every stream of the benchmark"),
    Option(
        "min-accuracy", metavar="[ARM:][STREAM=]FRACTION", kind="list",
        help="fail if overall (or STREAM's) accuracy is below FRACTION (for a stream whose match mode "
        "declares a headline mean, LoCoMo's mean F1); repeatable; with several arms "
        "it applies to each, or to ARM alone",
    ),
    Option(
        "min-gain", metavar="[STREAM=]POINTS", kind="list",
        help=f"with several arms: fail if an arm's {GAIN_FIGURE} does not beat the baseline's by POINTS "
        "percentage points overall (or on STREAM), paired on the tasks both ran (with repeats: the mean of "
        "the replicates' paired differences); repeatable",
    ),
    Option(
        "min-gain-by", metavar="|".join(GAIN_REQUIRES), kind="choice", choices=GAIN_REQUIRES,
        help="what {--min-gain} requires: 'estimate' (default) the paired difference itself reaches POINTS; "
        "'lower-bound' the lower bound of its 95%% interval does; 'p-value' the difference does and the paired "
        "test's p is below 0.05 (docs/statistics.md)",
    ),
    Option(
        "resume", metavar="RUN_DIR",
        help="continue the interrupted run whose output directory is RUN_DIR (or every arm of an "
        "interrupted session of arms, given the directory holding its arms.json): completed tasks are "
        "not run again and each stream's memory is restored",
    ),
    Option("repeats", metavar="N", kind="count", counts="replicates per arm", maximum=MAX_REPEATS,
           help="run each arm N times as independent replicates (seeds benchmark.seed .. +N-1, each its own run "
           "directory <arm dir>/r1..rN), reported as the mean with its 95%% interval across them; replaces the "
           "configs' benchmark.repeats / benchmark.seeds"),
    Option("max-errors", metavar="N", kind="count", counts="failed episodes", maximum=MAX_ERRORS,
           help="stop the session after N failed episodes (default: never)"),
    Option(
        "max-cost", metavar="USD", kind="dollars",
        help="stop the session before a model call could take its spend past USD US dollars (across every "
        "process and chain of the session; needs model.pricing); completed tasks are kept and a resume goes on",
    ),
    Option(
        "shard", metavar="I/N", kind="shard",
        help="run only shard I of N: a deterministic share of the session's cells (by default each stream with "
        "all its arms; {--shard-by}), balanced by expected model calls; run every I on its own machine or job, then "
        "'evomemory merge' their output directories (docs/scale.md)",
    ),
    Option(
        "shard-by", metavar="|".join(SHARD_UNITS), kind="choice", choices=SHARD_UNITS,
        help="with {--shard}: what a shard's cell is. 'stream' (default): a stream with all its arms, so each shard's "
        "comparison of the arms is complete; 'arm': one arm's run of one stream, so a stream that dominates the "
        "session spreads its arms over shards (better balance; only the merge compares the arms)",
    ),
    Option(
        "chains", metavar="N", kind="count", counts="chains in flight",
        help="evomemory run: run up to N chains at once in one process (a chain: one arm's run of one stream, a "
        f"serial chain of episodes; default: every chain, at most {DEFAULT_CHAINS}). Results are those of a serial "
        "run (a module:factory memory keeps its state per instance: docs/memory.md, 'Chains at once'). pytest "
        "refuses it: it runs one chain per xdist worker, so give it -n N instead (docs/scale.md)",
    ),
    Option("compare", metavar="OTHER_RUN_DIR",
           help="also write compare.html in the run directory: OTHER_RUN_DIR (baseline) vs this run"),
)

BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}


#: Each door's prefix before an option's name.
PREFIXES: dict[Entry, str] = {"pytest": "--evomemory-", "cli": "--"}


def flag(option: OptionName, door: Entry) -> str:
    """``option`` as ``door``'s user types it: ``--evomemory-output-dir`` for pytest,
    ``--output-dir`` for ``evomemory run``. The one place an option is spelled."""
    return f"{PREFIXES[door]}{option}"


def render(text: str, door: Entry) -> str:
    """``text`` with every option it names (:func:`.core.errors.named`) spelled as ``door``
    takes it: what a door does once with a message it is about to show."""
    def spell(match: re.Match[str]) -> str:
        option = BY_NAME.get(match.group(1))
        return match.group(0) if option is None else flag(option.name, door)

    return NAMED.sub(spell, text)


def rendered(error: EvoMemoryError, door: Entry) -> EvoMemoryError:
    """``error`` with its message rendered for ``door`` (:func:`render`), for a door
    that hands the error itself on (the Python API raises it to its caller)."""
    error.message = render(error.message, door)
    error.args = (error.message, *error.args[1:])
    return error


@dataclass(frozen=True)
class Flags:
    """How one entry point spells the options: ``--evomemory-limit`` or ``--limit``,
    parsed into ``evomemory_limit`` (beside pytest's own options) or ``limit``."""

    entry: Entry
    dest_prefix: str = ""

    def __call__(self, name: OptionName) -> str:
        return flag(name, self.entry)

    def dest(self, option: Option) -> str:
        """Where the entry point's parser puts ``option``'s value."""
        return f"{self.dest_prefix}{option.dest}"


PYTEST_FLAGS = Flags("pytest", "evomemory_")
CLI_FLAGS = Flags("cli")
#: The ini option for the seconds between a stream's progress lines, read by both
#: doors (``evomemory run`` reads the repository's pytest settings)
PROGRESS_INTERVAL_INI = "evomemory_progress_interval"


def add_options(addoption: Callable[..., Any], flags: Flags) -> None:
    """Declare every option of ``flags.entry`` through that entry point's ``addoption``
    (pytest's ``group.addoption`` or argparse's ``add_argument``).

    Counts are taken as text and checked by :func:`read_options`, so a bad value is one
    line naming the option and what to write (argparse's own error is a usage block).
    """
    for option in OPTIONS:
        if flags.entry not in option.entries:
            continue
        arguments: dict[str, Any] = {"dest": flags.dest(option), "help": render(option.help, flags.entry)}
        if option.kind == "flag":
            arguments.update(action="store_true", default=False)
        elif option.kind == "list":
            arguments.update(action="append", default=[], metavar=option.metavar)
        else:
            arguments.update(default=None, metavar=option.metavar)
        addoption(flags(option.name), **arguments)


@dataclass(frozen=True)
class SessionOptions:
    """The command line of a session, whichever entry point it came from."""

    configs: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    output_dir: str | None = None
    limit: int | None = None
    streams: tuple[str, ...] = ()
    min_accuracy: tuple[str, ...] = ()
    min_gain: tuple[str, ...] = ()
    #: ``min-gain-by``: what a gain gate requires (:data:`GAIN_REQUIRES`)
    min_gain_by: str = GAIN_REQUIRES[0]
    resume: str | None = None
    max_errors: int | None = None
    #: ``repeats``: replicates per arm (:mod:`.runtime.replicates`)
    repeats: int | None = None
    #: ``max-cost``: the session's spend cap in US dollars (:mod:`.models.budget`)
    max_cost: float | None = None
    compare: str | None = None
    #: ``shard``: (I, N), this session runs shard I of N (1 <= I <= N; :mod:`.runtime.shards`)
    shard: tuple[int, int] | None = None
    #: ``shard-by``: what a shard's cell is (:data:`SHARD_UNITS`)
    shard_by: str = SHARD_UNITS[0]
    #: ``chains``: chains run at once in one process (None: :data:`DEFAULT_CHAINS`)
    chains: int | None = None
    #: which options the user gave (a resume re-applies the recorded ones only when not)
    given: frozenset[str] = field(default_factory=frozenset)


def read_options(values: Mapping[str, Any], flags: Flags) -> SessionOptions:
    """Check and gather the values an entry point's parser gave (:func:`add_options`).

    An option given an empty value (``--resume=``, an unset shell variable) is refused:
    it would silently mean "not given". A count must be a whole number, at least 1.
    """
    gathered: dict[str, Any] = {}
    given: set[str] = set()
    for option in OPTIONS:
        value = values.get(flags.dest(option))
        if value is None or value == [] or value is False:
            continue
        given.add(option.dest)
        items = value if isinstance(value, list | tuple) else [value]
        if option.kind != "flag" and any(not str(item).strip() for item in items):
            raise ConfigError(
                f"{flags(option.name)} is given an empty value; give one (an unset shell variable?), "
                "or leave the option out"
            )
        if option.kind == "count":
            gathered[option.dest] = _count(value, option, flags)
        elif option.kind == "dollars":
            gathered[option.dest] = _dollars(value, option, flags)
        elif option.kind == "shard":
            gathered[option.dest] = _shard(value, option, flags)
        elif option.kind == "choice":
            gathered[option.dest] = _choice(value, option, flags)
        elif option.kind == "list":
            gathered[option.dest] = tuple(str(item) for item in items)
        else:
            gathered[option.dest] = str(value)
    return SessionOptions(
        configs=gathered.get("config", ()),
        settings=gathered.get("set", ()),
        output_dir=gathered.get("output_dir"),
        limit=gathered.get("limit"),
        streams=gathered.get("stream", ()),
        min_accuracy=gathered.get("min_accuracy", ()),
        min_gain=gathered.get("min_gain", ()),
        min_gain_by=gathered.get("min_gain_by", GAIN_REQUIRES[0]),
        resume=gathered.get("resume"),
        max_errors=gathered.get("max_errors"),
        repeats=gathered.get("repeats"),
        max_cost=gathered.get("max_cost"),
        compare=gathered.get("compare"),
        shard=gathered.get("shard"),
        shard_by=gathered.get("shard_by", SHARD_UNITS[0]),
        chains=gathered.get("chains"),
        given=frozenset(given),
    )


def _count(value: object, option: Option, flags: Flags) -> int:
    problem = count_problem(value, option.maximum)
    if problem is not None:
        raise ConfigError(
            f"{flags(option.name)} {problem} (a whole number of {option.counts}), got "
            f"{str(value)[:40]!r}; write e.g. {flags(option.name)}=5"
        )
    return int(str(value).strip())


def _dollars(value: object, option: Option, flags: Flags) -> float:
    """A positive, finite amount of US dollars (``5``, ``0.25``, ``$5``)."""
    text = str(value).strip().removeprefix("$")
    try:
        amount = float(text) if len(text) <= 40 else math.nan
    except ValueError:
        amount = math.nan
    if not 0 < amount < math.inf:
        raise ConfigError(
            f"{flags(option.name)} must be a positive number of US dollars, got {str(value)[:40]!r}; "
            f"write e.g. {flags(option.name)}=5"
        )
    return amount


#: The most shards a session is split into (each run.json lists every shard's cells;
#: a session has far fewer cells, one per stream or per arm's stream, so more shards only run nothing).
MAX_SHARDS = 1024


def _shard(value: object, option: Option, flags: Flags) -> tuple[int, int]:
    """``I/N``: shard I of N, both whole numbers, 1 <= I <= N <= :data:`MAX_SHARDS`."""
    index, slash, count = str(value).strip().partition("/")
    numbers = [int(part) if part.isascii() and part.isdigit() and len(part) <= 6 else 0 for part in (index, count)]
    if not slash or not 1 <= numbers[0] <= numbers[1] <= MAX_SHARDS:
        raise ConfigError(
            f"{flags(option.name)} must be I/N with 1 <= I <= N <= {MAX_SHARDS} (shard I of N), got "
            f"{str(value)[:40]!r}; write e.g. {flags(option.name)}=1/4"
        )
    return numbers[0], numbers[1]


def _choice(value: object, option: Option, flags: Flags) -> str:
    """One of the option's choices, as written."""
    text = str(value).strip()
    if text not in option.choices:
        from .util.text import did_you_mean  # only when refusing: plain pytest imports this module
        raise ConfigError(
            f"{flags(option.name)} must be one of {', '.join(option.choices)}, got {text[:40]!r}"
            f"{did_you_mean(text, option.choices)}; "
            f"write e.g. {flags(option.name)}={option.choices[-1]}"
        )
    return text


def add_min_gain_by(parser: Any) -> None:
    """``--min-gain-by`` for ``evomemory compare`` and ``merge``, which gate a
    comparison without running a session: the same option as run's (:data:`OPTIONS`)."""
    option = BY_NAME["min-gain-by"]
    parser.add_argument(
        CLI_FLAGS(option.name), dest=option.dest, default=None, metavar=option.metavar,
        help=render(option.help, "cli"),
    )


def min_gain_by(args: Any) -> str:
    """The ``--min-gain-by`` an ``evomemory compare`` or ``merge`` was given (checked
    as every door checks it), the default when none; refused without ``--min-gain``."""
    value = getattr(args, BY_NAME["min-gain-by"].dest, None)
    if value is None:
        return GAIN_REQUIRES[0]
    if not getattr(args, "min_gain", None):
        raise ConfigError("--min-gain-by says what --min-gain requires, but no --min-gain is given; add one or leave it out")
    return _choice(value, BY_NAME["min-gain-by"], CLI_FLAGS)


def option_values(options: SessionOptions) -> Sequence[str]:
    """The options as ``NAME=VALUE`` words (for messages that list what was given)."""
    return sorted(options.given)


__all__ = [
    "BY_NAME",
    "CLI_FLAGS",
    "DEFAULT_CHAINS",
    "GAIN_FIGURE",
    "GAIN_REQUIRES",
    "MAX_ERRORS",
    "MAX_LIMIT",
    "MAX_REPEATS",
    "OPTIONS",
    "PREFIXES",
    "PROGRESS_INTERVAL_INI",
    "PYTEST_FLAGS",
    "SHARD_UNITS",
    "Flags",
    "Option",
    "SessionOptions",
    "add_min_gain_by",
    "add_options",
    "count_problem",
    "flag",
    "min_gain_by",
    "read_options",
    "render",
    "rendered",
]
