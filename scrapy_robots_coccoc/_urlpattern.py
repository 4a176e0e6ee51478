"""Allow/Disallow patterns: normalisation and linear-time matching.

A pattern is matched against a URL's path plus ``?query``: ``*`` matches any
run of characters, a final ``$`` anchors the end, and every pattern implies a
trailing ``*``. Matching is a left-to-right scan with ``str.find`` (leftmost
match of each literal piece), so no pattern can backtrack.
"""

from __future__ import annotations

import re
from urllib.parse import quote

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_LOWER_ESCAPE = re.compile(r"%(?:[0-9a-f][0-9a-fA-F]|[0-9A-F][a-f])")
_PATH = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)?([^#]*)")


def _upper_escape(match: re.Match[str]) -> str:
    return match.group().upper()


def normalize(text: str) -> str:
    """Return *text* with non-ASCII characters and spaces as their UTF-8
    percent-encoding and every percent-escape in upper case, so that rules
    and URLs compare alike."""
    if not text.isascii():
        text = _NON_ASCII.sub(lambda m: quote(m.group(), safe="", errors="surrogatepass"), text)
    if "%" in text:
        text = _LOWER_ESCAPE.sub(_upper_escape, text)
    if " " in text:
        text = text.replace(" ", "%20")
    return text


def pattern_from_bytes(value: bytes) -> str:
    """Decode a rule value from robots.txt into a normalised pattern.

    Bytes outside ASCII become ``%XX`` one by one, which is their UTF-8
    percent-encoding when they are valid UTF-8, and a faithful escape of the
    raw byte when they are not: no input can fail to decode.
    """
    text = value.decode("ascii") if value.isascii() else quote(value, safe=bytes(range(0x21, 0x7F)))
    return normalize(text) if "%" in text or " " in text else text


def path_of(url: str) -> str:
    """Return the path plus ``?query`` of an absolute URL or of a path,
    without the fragment, normalised for matching."""
    path = _PATH.match(url)[1]  # type: ignore[index]
    if not path.startswith("/"):
        path = "/" + path
    if path.isascii() and "%" not in path and " " not in path:
        return path
    return normalize(path)


class Matcher:
    """A pattern with ``*`` or a final ``$``: ``matches(path)`` answers in time linear in the
    length of the path times the number of ``*`` in the pattern."""

    __slots__ = ("_anchored", "_first", "_last", "_middle", "needle")

    def __init__(self, pattern: str) -> None:
        self._anchored = pattern.endswith("$")
        if self._anchored:
            pattern = pattern[:-1]
        parts = pattern.split("*")
        self._first = parts[0]
        self._last = parts[-1] if len(parts) > 1 else ""
        self._middle = tuple(part for part in parts[1:-1] if part)
        if len(parts) == 1 and self._anchored:
            # "/page$": the whole path must equal the pattern.
            self._last = None
        #: The longest literal piece: a path without it cannot match.
        self.needle = max(parts, key=len)

    def matches(self, path: str) -> bool:
        if not path.startswith(self._first):
            return False
        last = self._last
        if last is None:
            return len(path) == len(self._first)
        pos = len(self._first)
        for part in self._middle:
            pos = path.find(part, pos)
            if pos < 0:
                return False
            pos += len(part)
        if self._anchored:
            return len(path) - len(last) >= pos and path.endswith(last)
        return not last or path.find(last, pos) >= 0
