"""Allow/Disallow patterns: the percent-encoding normal form and linear-time matching.

A pattern is matched against a URL's path plus ``?query``: ``*`` matches any
run of characters, a final ``$`` anchors the end, and every pattern implies a
trailing ``*``. Matching is a left-to-right scan with ``str.find`` (leftmost
match of each literal piece), so no pattern can backtrack.

Rules and URLs are compared in one normal form (RFC 9309 §2.2.2-2.2.3):
escapes of unreserved characters are decoded (``%7E`` is ``~``), other
escapes are upper-cased (``%2f`` is ``%2F``), and non-ASCII bytes and the
characters a URI must escape are percent-encoded (``<`` is ``%3C``). In a URL
a literal ``*`` or ``$`` is written ``%2A`` or ``%24``, which is how a rule
names them (RFC 9309 §2.2.3); in a rule they are the wildcard and the anchor.
"""

from __future__ import annotations

import re

_UNRESERVED = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
# RFC 3986 §2.2 reserved characters and "%" stand as written; "#" never
# reaches here (it starts a comment in a rule, the fragment in a URL).
_RESERVED = b":/?[]@!&'()+,;=%"
_HEX = b"0123456789ABCDEFabcdef"


def _byte_class(kept: bytes) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in sorted(set(kept)))


def _special(kept: bytes) -> re.Pattern[bytes]:
    """What the normal form rewrites: every escape, and every byte outside *kept*."""
    return re.compile(rb"%[0-9A-Fa-f]{2}|[^" + _byte_class(kept) + rb"]")


# A rule keeps "*" (wildcard) and "$" (anchor) as written; a URL encodes them.
_RULE_SPECIAL = _special(_UNRESERVED + _RESERVED + b"*$")
_URL_SPECIAL = _special(_UNRESERVED + _RESERVED)
_URL_SPECIAL_TEXT = re.compile("[^" + _byte_class(_UNRESERVED + _RESERVED).decode() + "]|%")
#: Finds what keeps newline-joined rule values from being their own normal
#: form: an escape, a byte to escape, or a "$" before the end of a value.
NEEDS_NORMALIZING = re.compile(rb"[^" + _byte_class(_UNRESERVED + _RESERVED + b"*$\n") + rb"]|%|\$(?!\n|\Z)")


def _rewrites() -> dict[bytes, bytes]:
    table = {bytes([byte]): b"%%%02X" % byte for byte in range(256)}
    for high in _HEX:
        for low in _HEX:
            escape = bytes([37, high, low])
            byte = int(escape[1:], 16)
            table[escape] = bytes([byte]) if byte in _UNRESERVED else escape.upper()
    return table


_REWRITE = _rewrites()


def _rewrite(match: re.Match[bytes]) -> bytes:
    return _REWRITE[match[0]]


def pattern_from_bytes(value: bytes) -> str:
    """Return a rule value from robots.txt in the normal form.

    Bytes outside ASCII are escaped one by one, which is their UTF-8
    percent-encoding when they are valid UTF-8, and a faithful escape of the
    raw byte when they are not: no input can fail to decode.
    """
    if _RULE_SPECIAL.search(value) is not None:
        value = _RULE_SPECIAL.sub(_rewrite, value)
    pattern = value.decode("ascii")
    # Google robots.cc: "$" is special only at the end of a pattern.
    if "$" in pattern[:-1]:
        anchor = "$" if pattern[-1] == "$" else ""
        pattern = pattern[: len(pattern) - len(anchor)].replace("$", "%24") + anchor
    return pattern


_PATH = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)?([^#]*)")


def path_of(url: str) -> str:
    """Return the path plus ``?query`` of an absolute URL or of a path,
    without the fragment, in the normal form."""
    path = _PATH.match(url)[1]  # type: ignore[index]
    if not path.startswith("/"):
        path = "/" + path
    if _URL_SPECIAL_TEXT.search(path) is None:
        return path
    raw = path.encode("utf-8", "surrogatepass")
    return _URL_SPECIAL.sub(_rewrite, raw).decode("ascii")


class Matcher:
    """A pattern with ``*`` or a final ``$``: ``matches(path)`` answers in time linear in the
    length of the path times the number of ``*`` in the pattern."""

    __slots__ = ("_anchored", "_first", "_last", "_middle", "needle", "pattern")

    def __init__(self, pattern: str) -> None:
        #: The pattern as written in the normal form, for explanations.
        self.pattern = pattern
        self._anchored = pattern.endswith("$")
        if self._anchored:
            pattern = pattern[:-1]
        parts = pattern.split("*")
        #: The literal text before the first ``*``: every match starts with it.
        self._first = parts[0]
        self._last: str | None = parts[-1] if len(parts) > 1 else ""
        self._middle = tuple(part for part in parts[1:-1] if part)
        if len(parts) == 1 and self._anchored:
            # "/page$": the whole path must equal the pattern.
            self._last = None
        #: The longest literal piece: a path without it cannot match.
        self.needle = max(parts, key=len)

    @property
    def literal(self) -> str:
        """The literal text every matching path starts with."""
        return self._first

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
