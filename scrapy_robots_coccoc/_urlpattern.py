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


_URL_SPECIAL = _special(_UNRESERVED + _RESERVED)
_URL_SPECIAL_TEXT = re.compile("[^" + _byte_class(_UNRESERVED + _RESERVED).decode() + "]|%")
# What newline-joined rule values in the normal form are made of.
_KEPT_IN_RULES = _UNRESERVED + _RESERVED + b"*$\n"


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


# A rule keeps "*" (wildcard) and "$" (anchor) as written; a URL encodes them.
_RULE_LINES_SPECIAL = _special(_UNRESERVED + _RESERVED + b"*$\n")
_INNER_DOLLAR = re.compile(r"\$(?!\n|\Z)")
_INNER_DOLLAR_BYTES = re.compile(rb"\$(?!\n|\Z)")


def in_normal_form(values: bytes) -> bool:
    """Whether newline-joined rule values are already their normal form, the
    common case: one C-speed pass deleting the bytes that may stand."""
    return (
        not values.translate(None, _KEPT_IN_RULES)
        and b"%" not in values
        and (b"$" not in values or _INNER_DOLLAR_BYTES.search(values) is None)
    )


def normalize_lines(values: bytes) -> str:
    """Return newline-joined rule values from robots.txt in the normal form,
    all lines at once at C speed.

    Bytes outside ASCII are escaped one by one, which is their UTF-8
    percent-encoding when they are valid UTF-8, and a faithful escape of the
    raw byte when they are not: no input can fail to decode.
    """
    text = _RULE_LINES_SPECIAL.sub(_rewrite, values).decode("ascii")
    # Google robots.cc: "$" is special only at the end of a pattern.
    return _INNER_DOLLAR.sub("%24", text)


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


def wildcard_matches(pattern: str, path: str) -> bool:
    """Whether *path* matches a pattern with ``*`` or a final ``$``, in time
    linear in the path's length times the number of ``*``. Nothing is
    precompiled: a compiled form per rule would cost more memory than the
    rule itself, and one check rarely tries more than a few patterns."""
    anchored = pattern[-1] == "$"
    if anchored:
        pattern = pattern[:-1]
    star = pattern.find("*")
    if star < 0:
        # "/page$": the whole path must equal the pattern.
        return path == pattern
    if not path.startswith(pattern[:star]):
        return False
    parts = pattern[star + 1 :].split("*")
    last = parts.pop()
    pos = star
    for part in parts:
        if part:
            pos = path.find(part, pos)
            if pos < 0:
                return False
            pos += len(part)
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return not last or path.find(last, pos) >= 0
