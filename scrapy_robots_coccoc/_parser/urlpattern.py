"""Allow/Disallow patterns: linear-time matching, and the one normal form rules and URLs compare in (RFC 9309
§2.2.2-2.2.3): ``%7E`` is ``~``, ``%2f`` is ``%2F``, ``<`` is ``%3C``; a URL's ``*`` and ``$`` are ``%2A``, ``%24``."""

from __future__ import annotations

import re
from typing import NamedTuple

_UNRESERVED = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
# RFC 3986 §2.2 reserved characters and "%" stand as written; "#" (comment or fragment) never reaches here.
_RESERVED = b":/?[]@!&'()+,;=%"
_HEX = b"0123456789ABCDEFabcdef"


# Escapes of A-Z, a-z, 0-9, "-", ".", "_", "~", and any with lower-case hex.
_CHANGED_ESCAPE = rb"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-F]|3[0-9]|[46][1-9A-F]|[57][0-9A]|2[DE]|5F|7E)"


def _byte_class(kept: bytes) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in sorted(set(kept)))


# A path left as it is: one repeated class runs far faster than a search for what it lacks.
_URL_PLAIN_TEXT = "[" + _byte_class((_UNRESERVED + _RESERVED).replace(b"%", b"")).decode() + "]*"
_PLAIN_HTTP_PATH = re.compile(rf"https?://[^/?#]*(/{_URL_PLAIN_TEXT})(?:#|\Z)")
_URL_PLAIN_PATH = re.compile(_URL_PLAIN_TEXT)
_KEPT_IN_URLS = _UNRESERVED + _RESERVED
_KEPT_IN_RULES = _KEPT_IN_URLS + b"*$\n"
_CHANGED = re.compile(b"(" + _CHANGED_ESCAPE + b")")
# A "%" starting no escape is data, "%25" (RFC 3986 §2.4): rule "/a%" is no prefix of "/a%3C", as in CPython.
_BARE_PERCENT = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def _rewrites() -> dict[bytes, bytes]:
    table: dict[bytes, bytes] = {}
    for high in _HEX:
        for low in _HEX:
            escape = bytes([37, high, low])
            byte = int(escape[1:], 16)
            table[escape] = bytes([byte]) if byte in _UNRESERVED else escape.upper()
    return table


_REWRITE = _rewrites()


class _Escapes(NamedTuple):
    """Each byte's three bytes in the normal form: its escape, or a kept byte and two NULs (NUL is never kept)."""

    first: bytes
    second: bytes
    third: bytes


def _escapes(kept: bytes) -> _Escapes:
    return _Escapes(
        bytes(byte if byte in kept else 37 for byte in range(256)),
        bytes(0 if byte in kept else _HEX[byte >> 4] for byte in range(256)),
        bytes(0 if byte in kept else _HEX[byte & 15] for byte in range(256)),
    )


_RULE_ESCAPES = _escapes(_KEPT_IN_RULES)
_URL_ESCAPES = _escapes(_KEPT_IN_URLS)


def _normal_form(raw: bytes, escapes: _Escapes) -> str:
    """*raw* in the normal form by seven C-speed passes, as a left-to-right scan gives it: no escape forms another."""
    if b"%" in raw:
        raw = _BARE_PERCENT.sub(b"%25", raw)
        parts = _CHANGED.split(raw)
        parts[1::2] = map(_REWRITE.__getitem__, parts[1::2])
        raw = b"".join(parts)
    first = raw.translate(escapes.first)
    if first == raw:
        return raw.decode("ascii")
    spread = bytearray(3 * len(raw))
    spread[0::3] = first
    spread[1::3] = raw.translate(escapes.second)
    spread[2::3] = raw.translate(escapes.third)
    return spread.translate(None, b"\x00").decode("ascii")


_INNER_DOLLAR = re.compile(r"\$(?!\n|\Z)")


def normalize_lines(values: bytes) -> str:
    """Newline-joined rule values in the normal form; each non-ASCII byte is escaped alone, so none fails to decode."""
    text = _normal_form(values, _RULE_ESCAPES)
    # Google robots.cc: "$" is special only at the end of a pattern.
    return _INNER_DOLLAR.sub("%24", text) if "$" in text else text


_PATH = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)?([^#]*)")


def path_of(url: str) -> str:
    """Return the path plus ``?query`` of an absolute URL or a path, without the fragment, in the normal form."""
    plain = _PLAIN_HTTP_PATH.match(url)
    if plain is not None:
        return plain[1]
    path = _PATH.match(url)[1]  # type: ignore[index]
    if not path.startswith("/"):
        path = "/" + path
    if _URL_PLAIN_PATH.fullmatch(path) is not None:
        return path
    return _normal_form(path.encode("utf-8", "surrogatepass"), _URL_ESCAPES)


def wildcard_matches(pieces: tuple[str, ...], anchored: bool, path: str) -> bool:
    """Whether *path*, starting with ``pieces[0]``, matches: each piece is found leftmost, so nothing backtracks."""
    pos = len(pieces[0])
    if len(pieces) == 1:
        return not anchored or len(path) == pos
    for part in pieces[1:-1]:
        pos = path.find(part, pos)
        if pos < 0:
            return False
        pos += len(part)
    last = pieces[-1]
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return path.find(last, pos) >= 0
