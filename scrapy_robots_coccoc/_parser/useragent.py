"""Robot names: the name a robot goes by, and the agent a ``User-agent`` line names."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import cast

# RFC 9110 §5.6.2 token characters, and any non-ASCII character: a robot may be named in any script.
_TOKEN = r"(?:[!#$%&'*+.^_`|~0-9A-Za-z-]|[^\x00-\x7f])+"
_COMPATIBLE = re.compile(r"\(\s*compatible\s*;\s*(" + _TOKEN + ")", re.IGNORECASE)
_FIRST_TOKEN = re.compile(_TOKEN)
# RFC 9309 §2.2.1: the product token ends at white space, "/", "(", and ";" or "," (several robots on a line).
_AGENT_WORD = re.compile(rb"[^\s/(;,]*")
_PREFIX_WORD = re.compile(r"([a-z0-9_-]+)\*?")
_SHORT_WORD = 64
_KEPT_KEYS = 4096
_KEYS: dict[bytes, str | None] = {}
_UNKNOWN = object()

EXACT = " "


def agent_key(value: bytes) -> str | None:
    """The group key of a ``User-agent`` value (None: no robot): a ``[a-z0-9_-]`` token matches by prefix; another word
    (``Go!Zilla``) is EXACT (in no robot name) plus it, matched whole, so a cut value is never more general."""
    # One lookup: another thread may clear the cache between two.
    known = _KEYS.get(value, _UNKNOWN)
    if known is not _UNKNOWN:
        return cast("str | None", known)
    word = _AGENT_WORD.match(value.lstrip())[0]  # type: ignore[index]
    key = (_key_of_word(word) if len(word) <= _SHORT_WORD else _key(word)) if word else None
    if len(value) <= _SHORT_WORD:
        if len(_KEYS) >= _KEPT_KEYS:
            _KEYS.clear()
        _KEYS[value] = key
    return key


@lru_cache(maxsize=4096)
def _key_of_word(word: bytes) -> str:
    # Values repeat across files: a bounded cache, as sys.intern's strings are immortal on Python 3.12.
    return _key(word)


def _key(word: bytes) -> str:
    text = word.decode("utf-8", "replace").casefold()
    if text == "*":
        return text
    prefix = _PREFIX_WORD.fullmatch(text)
    return prefix[1] if prefix else EXACT + text


@lru_cache(maxsize=256)
def robot_name(user_agent: str) -> str:
    """The robot's case-folded name: the first ``(compatible; name/…)`` token, wherever it stands, else the first."""
    found = _COMPATIBLE.search(user_agent)
    if found:
        return found[1].casefold()
    first = _FIRST_TOKEN.search(user_agent)
    return first[0].casefold() if first else ""
