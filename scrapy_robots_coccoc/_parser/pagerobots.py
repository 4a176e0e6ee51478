"""``X-Robots-Tag`` and ``<meta>`` directives for one robot, in Google's syntax
(developers.google.com/search/docs/crawling-indexing/robots-meta-tag); reads are bounded and no search backtracks,
so a hostile page costs no more than a real one."""

from __future__ import annotations

import calendar
import html
import re
import time
from datetime import datetime, timezone
from email.utils import parsedate_tz
from heapq import heapify, heappop, heapreplace
from itertools import islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

GENERIC = "robots"
#: Bytes of a body read for ``<meta>`` tags (the tags belong in the ``<head>``), and of ``X-Robots-Tag`` values.
HEAD_BYTES = 64 * 1024
#: Tags and comments looked at in a head: a real head holds far fewer.
MAX_LANDMARKS = 500
#: Comma-separated directives read in the headers, and in the ``<meta>`` tags: Google defines about a dozen.
MAX_DIRECTIVES = 100
# Attributes of a tag read: a robots <meta> has two or three.
_MAX_ATTRIBUTES = 16
# Words of one directive ("noindex nofollow"): a few in real pages.
_MAX_WORDS = 8

# Directives written "name: value"; any other word before a colon in X-Robots-Tag names a robot (Google).
_VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
# No restriction: Google reads them as the default.
_NOTHING = frozenset({"all", "index", "follow"})
_DAYS = frozenset({"mon", "tue", "wed", "thu", "fri", "sat", "sun"})
_DAYS |= {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
_NAME = re.compile(r"[a-z0-9_-]+")
# Sites write "noindex nofollow" and "noindex;nofollow" too: read as two directives, the politer reading.
_WORD = re.compile(r"[^\s;]+")

# What a head scan stops at; any other tag is skipped by bytes.find, in C.
_LANDMARKS = (b"<!--", b"</head", b"<body", b"<meta", b"<script", b"<style", b"<title", b"<textarea", b"<template")
_RAW_TEXT = frozenset({b"script", b"style", b"title", b"textarea", b"template"})
_AFTER_TAG_NAME = b" \t\n\r\f/>"
_ATTRIBUTE = re.compile(rb"""([^\s/>=][^\s/>=]*)(?:\s*=\s*("[^"]*"?|'[^']*'?|[^\s>]*))?""")


def page_directives(
    header_values: Iterable[bytes | str], body: bytes | None, robot: str, now: float | None = None
) -> frozenset[str]:
    """Directives for *robot* (case-folded) of the ``X-Robots-Tag`` values and *body*'s ``<meta>``, united (Google)."""
    found = header_directives(header_values, robot, now)
    return found | meta_directives(body, robot, now) if body else found


def header_directives(values: Iterable[bytes | str], robot: str, now: float | None = None) -> frozenset[str]:
    """``X-Robots-Tag`` directives for every robot and *robot*; a name holds to the next (``bot: noindex, none``)."""
    found: set[str] = set()
    size, left = HEAD_BYTES, MAX_DIRECTIVES
    for raw in values:
        if size <= 0 or left <= 0:
            break
        text = (raw[:size].decode("utf-8", "replace") if isinstance(raw, bytes) else raw[:size]).casefold()
        size -= len(text)
        for agent, piece in _pieces(text, left, header=True):
            left -= 1
            if agent is None or agent == robot:
                found.update(_directive(piece, now))
    return frozenset(found)


def meta_directives(body: bytes | None, robot: str, now: float | None = None) -> frozenset[str]:
    """Directives of the ``robots`` and *robot* ``<meta>`` tags in *body*'s first HEAD_BYTES, up to ``<body>``."""
    return tag_directives(meta_tags(body), robot, now)


def meta_tags(body: bytes | None) -> Iterator[tuple[str, str]]:
    """(name, content) of the ``<meta>`` tags in *body*'s first HEAD_BYTES, up to ``<body>``, case-folded: one scan
    of the head serves every tag read from it (robots directives, ``tdm-reservation``)."""
    return _meta_tags(body[:HEAD_BYTES].lower() if body else b"")


def tag_directives(tags: Iterable[tuple[str, str]], robot: str, now: float | None = None) -> frozenset[str]:
    """Directives of the ``robots`` and *robot* tags among *tags* (from :func:`meta_tags`), at most MAX_DIRECTIVES."""
    found: set[str] = set()
    left = MAX_DIRECTIVES
    for name, content in tags:
        if name not in (GENERIC, robot):
            continue
        for _, piece in _pieces(content, left, header=False):
            left -= 1
            found.update(_directive(piece, now))
        if left <= 0:
            break
    return frozenset(found)


def _meta_tags(head: bytes) -> Iterator[tuple[str, str]]:
    """(name, content) of the ``<meta>`` tags of a lower-cased head that have both, case-folded."""
    position = 0
    # The next place of each landmark at or after `position`, nearest first.
    ahead = [(at, landmark) for landmark in _LANDMARKS if (at := head.find(landmark)) >= 0]
    heapify(ahead)
    looked = 0
    while ahead and looked < MAX_LANDMARKS:
        start, landmark = ahead[0]
        if start < position:
            at = head.find(landmark, position)
            if at < 0:
                heappop(ahead)
            else:
                heapreplace(ahead, (at, landmark))
            continue
        looked += 1
        after = start + len(landmark)
        if landmark == b"<!--":
            end = head.find(b"-->", after)
            if end < 0:
                return  # an unclosed comment runs to the end
            position = end + 3
            continue
        if after < len(head) and head[after] not in _AFTER_TAG_NAME:
            position = start + 1  # another tag: <metadata>, <bodyguard>
            continue
        if landmark in (b"</head", b"<body"):
            return
        # HTML ends a tag at its first ">" outside quotes; robots' tags hold none inside, so the first will do.
        end = head.find(b">", after)
        if end < 0:
            return
        position = end + 1
        tag = landmark[1:]
        if tag in _RAW_TEXT:
            # Their text is not markup: a "<meta" in a script is no tag.
            close = head.find(b"</" + tag, position)
            if close < 0:
                return
            position = close + 2 + len(tag)
        elif tag == b"meta":
            attributes = _attributes(head, after, end)
            if "name" in attributes and "content" in attributes:
                yield attributes["name"], attributes["content"]


def _attributes(head: bytes, start: int, end: int) -> dict[str, str]:
    attributes: dict[str, str] = {}
    if head.find(b"name", start, end) < 0:
        return attributes
    for attribute in islice(_ATTRIBUTE.finditer(head, start, end), _MAX_ATTRIBUTES):
        key, raw = attribute[1], attribute[2] or b""
        if key not in (b"name", b"content") or key.decode() in attributes:
            continue  # HTML keeps the first of an attribute written twice
        quote = raw[:1]
        if quote in (b'"', b"'"):
            raw = raw[1:-1] if len(raw) > 1 and raw.endswith(quote) else raw[1:]
        else:
            raw = raw.removesuffix(b"/")  # <meta content=nofollow/>: HTML keeps the "/", the author meant none
        text = raw.decode("utf-8", "replace")
        attributes[key.decode()] = (html.unescape(text) if "&" in text else text).strip().casefold()
    return attributes


def _pieces(text: str, most: int, header: bool) -> Iterator[tuple[str | None, str]]:
    """At most *most* directives with the robot each names (headers); an ``unavailable_after`` date keeps its comma."""
    agent: str | None = None
    pieces = text.split(",", most)[:most]
    index = 0
    while index < len(pieces):
        piece = pieces[index].strip()
        index += 1
        name, colon, rest = piece.partition(":")
        if header and colon and name.strip() not in _VALUED:
            agent = name.strip()
            piece = rest.strip()
            name, colon, rest = piece.partition(":")
        if colon and name.strip() == "unavailable_after" and rest.strip() in _DAYS and index < len(pieces):
            piece = f"{piece},{pieces[index]}"
            index += 1
        yield agent, piece


def _directive(piece: str, now: float | None) -> list[str]:
    """The names *piece* stands for: ``none`` is noindex, nofollow; a passed ``unavailable_after`` date adds noindex."""
    name, colon, value = piece.partition(":")
    name = name.strip()
    if colon:
        if name == "unavailable_after":
            passed = _passed(value.strip(), time.time() if now is None else now)
            return ["unavailable_after", "noindex"] if passed else []
        return [name] if name in _VALUED else []
    found: list[str] = []
    for word in islice(_WORD.finditer(piece), _MAX_WORDS):
        text = word[0]
        if text == "none":
            found += ("noindex", "nofollow")
        elif text not in _NOTHING and _NAME.fullmatch(text):
            found.append(text)
    return found


def _passed(date: str, now: float) -> bool:
    """Whether *date* (RFC 822, RFC 850 or ISO 8601; UTC when it names no zone) is before *now*."""
    parsed = parsedate_tz(date)
    try:
        if parsed is not None:
            return calendar.timegm(parsed[:6]) - (parsed[9] or 0) < now
        iso = date.upper()
        moment = datetime.fromisoformat(iso[:-1] + "+00:00" if iso.endswith("Z") else iso)
    except (ValueError, OverflowError):
        return False
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp() < now
