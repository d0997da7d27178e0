"""Every spelling of a secret that a server or a proxy plausibly echoes.

A 401 body may quote the key it was sent, and not always as sent: a proxy
URL-encodes it (``Ab3%2BCd4%2F...``, upper or lower hex, ``+`` for a space, some
characters only, or twice: ``%252B``), a JSON encoder escapes it (``\\u0041``,
``\\/``), an HTML page writes entities (``&#43;``, ``&#x2b;``, ``&plus;``), a
debug page shows the ``Authorization: Basic`` header, which is the base64 of
``user:KEY`` (the key then sits at any of three alignments inside a longer base64
blob, in the standard or the URL-safe alphabet, padded or not), or a hex dump.
:class:`Spellings` finds and masks all of them, for a given set of secret values;
:mod:`.redaction` applies it after the plain value and the header patterns.

Cost: a text holds none of the few exact spellings (base64 cores, hex) and no
escape that could spell a character of the key (a percent-encoded byte, a
character reference, ``\\u``, ``\\x``, a backslash before one of its characters)
in the common case, and that is decided with substring tests and literal-led
searches; only a text that may hold an escaped secret is decoded, and only a text
whose decoding holds one is searched with the full pattern.
"""

from __future__ import annotations

import base64
import functools
import html
import html.entities
import re
import urllib.parse
from collections.abc import Sequence

#: Shorter base64 cores are not searched for: a few characters could occur anywhere.
MIN_CORE = 8

#: Characters of a base64 run (both alphabets); ``=`` only ends one (padding).
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")

#: Characters that JSON (or a JSON-ish echo) may write with a backslash before them.
_BACKSLASHED = '/\\"'
#: A character written as an escape: ``\\u0041``, ``\\x41``, ``\\/`` (JSON, JavaScript, Python).
_BACKSLASH_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([/\\"]))')

#: A percent-encoded byte; an HTML character reference or named entity (every name
#: of an ASCII character has two letters or more).
_PERCENT_BYTE = re.compile(r"%[0-9A-Fa-f]{2}")
_REFERENCE = re.compile(r"&(?:#|[A-Za-z]{2})")

_NAMED_ENTITIES: dict[str, list[str]] = {}
for _name, _value in html.entities.html5.items():
    if len(_value) == 1 and ord(_value) < 0x80:
        _NAMED_ENTITIES.setdefault(_value, []).append(_name)


def _hex_digits(value: int, width: int) -> str:
    """``value`` in hex as a pattern that takes either case of each letter digit."""
    return "".join(f"[{d.upper()}{d.lower()}]" if d.isalpha() else d for d in f"{value:0{width}x}")


def _character(char: str) -> str:
    """A pattern for ``char`` in any of its escaped spellings (or as itself)."""
    code = ord(char)
    options = [re.escape(char)]
    options.append("".join(f"%(?:25)?{_hex_digits(byte, 2)}" for byte in char.encode("utf-8", "surrogatepass")))
    if char == " ":
        options.append(r"\+")
    if code < 0x10000:
        options.append(rf"\\u{_hex_digits(code, 4)}")
    if code < 0x100:
        options.append(rf"\\x{_hex_digits(code, 2)}")
    if char in _BACKSLASHED:
        options.append(re.escape("\\" + char))
    # a reference without its ";" ends where its digits do (as a browser reads it)
    options.append(f"&#0*{code}(?:;|(?![0-9]))")
    options.append(f"&#[xX]0*{_hex_digits(code, 1)}(?:;|(?![0-9A-Fa-f]))")
    options += [re.escape(f"&{name}") for name in _NAMED_ENTITIES.get(char, ())]
    return f"(?:{'|'.join(options)})"


def base64_cores(secret: str) -> list[str]:
    """The base64 characters that encode only ``secret``'s bytes, at each of the three
    alignments it may have inside a longer blob, in both alphabets.

    With ``a`` bytes before it (mod 3), the first characters of its group also hold
    the preceding bytes' bits, and the last ones the following bytes': the core is
    what lies between, the same whatever surrounds the secret.
    """
    data = secret.encode("utf-8", "surrogatepass")
    cores: list[str] = []
    for before in range(3):
        encoded = base64.b64encode(b"\0" * before + data).decode("ascii")
        start = -(-8 * before // 6)  # the first character whose bits are all the secret's
        end = 8 * (before + len(data)) // 6  # past the last such character
        core = encoded[start:end]
        if len(core) >= MIN_CORE:
            for spelling in (core, core.replace("+", "-").replace("/", "_")):
                if spelling not in cores:
                    cores.append(spelling)
    return cores


def _decoded(text: str) -> str:
    """``text`` with one layer of every escape undone (for the cheap check only)."""
    if "%" in text:
        text = urllib.parse.unquote(urllib.parse.unquote(text))
    if "&" in text:
        text = html.unescape(text)
    if "\\" in text:
        text = _BACKSLASH_ESCAPE.sub(_unescaped, text)
    return text


def _unescaped(match: re.Match[str]) -> str:
    hex_code = match.group(1) or match.group(2)
    return chr(int(hex_code, 16)) if hex_code else match.group(3)


class Spellings:
    """The spellings of a set of secret values, compiled once (see :func:`spellings_of`)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self.secrets = tuple(secrets)
        #: Exact spellings masked as themselves: hex dumps.
        hexed = [secret.encode("utf-8", "surrogatepass").hex() for secret in self.secrets]
        self.exact = tuple(dict.fromkeys(spelling for dump in hexed for spelling in (dump, dump.upper())))
        #: Base64 cores, masked with the whole base64 run around them.
        self.cores = tuple(dict.fromkeys(core for secret in self.secrets for core in base64_cores(secret)))
        self._spaced = any(" " in secret for secret in self.secrets)
        #: What may also stand escaped (a hex dump is not escaped further).
        self._escapable = (*self.secrets, *self.cores)
        #: ``\\/``, ``\\"``, ``\\\\``: the backslash escapes of their own characters
        self._backslashed = tuple(
            "\\" + c for c in sorted({c for spelling in self._escapable for c in spelling if c in _BACKSLASHED})
        )
        self._pattern: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        """Every spelling with any of its characters escaped, longest first."""
        if self._pattern is None:
            ordered = sorted(self._escapable, key=len, reverse=True)
            self._pattern = re.compile("|".join("".join(map(_character, spelling)) for spelling in ordered))
        return self._pattern

    def may_hide_one(self, text: str) -> bool:
        """Whether ``text`` may hold an escaped spelling: a cheap check that is never
        wrong in saying no (an escape-free text holds none; an escaped one is decoded
        and searched for the plain spellings)."""
        if not self._has_escape(text):
            return False
        decoded = _decoded(text)
        if self._spaced and "+" in text:
            decoded += "\n" + decoded.replace("+", " ")
        return any(spelling in decoded for spelling in self._escapable)

    def _has_escape(self, text: str) -> bool:
        """Whether ``text`` holds an escape that could spell a character of theirs
        (what :attr:`pattern` can match besides plain characters). Each kind is
        looked for with a substring test or a search for a literal-led pattern,
        which run at C speed: transcripts are full of ``%``, ``&`` and backslashes
        (LaTeX, JSON inside JSON) that escape nothing of a key."""
        if "\\" in text and ("\\u" in text or "\\x" in text or any(s in text for s in self._backslashed)):
            return True
        if "%" in text and _PERCENT_BYTE.search(text) is not None:
            return True
        return "&" in text and _REFERENCE.search(text) is not None

    def holds_one(self, text: str) -> bool:
        """Whether ``text`` may hold any spelling other than the plain value."""
        return any(spelling in text for spelling in self.exact) or any(
            core in text for core in self.cores
        ) or self.may_hide_one(text)

    def masked(self, text: str, mask: str) -> str:
        """``text`` with every spelling replaced by ``mask``."""
        for spelling in self.exact:
            if spelling in text:
                text = text.replace(spelling, mask)
        for core in self.cores:
            if core in text:
                text = _mask_base64_runs(text, core, mask)
        if self.may_hide_one(text):
            text = self.pattern.sub(mask, text)
        return text

    def masked_without_shortcuts(self, text: str, mask: str) -> str:
        """:meth:`masked` with no cheap check first: what tests compare it with."""
        for spelling in self.exact:
            text = text.replace(spelling, mask)
        for core in self.cores:
            text = _mask_base64_runs(text, core, mask)
        return self.pattern.sub(mask, text)


def _mask_base64_runs(text: str, core: str, mask: str) -> str:
    """Each base64 run holding ``core`` replaced by ``mask`` whole (the characters
    at its edges also carry bits of the secret, and ``user:`` is part of the
    credential)."""
    parts: list[str] = []
    position = 0
    while (found := text.find(core, position)) >= 0:
        start = found
        while start > position and text[start - 1] in _BASE64:
            start -= 1
        end = found + len(core)
        while end < len(text) and (text[end] in _BASE64 or text[end] == "="):
            end += 1
        parts += [text[position:start], mask]
        position = end
    parts.append(text[position:])
    return "".join(parts)


@functools.lru_cache(maxsize=16)
def spellings_of(secrets: tuple[str, ...]) -> Spellings:
    """The (cached) spellings of these secret values."""
    return Spellings(secrets)


__all__ = ["MIN_CORE", "Spellings", "base64_cores", "spellings_of"]
