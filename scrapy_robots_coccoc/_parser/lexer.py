"""Field lines of robots.txt: the fields a group holds, and the regular expressions that find them."""

from __future__ import annotations

import re

ALLOW, DISALLOW, CRAWL_DELAY, REQUEST_RATE, VISIT_TIME, CONTENT_USAGE, CONTENT_SIGNAL = range(7)
MEMBER_FIELDS = {
    b"allow": ALLOW,
    b"disallow": DISALLOW,
    # Google robots.cc (KeyIsDisallow) accepts these misspellings of disallow.
    b"dissallow": DISALLOW,
    b"dissalow": DISALLOW,
    b"disalow": DISALLOW,
    b"diasllow": DISALLOW,
    b"disallaw": DISALLOW,
    b"crawl-delay": CRAWL_DELAY,
    b"crawldelay": CRAWL_DELAY,
    b"request-rate": REQUEST_RATE,
    b"visit-time": VISIT_TIME,
    # Usage preferences (draft-ietf-aipref-attach, contentsignals.org): lines of the group they stand in.
    b"content-usage": CONTENT_USAGE,
    b"content-signal": CONTENT_SIGNAL,
}


# White space ending a value, not part of it; Google robots.cc strips vertical tabs and form feeds too.
VALUE_END_SPACE = b" \t\x0b\x0c"
END_SPACE = b"[%s]*" % re.escape(VALUE_END_SPACE)


def fold_case(words: bytes) -> bytes:
    """A case-sensitive regex matching *words* in any case: ``re.IGNORECASE`` costs four times as much a line."""
    return re.sub(rb"[a-z]", lambda m: b"[" + m[0] + m[0].upper() + b"]", words)


def _first_letter(fields: bytes) -> bytes:
    """A lookahead for the first letters of *fields*, so that other lines fail without trying each name."""
    initials = bytes(sorted({word[0] for word in re.sub(rb"[^a-z|]", b"", fields.lower()).split(b"|") if word}))
    return rb"(?=[" + initials + initials.upper() + rb"])"


def member_field(fields: bytes, capture: bool = False) -> bytes:
    name = (b"(" if capture else b"(?:") + fold_case(fields) + b")"
    separator = rb"(?:[ \t]*:|[ \t]+(?=[^\s:#]+" + END_SPACE + rb"(?:#|\n|\Z)))[ \t]*"
    first = _first_letter(fields)
    return first + name + separator + rb"((?=[^\s#])[^#\n]*|)"


def field_line(fields: bytes, capture: bool = True) -> bytes:
    """The regex of a line of *fields*, names compared whole; a one-word value needs no colon (Google robots.cc
    GetKeyAndValueFrom). The literal leading newline lets the engine skip from line to line at C speed."""
    return rb"\n[ \t]*" + member_field(fields, capture)


def _fields(kinds: range) -> bytes:
    return b"|".join(re.escape(f) for f, kind in MEMBER_FIELDS.items() if kind in kinds)


# Lines that end a run of User-agent lines: the rules, Content-Usage among them (draft-ietf-aipref-attach makes it
# one). Not Content-Signal, which no standard makes a rule: other records must not change the rules' groups
# (RFC 9309 section 2.2.4).
MEMBER_LINE = re.compile(field_line(_fields(range(CONTENT_USAGE + 1))))
COMMENT = re.compile(rb"#[^\n]*")
# While a rule set's text is read, NUL (escaped in it by then) starts exactly the lines not read yet.
UNREAD = b"\x00"


def _unread_field(fields: bytes) -> bytes:
    separator = rb"(?:[ \t]*:|[ \t]+(?=[^\s:]+" + END_SPACE + rb"\n))[ \t]*"
    return UNREAD + rb"[ \t]*" + _first_letter(fields) + rb"(" + fold_case(fields) + rb")" + separator


def _unread_rule(fields: bytes) -> re.Pattern[bytes]:
    """Up to a non-empty value; an atomic group (lookahead, back reference) takes blanks whole: no quadratic retries."""
    name = UNREAD + rb"[ \t]*" + _first_letter(fields) + rb"(?:" + fold_case(fields) + rb")"
    separator = rb"(?=([ \t]*))\1(?::(?=([ \t]*))\2(?=\S)|(?<=[ \t])(?=[^\s:]+" + END_SPACE + rb"\n))"
    return re.compile(name + separator)


ALLOW_FIELD = _unread_rule(_fields(range(ALLOW, ALLOW + 1)))
DISALLOW_FIELD = _unread_rule(_fields(range(DISALLOW, DISALLOW + 1)))
EXTENSION_FIELD = re.compile(_unread_field(_fields(range(CRAWL_DELAY, CONTENT_SIGNAL + 1))) + rb"((?=\S)[^\n]*|)")
UNREAD_LINE = re.compile(UNREAD + rb"[^\n]*")
