"""Small, dependency-free text helpers shared by the in-process memory, the baselines and messages."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

#: Function words carry no topic; dropping them keeps lexical similarity meaningful.
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how in is it its of on or "
    "that the this to was what when where which who why will with you your".split()
)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (ending in "...") when longer: a value
    quoted in a one-line message or reason must not make that line unreadable."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def normalize(text: str) -> str:
    """Casefold, strip accents' compatibility forms and collapse whitespace."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tokens(text: str) -> list[str]:
    """Content words of ``text``, lower-cased, with a light plural stemming."""
    return list(_tokens(text))


@lru_cache(maxsize=256)
def _tokens(text: str) -> tuple[str, ...]:
    """:func:`tokens`, kept for the texts seen last: an episode's prompt is read by the
    memory's recall and again by the score's recall similarity, a stored record by the
    memory as it is retained and again when a later task recalls it."""
    words = _TOKEN.findall(normalize(text))
    return tuple(_stem(word) for word in words if word not in STOPWORDS)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def cosine(left: Counter[str], right: Counter[str]) -> float:
    """Cosine similarity of two bags of words, in [0, 1]."""
    if not left or not right:
        return 0.0
    dot = sum(count * right[word] for word, count in left.items() if word in right)
    norm = math.sqrt(sum(c * c for c in left.values())) * math.sqrt(
        sum(c * c for c in right.values())
    )
    return dot / norm if norm else 0.0


def similarity(left: str, right: str) -> float:
    """Bag-of-words cosine of two texts: 1.0 for the same content words (the same
    figure as :func:`cosine` of their bags, operation for operation)."""
    left_bag, left_norm = _bag(left)
    right_bag, right_norm = _bag(right)
    if not left_bag or not right_bag:
        return 0.0
    dot = sum(count * right_bag[word] for word, count in left_bag.items() if word in right_bag)
    norm = left_norm * right_norm
    return dot / norm if norm else 0.0


@lru_cache(maxsize=1024)
def _bag(text: str) -> tuple[Counter[str], float]:
    """A text's bag of words and its Euclidean norm, kept for the texts seen last: an
    episode compares its prompt with every recalled record twice (the recall agent,
    then the score's recall similarity), and a stream recalls the same records again
    and again. Nobody outside :func:`similarity` sees the bag, so it is never changed."""
    bag = Counter(_tokens(text))
    return bag, math.sqrt(sum(c * c for c in bag.values()))


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with what no artefact can hold replaced by U+FFFD: NUL (cut off by C
    APIs, invalid in XML) and lone surrogates (not encodable as UTF-8, so writing
    them would fail). Everything else, U+2028 included, is kept as given.

    Most text holds neither, and saying so is cheap where the regular expression is
    not (it steps through a 500 KB comparison page in 5 ms): text without NUL that
    is ASCII, or that UTF-8 encodes (which every lone surrogate, and nothing else,
    refuses), is returned as it is."""
    if not text:
        return text
    if "\x00" not in text:
        if text.isascii():
            return text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    return _UNSTORABLE.sub("\ufffd", text)


_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")


def storable_json_text(text: str) -> str:
    """JSON text (tool-call arguments) whose *decoded* strings are storable too.

    ``"\\ud800"`` is a valid JSON escape for a lone surrogate (``"\\u0000"`` for NUL):
    the text itself is plain ASCII, but the value it decodes to cannot be written as
    UTF-8 (or shown safely). Such text
    is re-encoded with the surrogates replaced (see :func:`storable`); any other
    text, valid JSON or not, is returned as given.
    """
    text = storable(text)
    if not _UNSTORABLE_ESCAPE.search(text):
        return text
    import json

    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # over the nesting bound the turn refuses it as such
        return text
    cleaned = _storable_value(value)
    return text if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


def _storable_value(value: object) -> object:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [_storable_value(item) for item in value]
    if isinstance(value, dict):
        return {storable(str(key)): _storable_value(item) for key, item in value.items()}
    return value


class JsonScan:
    """Walks a JSON text and yields its brackets outside strings, remembering whether
    the text ended inside a string (and right after a backslash there): the one scan
    that both the nesting limit of data files and the repair of a cut-off tool-call
    prefix need."""

    def __init__(self) -> None:
        self.in_string = False
        self.escaped = False

    def brackets(self, text: str) -> Iterator[str]:
        for char in text:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
            elif char in "[]{}":
                yield char


#: What a terminal obeys, or draws as something it is not, instead of showing it:
#: C0 controls (ESC starts every escape sequence: title, clear screen, OSC 8 links,
#: OSC 52 clipboard writes; BEL ends an OSC; CR overwrites the line), DEL, C1
#: controls (0x9b is a one-character CSI, 0x9d an OSC), the line and paragraph
#: separators, the bidirectional controls that reorder what is shown (Trojan
#: Source), and lone surrogates (which no terminal encoding can write).
_OBEYED = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_NOT_INERT = re.compile(f"[{_OBEYED}]")
_NOT_INERT_LINE = re.compile(f"[\t\n{_OBEYED}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str, *, one_line: bool = False) -> str:
    """``text`` as a terminal shows it without obeying it: every control character,
    bidirectional override and lone surrogate written out visibly (``\\x1b``,
    ``\\u202e``), everything else as given. Newlines and tabs stay unless
    ``one_line`` (a table cell, a one-line message). Idempotent: what it writes is
    printable ASCII.

    Everything the plugin prints that came from a model, a server, a data file or
    an artefact passes here on its way to a terminal (see docs/artefacts.md).
    """
    pattern = _NOT_INERT_LINE if one_line else _NOT_INERT
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """``" (did you mean 'max_steps'?)"`` for the choice closest to a misspelt ``word``
    (``max_step``, ``tooluse``, ``sampel``), or ``""`` when none is close: the one
    suggestion every refusal of an unknown key, name or value makes."""
    if not isinstance(word, str) or not word:
        return ""
    import difflib  # only when a refusal is being written

    options = list(dict.fromkeys(choices))
    by_fold = {option.casefold().replace("-", "_"): option for option in options}
    folded = word.casefold().replace("-", "_")
    if folded in by_fold and by_fold[folded] != word:
        return f" (did you mean {by_fold[folded]!r}?)"
    close = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=0.75)
    return f" (did you mean {by_fold[close[0]]!r}?)" if close and by_fold[close[0]] != word else ""


def quoted_with_suggestions(names: Iterable[str], choices: Iterable[str]) -> str:
    """Unknown ``names`` as a message lists them, each with the choice it may have
    meant (``'mien' (did you mean 'mine'?), 'x'``)."""
    options = list(choices)
    return ", ".join(f"{name!r}{did_you_mean(name, options)}" for name in names)
