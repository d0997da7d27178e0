"""The reference scorers, re-implemented from their official code for agreement tests.

Each function reads an answer exactly as the cited code does (including its
faults), so the agreement tests can say where ours reads the same answer and where
it deliberately does not. Only the extraction is reproduced; I/O is left out.

* MMLU-Pro: TIGER-AI-Lab/MMLU-Pro, ``evaluate_from_api.py`` at commit
  007ab5c2b1b1271303db9f92bbd9fe0e173db18c (``extract_answer`` -> ``extract_again``
  -> ``extract_final``; later revisions strip ``**`` from responses first, which we
  also do). No match: ``update_result`` scores a seeded ``random.randint`` guess.
* GPQA: openai/simple-evals, ``common.py`` at 01ac108d27478a71ead72e966d68810a18a776fb
  (``ANSWER_PATTERN_MULTICHOICE``) and ``gpqa_eval.py`` at
  0ac027d54433a704cd31216ab38c7a5c4375f020 (``re.search`` on the raw response, first
  match, ``extracted_answer == correct_answer``).
* AIME: Hugging Face math-verify, ``verify(parse(gold), parse(answer))`` (the
  installed package itself is the reference).
* APIBench TorchHub: ShishirPatil/gorilla, ``eval/eval-scripts/ast_eval_th.py`` at
  291fd4fd401f94ae03ac182fe4c787ffc2f8bf84 (``process_response``, ``ast_check``,
  ``get_args``). tree-sitter is not a dependency, so the call it finds is found with
  a bracket scanner; see :func:`gorilla_match`.
* LoCoMo: snap-research/locomo, ``task_eval/evaluation.py`` at commit
  92286325a40764bee61f77824ddb95233b11c4d6 (branch ``code``): ``normalize_answer``,
  ``f1_score``, ``f1`` and the per-line loop of ``eval_question_answering``; and
  ``task_eval/evaluate_gpts.py`` at the same commit (``get_cat_5_answer``), applied
  to the model's output before it is stored as the prediction. See
  :func:`locomo_eval_question_answering`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ----------------------------------------------------------------------- MMLU-Pro


def mmlu_pro_extract(text: str) -> str | None:
    """``extract_answer`` -> ``extract_again`` -> ``extract_final``, verbatim regexes."""
    text = text.replace("**", "")
    match = re.search(r"answer is \(?([A-J])\)?", text)
    if match:
        return match.group(1)
    match = re.search(r".*[aA]nswer:\s*([A-J])", text)
    if match:
        return match.group(1)
    match = re.search(r"\b[A-J]\b(?!.*\b[A-J]\b)", text, re.DOTALL)
    if match:
        return match.group(0)
    return None


# ----------------------------------------------------------------------- GPQA

ANSWER_PATTERN_MULTICHOICE = r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?"


def simple_evals_extract(text: str) -> str | None:
    """``re.search(ANSWER_PATTERN_MULTICHOICE, response_text)``; group 1 or None."""
    match = re.search(ANSWER_PATTERN_MULTICHOICE, text)
    return match.group(1) if match else None


# ----------------------------------------------------------------------- AIME


def math_verify_reference(gold: str, answer: str) -> tuple[bool, list[object]]:
    """``verify(parse(gold), parse(answer))`` and what ``parse(answer)`` read."""
    from math_verify import parse, verify

    parsed = parse(answer)
    return bool(verify(parse(gold), parsed)), list(parsed)


# ----------------------------------------------------------------------- Gorilla


@dataclass(frozen=True)
class GorillaApi:
    """One line of Gorilla's ``torchhub_api.jsonl``: its call and domain."""

    api_call: str
    domain: str


def gorilla_api_call_region(text: str) -> str | None:
    """``process_response``: the text between ``api_call`` and ``api_provider``.

    ``output[start + 2 : end + 1]`` with ``start`` the first ``:`` and ``end`` the
    last ``)``; no ``api_call`` in the response means no answer.
    """
    parts = text.split("api_call")
    if len(parts) == 1:
        return None
    output = parts[1].split("api_provider")[0]
    start = output.index(":") if ":" in output else 0
    end = output.rindex(")") if ")" in output else -2
    return output[start + 2 : end + 1]


def _find_closing(text: str, open_at: int) -> int | None:
    depth, quote = 0, ""
    for index in range(open_at, len(text)):
        char = text[index]
        if quote:
            if char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    return None


def _closing(text: str, open_at: int) -> int:
    closing = _find_closing(text, open_at)
    # tree-sitter's error recovery closes an unbalanced call at the end
    return len(text) - 1 if closing is None else closing


def gorilla_get_args(api_call: str) -> list[str]:
    """``get_args``: the value text of each argument whose text holds ``repo_or_dir``
    or ``model`` (``child.children[2]``: keyword arguments only), quotes kept."""
    open_at = api_call.index("(")
    inner = api_call[open_at + 1 : _closing(api_call, open_at)]
    args = []
    for part in _split(inner):
        if "repo_or_dir" in part or "model" in part:
            keyword = re.match(r"^\s*\w+\s*=\s*(.*?)\s*$", part, re.DOTALL)
            if keyword:
                args.append(keyword.group(1))
    return args


def _split(text: str) -> list[str]:
    parts, depth, quote, last = [], 0, "", 0
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[last:index])
            last = index + 1
    parts.append(text[last:])
    return [part for part in parts if part.strip()]


def gorilla_candidate_call(region: str) -> str | None:
    """The ``torch.hub.load`` call ``ast_check`` compares against.

    ``get_all_sub_trees`` walks the tree with a stack, so later statements come
    first: the last ``torch.hub.load(`` call of the region is found. An unclosed
    call (a cut-off answer) becomes an ERROR node holding the rest of the region;
    tree-sitter (checked with tree-sitter-python 0.25) then still finds an earlier
    closed call first, and reads a lone unclosed one whole. (When there is
    none, ``ast_check`` goes on with whatever subtree its loop variable was left at;
    we read that as no call, which only differs for answers naming no hub call.)
    """
    code = re.sub(r"#[^\n]*", lambda m: " " * len(m.group(0)), region) if "#" in region else region
    # (a call in a comment is no call; a '#' inside a string literal is not met in APIBench calls)
    starts = [match.start() for match in re.finditer(r"torch\.hub\.load\(", code)]
    if not starts:
        return None
    calls = [region[start : _closing(region, region.index("(", start)) + 1] for start in starts]
    closed = [call for call in calls if _balanced(call)]
    return (closed or calls)[-1]


def _balanced(call: str) -> bool:
    return _find_closing(call, call.index("(")) is not None


def gorilla_match(text: str, database: list[GorillaApi]) -> int | None:
    """The index of the API ``ast_check`` matches, or None (it reads no answer).

    For each database API in order: every ``get_args`` value, stripped of single
    quotes, must occur as a substring of the candidate call's text.
    """
    region = gorilla_api_call_region(text)
    if region is None:
        return None
    call = gorilla_candidate_call(region)
    if call is None:
        return None
    for index, api in enumerate(database):
        args = gorilla_get_args(api.api_call)
        if not args:
            continue
        if all(arg.lstrip("'").rstrip("'") in call for arg in args):
            return index
    return None


def gorilla_correct(text: str, database: list[GorillaApi], question_domain: str) -> bool:
    """Gorilla's functionality accuracy: the matched API has the question's domain."""
    index = gorilla_match(text, database)
    return index is not None and database[index].domain == question_domain


# ----------------------------------------------------------------------- LoCoMo


def _locomo_normalize(s: str) -> str:
    """``normalize_answer``: commas out, then lower, punctuation, articles, spaces."""
    import string

    import regex

    s = s.replace(",", "")

    def remove_articles(text: str) -> str:
        return regex.sub(r"\b(a|an|the|and)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _locomo_f1_score(prediction: str, ground_truth: str) -> float:
    """``f1_score``: Porter-stemmed token F1 (a module-level ``PorterStemmer()``)."""
    from collections import Counter

    from nltk.stem import PorterStemmer

    ps = PorterStemmer()
    prediction_tokens = [ps.stem(w) for w in _locomo_normalize(prediction).split()]
    ground_truth_tokens = [ps.stem(w) for w in _locomo_normalize(ground_truth).split()]
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _locomo_f1(prediction: str, ground_truth: str) -> float:
    """``f1`` (category 1): numpy's mean over gold parts of the best part F1."""
    import numpy as np

    predictions = [p.strip() for p in prediction.split(",")]
    ground_truths = [g.strip() for g in ground_truth.split(",")]
    return float(np.mean([max([_locomo_f1_score(p, gt) for p in predictions]) for gt in ground_truths]))


def locomo_cat_5_answer(model_prediction: str, answer_key: dict[str, str]) -> str:
    """``get_cat_5_answer`` of evaluate_gpts.py."""
    model_prediction = model_prediction.strip().lower()
    if len(model_prediction) == 1:
        if "a" in model_prediction:
            return answer_key["a"]
        return answer_key["b"]
    if len(model_prediction) == 3:
        if "(a)" in model_prediction:
            return answer_key["a"]
        return answer_key["b"]
    return model_prediction


def locomo_eval_question_answering(line: dict[str, object], output: str) -> float:
    """One line of ``eval_question_answering`` (metric ``f1``) for the model output
    ``output``: category 5's output first goes through ``get_cat_5_answer`` (with
    the question's option key, ``line["answer_key"]``), and is then stripped, as
    evaluate_gpts.py stores ``answer.strip()``; the other categories' too."""
    category = line["category"]
    if category == 5:
        output = locomo_cat_5_answer(output, line["answer_key"])  # type: ignore[arg-type]
    output = output.strip()
    answer = str(line.get("answer"))
    if category == 3:
        answer = answer.split(";")[0].strip()
    if category in [2, 3, 4]:
        return _locomo_f1_score(output, answer)
    if category in [1]:
        return _locomo_f1(output, answer)
    if category in [5]:
        if "no information available" in output.lower() or "not mentioned" in output.lower():
            return 1
        return 0
    raise ValueError(line)
