"""The configuration of a run: the models every layer reads, and how their errors read.

A run config names a benchmark config, an agent config and a memory config (paths
relative to the run config, or inline mappings; :mod:`.configload` reads them). Each
part is validated by a strict pydantic model (unknown keys are errors, nothing is
coerced), and every problem is reported as a
:class:`~pytest_evomemory.errors.ConfigError` naming the file and the key path, so a
run is refused before a single task executes. This package imports no component:
the models are the low layer that agents, memories and streams read. Each part's
models live in their own module; every name is importable from here.
"""

from __future__ import annotations

from .configagent import (
    DEFAULT_API_MODEL as DEFAULT_API_MODEL,
)
from .configagent import (
    DEFAULT_CONTEXT_WINDOW as DEFAULT_CONTEXT_WINDOW,
)
from .configagent import (
    DEFAULT_MAX_REPLY_BYTES as DEFAULT_MAX_REPLY_BYTES,
)
from .configagent import (
    DEFAULT_MAX_REQUEST_BYTES as DEFAULT_MAX_REQUEST_BYTES,
)
from .configagent import (
    DEFAULT_MOCK_MODEL as DEFAULT_MOCK_MODEL,
)
from .configagent import (
    PROVIDER_KEYS as PROVIDER_KEYS,
)
from .configagent import (
    AgentConfig as AgentConfig,
)
from .configagent import (
    BaselineOptions as BaselineOptions,
)
from .configagent import (
    MemoryStrategy as MemoryStrategy,
)
from .configagent import (
    MockMode as MockMode,
)
from .configagent import (
    MockSettings as MockSettings,
)
from .configagent import (
    ModelConfig as ModelConfig,
)
from .configagent import (
    env_variable_name as env_variable_name,
)
from .configagent import (
    foreign_keys as foreign_keys,
)
from .configagent import (
    http_url_problem as http_url_problem,
)
from .configagent import (
    looks_like_a_secret as looks_like_a_secret,
)
from .configbase import (
    CONFIG_PATH as CONFIG_PATH,
)
from .configbase import (
    PathText as PathText,
)
from .configbase import (
    StrictModel as StrictModel,
)
from .configbase import (
    Text as Text,
)
from .configbase import (
    format_validation_error as format_validation_error,
)
from .configbase import (
    validate_mapping as validate_mapping,
)
from .configbenchmark import (
    ORDER_KEYS as ORDER_KEYS,
)
from .configbenchmark import (
    STREAM_NAME as STREAM_NAME,
)
from .configbenchmark import (
    BenchmarkConfig as BenchmarkConfig,
)
from .configbenchmark import (
    StreamFile as StreamFile,
)
from .configbenchmark import (
    Thresholds as Thresholds,
)
from .configbenchmark import (
    check_threshold_streams as check_threshold_streams,
)
from .configmemory import (
    BackendOptions as BackendOptions,
)
from .configmemory import (
    MemoryConfig as MemoryConfig,
)
from .configrun import (
    REPLICATE_SEPARATOR as REPLICATE_SEPARATOR,
)
from .configrun import (
    Replicate as Replicate,
)
from .configrun import (
    RunConfig as RunConfig,
)
from .configrun import (
    arm_label as arm_label,
)
from .configrun import (
    arm_name as arm_name,
)
from .configrun import (
    base_configs as base_configs,
)
from .configrun import (
    replicate_of as replicate_of,
)
from .configrun import (
    replicate_tag as replicate_tag,
)
from .configrun import (
    split_label as split_label,
)

__all__ = [
    "CONFIG_PATH",
    "DEFAULT_API_MODEL",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MOCK_MODEL",
    "ORDER_KEYS",
    "PROVIDER_KEYS",
    "REPLICATE_SEPARATOR",
    "STREAM_NAME",
    "AgentConfig",
    "BackendOptions",
    "BaselineOptions",
    "BenchmarkConfig",
    "MemoryConfig",
    "MemoryStrategy",
    "MockMode",
    "MockSettings",
    "ModelConfig",
    "PathText",
    "Replicate",
    "RunConfig",
    "StreamFile",
    "StrictModel",
    "Text",
    "Thresholds",
    "arm_label",
    "arm_name",
    "base_configs",
    "check_threshold_streams",
    "env_variable_name",
    "foreign_keys",
    "format_validation_error",
    "http_url_problem",
    "looks_like_a_secret",
    "replicate_of",
    "replicate_tag",
    "split_label",
    "validate_mapping",
]
