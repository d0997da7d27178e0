"""The configuration of a run: the models every layer reads, and how their errors read.

A run config names a benchmark config, an agent config and a memory config (paths
relative to the run config, or inline mappings; :mod:`..configs.load` reads them). Each
part is validated by a strict pydantic model (unknown keys are errors, nothing is
coerced), and every problem is reported as a
:class:`~pytest_evomemory.core.errors.ConfigError` naming the file and the key path, so a
run is refused before a single task executes. This package imports no component:
the models are the low layer that agents, memories and streams read. Each part's
models live in their own module; every name is importable from here.
"""

from __future__ import annotations

from ..util.secretshape import (
    looks_like_a_secret as looks_like_a_secret,
)
from .agent import (
    DEFAULT_API_MODEL as DEFAULT_API_MODEL,
)
from .agent import (
    DEFAULT_CONTEXT_WINDOW as DEFAULT_CONTEXT_WINDOW,
)
from .agent import (
    DEFAULT_MAX_REPLY_BYTES as DEFAULT_MAX_REPLY_BYTES,
)
from .agent import (
    DEFAULT_MAX_REQUEST_BYTES as DEFAULT_MAX_REQUEST_BYTES,
)
from .agent import (
    DEFAULT_MOCK_MODEL as DEFAULT_MOCK_MODEL,
)
from .agent import (
    PROVIDER_KEYS as PROVIDER_KEYS,
)
from .agent import (
    AgentConfig as AgentConfig,
)
from .agent import (
    BaselineOptions as BaselineOptions,
)
from .agent import (
    MemoryStrategy as MemoryStrategy,
)
from .agent import (
    MockMode as MockMode,
)
from .agent import (
    MockSettings as MockSettings,
)
from .agent import (
    ModelConfig as ModelConfig,
)
from .agent import (
    env_variable_name as env_variable_name,
)
from .agent import (
    foreign_keys as foreign_keys,
)
from .agent import (
    http_url_problem as http_url_problem,
)
from .base import (
    CONFIG_PATH as CONFIG_PATH,
)
from .base import (
    PathText as PathText,
)
from .base import (
    StrictModel as StrictModel,
)
from .base import (
    Text as Text,
)
from .base import (
    format_validation_error as format_validation_error,
)
from .base import (
    validate_mapping as validate_mapping,
)
from .benchmark import (
    ORDER_KEYS as ORDER_KEYS,
)
from .benchmark import (
    STREAM_NAME as STREAM_NAME,
)
from .benchmark import (
    BenchmarkConfig as BenchmarkConfig,
)
from .benchmark import (
    StreamFile as StreamFile,
)
from .benchmark import (
    Thresholds as Thresholds,
)
from .benchmark import (
    check_threshold_streams as check_threshold_streams,
)
from .memory import (
    BackendOptions as BackendOptions,
)
from .memory import (
    MemoryConfig as MemoryConfig,
)
from .run import (
    REPLICATE_SEPARATOR as REPLICATE_SEPARATOR,
)
from .run import (
    Replicate as Replicate,
)
from .run import (
    RunConfig as RunConfig,
)
from .run import (
    arm_label as arm_label,
)
from .run import (
    arm_name as arm_name,
)
from .run import (
    base_configs as base_configs,
)
from .run import (
    replicate_of as replicate_of,
)
from .run import (
    replicate_tag as replicate_tag,
)
from .run import (
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
