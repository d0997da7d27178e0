"""A seeded corpus of answers to LoCoMo-style questions, written for these tests.

The golds imitate the shapes LoCoMo's answers take (names, phrases, dates, years,
lists for multi-hop, "Likely yes; because ..." for open-domain, integer answers),
invented here; the answers are made from them by transformations an agent's
output shows: case, articles, punctuation, plurals, extra words, reordering, lists,
option letters for adversarial questions, Unicode, control characters, and one
answer longer than the evaluator reads. Every item goes through the real path: a
conversation document in the README layout -> our schema reader -> converter ->
``TaskQAEvaluator``; the reference gets the raw ``qa`` line.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.streams.base import Stream
from pytest_evomemory.streams.locomo.convert import to_stream
from pytest_evomemory.streams.locomo.schema import read_samples

#: (category, gold) pairs; category 5 golds are the adversarial answer.
GOLDS: list[tuple[int, Any]] = [
    (4, "the Heron"), (4, "mental health"), (4, "cobalt blue"), (4, "by carving out some me-time each day"),
    (4, "a pottery class"), (4, "Sweden"), (4, "self-care is important"), (4, "The Kiln House"),
    (4, "his niece Mira"), (4, "researching adoption agencies"), (4, "running, reading, playing the violin"),
    (4, "an old green bicycle"), (4, "Harbour Lights"), (4, "painting sunsets"), (4, "U.S. Open"),
    (1, "Adoption agencies"), (1, "a silver oar, a voucher for the pie shop"), (1, "accordion, Harbour Lights"),
    (1, "a cat named Pepper, rowing"), (1, "Single"), (1, "hiking, camping, painting"), (1, "Sweden"),
    (1, "Psychology, counseling certification"), (1, "two: a dog and a cat"), (1, "Jon's bakery, Gina's shop"),
    (2, "7 May 2023"), (2, "The sunday before 25 May 2023"), (2, "June 2023"), (2, 2022), (2, 1998),
    (2, "2 February 2022"), (2, "the week before 9 June, 2021"), (2, "In 2019"), (2, "three years ago"),
    (2, "Last Saturday of April 2021"),
    (3, "Likely yes; he restored an old bicycle himself"), (3, "Yes; she collects teapots"),
    (3, "LIkely no; though she likes reading, she wants to be a counselor"), (3, "Likely no"),
    (3, "Psychology, counseling certification"), (3, "Yes, since she collects classic children's books"),
    (3, "Liberal"), (3, "Maybe; the schedule is full"),
    (5, "self-care is important"), (5, "Harbour Lights"), (5, "Pepper"), (5, "LGBTQ+ individuals"),
    (5, "because of their inclusivity"), (5, "a red kite"),
]

_FILLER = ["I think", "Probably", "As far as I remember,", "It was", "They said", "Definitely"]
_UNICODE = {"'": "\u2019", "-": "\u2013", "e": "\u00e9", "a": "\u00e0"}


@dataclass(frozen=True)
class LocomoItem:
    kind: str
    sample: BenchmarkSample
    line: dict[str, Any]
    answer: str


def _variants(rng: random.Random, category: int, gold: str, options: dict[str, str] | None) -> dict[str, str]:
    words = gold.split()
    variants = {
        "exact": gold,
        "lower": gold.lower(),
        "upper": gold.upper(),
        "sentence": f"{rng.choice(_FILLER)} {gold}.",
        "articles": f"the {gold} and a bit",
        "punctuation": f'"{gold}"!?',
        "plural": " ".join(word + "s" for word in words),
        "half": " ".join(words[: max(1, len(words) // 2)]),
        "reordered": " ".join(reversed(words)),
        "unrelated": "no idea at all",
        "empty-ish": rng.choice(["N/A", "-", "?", "..."]),
        "unicode": "".join(_UNICODE.get(ch, ch) for ch in gold),
        "comma-list": ", ".join(reversed([part.strip() for part in gold.split(",")])),
        "extra-comma": f"{gold}, and more",
        "semicolon": f"{gold}; or so",
        "numbers": gold.replace("2", "two") if "2" in gold else f"{gold} 2",
        "not-mentioned": rng.choice(["Not mentioned in the conversation", "No information available", "not mentioned"]),
        "letter": rng.choice(["a", "b", "A", "B", "(a)", "(b)", "(A)", "yes", "no", "x"]),
        "letter-spaced": rng.choice([" a ", "\n(b)\n", " (a)."]),
        "whitespace": f"  {gold}\n\t",
        "hyphen": gold.replace(" ", "-"),
        "apostrophe": gold.replace("s", "'s", 1),
        "control": gold + "\x00\x07",
    }
    if rng.random() < 0.25:  # past what the evaluator reads (one long token: cheap to stem)
        variants["long"] = gold + " " + "x" * 20_100
    if options is not None:
        variants["option-text-a"] = options["a"]
        variants["option-text-b"] = options["b"]
        variants["option-sentence"] = f"The answer is (b) {options['b']}"
    return variants


def locomo_corpus(seed: int = 28, rounds: int = 2) -> list[LocomoItem]:
    """Every gold with every variant, ``rounds`` times with different random picks."""
    rng = random.Random(seed)
    qa = []
    for category, gold in GOLDS:
        item: dict[str, Any] = {"question": f"Question about {gold}?", "evidence": ["D1:1"], "category": category}
        item["adversarial_answer" if category == 5 else "answer"] = gold
        qa.append(item)
    document = [{
        "sample_id": "conv-corpus",
        "conversation": {
            "speaker_a": "Ada", "speaker_b": "Ben", "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [{"speaker": "Ada", "dia_id": "D1:1", "text": "Hello."}],
        },
        "qa": qa,
    }]
    conversation = read_samples(document, "corpus")[0]
    stream: Stream = to_stream(conversation, seed=seed, limit=None, ingest="memory", provenance={}, source="corpus")
    items: list[LocomoItem] = []
    for _ in range(rounds):
        for sample, raw in zip(stream.samples, qa, strict=True):
            options = sample.metadata.get("options")
            gold = str(raw.get("answer", raw.get("adversarial_answer")))
            line = {"category": raw["category"], "answer": raw.get("answer"), "answer_key": options}
            for kind, answer in _variants(rng, raw["category"], gold, options).items():
                items.append(LocomoItem(kind, sample, line, answer))
    return items
