"""Usage preferences: what a site lets a crawler do with what it fetches, as IETF AIPREF (``Content-Usage``,
draft-ietf-aipref-attach and -vocab), Cloudflare's Content Signals (``Content-Signal``), W3C TDMRep
(``tdm-reservation``) and the ``noai`` / ``noimageai`` convention state it, in robots.txt groups, response headers
and ``<meta>`` tags. Values are RFC 9651 Dictionaries read by ``http-sf``; every read is bounded."""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import compress
from typing import NamedTuple

import http_sf

from .lexer import CONTENT_SIGNAL
from .pagerobots import HEAD_BYTES, header_directives, meta_tags, tag_directives
from .urlpattern import normalize_lines, wildcard_matches

#: Bytes of preference values a robots.txt group reads, its values together in file order. A value past it states
#: nothing, as one that fails to parse: real ones are tens of bytes, and this bounds the Dictionary parser's work
#: (about a microsecond a byte at worst) on hostile files.
MAX_VALUE_BYTES = 100 * 1024

#: Bytes of a response header's value read; a longer one states nothing. Headers are read on the reactor, for every
#: response: real values are tens of bytes, and a hostile 100 KiB one takes the Dictionary parser tens of ms.
MAX_HEADER_BYTES = 1024

# The labels each source decides, in one place (the usage page tabulates them). AIPREF labels are taken as written,
# so that a label a later revision of the vocabulary adds works unchanged.
#: Content-Signal keys (contentsignals.org) and the labels each decides: ``ai-train`` (any AI training) decides
#: AIPREF's ``train-ai`` (generative AI training) too, a no for the broader use being a no for the narrower.
CONTENT_SIGNAL_LABELS: dict[str, tuple[str, ...]] = {
    "search": ("search",),
    "ai-input": ("ai-input",),
    "ai-train": ("ai-train", "train-ai"),
}
#: What ``tdm-reservation: 1`` (TDMRep: text and data mining rights reserved) disallows.
TDM_RESERVATION_LABELS = ("train-ai", "ai-train", "ai-input")
#: What ``noai`` disallows; ``noimageai`` disallows the same for an image response.
NOAI_LABELS = ("train-ai", "ai-train")

# AIPREF preferences are Tokens y and n (vocab, "Preference Labels"); Content Signals write yes and no.
_AIPREF_VALUES = {"y": True, "n": False}
_SIGNAL_VALUES = {"yes": True, "no": False}
_BLANKS = re.compile(rb"[ \t]+")
# Characters of a value a source keeps: it names the value in a DEBUG line, it need not hold 100 KB of it.
_SHOWN = 200


class UsageSource(NamedTuple):
    """Where a preference was stated: a robots.txt line (*line*, from 1), a response header or a ``<meta>`` tag
    (*where* ``"robots.txt"``, ``"header"`` or ``"meta"``), with its field and value as written (a value longer
    than 200 characters cut there, with "…")."""

    where: str
    field: str
    value: str
    line: int | None = None

    def __str__(self) -> str:
        place = f"robots.txt line {self.line}" if self.where == "robots.txt" else self.where
        return f"{self.field}: {self.value} ({place})"


class UsagePreferences(Mapping[str, bool]):
    """Usage preferences for one URL or response: label -> True (allowed) or False (disallowed); a label no statement
    decides is absent (unknown). Immutable; :meth:`source` says where each came from, :meth:`combine` merges.
    ``UsagePreferences(values, source)`` is one statement of *values*, each label stated by *source*."""

    __slots__ = ("_sources", "_values")

    def __init__(self, values: Mapping[str, bool] | None = None, source: UsageSource | None = None) -> None:
        self._values: dict[str, bool] = dict(values or {})
        # One source for a whole statement, a label's own after combine(): a robots.txt file holds thousands.
        self._sources: dict[str, UsageSource | None] | UsageSource | None = source

    @classmethod
    def _of(cls, values: dict[str, bool], sources: dict[str, UsageSource | None]) -> UsagePreferences:
        preferences = cls.__new__(cls)
        preferences._values, preferences._sources = values, sources
        return preferences

    @classmethod
    def combine(cls, *statements: UsagePreferences) -> UsagePreferences:
        """*statements* about one asset as one, the most restrictive winning (draft-ietf-aipref-vocab, "Combining
        Preferences"): a label is disallowed when any disallows it, else allowed when any allows it; its source is the
        first statement that decided it."""
        stated = [statement for statement in statements if statement]
        if len(stated) <= 1:
            return stated[0] if stated else NO_PREFERENCES
        values: dict[str, bool] = {}
        sources: dict[str, UsageSource | None] = {}
        for statement in stated:
            for label, allowed in statement._values.items():
                known = values.get(label)
                if known is None or (known and not allowed):
                    values[label] = allowed
                    sources[label] = statement.source(label)
        return cls._of(values, sources)

    def allows(self, label: str) -> bool | None:
        """True when *label*'s use is allowed, False when disallowed, None when unknown."""
        return self._values.get(label)

    def source(self, label: str) -> UsageSource | None:
        """Where *label*'s preference was stated; None when unknown (or built without a source)."""
        sources = self._sources
        if isinstance(sources, dict):
            return sources.get(label)
        return sources if label in self._values else None

    def __getitem__(self, label: str) -> bool:
        return self._values[label]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"UsagePreferences({self._values!r})"

    def __str__(self) -> str:
        """The preferences in the AIPREF syntax: ``train-ai=n, search=y``."""
        return ", ".join(f"{label}={'y' if allowed else 'n'}" for label, allowed in self._values.items())

    def _footprint(self) -> int:
        """Roughly the bytes held: the labels, and the sources (with their values' text) once each."""
        size = sys.getsizeof(self) + sys.getsizeof(self._values) + sum(map(sys.getsizeof, self._values))
        sources = self._sources
        if isinstance(sources, dict):
            size += sys.getsizeof(sources)
        distinct = {id(source): source for source in map(self.source, self._values) if source is not None}
        return size + sum(sys.getsizeof(source) + sys.getsizeof(source.value) for source in distinct.values())


#: The preferences of a URL or response that states none.
NO_PREFERENCES = UsagePreferences()


def _dictionary(value: bytes) -> Mapping[str, object]:
    """*value* as an RFC 9651 Dictionary (the last of a duplicated key wins); empty when it fails to parse, which
    states nothing (vocab, "Processing Algorithm")."""
    try:
        parsed = http_sf.parse(value, tltype="dictionary")
    except ValueError:  # StructuredFieldError; nothing a site writes may raise further
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tokens(value: bytes, meanings: Mapping[str, bool]) -> Iterator[tuple[str, bool]]:
    """(key, meaning) of *value*'s members whose value is a Token in *meanings*; parameters are ignored, and any other
    value (a String ``"n"``, a bare key's True, an Inner List) states nothing for that key (vocab, "Processing
    Algorithm")."""
    for key, member in _dictionary(value).items():
        item = member[0] if isinstance(member, tuple) else member
        if isinstance(item, http_sf.Token) and item.data in meanings:
            yield key, meanings[item.data]


def content_usage(value: bytes, source: UsageSource) -> UsagePreferences:
    """An AIPREF preference (``train-ai=n, search=y``): ``y`` and ``n`` Tokens, each label as written."""
    return UsagePreferences(dict(_tokens(value, _AIPREF_VALUES)), source)


def content_signal(value: bytes, source: UsageSource) -> UsagePreferences:
    """A Content-Signal (``search=yes, ai-train=no``): ``yes`` and ``no`` Tokens of the known keys, mapped to the
    labels they decide (CONTENT_SIGNAL_LABELS); other keys are ignored."""
    values: dict[str, bool] = {}
    for key, allowed in _tokens(value, _SIGNAL_VALUES):
        for label in CONTENT_SIGNAL_LABELS.get(key, ()):
            values[label] = allowed
    return UsagePreferences(values, source)


def _disallowing(labels: Iterable[str], source: UsageSource) -> UsagePreferences:
    return UsagePreferences(dict.fromkeys(labels, False), source)


def _field_value(values: Iterable[bytes | str]) -> bytes | None:
    """A header's field lines as one value, joined by commas as HTTP combines them (RFC 9110 §5.3); None when longer
    than MAX_HEADER_BYTES, or absent."""
    lines: list[bytes] = []
    size = 0
    for value in values:
        raw = value if isinstance(value, bytes) else value.encode("utf-8", "replace")
        size += len(raw) + (2 if lines else 0)
        if size > MAX_HEADER_BYTES:
            return None
        lines.append(raw)
    return b", ".join(lines) if lines else None


def _shown(value: bytes) -> str:
    text = value[:_SHOWN].decode("utf-8", "replace")
    return text + "…" if len(value) > _SHOWN else text


def content_usage_header(values: Iterable[bytes | str]) -> UsagePreferences:
    """The ``Content-Usage`` response header's preferences (draft-ietf-aipref-attach), from its field lines."""
    value = _field_value(values)
    if value is None:
        return NO_PREFERENCES
    return content_usage(value, UsageSource("header", "Content-Usage", _shown(value)))


def content_signal_header(values: Iterable[bytes | str]) -> UsagePreferences:
    """The ``Content-Signal`` response header's preferences, read as the robots.txt line is."""
    value = _field_value(values)
    if value is None:
        return NO_PREFERENCES
    return content_signal(value, UsageSource("header", "Content-Signal", _shown(value)))


def tdm_reservation_header(values: Iterable[bytes | str]) -> UsagePreferences:
    """``tdm-reservation: 1`` (TDMRep) disallows TDM_RESERVATION_LABELS; ``0`` (rights not reserved) grants nothing
    the vocabulary could name, so it states nothing."""
    for value in values:
        if (value if isinstance(value, bytes) else value.encode("utf-8", "replace")).strip() == b"1":
            return _disallowing(TDM_RESERVATION_LABELS, UsageSource("header", "tdm-reservation", "1"))
    return NO_PREFERENCES


def _noai(directives: frozenset[str], image: bool, where: str, field: str) -> UsagePreferences:
    """``noai`` (or, for an image, ``noimageai``) among robots *directives*: NOAI_LABELS disallowed."""
    for directive in ("noai", "noimageai") if image else ("noai",):
        if directive in directives:
            return _disallowing(NOAI_LABELS, UsageSource(where, field, directive))
    return NO_PREFERENCES


def page_usage(
    header_values: Callable[[str], Iterable[bytes | str]],
    body: bytes | None,
    robot: str,
    image: bool = False,
    now: float | None = None,
) -> UsagePreferences:
    """What a response states about its own use, combined most-restrictive: its ``Content-Usage``,
    ``Content-Signal``, ``tdm-reservation`` and ``X-Robots-Tag`` (``noai``, for *robot* or all) headers, read by
    *header_values* (a header's field lines by name, as Scrapy's ``Headers.getlist``), and in an HTML *body* the
    ``tdm-reservation`` and robots ``<meta>`` tags; *image* makes ``noimageai`` count."""
    stated = [
        content_usage_header(header_values("Content-Usage")),
        content_signal_header(header_values("Content-Signal")),
        tdm_reservation_header(header_values("tdm-reservation")),
        _noai(header_directives(header_values("X-Robots-Tag"), robot, now), image, "header", "X-Robots-Tag"),
    ]
    # Most heads hold none of the words a usage tag needs: only those are scanned for tags.
    head = body[:HEAD_BYTES].lower() if body else b""
    if b"noai" in head or b"noimageai" in head or b"tdm-reservation" in head:
        tags = list(meta_tags(body))
        if ("tdm-reservation", "1") in tags:
            stated.append(_disallowing(TDM_RESERVATION_LABELS, UsageSource("meta", "tdm-reservation", "1")))
        stated.append(_noai(tag_directives(tags, robot, now), image, "meta", "robots"))
    return UsagePreferences.combine(*stated)


class UsageLines(NamedTuple):
    """A group's Content-Usage and Content-Signal lines, kept unread until asked: a byte of kind (lexer's
    CONTENT_USAGE, CONTENT_SIGNAL) and the line number of each, and their values joined by newlines. Three objects,
    not three a line: a hostile file holds thousands."""

    kinds: bytes
    numbers: array[int]
    values: bytes

    def footprint(self) -> int:
        return sum(map(sys.getsizeof, (self, self.kinds, self.numbers, self.values)))


class UsageRules:
    """A group's ``Content-Usage`` rules, looked up by path as Allow and Disallow are (the longest matching path
    wins, bytes of the normal form counted; rules of one path combine most-restrictive), and its ``Content-Signal``
    lines, which hold for every path; each rule's preferences come combined with the signals, ready to hand out."""

    __slots__ = ("_lengths", "_plain", "_signals", "_wildcard_lasts", "_wildcards")

    def __init__(self, lines: UsageLines) -> None:
        signals: list[UsagePreferences] = []
        paths: list[bytes] = []
        stated: list[UsagePreferences] = []
        left = MAX_VALUE_BYTES
        for kind, line, value in zip(lines.kinds, lines.numbers, lines.values.split(b"\n"), strict=True):
            read = len(value) <= left
            if read:
                left -= len(value)
            field = "Content-Signal" if kind == CONTENT_SIGNAL else "Content-Usage"
            source = UsageSource("robots.txt", field, _shown(value), line) if read else None
            if kind == CONTENT_SIGNAL:
                if source is not None:
                    signals.append(content_signal(value, source))
                continue
            path, preference = _split_rule(value)
            paths.append(path)
            # A rule past the budget still matches its paths, stating nothing there.
            stated.append(NO_PREFERENCES if source is None else content_usage(preference, source))
        self._signals = UsagePreferences.combine(*signals)
        by_pattern: dict[str, list[UsagePreferences]] = {}
        for pattern, statement in zip(
            normalize_lines(b"\n".join(paths)).split("\n") if paths else (), stated, strict=True
        ):
            by_pattern.setdefault(pattern, []).append(statement)
        self._plain: dict[str, UsagePreferences] = {}
        wildcards: list[tuple[int, tuple[str, ...], bool, UsagePreferences]] = []
        for pattern, statements in by_pattern.items():
            preferences = UsagePreferences.combine(*statements, self._signals)
            if "*" in pattern or "$" in pattern:
                # A trailing "*" is implied and an inner "$" is %24 in the normal form, as for Allow and Disallow.
                literal = re.sub(r"\*+", "*", pattern).rstrip("*").removesuffix("$")
                wildcards.append((len(pattern), tuple(literal.split("*")), pattern.endswith("$"), preferences))
            else:
                self._plain[pattern] = preferences
        wildcards.sort(key=_length, reverse=True)
        self._wildcards = tuple(wildcards)
        # A path holds the last piece of any wildcard pattern it matches: one C-speed test spares the others.
        self._wildcard_lasts = tuple(pieces[-1] for _, pieces, _, _ in wildcards)
        self._lengths = tuple(sorted(set(map(len, self._plain)), reverse=True))

    def for_path(self, path: str) -> UsagePreferences:
        """The preferences of the longest rules matching *path* (in the normal form), else the signals alone."""
        found: list[UsagePreferences] = []
        best = -1
        size = len(path)
        for length in self._lengths:
            if length <= size:
                preferences = self._plain.get(path[:length])
                if preferences is not None:
                    best, found = length, [preferences]
                    break
        for length, pieces, anchored, preferences in compress(
            self._wildcards, map(path.__contains__, self._wildcard_lasts)
        ):
            if length < best:
                break
            if path.startswith(pieces[0]) and wildcard_matches(pieces, anchored, path):
                if length > best:
                    best, found = length, []
                found.append(preferences)
        if not found:
            return self._signals
        # Equally long patterns that both match (a plain and a wildcard one): combined, as rules of one path are.
        return found[0] if len(found) == 1 else UsagePreferences.combine(*found)

    def footprint(self) -> int:
        """Roughly the bytes held, for stores bounded in bytes: the tables, and each distinct rule's preferences."""
        held = [self, self._plain, self._wildcards, self._wildcard_lasts, self._lengths]
        size = sum(map(sys.getsizeof, held)) + sum(map(sys.getsizeof, self._plain))
        preferences = {id(self._signals): self._signals}
        preferences.update((id(stated), stated) for stated in self._plain.values())
        for rule in self._wildcards:
            size += sys.getsizeof(rule) + sys.getsizeof(rule[1]) + sum(map(sys.getsizeof, rule[1]))
            preferences[id(rule[3])] = rule[3]
        return size + sum(stated._footprint() for stated in preferences.values())


def _split_rule(value: bytes) -> tuple[bytes, bytes]:
    """A Content-Usage value's path (to its first SP or HTAB: attach, "Processing Content-Usage Rules") and
    preference; a value without a path (no ``/`` first, as earlier drafts wrote) is a rule for ``/``."""
    if not value.startswith(b"/"):
        return b"/", value
    parts = _BLANKS.split(value, 1)
    return parts[0], parts[1] if len(parts) > 1 else b""


def _length(rule: tuple[int, tuple[str, ...], bool, UsagePreferences]) -> int:
    return rule[0]
