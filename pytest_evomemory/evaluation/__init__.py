"""Scoring: the evaluator interface, the match modes and the Evo-Memory evaluator.

The built-in match modes (``exact``, ``choice``, ``gpqa``, ``aime``, ``toolbench``, ``locomo_f1``) are in
``MATCH_MODES`` from the start and their modules load on first use; see
docs/scoring.md for what each one accepts and where it comes from.
"""

from .base import Evaluator
from .evomemory import EvoMemoryEvaluator
from .modes import MATCH_MODES, MatchMode, register_match_mode, scorer_identity
from .taskqa import TaskQAEvaluator

__all__ = [
    "MATCH_MODES",
    "Evaluator",
    "EvoMemoryEvaluator",
    "MatchMode",
    "TaskQAEvaluator",
    "register_match_mode",
    "scorer_identity",
]
