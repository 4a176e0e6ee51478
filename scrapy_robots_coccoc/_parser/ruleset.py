"""The rules of one user agent, merged from every group naming it, and the "most specific rule wins" decision."""

from __future__ import annotations

import math
import re
import sys
import threading
from array import array
from bisect import bisect_left
from datetime import time
from itertools import accumulate, chain, compress, repeat
from operator import contains, itemgetter
from typing import NamedTuple

from .lexer import (
    ALLOW_FIELD,
    COMMENT,
    CONTENT_USAGE,
    CRAWL_DELAY,
    DISALLOW_FIELD,
    EXTENSION_FIELD,
    MEMBER_FIELDS,
    REQUEST_RATE,
    UNREAD,
    UNREAD_LINE,
    VALUE_END_SPACE,
)
from .urlpattern import normalize_lines, wildcard_matches
from .usage import NO_PREFERENCES, UsageLines, UsagePreferences, UsageRules


class Rule(NamedTuple):
    """One Allow or Disallow line: its pattern (normalised) and line number."""

    allow: bool
    pattern: str
    line: int

    def __str__(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern} (line {self.line})"


class RequestRate(NamedTuple):
    """``Request-rate: 1/5`` (extended standard): *requests* per *seconds*, between *start* and *end* (UTC) if given."""

    requests: int
    seconds: float
    start: time | None = None
    end: time | None = None


class VisitTime(NamedTuple):
    """``Visit-time: 0600-0845`` of the extended standard, in UTC."""

    start: time
    end: time


#: A group's member lines, each led by its newline, after its User-agent line's number: one object, not three.
Section = bytes
_LINE_NUMBER = re.compile(rb"\d+")

#: How a rule line starts: Allow sorts after Disallow, so sorting puts Allow first among equally long patterns.
ALLOW_MARK, DISALLOW_MARK = "+", "!"
_ALLOW_LEAD, _DISALLOW_LEAD = ALLOW_MARK.encode(), DISALLOW_MARK.encode()
_LONG_TEXT = 16 * 1024
# Above this many characters of rules, a sorted array of hashes spares searching the rule text.
_INDEXED_CHARS = 1024
# Past this many plain patterns, nearly every bit of the Bloom filter is set.
_BLOOM_KEYS = 512
_ALL_BITS = (1 << 256) - 1
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_WINDOW = re.compile(r"(\d{1,2}):?(\d\d)\s*(?:-|\s)\s*(\d{1,2}):?(\d\d)")
# Helpers that let map() and compress() run at C speed.
_PATTERN_OF_LINE = itemgetter(slice(1, None))
_LAST = itemgetter(-1)
_PIECES = itemgetter(1)
_FIRST = itemgetter(0)
_STARS = re.compile(r"\*\*+")
# Past this many one-piece patterns, look them up: a search costs as much as the path is long.
_LOOKED_UP = 64
# Below every rank, that of no rule found (-1 long) included.
_NO_RANK = -2
_LOW_BYTE_AT = 0 if sys.byteorder == "little" else 7
_ONE_TO_DIGIT = bytes.maketrans(bytes(range(256)), b"0" + b"1" + b"0" * 254)
# Pattern lengths from the lengths of their lines, which count the mark.
_MINUS_ONE = bytes([0, *range(255)])


def _rule_lines(text: bytes) -> tuple[str, list[tuple[bytes, bytes]], bytes]:
    """*text*'s lines as normal-form rule lines (mark and pattern, else empty), its extensions' (field, value), and
    the text with the lines not read yet marked (for the usage lines' numbers), by C-speed passes: plain
    replacements take the common ``Disallow: /…`` lines, regexes only the lines left."""
    if b"#" in text:
        text = COMMENT.sub(b"", text)
    if UNREAD in text:
        # UNREAD marks lines below: a NUL in the text takes its normal form first.
        text = text.replace(UNREAD, b"%00")
    if b" \n" in text or b"\t\n" in text:
        # So blank lines are empty and a colon-less value ends its line; not by regex, quadratic on long runs.
        text = b"\n".join(map(bytes.rstrip, text.split(b"\n"), repeat(b" \t")))
    text = text.replace(b"\n", b"\n" + UNREAD)
    if len(text) > _LONG_TEXT:
        # Mark empty lines read, sparing each an attempt of every regular expression below (short texts don't gain).
        text = text.replace(UNREAD + b"\n", b"\n")
    text = text.replace(UNREAD + b"Disallow: /", _DISALLOW_LEAD + b"/")
    text = text.replace(UNREAD + b"Allow: /", _ALLOW_LEAD + b"/")
    text = DISALLOW_FIELD.sub(_DISALLOW_LEAD, text)
    text = ALLOW_FIELD.sub(_ALLOW_LEAD, text)
    extensions = EXTENSION_FIELD.findall(text)
    marked = text
    # An empty Disallow allows everything and an empty Allow is ignored: neither is kept.
    text = UNREAD_LINE.sub(b"", text)
    if b"\x0b" in text or b"\x0c" in text:
        text = b"\n".join(map(bytes.rstrip, text.split(b"\n"), repeat(VALUE_END_SPACE)))
    return normalize_lines(text), extensions, marked


#: Bytes all split wildcard patterns may hold: above the 11 MiB one 500 KiB body can need; the newest set stays.
SPLIT_BUDGET = 16 << 20


class _Split(NamedTuple):
    """Wildcard patterns ready for checks: one-piece ones looked up, others with the last piece any match holds."""

    size: int
    prefixes: dict[str, tuple[int, int]]
    prefix_lengths: tuple[int, ...]
    paths: dict[str, tuple[int, int]]
    looked_up_rank: int
    literals: tuple[str, ...]
    rules: tuple[tuple[int, tuple[str, ...], bool, int], ...]
    text: str


# Shared by rule sets with the same wildcards (sites copy rules) and kept out of them (a store holds thousands).
_SPLIT: dict[str, _Split] = {}
_split_bytes = 0
_SPLIT_LOCK = threading.Lock()


def _split(wildcards: str) -> _Split:
    """Split *wildcards* (marked lines, longest first); a rank is twice the pattern's length, plus one for Allow,
    which wins a tie (RFC 9309 §2.2.2)."""
    global _split_bytes
    lines = wildcards.split("\n")
    # A run of "*" is one "*", not empty pieces walked at every check.
    collapsed = _STARS.sub("*", wildcards).split("\n") if "**" in wildcards else lines
    patterns = list(map(_PATTERN_OF_LINE, collapsed))
    # A trailing "*" is implied; an inner "$" is %24 in the normal form, so at most one ends a pattern.
    literals = map(str.rstrip, map(str.rstrip, patterns, repeat("*")), repeat("$"))
    pieces = tuple(map(tuple, map(str.split, literals, repeat("*"))))
    ranks = [2 * len(line) - 2 + (line[0] == ALLOW_MARK) for line in lines]
    anchored = map(str.endswith, patterns, repeat("$"))
    offsets = accumulate(map((1).__add__, map(len, lines)), initial=1)
    rules = tuple(zip(ranks, pieces, anchored, offsets, strict=False))
    prefixes: dict[str, tuple[int, int]] = {}
    paths: dict[str, tuple[int, int]] = {}
    if len(rules) > _LOOKED_UP and _worth_looking_up(pieces):
        searched = []
        for rule in rules:
            rank, parts, whole, offset = rule
            if len(parts) > 1:
                searched.append(rule)
            else:
                # Longest first: the first rank met for a piece is its highest.
                (paths if whole else prefixes).setdefault(parts[0], (rank, offset))
        rules = tuple(searched)
    size = 210 * len(lines) + 2 * len(wildcards)
    split = _Split(
        size,
        prefixes,
        tuple(sorted(set(map(len, prefixes)), reverse=True)),
        paths,
        max(map(_FIRST, chain(prefixes.values(), paths.values())), default=_NO_RANK),
        tuple(map(_LAST, map(_PIECES, rules))),
        rules,
        wildcards,
    )
    with _SPLIT_LOCK:
        if wildcards not in _SPLIT:
            _SPLIT[wildcards] = split
            _split_bytes += size
            while _split_bytes > SPLIT_BUDGET and len(_SPLIT) > 1:
                _split_bytes -= _SPLIT.pop(next(iter(_SPLIT))).size
    return split


def _earliest(hit: tuple[int, int]) -> tuple[int, int]:
    return hit[0], -hit[1]


def _worth_looking_up(pieces: tuple[tuple[str, ...], ...]) -> bool:
    """Whether one-piece patterns are many, of few lengths: a lookup costs a hash per length, a search one a pattern."""
    single = [parts[0] for parts in pieces if len(parts) == 1]
    return len(single) > _LOOKED_UP and len(single) > 4 * len(set(map(len, single)))


def _bloom(keys: list[int]) -> int:
    """The 256-bit Bloom filter of *keys* (bit ``key & 255``; bit 1 always, a harmless false positive), built in C."""
    low_bytes = array("q", keys).tobytes()[_LOW_BYTE_AT::8]
    table = bytes.maketrans(low_bytes, b"\x01" * len(low_bytes))
    return int(table.translate(_ONE_TO_DIGIT)[::-1], 2)


class RuleSet:
    """What a robot obeys: the rules as one string (a line per group line, no object per rule); the path's prefixes
    of each plain pattern length are looked up, wildcard patterns tried longest first while they can win."""

    __slots__ = (
        "_bloom",
        "_hashes",
        "_lengths",
        "_rules",
        "_starts",
        "_usage",
        "_wildcards",
        "agent",
        "crawl_delay",
        "request_rate",
        "visit_time",
    )

    def __init__(self, agent: str, sections: tuple[Section, ...]) -> None:
        self.agent = agent
        self.crawl_delay: float | None = None
        self.request_rate: RequestRate | None = None
        self.visit_time: VisitTime | None = None
        # A section starts with its line number and the rest of its User-agent line: a line holding no rule.
        self._rules, extensions, marked = _rule_lines(b"\n%b\n" % b"\n".join(sections))
        states_usage = False
        for field, value in extensions:
            kind = MEMBER_FIELDS[field.lower()]
            if kind >= CONTENT_USAGE:
                states_usage = True
            else:
                self._read_extension(kind, value.decode("ascii", "replace"))
        if len(sections) == 1:
            self._starts: tuple[int, ...] = (0, int(_LINE_NUMBER.match(sections[0])[0]))  # type: ignore[index]
        else:
            starts: list[int] = []
            index = 0
            for section in sections:
                starts += (index, int(_LINE_NUMBER.match(section)[0]))  # type: ignore[index]
                index += section.count(b"\n") + 1
            self._starts = tuple(starts)
        # Kept unread (most crawls never ask) until usage() first asks; None for the many groups that state none.
        self._usage: UsageLines | UsageRules | None = self._usage_lines(marked) if states_usage else None
        self._index()

    def _index(self) -> None:
        rules = self._rules
        patterns = set(rules.split("\n"))
        patterns.discard("")
        self._wildcards = ""
        if "*" in rules or "$" in rules:
            lines = list(patterns)
            wildcards = {
                *compress(lines, map(contains, lines, repeat("*"))),
                *compress(lines, map(contains, lines, repeat("$"))),
            }
            if wildcards:
                patterns -= wildcards
                # Longest first, Allow before Disallow of one length (RFC 9309 §2.2.2), each pattern once.
                text = "\n".join(sorted(sorted(wildcards, reverse=True), key=len, reverse=True))
                # The copy _SPLIT holds, if any: one for all rule sets, and found there by identity, not compared.
                known = _SPLIT.get(text)
                self._wildcards = text if known is None else known.text
        # Bytes when every length fits one: a fifth of a tuple's size.
        ordered = sorted(set(map(len, patterns)), reverse=True)
        if not ordered or ordered[0] < 256:
            self._lengths: bytes | tuple[int, ...] = bytes(ordered).translate(_MINUS_ONE)
        else:
            self._lengths = tuple(length - 1 for length in ordered)
        keys = list(map(hash, map(_PATTERN_OF_LINE, patterns)))
        # Most prefixes of a path are no pattern, and a bit test costs less than searching the text.
        self._bloom = _bloom(keys) if len(keys) <= _BLOOM_KEYS else _ALL_BITS
        self._hashes = array("q", sorted(keys)) if len(rules) > _INDEXED_CHARS else None

    def _usage_lines(self, text: bytes) -> UsageLines:
        """The Content-Usage and Content-Signal lines of *text* (as _rule_lines marks it) with their line numbers."""
        kinds = bytearray()
        numbers = array("l")
        values = []
        starts = self._starts
        newlines = counted = position = 0
        for found in EXTENSION_FIELD.finditer(text):
            kind = MEMBER_FIELDS[found[1].lower()]
            if kind < CONTENT_USAGE:
                continue
            newlines += text.count(b"\n", counted, found.start())
            counted = found.start()
            # The newline ending the line before is counted: the line's index is one less. Mapped through its
            # section as _line_of maps a rule, walking on from the last line's section (the lines come in order).
            index = newlines - 1
            while position + 2 < len(starts) and starts[position + 2] <= index:
                position += 2
            kinds.append(kind)
            numbers.append(starts[position + 1] + index - starts[position])
            values.append(found[2].rstrip(VALUE_END_SPACE))
        return UsageLines(bytes(kinds), numbers, b"\n".join(values))

    @property
    def states_usage(self) -> bool:
        """Whether the group has Content-Usage or Content-Signal lines."""
        return self._usage is not None

    def usage(self, path: str) -> UsagePreferences:
        """The preferences of the group's usage lines for *path* (in the normal form), whether it may be crawled or
        not: the caller decides that. The lines are read on the first call."""
        rules = self._usage
        if rules is None:
            return NO_PREFERENCES
        if not isinstance(rules, UsageRules):
            rules = self._usage = UsageRules(rules)
        return rules.for_path(path)

    def rule_count(self) -> int:
        return sum(1 for line in self._rules.split("\n") if line)

    def __getstate__(self) -> dict[str, object]:
        # String hashes differ from process to process: the index is rebuilt.
        derived = ("_bloom", "_hashes", "_lengths", "_wildcards")
        return {name: getattr(self, name) for name in self.__slots__ if name not in derived}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._index()

    def _read_extension(self, kind: int, text: str) -> None:
        if not text:
            return
        if kind == CRAWL_DELAY:
            if self.crawl_delay is None:
                self.crawl_delay = parse_delay(text)
        elif kind == REQUEST_RATE:
            if self.request_rate is None:
                self.request_rate = parse_request_rate(text)
        elif self.visit_time is None:
            self.visit_time = parse_visit_time(text)

    def match(self, path: str) -> tuple[bool, str] | None:
        """Return (allow, pattern) of the most specific rule matching *path*."""
        best: tuple[bool, str] | None = None
        best_length = -1
        size = len(path)
        hashes, bloom, rules = self._hashes, self._bloom, self._rules
        for length in self._lengths:
            if length > size:
                continue
            prefix = path[:length]
            key = hash(prefix)
            if not bloom >> (key & 255) & 1:
                continue
            if hashes is not None:
                found = bisect_left(hashes, key)
                if found == len(hashes) or hashes[found] != key:
                    continue
            # ALLOW_MARK then DISALLOW_MARK, written out for speed: Allow wins a tie (RFC 9309 §2.2.2).
            if f"\n+{prefix}\n" in rules:
                best, best_length = (True, prefix), length
                break
            if f"\n!{prefix}\n" in rules:
                best, best_length = (False, prefix), length
                break
        wildcards = self._wildcards
        if not wildcards:
            return best
        _, prefixes, lengths, paths, looked_up_rank, literals, split, _ = _SPLIT.get(wildcards) or _split(wildcards)
        best_rank = 2 * best_length + (best is not None and best[0])
        # Of wildcard patterns of one rank the first in the text wins; a plain one beats both (offset -1).
        tie_offset = -1
        if looked_up_rank > best_rank:
            prefixes_of_path = map(path.__getitem__, map(slice, repeat(None), lengths))
            hits = filter(None, chain((paths.get(path),), map(prefixes.get, prefixes_of_path)))
            top = max(hits, key=_earliest, default=None)
            if top is not None and top[0] > best_rank:
                best_rank, tie_offset = top
                best = bool(best_rank & 1), wildcards[tie_offset : tie_offset + (best_rank >> 1)]
        for rank, pieces, anchored, offset in compress(split, map(path.__contains__, literals)):
            if rank <= best_rank and (rank < best_rank or offset > tie_offset):
                break
            if path.startswith(pieces[0]) and wildcard_matches(pieces, anchored, path):
                return bool(rank & 1), wildcards[offset : offset + (rank >> 1)]
        return best

    def decide(self, path: str) -> Rule | None:
        found = self.match(path)
        return None if found is None else Rule(found[0], found[1], self._line_of(*found))

    def _line_of(self, allow: bool, pattern: str) -> int:
        # Only explanations want line numbers: the rule's index, mapped to the file through its section.
        rules = self._rules
        mark = ALLOW_MARK if allow else DISALLOW_MARK
        index = rules.count("\n", 0, rules.index(f"\n{mark}{pattern}\n"))
        starts = self._starts
        position = 0
        while position + 2 < len(starts) and starts[position + 2] <= index:
            position += 2
        return starts[position + 1] + index - starts[position]

    def footprint(self) -> int:
        """Roughly the bytes this rule set holds, for stores bounded in bytes."""
        held = (self, self._rules, self._bloom, self._starts, self._lengths, self._wildcards)
        size = sum(map(sys.getsizeof, held))
        usage = self._usage
        if usage is not None:
            size += usage.footprint()
        return size + (0 if self._hashes is None else sys.getsizeof(self._hashes))


def parse_delay(text: str) -> float | None:
    """Return a Crawl-delay in seconds, or None unless decimal (``float`` reads ``1_0`` as 10, ``1e3`` as 1000)."""
    text = text.strip()
    delay = float(text) if _DECIMAL.fullmatch(text) else math.inf
    return delay if math.isfinite(delay) else None


def parse_request_rate(text: str) -> RequestRate | None:
    """``n/m`` (``m`` may end in s, m, h or d), then perhaps a ``HHMM-HHMM`` window, as a RequestRate; else None."""
    rate, _, window = text.strip().partition(" ")
    requests, slash, period = rate.partition("/")
    period = period.strip().lower()
    unit = _SECONDS_PER_UNIT.get(period[-1:], 0)
    if unit:
        period = period[:-1]
    requests = requests.strip()
    if not (slash and requests.isdecimal() and requests.isascii() and _DECIMAL.fullmatch(period)):
        return None
    count, seconds = int(requests), float(period) * (unit or 1)
    if count <= 0 or not (math.isfinite(seconds) and seconds > 0):
        return None
    hours = parse_visit_time(window) if window else None
    return RequestRate(count, seconds, *hours) if hours else RequestRate(count, seconds)


def parse_visit_time(text: str) -> VisitTime | None:
    """Return ``HHMM-HHMM`` (or ``HHMM HHMM``, as Protego reads it) as a VisitTime, or None."""
    found = _WINDOW.fullmatch(text.strip())
    if found is None:
        return None
    try:
        return VisitTime(time(int(found[1]), int(found[2])), time(int(found[3]), int(found[4])))
    except ValueError:
        return None
