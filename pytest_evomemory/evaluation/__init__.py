"""Scoring: the evaluator interface, the match modes and the Evo-Memory evaluator."""

from .base import Evaluator
from .evomemory import EvoMemoryEvaluator
from .modes import MATCH_MODES, MatchMode, register_match_mode
from .taskqa import TaskQAEvaluator

__all__ = [
    "MATCH_MODES",
    "EvoMemoryEvaluator",
    "Evaluator",
    "MatchMode",
    "TaskQAEvaluator",
    "register_match_mode",
]
