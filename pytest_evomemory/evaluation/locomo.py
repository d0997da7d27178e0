"""``locomo_f1``: LoCoMo's official question-answering score, reproduced exactly.

The reference is snap-research/locomo, ``task_eval/evaluation.py`` at commit
92286325a40764bee61f77824ddb95233b11c4d6 (``eval_question_answering``,
``f1_score``, ``f1``, ``normalize_answer``), and, for the adversarial category, the
answer mapping of ``task_eval/evaluate_gpts.py`` (``get_cat_5_answer``) at the same
commit, which turns an option letter into the option's text before scoring:

* the answer and the gold are normalized: commas removed, lower-cased, every
  ``string.punctuation`` character removed, the words a/an/the/and removed
  (``\\b(a|an|the|and)\\b``), whitespace collapsed;
* each word is Porter-stemmed (NLTK's ``PorterStemmer``, as upstream);
* token F1 of the two multisets of stems (0 when they share none).

Per category (the numbers are the data's; names as docs/locomo.md derives them):
1 multi-hop: answer and gold are split on commas, and the score is the mean, over
the gold parts, of the best F1 of any answer part; 2 temporal and 4 single-hop:
F1; 3 open-domain: the gold is cut at its first ``;``, then F1; 5 adversarial: 1
when the (option-mapped, lower-cased) answer contains "no information available"
or "not mentioned", else 0.

``Score.value`` is that number in [0, 1]; ``Score.correct`` is ``value >= 0.5``
(our convention, so that accuracy and McNemar have a yes/no outcome; LoCoMo
itself reports only the mean F1, which the mode declares as its headline figure:
the gates read it and the reports lead with it, computed from ``value``).
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import regex
from nltk.stem import PorterStemmer

from ..core.types import BenchmarkSample, Score
from .modes import Metric, register_match_mode

MODE = "locomo_f1"

#: LoCoMo's five question categories by the number the data uses. The repository
#: itself labels them {1: 'Multi-Hop', 2: 'Time', 3: 'Knowledge', 4: 'Single-Hop',
#: 5: 'Adversarial'} (task_eval/dpr_qa.py); the names here are the paper's.
CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

#: ``Score.correct`` is ``value >= CORRECT_AT``.
CORRECT_AT = 0.5

#: The two phrases that make an adversarial answer right (evaluation.py).
NOT_AVAILABLE = ("no information available", "not mentioned")

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = regex.compile(r"\b(a|an|the|and)\b")
_STEMMER = PorterStemmer()

#: Stems shown in a score's details, per side (a long answer is cut, not its score).
_SHOWN_TOKENS = 40


def normalize_answer(text: str) -> str:
    """``normalize_answer`` of evaluation.py: commas out, lower case, punctuation
    out, a/an/the/and out, whitespace collapsed."""
    text = text.replace(",", "").lower()
    text = "".join(character for character in text if character not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    return str(_STEMMER.stem(word))


def stems(text: str) -> list[str]:
    return [stem(word) for word in normalize_answer(text).split()]


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 of the stemmed, normalized texts (``f1_score`` of evaluation.py)."""
    predicted, expected = stems(prediction), stems(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(expected)
    return (2 * precision * recall) / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """``f1`` of evaluation.py (category 1): mean over the comma-separated gold parts
    of the best F1 of any comma-separated prediction part."""
    predictions = [part.strip() for part in prediction.split(",")]
    golds = [part.strip() for part in gold.split(",")]
    best = [max(f1_score(part, expected) for part in predictions) for expected in golds]
    return sum(best) / len(best)


def option_answer(prediction: str, options: Mapping[str, str]) -> str:
    """``get_cat_5_answer`` of evaluate_gpts.py: the lower-cased, stripped answer;
    one character means option (a) if it holds an "a", else (b); three characters
    mean (a) if they hold "(a)", else (b) (so "yes" picks (b), as upstream)."""
    text = prediction.strip().lower()
    if len(text) == 1:
        return options["a"] if "a" in text else options["b"]
    if len(text) == 3:
        return options["a"] if "(a)" in text else options["b"]
    return text


def gold_answer(sample: BenchmarkSample) -> str:
    """The gold as evaluation.py compares it: category 3 cut at the first ``;``."""
    if category_of(sample) == 3:
        return sample.target.split(";")[0].strip()
    return sample.target


def category_of(sample: BenchmarkSample) -> int:
    category = sample.metadata.get("locomo_category")
    if isinstance(category, bool) or not isinstance(category, int) or category not in CATEGORY_NAMES:
        raise ValueError(f"task {sample.task_id!r} has no LoCoMo category 1-5 (metadata 'locomo_category': {category!r})")
    return category


def locomo_value(answer: str, sample: BenchmarkSample) -> tuple[float, str, dict[str, Any]]:
    """The official score of ``answer``, what was scored, and the details."""
    category = category_of(sample)
    if category == 5:
        options = sample.metadata.get("options")
        scored = option_answer(answer, options) if isinstance(options, Mapping) else answer.strip().lower()
        lowered = scored.lower()
        hit = next((phrase for phrase in NOT_AVAILABLE if phrase in lowered), None)
        return (1.0 if hit else 0.0), scored, {"phrase": hit}
    gold = gold_answer(sample)
    value = multi_answer_f1(answer, gold) if category == 1 else f1_score(answer, gold)
    details: dict[str, Any] = {
        "gold": gold,
        "answer_stems": stems(answer)[:_SHOWN_TOKENS],
        "gold_stems": stems(gold)[:_SHOWN_TOKENS],
    }
    if category == 1:
        details["gold_parts"] = len(gold.split(","))
    return value, answer, details


F1_METRIC = Metric(
    "f1", "f1", "F1",
    "mean token F1 over the questions, a failed episode counting 0 (LoCoMo reports this figure)",
    kind="mean",
)


@register_match_mode(MODE, metrics=(F1_METRIC,), headline=F1_METRIC.name)
def locomo_f1(answer: str, sample: BenchmarkSample) -> Score:
    """LoCoMo's official per-category score (see the module docstring)."""
    value, scored, details = locomo_value(answer, sample)
    category = category_of(sample)
    name = CATEGORY_NAMES[category]
    if category == 5:
        phrase = details["phrase"]
        reason = (
            f"category 5 ({name}): the answer says {phrase!r}" if phrase
            else "category 5 (adversarial): the answer says neither 'no information available' nor 'not mentioned'"
        )
    elif category == 1:
        reason = (
            f"category 1 ({name}): mean over {details['gold_parts']} comma-separated gold part(s) of the "
            f"best token F1 = {value:.3f}"
        )
    else:
        cut = " (gold cut at its first ';')" if category == 3 and ";" in sample.target else ""
        reason = f"category {category} ({name}): token F1 {value:.3f} against {details['gold']!r}{cut}"
    return Score(
        value >= CORRECT_AT,
        answer,
        scored,
        sample.target,
        MODE,
        reason,
        value=value,
        details={"category": category, "category_name": name, "f1": value, **details},
    )


__all__ = [
    "CATEGORY_NAMES",
    "CORRECT_AT",
    "F1_METRIC",
    "MODE",
    "NOT_AVAILABLE",
    "f1_score",
    "gold_answer",
    "locomo_f1",
    "locomo_value",
    "multi_answer_f1",
    "normalize_answer",
    "option_answer",
]
