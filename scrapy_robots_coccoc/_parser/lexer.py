"""Field lines of robots.txt: which fields a group holds, and the regular
expressions that find them (matched case-sensitively against alternatives
of each case: ``re.IGNORECASE`` costs four times as much on every line)."""

from __future__ import annotations

import re

ALLOW, DISALLOW, CRAWL_DELAY, REQUEST_RATE, VISIT_TIME = range(5)
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
}
# The spellings met most, looked up before lower-casing.
MEMBER_FIELDS.update({field.capitalize(): kind for field, kind in MEMBER_FIELDS.items()})
MEMBER_FIELDS[b"Crawl-Delay"] = CRAWL_DELAY


# White space a value may end with that is not part of it: vertical tabs
# and form feeds too, which Google robots.cc strips from a line's end.
VALUE_END_SPACE = b" \t\x0b\x0c"
#: A run of that white space, in a regular expression.
END_SPACE = b"[%s]*" % re.escape(VALUE_END_SPACE)


def fold_case(words: bytes) -> bytes:
    """Return a case-sensitive regular expression matching *words* in any case:
    ``re.IGNORECASE`` costs four times as much on every line tried."""
    return re.sub(rb"[a-z]", lambda m: b"[" + m[0] + m[0].upper() + b"]", words)


def _first_letter(fields: bytes) -> bytes:
    """A lookahead for the first letters of *fields*: lines that cannot start
    with one are left at their first character, without trying each name."""
    initials = bytes(sorted({word[0] for word in re.sub(rb"[^a-z|]", b"", fields.lower()).split(b"|") if word}))
    return rb"(?=[" + initials + initials.upper() + rb"])"


def member_field(fields: bytes, capture: bool = False) -> bytes:
    """The regular expression of one of *fields* and its value, after the
    line's leading white space (see :func:`field_line`)."""
    name = (b"(" if capture else b"(?:") + fold_case(fields) + b")"
    separator = rb"(?:[ \t]*:|[ \t]+(?=[^\s:#]+" + END_SPACE + rb"(?:#|\n|\Z)))[ \t]*"
    first = _first_letter(fields)
    # The value runs to the comment or the line's end without backtracking;
    # readers strip the white space it may end with.
    return first + name + separator + rb"((?=[^\s#])[^#\n]*|)"


def field_line(fields: bytes, capture: bool = True) -> bytes:
    """Return the regular expression of a line holding one of *fields* and its value.

    Field names are compared whole (``Disallowed:`` is no Disallow line). The
    colon may be missing when white space separates the name from a value of
    a single word, as Google robots.cc (GetKeyAndValueFrom) accepts:
    ``disallow /``. The leading newline is a literal that lets the regular
    expression engine skip from line to line at C speed. The value is
    captured without the white space before it (and with any after it); the
    field name only when *capture* is true.
    """
    return rb"\n[ \t]*" + member_field(fields, capture)


def _fields(kinds: range) -> bytes:
    return b"|".join(re.escape(f) for f, kind in MEMBER_FIELDS.items() if f.islower() and kind in kinds)


MEMBER_LINE = re.compile(field_line(_fields(range(5))))
COMMENT = re.compile(rb"#[^\n]*")
# While a rule set's text is read, NUL (which the text cannot hold then)
# starts exactly the lines not read yet.
UNREAD = b"\x00"


def _unread_field(fields: bytes) -> bytes:
    """The regular expression of an unread line holding one of *fields*, up
    to its value (see :func:`field_line`; comments are gone by then)."""
    separator = rb"(?:[ \t]*:|[ \t]+(?=[^\s:]+" + END_SPACE + rb"\n))[ \t]*"
    return UNREAD + rb"[ \t]*" + _first_letter(fields) + rb"(" + fold_case(fields) + rb")" + separator


def _unread_rule(fields: bytes) -> re.Pattern[bytes]:
    """Like :func:`_unread_field`, up to a value that is not empty, with each
    run of white space taken whole (a lookahead and a back reference: an
    atomic group), so that a long run that ends the line is not tried again
    from each of its characters."""
    name = UNREAD + rb"[ \t]*" + _first_letter(fields) + rb"(?:" + fold_case(fields) + rb")"
    separator = rb"(?=([ \t]*))\1(?::(?=([ \t]*))\2(?=\S)|(?<=[ \t])(?=[^\s:]+" + END_SPACE + rb"\n))"
    return re.compile(name + separator)


ALLOW_FIELD = _unread_rule(_fields(range(ALLOW, ALLOW + 1)))
DISALLOW_FIELD = _unread_rule(_fields(range(DISALLOW, DISALLOW + 1)))
EXTENSION_FIELD = re.compile(_unread_field(_fields(range(CRAWL_DELAY, 5))) + rb"((?=\S)[^\n]*|)")
UNREAD_LINE = re.compile(UNREAD + rb"[^\n]*")
