"""Sitemaps read as a stream within sitemaps.org's bounds (50,000 URLs, 50 MB uncompressed): gzip inflated no further
than the bound, XML parsed incrementally and pruned as it goes, so memory stays flat however hostile the body."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

GZIP_MAGIC = b"\x1f\x8b\x08"
#: The root elements of a sitemap and of a sitemap index; any other root is no sitemap.
SITEMAP_TYPES = ("urlset", "sitemapindex")
#: Children kept per entry (``loc``, hreflang ``xhtml:link`` ...): real ones have a few hundred, a hostile one millions.
MAX_ENTRY_PARTS = 1000

# Inflated (or raw) bytes fed to the parser at a time: the parse works in slices of a few milliseconds.
_CHUNK = 64 * 1024
# Compressed bytes handed to zlib at a time: its unconsumed tail is a copy, so a large input is not copied each step.
_IN_CHUNK = 16 * 1024
# gzip members read at most (RFC 1952 §2.2, as Scrapy reads them): thousands of empty ones would cost time.
_GZIP_MEMBERS = 16
# Scrapy's parser options for sitemaps (scrapy.utils.sitemap.Sitemap): no entities, no network, lenient.
_PARSER_OPTIONS: dict[str, Any] = {
    "recover": True,
    "resolve_entities": False,
    "remove_comments": True,
    "remove_pis": True,
    "remove_blank_text": True,
    "collect_ids": False,
    "no_network": True,
}
# Events only for the root and the entries: an event per element would cost Python objects for every one.
_EVENT_TAGS = ("{*}urlset", "{*}sitemapindex", "{*}url", "{*}sitemap")


class SitemapReader:
    """One sitemap body's entries as Scrapy's ``Sitemap`` gives them, read as iterated, within *max_entries* and
    *max_bytes*. Then ``kind`` is the root's local name (None without XML) and ``truncated`` the bound hit, if any."""

    def __init__(self, body: bytes, *, gzipped: bool, max_entries: int, max_bytes: int) -> None:
        self._body = body
        self._gzipped = gzipped
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self.kind: str | None = None
        self.entries = 0
        self.truncated: str | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # The root's name comes from a parser reporting every start: the main one reports only sitemap roots.
        detector: Any = etree.XMLPullParser(events=("start",), **_PARSER_OPTIONS)
        parser = etree.XMLPullParser(events=("start", "end"), tag=_EVENT_TAGS, **_PARSER_OPTIONS)
        root: Any = None
        for chunk in self._chunks():
            try:
                if detector is not None:
                    detector.feed(chunk)
                    for _, element in detector.read_events():
                        self.kind = _local_name(element.tag)
                        break
                    if self.kind is not None:
                        detector = None
                        if self.kind not in SITEMAP_TYPES:
                            return
                parser.feed(chunk)
            except etree.LxmlError:  # recover=True takes most damage; what it cannot, ends the reading
                return
            for event, element in parser.read_events():
                if root is None:
                    root = element  # the first event is the root's start: the detector said it is a sitemap
                    continue
                if element.getparent() is not root:
                    continue  # an element named url or sitemap deeper down is no entry
                if event == "start":
                    if self.entries >= self._max_entries:
                        self.truncated = "entries"
                        return
                    continue
                entry = _entry(element)
                if entry is not None:
                    self.entries += 1
                    yield entry
            if root is not None:
                _prune(root)
        # The document is not closed: what closing would finish is an entry cut short, whose loc may be too.

    def _chunks(self) -> Iterator[bytes]:
        left = self._max_bytes
        for chunk in _gunzipped(self._body) if self._gzipped else _slices(self._body):
            if len(chunk) > left:
                if left:
                    yield chunk[:left]
                self.truncated = "bytes"
                return
            left -= len(chunk)
            yield chunk


def _slices(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), _CHUNK):
        yield body[start : start + _CHUNK]


def _gunzipped(data: bytes) -> Iterator[bytes]:
    """*data* inflated lazily, member after member; a corrupt or cut stream gives what it inflated, as Scrapy's does."""
    stream = zlib.decompressobj(31)
    members = 0
    position = 0
    pending = b""
    while True:
        if not pending:
            if position >= len(data):
                break
            pending = data[position : position + _IN_CHUNK]
            position += len(pending)
        try:
            out = stream.decompress(pending, _CHUNK)
        except zlib.error:
            return
        pending = stream.unconsumed_tail
        if out:
            yield out
        if stream.eof:
            members += 1
            pending = stream.unused_data
            if members >= _GZIP_MEMBERS or not (pending or position < len(data)):
                return
            stream = zlib.decompressobj(31)
    while not stream.eof:  # the input is all in: what zlib still holds, a window at most
        try:
            out = stream.decompress(b"", _CHUNK)
        except zlib.error:
            return
        if not out:
            return
        yield out


def _local_name(tag: object) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _entry(element: Any) -> dict[str, Any] | None:
    """An entry as Scrapy's ``Sitemap`` reads it: children's text by local name, ``link`` hrefs as ``alternate``."""
    entry: dict[str, Any] = {}
    alternate: list[str] = []
    for child in element.iterchildren():
        name = _local_name(child.tag)
        if not name:
            continue
        if name == "link":
            href = child.get("href")
            if href:
                alternate.append(href)
        else:
            entry[name] = child.text.strip() if child.text else ""
    if "loc" not in entry:
        return None
    if alternate:
        entry["alternate"] = alternate
    return entry


def _prune(root: Any) -> None:
    """Drop what the reading is done with: finished entries (all but the last, maybe open), the open entry's children
    past ``MAX_ENTRY_PARTS``, all below its finished ones (no entry data lies deeper), what ends under the open path."""
    if len(root) > 1:
        del root[:-1]
    if not len(root):
        return
    entry = root[-1]
    if len(entry) > MAX_ENTRY_PARTS + 1:
        del entry[MAX_ENTRY_PARTS:-1]
    for part in entry[:-1]:
        if len(part):
            del part[:]
    node = entry[-1] if len(entry) else None
    while node is not None and len(node):
        if len(node) > 1:
            del node[:-1]
        node = node[-1]
