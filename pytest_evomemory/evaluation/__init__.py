"""Scoring: the evaluator interface, the match modes and the Evo-Memory evaluator.

Importing this package registers the built-in match modes (``exact``, ``choice``,
``aime``, ``toolbench``); see docs/scoring.md for what each one accepts and where it comes from.
"""

from . import aime as _aime  # noqa: F401  (registers "aime")
from . import choice as _choice  # noqa: F401  (registers "choice")
from . import toolbench as _toolbench  # noqa: F401  (registers "toolbench")
from .base import Evaluator
from .evomemory import EvoMemoryEvaluator
from .modes import MATCH_MODES, MatchMode, register_match_mode
from .taskqa import TaskQAEvaluator

__all__ = [
    "MATCH_MODES",
    "Evaluator",
    "EvoMemoryEvaluator",
    "MatchMode",
    "TaskQAEvaluator",
    "register_match_mode",
]
