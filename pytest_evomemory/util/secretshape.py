"""Whether a value a user wrote looks like a secret, and masking such values in a message.

A config error quotes what the user wrote (``unknown agent kind 'gw-Zq8x...'``, an
unknown key's name, a URL that is no URL), and a user who pastes an API key into the
wrong key gets it echoed to the terminal and the CI log. :func:`mask_secret_shaped`
is applied to every :class:`~..core.errors.ConfigError` message, so no refusal quotes
a key, whichever check wrote it; :func:`looks_like_a_secret` is the stricter test of a
setting that must hold a variable *name* (``model.api_key_env``).

Only values registered as secrets (:mod:`.redaction`) are known for sure; this is
the shape test for the rest: a provider's key prefix, or a long token whose letters
and digits change class as often as random text does (a file name such as
``MyAgentProject2024Final`` does not; ``Zq8xV3mK9pL2nR7t`` does).
"""

from __future__ import annotations

import re
from itertools import pairwise

#: What a masked value is replaced with in a message.
SECRET_SHOWN = "(a value that looks like a secret, not shown)"

#: Prefixes of providers' keys and tokens (OpenAI, Anthropic, GitHub, Hugging Face,
#: Slack, Google, GitLab, Stripe, AWS access key ids).
_KEY_PREFIXES = (
    "sk-", "sk_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "hf_", "xoxb-", "xoxp-", "xoxa-", "xoxr-",
    "AIza", "glpat-", "rk_live_", "pk_live_", "AKIA",
)
#: A run of characters a token is made of (``/`` and ``.`` split it: paths stay whole words).
_TOKEN = re.compile(r"[A-Za-z0-9_+=-]{16,}")
#: The shortest token without a known prefix that is masked.
_MIN_RANDOM = 24


def looks_like_a_secret(value: str) -> bool:
    """An API key pasted where a variable *name* belongs: a provider's key prefix, or a
    long mixed-case string with digits (variable names are short, and upper case)."""
    if value.startswith(("sk-", "sk_", "sk-proj", "Bearer ")):
        return True
    return (
        len(value) >= 32 and any(c.isdigit() for c in value)
        and any(c.islower() for c in value) and any(c.isupper() for c in value)
    )


def _class(character: str) -> int:
    return 0 if character.islower() else 1 if character.isupper() else 2


def secret_shaped(token: str) -> bool:
    """Whether one token (no spaces, slashes or dots) looks like a key or a token.

    A known prefix with 12 more characters, or at least :data:`_MIN_RANDOM` letters
    and digits (separators ``_-+=`` aside) whose class (lower, upper, digit) changes
    at least 4 times in 10: random text changes about 6 times in 10 (hex about 5),
    words and names far less (``MyAgentProject2024ExperimentsV3Final``: 12 in 35)."""
    if len(token) >= 16 and token.startswith(_KEY_PREFIXES):
        return True
    alnum = [c for c in token if c.isalnum()]
    if len(alnum) < _MIN_RANDOM or not any(c.isdigit() for c in alnum) or not any(c.isalpha() for c in alnum):
        return False
    changes = sum(_class(a) != _class(b) for a, b in pairwise(alnum))
    return changes * 10 >= 4 * (len(alnum) - 1)


def mask_secret_shaped(text: str) -> str:
    """``text`` with every token that :func:`secret_shaped` says is a key replaced by
    :data:`SECRET_SHOWN`."""
    if len(text) < 16:
        return text
    return _TOKEN.sub(lambda match: SECRET_SHOWN if secret_shaped(match.group(0)) else match.group(0), text)


__all__ = ["SECRET_SHOWN", "looks_like_a_secret", "mask_secret_shaped", "secret_shaped"]
