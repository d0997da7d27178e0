"""A differential hunt: adversarial-but-realistic outputs, ours against the references.

``corpus.py`` draws whole answers from a family of templates per class. This module
composes them instead: an answer is a *prefix* (reasoning that may hold stray
letters or numbers), a *statement* of the answer in one of many surface forms
(markdown, LaTeX, full-width letters, no-break spaces, CRLF, several "Answer:"
lines, ...) and a *suffix* (a trailing explanation that names other options or
numbers). Every combination is a shape a model produces; together they probe the
places where two readers of the same answer may part ways. Each item carries its
classes (``prefix+statement+suffix``) so a disagreement names the forms behind it.

The generator is seeded and small enough to run in the test suite; the agreement
checks of :mod:`.agreement` judge each item, so a disagreement must fall in a
documented class (docs/scoring.md) or the tests fail.

``python -m tests.evaluation.fuzz`` prints the disagreements per statement class.
"""

from __future__ import annotations

import random
from collections import Counter

from pytest_evomemory.core.types import BenchmarkSample

from . import agreement, corpus
from .corpus import LETTERS, CorpusItem

NBSP, NNBSP = "\u00a0", "\u202f"


def _full_width(letter: str) -> str:
    return chr(ord(letter) - ord("A") + 0xFF21)


# ------------------------------------------------------------------------ choice

#: Reasoning before the statement: ``{o}`` is another option's letter, ``{t}`` its text.
CHOICE_PREFIXES: dict[str, str] = {
    "none": "",
    "prose": "Let's think step by step. The key observation is that the function is monotone.\n",
    "stray_letters": "I considered option {o} first, but A careful look rules it out.\n",
    "restated_options": "{options}\n\nWe compare each option with the data.\n",
    "walkthrough": "{walk}\n",
    "heading": "## Reasoning\nFirst, recall the definition.\n\n",
    "early_statement": "At first glance the answer is ({o}), but let me check.\n",
    "early_colon": "Answer: {o}? Not so fast.\n",
    "crlf_prose": "Let's think step by step.\r\nThe units must agree.\r\n",
    "think_block": "<think>\nMaybe {o}... no, {o} ignores friction.\n</think>\n",
    "celsius": "At 25 \u2103 and 1 atm the equilibrium shifts right.\n",
}

#: How the answer itself is stated: ``{x}`` is the chosen letter, ``{xt}`` its text.
CHOICE_STATEMENTS: dict[str, str] = {
    "answer_is_paren": "The answer is ({x}).",
    "answer_is_plain": "Therefore, the answer is {x}.",
    "answer_is_colon": "The answer is: {x}",
    "answer_is_bold": "The answer is **({x})**.",
    "answer_is_bold_letter": "The answer is **{x}**",
    "bold_answer_is": "**The answer is ({x})**",
    "answer_is_lower": "the answer is ({lx})",
    "Answer_is_capital": "Answer is ({x}).",
    "correct_answer_is_option": "The correct answer is option {x}.",
    "correct_answer_is_option_paren": "The correct answer is option ({x}).",
    "answer_is_text_then_letter": "The answer is {xt} ({x}).",
    "answer_is_letter_text": "The answer is ({x}) {xt}.",
    "answer_is_letter_colon_text": "The answer is {x}: {xt}",
    "answer_colon": "Answer: {x}",
    "answer_colon_bold": "**Answer: {x}**",
    "answer_colon_bold_label": "**Answer:** {x}",
    "answer_colon_bold_letter": "Answer: **{x}**",
    "answer_colon_paren": "Answer: ({x})",
    "answer_colon_bracket": "Answer: [{x}]",
    "answer_colon_nospace": "Answer:{x}",
    "answer_colon_upper": "ANSWER: {x}",
    "answer_colon_lower_letter": "Answer: {lx}",
    "answer_colon_all_lower": "answer: {lx}",
    "answer_colon_dollar": "Answer: ${x}$",
    "answer_colon_boxed": "Answer: $\\boxed{{{x}}}$",
    "answer_colon_text_cmd": "Answer: \\text{{{x}}}",
    "answer_colon_newline": "Answer:\n{x}",
    "answer_colon_letter_text": "Answer: {x}. {xt}",
    "answer_colon_letter_paren_text": "Answer: {x}) {xt}",
    "final_answer_colon": "Final Answer: {x}",
    "final_answer_lower": "Final answer: {x}",
    "final_answer_is": "Final answer: the answer is ({x})",
    "answer_dash": "Answer - {x}",
    "answer_colon_nbsp": "Answer:" + NBSP + "{x}",
    "answer_is_nbsp": "The answer" + NBSP + "is ({x}).",
    "answer_is_nnbsp": "The answer is" + NNBSP + "({x}).",
    "full_width_answer_is": "The answer is ({fx}).",
    "full_width_colon": "Answer: {fx}",
    "full_width_bare": "{fx}",
    "boxed": "$\\boxed{{{x}}}$",
    "boxed_text": "$\\boxed{{\\text{{{x}}}}}$",
    "boxed_textbf": "\\boxed{{\\textbf{{{x}}}}}",
    "boxed_paren": "\\boxed{{({x})}}",
    "boxed_letter_text": "\\boxed{{{x}. {xt}}}",
    "latex_text": "$\\text{{{x}}}$",
    "bare": "{x}",
    "bare_paren": "({x})",
    "bare_lower": "{lx}",
    "bare_period": "{x}.",
    "bare_close_paren": "{x})",
    "label_text": "{x}. {xt}",
    "option_text": "{xt}",
    "option_word": "Option {x}",
    "option_word_is_correct": "Option {x} is correct.",
    "choice_word": "The best choice is {x}.",
    "two_colon_lines": "Answer: {o}\nWait, that is wrong.\nAnswer: {x}",
    "two_answer_is": "The answer is ({o}). Hmm, no: the answer is ({x}).",
    "colon_then_answer_is": "Answer: {o}\nOn reflection the answer is ({x}).",
    "same_line_two_colons": "Answer: {o}, no wait, Answer: {x}",
    "beyond_j": "The answer is ({beyond}).",
    "beyond_j_colon": "Answer: {beyond}",
    "letter_then_is_correct": "{x} is correct.",
    "json": '{{"answer": "{x}"}}',
    "xml": "<answer>{x}</answer>",
    "hash_answer": "#### {x}",
    "answer_space_colon": "Answer : {x}",
    "answer_tab": "Answer:\t{x}",
    "correct_answer_colon": "Correct Answer: {x}",
    "final_answer_bold_colon": "**Final Answer: {x}**",
    "answer_colon_letter_comma_text": "Answer: {x}, {xt}",
    "answer_colon_dollar_lower": "Answer: ${lx}$",
    "answer_colon_lower_paren": "answer: ({lx})",
    "answer_colon_lower_then_text": "answer: {lx}, since it fits the data",
    "answer_colon_option": "Answer: Option {x}",
    "answer_colon_sentence": "Answer: The correct choice is {x}.",
    "answer_colon_article": "Answer: A careful analysis shows {x}.",
    "answer_is_x_or_o": "The answer is {x} or {o}.",
    "answer_is_option_colon_text": "The answer is option ({x}): {xt}",
    "math_bold_letter": "The answer is ({mb}).",
    "answer_is_i_think": "The answer is I think {x}.",
}

#: What follows the statement: ``{o}`` is another option's letter.
CHOICE_SUFFIXES: dict[str, str] = {
    "none": "",
    "hope": " I hope this helps!",
    "explanation_other": "\n\nExplanation: option {o} ignores the constraint.",
    "distractor": " ({o} is a distractor.)",
    "crlf": "\r\n",
    "trailing_space": "  \n",
    "note_letters": "\nNote: A and B are both incorrect here.",
    "period_nbsp": "." + NBSP,
    "celsius": " (all values in \u2103)",
}


def _choice_fields(rng: random.Random, options: tuple[str, ...], pick: str) -> dict[str, str]:
    letters = LETTERS[: len(options)]
    other = rng.choice([letter for letter in letters if letter != pick])
    return {
        "x": pick,
        "lx": pick.lower(),
        "fx": _full_width(pick),
        "mb": chr(0x1D400 + ord(pick) - ord("A")),  # mathematical bold capital
        "xt": options[letters.index(pick)],
        "o": other,
        "beyond": rng.choice("KLMNOPQRSTUVWXYZ") if len(options) == 10 else rng.choice("HIJKLM"),
        "options": "\n".join(f"{letter}. {text}" for letter, text in zip(letters, options, strict=True)),
        "walk": " ".join(
            f"{letter}. {text} - {'fits' if letter == pick else 'wrong'}."
            for letter, text in zip(letters, options, strict=True)
        ),
    }


def choice_fuzz(
    seed: int, size: int, stream: str, mode: str, counts: tuple[int, ...]
) -> list[CorpusItem]:
    """``size`` seeded answers, every statement class at least ``size // len`` times."""
    rng = random.Random(seed)
    statements = sorted(CHOICE_STATEMENTS)
    items = []
    for index in range(size):
        options = corpus._options(rng, rng.choice(counts))
        target = rng.choice(LETTERS[: len(options)])
        pick = target if rng.random() < 0.5 else rng.choice(LETTERS[: len(options)])
        prefix = rng.choice(sorted(CHOICE_PREFIXES))
        statement = statements[index % len(statements)]
        suffix = rng.choice(sorted(CHOICE_SUFFIXES))
        fields = _choice_fields(rng, options, pick)
        answer = "".join(
            part.format(**fields)
            for part in (CHOICE_PREFIXES[prefix], CHOICE_STATEMENTS[statement], CHOICE_SUFFIXES[suffix])
        )
        if prefix.startswith("crlf") or suffix == "crlf":
            answer = answer.replace("\r\n", "\n").replace("\n", "\r\n")
        sample = BenchmarkSample(f"{stream}_f{index}", stream, index, "Q", target, mode, options)
        items.append(CorpusItem(sample, answer, f"{prefix}+{statement}+{suffix}"))
    return items


def mmlu_pro_fuzz(seed: int = 1515, size: int = 2400) -> list[CorpusItem]:
    return choice_fuzz(seed, size, "mmlu_pro", "choice", (4, 7, 10, 10))


def gpqa_fuzz(seed: int = 1616, size: int = 1200) -> list[CorpusItem]:
    return choice_fuzz(seed, size, "gpqa_diamond", "gpqa", (4,))


# ------------------------------------------------------------------------ AIME

AIME_PREFIXES: dict[str, str] = {
    "none": "",
    "prose": "We count the arrangements step by step. ",
    "numbers": "With n = {s} fixed and k = {s2}, there are 12 cases; 3 of them fail. ",
    "equation": "So $a + b = {s} + {rest} = {v}$. ",
    "thousands": "Of the 1,000 strings we keep {v}. ",
    "early_box": "A first guess is $\\boxed{{{s}}}$, but that misses a case. ",
    "think": "<think>\nmaybe {s}? no.\n</think>\n",
    "crlf": "Step 1.\r\nStep 2: {s} ways.\r\n",
    "superscripts": "Since x\u00b2 = 49 and y\u00b3 = 27, ",
}

AIME_STATEMENTS: dict[str, str] = {
    "boxed": "$\\boxed{{{v}}}$",
    "boxed_double_brace": "$\\boxed{{{{{v}}}}}$",
    "boxed_nested_text": "\\boxed{{\\text{{{v}}}}}",
    "boxed_mathbf": "\\boxed{{\\mathbf{{{v}}}}}",
    "boxed_padded": "\\boxed{{{v03}}}",
    "boxed_comma": "\\boxed{{{vcomma}}}",
    "boxed_decimal": "\\boxed{{{v}.0}}",
    "boxed_negative": "\\boxed{{-{v}}}",
    "boxed_frac": "\\boxed{{\\frac{{{v2}}}{{2}}}}",
    "boxed_dfrac_nonint": "\\boxed{{\\dfrac{{{v}}}{{7}}}}",
    "boxed_degrees": "\\boxed{{{v}^\\circ}}",
    "boxed_percent": "\\boxed{{{v}\\%}}",
    "boxed_units": "\\boxed{{{v} \\text{{ ways}}}}",
    "boxed_equation": "\\boxed{{m+n={v}}}",
    "boxed_spaced": "\\boxed{{ {v} }}",
    "boxed_display": "\\[\n\\boxed{{{v}}}\n\\]",
    "two_boxed": "$\\boxed{{{s}}}$ and $\\boxed{{{v}}}$",
    "boxed_then_text": "$\\boxed{{{v}}}$ is the number of ways, since {s} cases cancel.",
    "answer_is": "The answer is {v}.",
    "answer_is_dollar": "The answer is ${v}$.",
    "answer_is_comma": "The answer is {vcomma}.",
    "answer_is_padded": "The answer is {v03}.",
    "answer_is_decimal": "The answer is {v}.0.",
    "final_answer_colon": "Final answer: {v}",
    "final_answer_is": "The final answer is ${v}$. I hope it is correct.",
    "final_answer_is_plain": "The final answer is {v}.",
    "answer_colon_bold": "**Answer:** {v}",
    "answer_colon_bold_all": "**Answer: {v}**",
    "answer_colon_dollar": "Answer: ${v}$",
    "hashes": "#### {v}",
    "bare": "{v}",
    "bare_dollar": "${v}$",
    "bare_padded": "{v03}",
    "bare_comma": "{vcomma}",
    "bare_decimal": "{v}.0",
    "units": "There are {v} ways.",
    "degrees_text": "The angle is {v} degrees.",
    "percent_text": "The probability is {v}%.",
    "mod_statement": "The remainder when divided by 1000 is {v}.",
    "m_plus_n": "Thus m + n = {v}.",
    "equiv": "$N \\equiv {v} \\pmod{{1000}}$",
    "fraction_sum": "The probability is $\\frac{{{s}}}{{{s3}}}$, so $m+n = {sum}$.",
    "answer_is_then_check": "The answer is {v}. Check: {s} + {rest} = {v}.",
    "answer_bold_number": "The answer is **{v}**.",
    "answer_is_text": "The answer is $\\text{{{v}}}$.",
    "answer_after_equals": "Therefore the count is $N = {v}$.",
    "boxed_period_inside": "\\boxed{{{v}.}}",
    "boxed_plus": "\\boxed{{+{v}}}",
    "paren_boxed": "\\(\\boxed{{{v}}}\\)",
    "display_dollar_boxed": "$$\\boxed{{{v}}}$$",
    "final_answer_heading": "**Final Answer**\n\n\\boxed{{{v}}}",
    "minerva": "Final Answer: The final answer is ${v}$. I hope it is correct.",
    "boxed_then_units": "$\\boxed{{{v}}}$ ways",
    "answer_colon_mod": "answer: {v} (mod 1000)",
    "ends_equals": "So the total is $3 \\cdot 5 + {rest15} = {v}$.",
    "answer_is_ie": "The answer is {v} (i.e. m+n).",
    "boxed_text_units": "\\boxed{{{v}\\text{{ degrees}}}}",
    "answer_colon_newline": "Answer:\n{v}",
    "final_answer_colon_boxed": "Final answer: \\boxed{{{v}}}",
    "two_final_answers": "The final answer is {s}. Wait, let me recheck. The final answer is {v}.",
    "answer_negative": "The answer is -{v}.",
    "fraction_plain": "The answer is {s}/{s3}.",
    "full_width_digits": "The answer is {fwv}.",
    "answer_is_boxed": "The answer is $\\boxed{{{v}}}$.",
}

AIME_SUFFIXES: dict[str, str] = {
    "none": "",
    "hope": " I hope it is correct.",
    "after_numbers": "\nThis uses {s} colours and 2 steps.",
    "crlf": "\r\n",
    "verification": "\n\nVerification: {s} * 2 = {s2}.",
}


def _aime_fields(rng: random.Random, value: int) -> dict[str, str]:
    small = rng.randint(2, 40)
    return {
        "v": str(value),
        "v03": f"{value:03d}",
        "vcomma": f"{value:,}",
        "v2": str(2 * value),
        "s": str(small),
        "s2": str(2 * small),
        "s3": str(small + 1),
        "sum": str(2 * small + 1),
        "rest": str(value - small),
        "rest15": str(value - 15),
        "fwv": "".join(chr(ord(digit) + 0xFEE0) for digit in str(value)),
    }


def aime_fuzz(seed: int = 1717, size: int = 480) -> list[CorpusItem]:
    rng = random.Random(seed)
    statements = sorted(AIME_STATEMENTS)
    items = []
    for index in range(size):
        gold = rng.randint(0, 999)
        target = f"{gold:03d}" if rng.random() < 0.25 else str(gold)
        value = gold if rng.random() < 0.6 else rng.choice([rng.randint(0, 999), rng.randint(1000, 9999)])
        prefix = rng.choice(sorted(AIME_PREFIXES))
        statement = statements[index % len(statements)]
        suffix = rng.choice(sorted(AIME_SUFFIXES))
        fields = _aime_fields(rng, value)
        if statement == "fraction_sum":
            target = fields["sum"] if rng.random() < 0.6 else target
        answer = "".join(
            part.format(**fields)
            for part in (AIME_PREFIXES[prefix], AIME_STATEMENTS[statement], AIME_SUFFIXES[suffix])
        )
        if prefix == "crlf" or suffix == "crlf":
            answer = answer.replace("\r\n", "\n").replace("\n", "\r\n")
        sample = BenchmarkSample(f"aime_f{index}", "aime_2024", index, "Q", target, "aime")
        items.append(CorpusItem(sample, answer, f"{prefix}+{statement}+{suffix}", {"gold": gold}))
    return items


# ------------------------------------------------------------------------ APIBench


def _tool_statements(call: str, other: str, api: corpus.HubApi) -> dict[str, str]:
    fence = f"```python\nimport torch\nmodel = {call}\n```"
    return {
        "label_call": f"api_call: {call}",
        "label_tags": f"<<<api_call>>>: {call}, <<<api_provider>>>: PyTorch",
        "label_fence": f"api_call:\n{fence}",
        "fence_then_label": f"{fence}\napi_call: {call}",
        "two_calls": f"api_call: {other}\nBetter: {call}",
        "two_calls_reversed": f"api_call: {call}\nAlternatively: {other}",
        "label_assignment": f"api_call: model = {call}",
        "label_then_provider": f"api_call: {call}, api_provider: PyTorch, explanation: loads {api.model}.",
        "malformed_unclosed": f"api_call: {call[:-1]}",
        "malformed_extra_paren": f"api_call: {call})",
        "keyword_args": "api_call: " + call.replace("torch.hub.load(", "torch.hub.load(repo_or_dir=", 1),
        "json_dict": '{"api_call": "' + call.replace('"', "'") + '", "api_provider": "PyTorch"}',
        "label_double_quotes": "api_call: " + call.replace("'", '"'),
        "label_whitespace": "api_call: " + call.replace("(", "( ").replace(", ", " ,  "),
        "label_newlines": "api_call: " + call.replace(", ", ",\n    "),
        "label_comment": f"api_call: {call}  # loads the pretrained weights",
        "hub_list_first": f"api_call: torch.hub.list('{api.repo}'); {call}",
        "comment_after": f"api_call: {call}  # or: {other}",
        "comment_line_before": f"api_call:\n# {other}\n{call}",
        "cut_off_assignment": f"api_call: model = {call[:-1]}",
        "closed_then_cut_off": f"api_call: {other}; {call[:-1]}",
    }


def toolbench_fuzz(seed: int = 1919, size: int = 340) -> list[CorpusItem]:
    rng = random.Random(seed)
    records = corpus.toolbench_records(seed, size)
    items = []
    for index, record in enumerate(records):
        api = record["_api"]
        assert isinstance(api, corpus.HubApi)
        chosen = api if rng.random() < 0.6 else rng.choice(corpus.HUB_APIS)
        other = rng.choice(corpus.HUB_APIS).runnable()
        statements = _tool_statements(chosen.runnable(rng.choice(["'", '"'])), other, chosen)
        kind = sorted(statements)[index % len(statements)]
        sample = BenchmarkSample(
            f"torchhub_f{index}", "toolbench", index, "Q", str(record["api_call"]), "toolbench",
            metadata={"domain": record["api_data"]["domain"]},  # type: ignore[index]
        )
        items.append(CorpusItem(sample, statements[kind], kind, {"record": record}))
    return items


# ------------------------------------------------------------------------ report


def fuzz_tallies() -> dict[str, tuple[agreement.Tally, list[CorpusItem]]]:
    return agreement.tallies(mmlu_pro_fuzz(), gpqa_fuzz(), aime_fuzz(), toolbench_fuzz())


def main() -> None:  # pragma: no cover - a report for people
    tallies = fuzz_tallies()
    agreement.print_table(tallies)
    for mode, (tally, undocumented) in tallies.items():
        print(f"\n{mode}:")
        for cls, count in tally.classes.most_common():
            print(f"  {cls}: {count} (effect {tally.effect[cls] / tally.items:+.2%}) e.g. {tally.examples[cls][-100:]!r}")
        by_statement = Counter(item.kind.split("+")[1] if "+" in item.kind else item.kind for item in undocumented)
        for statement, count in by_statement.most_common():
            example = next(item for item in undocumented if statement in item.kind)
            print(f"  UNDOCUMENTED {statement}: {count} e.g. {example.answer[-200:]!r} target {example.sample.target}")


if __name__ == "__main__":  # pragma: no cover
    main()
