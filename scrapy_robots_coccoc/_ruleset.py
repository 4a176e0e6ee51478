"""The rules of one user agent, merged from every group that names it, and
the "most specific rule wins" decision."""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from datetime import time
from typing import NamedTuple

from ._urlpattern import NEEDS_NORMALIZING, Matcher, pattern_from_bytes


class Rule(NamedTuple):
    """One Allow or Disallow line: its pattern (normalised) and line number."""

    allow: bool
    pattern: str
    line: int

    def __str__(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern} (line {self.line})"


class RequestRate(NamedTuple):
    """``Request-rate: 1/5`` of the extended standard: *requests* per *seconds*,
    only between *start* and *end* (UTC) when a window follows (``1/10s 0600-0845``)."""

    requests: int
    seconds: float
    start: time | None = None
    end: time | None = None


class VisitTime(NamedTuple):
    """``Visit-time: 0600-0845`` of the extended standard, in UTC."""

    start: time
    end: time


#: The member lines of a group as found in the file: the line number of the
#: line before them and their raw bytes, each line led by its newline.
Section = tuple[int, bytes]

_ALLOW, _DISALLOW, _CRAWL_DELAY, _REQUEST_RATE, _VISIT_TIME = range(5)
MEMBER_FIELDS = {
    b"allow": _ALLOW,
    b"disallow": _DISALLOW,
    # Google robots.cc (KeyIsDisallow) accepts these misspellings of disallow.
    b"dissallow": _DISALLOW,
    b"dissalow": _DISALLOW,
    b"disalow": _DISALLOW,
    b"diasllow": _DISALLOW,
    b"disallaw": _DISALLOW,
    b"crawl-delay": _CRAWL_DELAY,
    b"crawldelay": _CRAWL_DELAY,
    b"request-rate": _REQUEST_RATE,
    b"visit-time": _VISIT_TIME,
}
# The spellings met most, looked up before lower-casing.
MEMBER_FIELDS.update({field.capitalize(): kind for field, kind in MEMBER_FIELDS.items()})
MEMBER_FIELDS[b"Crawl-Delay"] = _CRAWL_DELAY


def fold_case(words: bytes) -> bytes:
    """Return a case-sensitive regular expression matching *words* in any case:
    ``re.IGNORECASE`` costs four times as much on every line tried."""
    return re.sub(rb"[a-z]", lambda m: b"[" + m[0] + m[0].upper() + b"]", words)


def field_line(fields: bytes, capture: bool = True) -> bytes:
    """Return the regular expression of a line holding one of *fields* and its value.

    Field names are compared whole (``Disallowed:`` is no Disallow line). The
    colon may be missing when white space separates the name from a value of
    a single word, as Google robots.cc (GetKeyAndValueFrom) accepts:
    ``disallow /``. The leading newline is a literal that lets the regular
    expression engine skip from line to line at C speed. The value is
    captured without the white space around it; the field name only when
    *capture* is true.
    """
    name = (b"(" if capture else b"(?:") + fold_case(fields) + b")"
    separator = rb"(?:[ \t]*:|[ \t]+(?=[^\s:#]+[ \t]*(?:#|\n|\Z)))[ \t]*"
    # Lines that cannot start with a field are left at their first character.
    initials = bytes(sorted({word[0] for word in re.sub(rb"[^a-z|]", b"", fields.lower()).split(b"|") if word}))
    first = rb"(?=[" + initials + initials.upper() + rb"])"
    return rb"\n[ \t]*" + first + name + separator + rb"([^\s#](?:[^#\n]*[^\s#])?|)"


def _fields(kinds: range) -> bytes:
    return b"|".join(re.escape(f) for f, kind in MEMBER_FIELDS.items() if f.islower() and kind in kinds)


MEMBER_LINE = re.compile(field_line(_fields(range(5))))
# Allow, Disallow and extension values are read with one C-speed findall each.
_ALLOW_LINE = re.compile(field_line(_fields(range(_ALLOW, _ALLOW + 1)), capture=False))
_DISALLOW_LINE = re.compile(field_line(_fields(range(_DISALLOW, _DISALLOW + 1)), capture=False))
_EXTENSION_LINE = re.compile(field_line(_fields(range(_CRAWL_DELAY, 5))))
_PREFILTER_MAX = 64
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WINDOW = re.compile(r"(\d{1,2}):?(\d\d)\s*(?:-|\s)\s*(\d{1,2}):?(\d\d)")


class RuleSet:
    """What a robot obeys once its group is chosen.

    Plain patterns (no ``*``, no final ``$``) match when they are a prefix of
    the path, so the longest one is found by looking up the path's prefixes
    of each pattern length in a dict; wildcard patterns are tried longest
    first, only while they can still beat that. A single ``str.startswith``
    over every literal prefix answers the common "no rule matches" case.
    """

    __slots__ = (
        "_lengths",
        "_plain",
        "_prefixes",
        "_sections",
        "_wildcards",
        "agent",
        "crawl_delay",
        "request_rate",
        "visit_time",
    )

    def __init__(self, agent: str, sections: tuple[Section, ...]) -> None:
        self.agent = agent
        self._sections = sections
        self.crawl_delay: float | None = None
        self.request_rate: RequestRate | None = None
        self.visit_time: VisitTime | None = None
        text = b"\n".join(chunk for _, chunk in sections)
        for field, value in _EXTENSION_LINE.findall(text):
            self._read_extension(MEMBER_FIELDS[field.lower()], value.decode("ascii", "replace"))
        plain: dict[str, bool] = {}
        wildcards: list[tuple[int, bool, Matcher]] = []
        # Disallow first, so that an Allow of the same pattern replaces it
        # (RFC 9309 §2.2.2: Allow wins a tie).
        for allow, values in ((False, _DISALLOW_LINE.findall(text)), (True, _ALLOW_LINE.findall(text))):
            for pattern in _patterns(values):
                if isinstance(pattern, str):
                    plain[pattern] = allow
                else:
                    wildcards.append((len(pattern.pattern), allow, pattern))
        # An empty Disallow allows everything; an empty Allow is ignored.
        plain.pop("", None)
        # Longest first, and Allow before Disallow of the same length (RFC 9309 §2.2.2).
        wildcards.sort(key=lambda w: (w[0], w[1]), reverse=True)
        self._plain = plain
        self._wildcards = wildcards
        self._lengths = sorted({len(p) for p in plain}, reverse=True)
        prefixes = (*plain, *{w[2].literal for w in wildcards})
        # One startswith over many prefixes costs more than it saves.
        self._prefixes = prefixes if len(prefixes) <= _PREFILTER_MAX else ("",)

    def _read_extension(self, kind: int, text: str) -> None:
        if not text:
            return
        if kind == _CRAWL_DELAY:
            if self.crawl_delay is None:
                self.crawl_delay = parse_delay(text)
        elif kind == _REQUEST_RATE:
            if self.request_rate is None:
                self.request_rate = parse_request_rate(text)
        elif self.visit_time is None:
            self.visit_time = parse_visit_time(text)

    def match(self, path: str) -> tuple[bool, str] | None:
        """Return (allow, pattern) of the most specific rule matching *path*."""
        if not path.startswith(self._prefixes):
            return None
        best: tuple[bool, str] | None = None
        best_length = -1
        plain = self._plain
        size = len(path)
        for length in self._lengths:
            if length <= size:
                allow = plain.get(path[:length])
                if allow is not None:
                    best, best_length = (allow, path[:length]), length
                    break
        for length, allow, matcher in self._wildcards:
            if length < best_length or (length == best_length and (best[0] or not allow)):  # type: ignore[index]
                break
            if matcher.needle in path and matcher.matches(path):
                return allow, matcher.pattern
        return best

    def decide(self, path: str) -> Rule | None:
        """Return the most specific rule matching *path*, with its line number."""
        found = self.match(path)
        return None if found is None else Rule(found[0], found[1], self._line_of(*found))

    def _line_of(self, allow: bool, pattern: str) -> int:
        # Line numbers are only wanted to explain a decision, so they are
        # looked up then instead of being stored for every rule.
        for line_before, chunk in self._sections:
            for number, line in enumerate(chunk.split(b"\n")[1:], line_before + 1):
                found = MEMBER_LINE.match(b"\n" + line)
                if found and (MEMBER_FIELDS[found[1].lower()] == _ALLOW) == allow:
                    value = found[2]
                    if value and pattern_from_bytes(value) == pattern:
                        return number
        return 0

    def footprint(self) -> int:
        """Roughly the bytes this rule set holds, for caches bounded in bytes."""
        return 400 + 120 * (len(self._plain) + len(self._wildcards)) + sum(len(c) for _, c in self._sections)


_MATCHERS: dict[str, Matcher] = {}
_MATCHERS_MAX = 8192
_MATCHER_CACHED_CHARS = 256


def _patterns(values: list[bytes]) -> list[str | Matcher]:
    """Return rule values in the normal form: a str when the pattern is a
    plain prefix, else its Matcher. Values already in the normal form, the
    common case, are decoded all at once at C speed."""
    if not values:
        return []
    joined = b"\n".join(values)
    if NEEDS_NORMALIZING.search(joined) is None:
        patterns = joined.decode("ascii").split("\n")
    else:
        patterns = [pattern_from_bytes(value) for value in values]
    if b"*" not in joined and b"$" not in joined:
        return patterns  # type: ignore[return-value]
    return [_matcher(p) if "*" in p or p.endswith("$") else p for p in patterns]


def _matcher(pattern: str) -> Matcher:
    """Each distinct wildcard pattern is compiled once while it is in a cache
    of at most 8,192 patterns of at most 256 characters (so bounded in
    bytes); a full cache is emptied, not scanned, so its cost stays flat."""
    matcher = _MATCHERS.get(pattern)
    if matcher is None:
        matcher = Matcher(pattern)
        if len(pattern) <= _MATCHER_CACHED_CHARS:
            if len(_MATCHERS) >= _MATCHERS_MAX:
                _MATCHERS.clear()
            _MATCHERS[pattern] = matcher
    return matcher


class RuleSetCache:
    """Rule sets keyed by content, so that identical groups of different files
    share one, least recently used first out once *budget* bytes are held.

    Each RobotsTxt keeps the rule sets it built, so a crawl with more sites
    than this cache holds rebuilds nothing: the cache only shares.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self._entries: OrderedDict[tuple[str, tuple[Section, ...]], tuple[RuleSet, int]] = OrderedDict()

    def get(self, agent: str, sections: tuple[Section, ...]) -> RuleSet:
        """Return the RuleSet of *sections*, built now unless one is held."""
        key = (agent, sections)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            return entry[0]
        ruleset = RuleSet(agent, sections)
        size = ruleset.footprint()
        if size <= self.budget:
            self._entries[key] = (ruleset, size)
            self.held += size
            while self.held > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.held -= dropped
        return ruleset

    def clear(self) -> None:
        self._entries.clear()
        self.held = 0


#: Shared by every RobotsTxt of the process.
RULESETS = RuleSetCache(16 * 1024 * 1024)


def parse_delay(text: str) -> float | None:
    """Return a Crawl-delay in seconds, or None when it is not a number >= 0."""
    try:
        delay = float(text)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


def parse_request_rate(text: str) -> RequestRate | None:
    """Return ``n/m`` (``m`` may end in s, m, h or d), optionally followed by a
    ``HHMM-HHMM`` window (extended standard), as a RequestRate, or None."""
    rate, _, window = text.strip().partition(" ")
    requests, slash, period = rate.partition("/")
    period = period.strip().lower()
    unit = _SECONDS_PER_UNIT.get(period[-1:], 0)
    if unit:
        period = period[:-1]
    try:
        count, seconds = int(requests), float(period) * (unit or 1)
    except ValueError:
        return None
    if not slash or count <= 0 or not (math.isfinite(seconds) and seconds > 0):
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
