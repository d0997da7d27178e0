"""The one redaction step every quote of a server reply, error and artefact passes.

A model server, or a proxy in front of it, may echo what it was sent: a debug page
that lists the request headers, a JSON error that quotes the ``Authorization``
header, a gateway's HTML page. Anything we quote from such a reply (into a
``ModelError``, a response record, ``scores.jsonl``, ``report.html``, JUnit XML,
the terminal) must not carry the API key. So there is exactly one function that
removes secrets, :func:`redact`, and everything that writes text a user or a CI
log will see calls it (or :func:`redact_record` for a whole record).

It removes, in any text shape (JSON, HTML, headers, a truncated body):

* every secret value registered with :func:`register_secret` (the model client
  registers the API key it reads from the environment), and the values of the
  environment variables named in :data:`SECRET_VARIABLES`;
* the value after ``Authorization:``, ``Bearer``, ``Basic``, ``api-key``,
  ``x-api-key``, ``Proxy-Authorization`` (as a header, a JSON key or a query
  parameter);
* anything shaped like an OpenAI-style key (``sk-...``), whoever it belongs to;
* credentials in URLs (``https://user:password@host``, ``https://token@host``) and
  the values of query parameters named like a secret (``?key=``, ``&token=``,
  ``?sig=``, ``&client_secret=``: :data:`_QUERY_NAMES`);
* a known secret in every spelling a server or proxy plausibly echoes it in:
  percent-encoded, JSON- or HTML-escaped, base64 (alone or inside a longer blob
  such as a ``Basic`` header's ``user:KEY``) or hex (:mod:`.spellings`).

Secret values shorter than :data:`MIN_SECRET_LENGTH` are not registered: replacing
every ``"no"`` in a record would destroy it and protect nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from .spellings import spellings_of
from .text import inert, storable

#: What a removed secret is replaced with.
MASK = "***"

#: Shorter values are too common to redact by value (patterns still apply).
MIN_SECRET_LENGTH = 6

#: Environment variables whose values are secrets wherever they are set.
SECRET_VARIABLES = ("OPENAI_API_KEY", "PGPASSWORD")

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
#: Bumped by every :func:`register_secret`; with the environment's values it keys
#: the cached, sorted secret list (:func:`_secret_values`), which every record of
#: the run directory needs and which only changes when a secret is registered.
_GENERATION = 0
_CACHED: tuple[tuple[int, tuple[object, ...]], tuple[str, ...]] | None = None

_HEADER_NAMES = r"(?:proxy-)?authorization|x-api-key|api[-_]?key|openai[-_]api[-_]key|access[-_]token"
#: ``Authorization: Bearer X``, ``"authorization": "Bearer X"``, ``api_key=X``, ``<td>api-key</td><td>X</td>``.
#: A quoted name (JSON, a Python repr) has a quoted value: what follows ``'api_key':``
#: unquoted is prose (a config error's "key 'model.api_key': unknown key"), not a value.
_NAMED_VALUE = re.compile(
    rf"""(?ix)
    (?P<name>["']?\b(?:{_HEADER_NAMES})\b(?P<quoted>["'])?)
    (?P<sep>\s*(?:[:=]|</t[dh]>\s*<t[dh][^>]*>)\s*(?(quoted)["']|["']?)\s*)
    (?:(?:bearer|basic|token)\s+)?
    (?P<value>[^\s"'<>,;&]+)
    """
)
#: A bare ``Bearer X`` anywhere (a header line echoed in a body, a log line); the token
#: must hold a digit or ``=`` so that prose ("basic understanding") is left alone.
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+(?P<value>(?=[A-Za-z._~+/=-]*[0-9=])[A-Za-z0-9._~+/=-]{8,})")
#: OpenAI-style keys: ``sk-``, ``sk-proj-``, ``sk-svcacct-``... followed by a long token.
_KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
#: ``scheme://user:password@host``, and ``scheme://token@host`` (a token as the user name)
_URL_CREDENTIALS = re.compile(r"(?i)\b(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s@?#]+@")
#: What a query parameter holding a secret ends its name with (``?key=``, ``&sig=``,
#: ``?access_token=``, ``&X-Amz-Signature=``): the value is masked, the name kept.
_QUERY_NAMES = ("key", "token", "sig", "signature", "secret", "password", "passwd", "pwd")
_QUERY_SECRET = re.compile(
    rf"""(?i)(?P<name>[?&;][a-z0-9_.~-]*(?:{"|".join(_QUERY_NAMES)})=)(?P<value>[^&#;\s"'<>]+)"""
)


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret to remove from every later :func:`redact`."""
    global _GENERATION
    if value and len(value.strip()) >= MIN_SECRET_LENGTH:
        with _LOCK:
            _SECRETS.add(value)
            _SECRETS.add(value.strip())
            _GENERATION += 1


def known_secrets() -> list[str]:
    """Registered secrets and those in :data:`SECRET_VARIABLES`, longest first (so a
    key that contains another is replaced whole)."""
    return list(_known_secrets())


def _environment_key() -> tuple[object, ...]:
    """The values of :data:`SECRET_VARIABLES` as the environment holds them now.

    Read from ``os.environ``'s own store, which every change through ``os.environ``
    updates, as it holds them (bytes on POSIX): decoding each on every call (its
    ``get``) cost more than the check of a record it guards. Through ``get`` where
    there is no such store."""
    store = getattr(os.environ, "_data", None)
    if type(store) is dict:
        return tuple([store.get(key) for key in _ENVIRONMENT_KEYS])
    return tuple([os.environ.get(name) for name in SECRET_VARIABLES])


#: :data:`SECRET_VARIABLES` as keys of ``os.environ``'s store (see :func:`_environment_key`)
_ENVIRONMENT_KEYS = tuple(getattr(os.environ, "encodekey", lambda name: name)(name) for name in SECRET_VARIABLES)
#: how ``os.environ`` decodes a value of its store (as its ``get`` does)
_DECODE_VALUE = getattr(os.environ, "decodevalue", None)


def _environment_value(held: object) -> str:
    """A value of :func:`_environment_key` as ``os.environ.get(name, "")`` gives it."""
    if held is None:
        return ""
    if isinstance(held, str):
        return held
    return str(_DECODE_VALUE(held)) if _DECODE_VALUE is not None else str(held)


def _known_secrets() -> tuple[str, ...]:
    """:func:`known_secrets`, cached until a secret is registered or a variable of
    :data:`SECRET_VARIABLES` changes (both are part of the cache key, read on every
    call, so a secret set a moment ago is never missed)."""
    global _CACHED
    key = (_GENERATION, _environment_key())
    cached = _CACHED
    if cached is not None and cached[0] == key:
        return cached[1]
    with _LOCK:
        key = (_GENERATION, key[1])
        values = set(_SECRETS)
    for value in map(_environment_value, key[1]):  # the values of the key the result is kept under
        if len(value.strip()) >= MIN_SECRET_LENGTH:
            values.add(value)
            values.add(value.strip())
    result = tuple(sorted(values, key=len, reverse=True))
    _CACHED = (key, result)
    return result


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without any secret (known values, header values, key-shaped tokens)."""
    return _redact(text, _secret_values(secrets))


def _secret_values(secrets: Iterable[str]) -> tuple[str, ...]:
    known = _known_secrets()
    extra = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
    if not extra or extra <= set(known):
        return known
    return tuple(sorted(extra | set(known), key=len, reverse=True))


#: Every pattern above needs one of these characters (or a known value) to match:
#: a string without them is returned as it is, which is most of a transcript.
_PATTERN_LITERALS = ("bearer", "basic", "sk-", "://", "authori", "api", "token")
#: The same, with what a query parameter named like a secret ends with (``key=``...):
#: what :func:`_clean` looks for in a record's JSON text.
_HINT_LITERALS = (*_PATTERN_LITERALS, *(f"{name}=" for name in _QUERY_NAMES if name != "token"))
#: A string's hints: a query parameter's rule needs its ``=`` (one alternative, not
#: seven: the search is most of what redacting a string without secrets costs).
_PATTERN_HINTS = re.compile("(?i)" + "|".join(map(re.escape, (*_PATTERN_LITERALS, "="))))

#: The same hints for an ASCII text that was lower-cased first: for ASCII, matching
#: case-insensitively is matching the lower-cased text, and a plain search is ten
#: times faster than an ``(?i)`` one. (For other text ``(?i)`` also folds characters
#: such as the dotless i or the long s, so :data:`_PATTERN_HINTS` itself is used.)
_LOWER_HINTS = re.compile("|".join(map(re.escape, (*_PATTERN_LITERALS, "="))))


def _redact(text: str, values: tuple[str, ...] | list[str]) -> str:
    if len(text) < MIN_SECRET_LENGTH:
        return text  # too short to hold a secret or any of the patterns
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
        text = _mask_front_half(text, value)
        text = _mask_cut_secret(text, value)
    if values:
        text = spellings_of(tuple(values)).masked(text, MASK)
    if not text.isascii():
        if _PATTERN_HINTS.search(text) is None:
            return text
        return _redact_patterns(text)
    lower = text.lower()
    if _LOWER_HINTS.search(lower) is None:
        return text
    # Each pattern runs only where its own literal occurs (in an ASCII text, which a
    # mask never makes non-ASCII, and a mask never creates a literal), so a text
    # that merely says "basic" is not searched for headers and URLs as well.
    if "authori" in lower or "api" in lower or "token" in lower:
        text = _NAMED_VALUE.sub(_mask_value, text)
    if "bearer" in lower or "basic" in lower:
        text = _BEARER.sub(_mask_scheme, text)
    if "sk-" in text:
        text = _KEY_SHAPED.sub(MASK, text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub(_mask_credentials, text)
    if "=" in text and ("token" in lower or any(f"{name}=" in lower for name in _QUERY_NAMES)):
        text = _QUERY_SECRET.sub(_mask_query, text)
    return text


def _redact_patterns(text: str) -> str:
    text = _NAMED_VALUE.sub(_mask_value, text)
    text = _BEARER.sub(_mask_scheme, text)
    text = _KEY_SHAPED.sub(MASK, text)
    text = _URL_CREDENTIALS.sub(_mask_credentials, text)
    return _QUERY_SECRET.sub(_mask_query, text)


def _mask_query(match: re.Match[str]) -> str:
    return f"{match.group('name')}{MASK}"


def url_shown(url: str) -> str:
    """``url`` as a message may quote it: its user name and password, query string
    and fragment (where a key is pasted, whatever the parameter is called) replaced
    by the mask, then redacted. For quoting a URL that is refused or points
    elsewhere (a redirect's ``Location``), where only its scheme, host and path help."""
    cut = min((index for index in (url.find("?"), url.find("#")) if index >= 0), default=-1)
    if cut >= 0:
        url = f"{url[:cut + 1]}{MASK}"
    start = url.find("://")
    start = start + 3 if start >= 0 else 0
    end = min((index for index in (url.find("/", start), url.find("?", start), url.find("#", start)) if index >= 0),
              default=len(url))
    at = url.rfind("@", start, end)
    if at >= 0:
        url = f"{url[:start]}{MASK}{url[at:]}"
    return redact(url)


def _mask_scheme(match: re.Match[str]) -> str:
    return f"{match.group('scheme')} {MASK}"


def _mask_credentials(match: re.Match[str]) -> str:
    return f"{match.group('scheme')}{MASK}@"


def _mask_front_half(text: str, secret: str) -> str:
    """Mask the front of ``secret`` wherever at least half of it (and at least
    :data:`MIN_SECRET_LENGTH` characters) stands in ``text``: a gateway that
    "masks" a key it echoes by starring its middle (``sk-proj-AbCdEfGh****WXYZ``)
    still gives its front half away. The last characters alone (``...WXYZ``, the
    form OpenAI's errors quote) identify a key without revealing it, and stay."""
    least = max(MIN_SECRET_LENGTH, len(secret) // 2)
    if least >= len(secret):
        return text
    head = secret[:least]
    found = text.find(head)
    if found < 0:
        return text  # the usual case, found in one pass
    parts, start = [], 0
    while found >= 0:
        end = found + least
        while end - found < len(secret) and end < len(text) and text[end] == secret[end - found]:
            end += 1
        parts += [text[start:found], MASK]
        start = end
        found = text.find(head, start)
    parts.append(text[start:])
    return "".join(parts)


def _mask_cut_secret(text: str, secret: str) -> str:
    """Mask the front part of ``secret`` where ``text`` ends with it: a server that
    truncates its body (or an error preview) can cut a key in half."""
    start = max(0, len(text) - len(secret) + 1)
    if text.find(secret[:MIN_SECRET_LENGTH], start) < 0:
        return text  # the tail holds no start of the secret (the usual case, found in one pass)
    for length in range(len(secret) - 1, MIN_SECRET_LENGTH - 1, -1):
        if text.endswith(secret[:length]):
            return text[:-length] + MASK
    return text


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith(MASK):
        return match.group(0)  # masked already: what follows the mask (``***):``) is the text's own
    start, end = match.span("value")
    whole = match.group(0)
    offset = match.start()
    return whole[: start - offset] + MASK + whole[end - offset :]


def dumps_redacted(record: Any, **options: Any) -> str:
    """``json.dumps(record, **options)`` with every string value redacted (the one
    step every artefact the run directory writes goes through), and strict: a float
    JSON cannot hold (NaN, infinities, which a model's tool arguments may carry)
    is written as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
    (:func:`strict_number`), so ``jq`` and browsers read every artefact.

    Most records hold nothing to redact, and proving that on their JSON text (see
    :func:`_clean`) costs a fraction of walking them string by string; a
    record that may hold something is walked, so the result is always exactly the
    walk's. When the walk changed nothing (a URL in a run.json, which only a URL
    with credentials would), the text already encoded is that result, and is not
    encoded again (an indented document is encoded by ``json``'s Python code).
    """
    return _dumps(record, options, _fast_encoder(options))


class RedactedDumps:
    """:func:`dumps_redacted` with its options given once, for a writer that encodes
    every record of a run with the same ones (the run directory's JSON lines): the
    options are not looked up again for each record."""

    __slots__ = ("_encoder", "_options")

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._encoder = _fast_encoder(options)

    def __call__(self, record: Any) -> str:
        """``dumps_redacted(record, **options)``."""
        return _dumps(record, self._options, self._encoder)


def _dumps(record: Any, options: Mapping[str, Any], encoder: json.JSONEncoder | None) -> str:
    """:func:`dumps_redacted`, its fast encoder (:func:`_fast_encoder`) found."""
    values = _known_secrets()  # _secret_values(()), without the empty set of extra ones
    text = None
    if encoder is not None:
        text = _encoded(record, encoder)
        if text is not None and _clean(text, values):
            return text
    walked = None
    if text is not None:
        walked = _redact_walk(record, values)
        # Equal, the walk changed no string (nor a tuple into a list, nor a Mapping
        # into a dict: the encoded values were plain JSON, ``default`` was never
        # called), and a number only into a float of the same value: the same text.
        if walked == record:
            return text
    fallback = options.get("default")
    if fallback is not None:
        # What ``default`` makes of a value JSON cannot encode (``str`` of an
        # exception or a path) is text in the artefact too: redact it as well.
        def default(value: Any) -> Any:
            return _redact_walk(fallback(value), values)

        options = {**options, "default": default}
    if walked is None:
        walked = _redact_walk(record, values)
    return json.dumps(walked, **{"allow_nan": False, **options})


def strict_number(value: float) -> float | str:
    """``value``, or how a strict JSON artefact spells it when JSON has no number for
    it: ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (the spellings of JavaScript and
    of Python's own lenient JSON, now as strings; see docs/artefacts.md)."""
    if math.isfinite(value):
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


#: From a character boundary inside a JSON string token to its closing quote.
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"')  # "unrolled": one charset run at a time
#: Characters that an ASCII JSON encoder writes as themselves inside a string.
_JSON_PLAIN = frozenset(map(chr, range(0x20, 0x7F))) - {'"', "\\"}
#: ``json.dumps`` options under which :func:`_clean` may answer.
_FAST_OPTIONS = frozenset({"ensure_ascii", "sort_keys", "default", "indent"})


class _DefaultCalled(threading.local):
    """Set when the encoder met a value that is not plain JSON (this thread)."""

    called = False


_DEFAULT_CALLED = _DefaultCalled()
_ENCODERS: dict[tuple[tuple[str, Any], ...], json.JSONEncoder] = {}


def _fast_encoder(options: Mapping[str, Any]) -> json.JSONEncoder | None:
    """An encoder equal to ``json.dumps(**options)`` that notes every call of its
    ``default``; None for options the clean-text proof does not cover (it needs
    ASCII output with the standard separators)."""
    try:
        # the options as given (a call site passes them in one order): no sorting per record
        key = tuple(options.items())
        encoder = _ENCODERS.get(key)
    except TypeError:  # an unhashable option value
        return None
    if encoder is not None:
        return encoder
    if not _FAST_OPTIONS.issuperset(options) or options.get("ensure_ascii", True) is not True:
        return None
    fallback = options.get("default")

    def default(value: Any) -> Any:
        _DEFAULT_CALLED.called = True
        if fallback is None:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        return fallback(value)

    settings = {name: value for name, value in options.items() if name != "default"}
    # a non-finite float raises ValueError: the record then goes through the walk
    encoder = _ENCODERS[key] = json.JSONEncoder(**settings, default=default, allow_nan=False)
    return encoder


def _encoded(record: Any, encoder: json.JSONEncoder) -> str | None:
    """The record's JSON text when it is plain JSON: None when the encoder had to
    pass a value to ``default`` (its text is not a string value of the record) or
    could not encode it (a non-finite float, which the walk spells)."""
    _DEFAULT_CALLED.called = False
    try:
        text = encoder.encode(record)
    except (TypeError, ValueError, RecursionError):
        return None  # the walk and json.dumps report it as they always did
    return None if _DEFAULT_CALLED.called else text


def _clean(text: str, values: tuple[str, ...]) -> bool:
    """Whether redaction would change none of the string values of ``text``, the
    JSON text of a plain record (:func:`_encoded`).

    Sound because the text is ASCII JSON in which every character a secret's start
    or a pattern's literal is made of stands as itself: a string value that holds
    one puts it in the text. So the text is returned only when no secret's first
    :data:`MIN_SECRET_LENGTH` characters occur in it (every secret rule needs them)
    and every pattern literal it holds (ASCII, so case-folding is lower-casing)
    lies in a key, which redaction never changes. Non-ASCII text (``\\u`` escapes,
    which ``(?i)`` may fold into a literal), a value the encoder had to pass to
    ``default`` (its text is not a string value of the record), or a secret with
    characters that JSON escapes, all send the record to the walk.
    """
    if "\\u" in text:
        return False
    for value in values:
        start = value[:MIN_SECRET_LENGTH]
        if start in text or not _JSON_PLAIN.issuperset(start):
            return False
    # Another spelling of a secret (see spellings.py) stands in the text as it stands
    # in its string value, except that a value's backslash is doubled: undone here,
    # the check sees what the walk would see.
    if values and spellings_of(values).holds_one(text.replace("\\\\", "\\")):
        return False
    lower = text.lower()
    for literal in _HINT_LITERALS if "=" in text else _PATTERN_LITERALS:  # a query parameter's needs its "="
        position = lower.find(literal)
        while position >= 0:
            if not _inert(literal, text, lower, position):
                # Every literal is inside a string token (outside strings JSON has no
                # such letters), and its end is a character boundary: there is no
                # ``\\u`` escape here, and the character before a literal's last is
                # part of the literal, never a backslash. So the token ends at the
                # first unescaped quote after it.
                rest = _STRING_REST.match(text, position + len(literal))
                if rest is None or not text.startswith(":", rest.end()):
                    return False  # in a string value (a key is followed by its colon)
            position = lower.find(literal, position + 1)
    return True


#: What must follow a hint literal for its rule to match there (:func:`_inert`).
_API_NAMES = ("apikey", "api-key", "api_key")  # x-api-key, api[-_]?key, openai[-_]api[-_]key
_KEY_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _inert(literal: str, text: str, lower: str, position: int) -> bool:
    """Whether no rule can match at this occurrence of a hint literal in the JSON
    text of a plain record (ASCII, no ``\\u`` escape: :func:`_clean`), wherever it
    stands: a value holding ``capital`` or a URL without credentials is then not
    walked. Each answer rests on a character the rule needs beyond its literal,
    which stands in the text as in the value (ASCII JSON escapes none of them, and
    what it escapes begins with a backslash, which none of them is):

    * ``api``: a header name of :data:`_NAMED_VALUE` holding it goes on ``key``
      (``api-key``, ``api_key``, ``apikey``);
    * ``authori``: its header name is all of ``authorization``;
    * ``sk-``: :data:`_KEY_SHAPED` needs eight letters, digits, ``_`` or ``-`` next;
    * ``://``: :data:`_URL_CREDENTIALS` needs an ``@``, which is nowhere in the text.

    The others (``bearer``, ``basic``, ``token``) are never taken as inert here."""
    if literal == "api":
        return not lower.startswith(_API_NAMES, position)
    if literal == "authori":
        return not lower.startswith("authorization", position)
    if literal == "sk-":
        return not _KEY_CHARACTERS.issuperset(text[position + 3:position + 11]) or len(text) < position + 11
    if literal == "://":
        return "@" not in text
    return False


def redact_strings(record: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like record with every string value redacted and every
    non-finite float spelled as strict JSON spells it (:func:`strict_number`), and
    nothing else changed: for JSON that another library writes (pytest-json-report's
    file). The run directory escapes what cannot be stored (ASCII JSON), so its
    records stay lossless (NUL and lone surrogates included)."""
    return _redact_walk(record, _secret_values(secrets))


def _redact_walk(record: Any, values: tuple[str, ...]) -> Any:
    # Exact types first: an ABC isinstance check per value costs more than the
    # redaction of most strings, and records are plain dicts, lists and strings.
    kind = type(record)
    if kind is str:
        return _redact(record, values)
    if kind is dict:
        return {key: _redact_walk(value, values) for key, value in record.items()}
    if kind is list or kind is tuple:
        return [_redact_walk(value, values) for value in record]
    if kind is float:
        return record if math.isfinite(record) else strict_number(record)
    if kind is int or kind is bool or record is None:
        return record
    if isinstance(record, str):
        return _redact(record, values)
    if isinstance(record, float):  # a subclass (numpy's float64)
        return strict_number(float(record))
    if isinstance(record, Mapping):
        return {key: _redact_walk(value, values) for key, value in record.items()}
    if isinstance(record, list | tuple):
        return [_redact_walk(value, values) for value in record]
    return record


def redact_record(record: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like record that is safe to write: every string redacted and
    made storable (NUL and lone surrogates become U+FFFD, see :func:`.text.storable`).

    Keys are kept as field names (made storable), values are redacted at any depth;
    the artefact writer passes every record through this before writing it, so an
    agent's answer holding a lone surrogate cannot make a write fail either.
    """
    values = tuple(secrets)
    if isinstance(record, str):
        return redact(storable(record), values)
    if isinstance(record, Mapping):
        return {storable(str(key)) if isinstance(key, str) else key: redact_record(value, values) for key, value in record.items()}
    if isinstance(record, list | tuple):
        return [redact_record(value, values) for value in record]
    return record


def shown(text: str, *, one_line: bool = False) -> str:
    """``text`` on its way to a terminal: redacted, then made inert (control and
    bidirectional characters shown, not obeyed; see :func:`.text.inert`)."""
    return inert(redact(text), one_line=one_line)
