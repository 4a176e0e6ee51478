"""The rules of one user agent, merged from every group that names it, and
the "most specific rule wins" decision."""

from __future__ import annotations

import math
import re
from datetime import time
from functools import lru_cache
from typing import NamedTuple

from ._urlpattern import Matcher, pattern_from_bytes


class Rule(NamedTuple):
    """One Allow or Disallow line: its pattern (normalised) and line number."""

    allow: bool
    pattern: str
    line: int

    def __str__(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern} (line {self.line})"


class RequestRate(NamedTuple):
    """``Request-rate: 1/5`` of the extended standard: *requests* per *seconds*."""

    requests: int
    seconds: float


class VisitTime(NamedTuple):
    """``Visit-time: 0600-0845`` of the extended standard, in UTC."""

    start: time
    end: time


#: The member lines of a group as found in the file: the line number of the
#: line before them and their raw bytes, each line led by its newline.
Section = tuple[int, bytes]

_ALLOW, _DISALLOW, _CRAWL_DELAY, _REQUEST_RATE, _VISIT_TIME = range(5)
MEMBER_FIELDS = {
    b"Allow": _ALLOW,
    b"Disallow": _DISALLOW,
    b"Crawl-delay": _CRAWL_DELAY,
    b"allow": _ALLOW,
    b"disallow": _DISALLOW,
    b"dissallow": _DISALLOW,
    b"disalow": _DISALLOW,
    b"crawl-delay": _CRAWL_DELAY,
    b"crawldelay": _CRAWL_DELAY,
    b"request-rate": _REQUEST_RATE,
    b"visit-time": _VISIT_TIME,
}
# A member line: the leading newline is a literal that lets the regular
# expression engine skip from line to line at C speed.
MEMBER_LINE = re.compile(
    rb"\n[ \t]*(%s)[ \t]*:[ \t]*([^#\n]*)" % b"|".join(re.escape(f) for f in MEMBER_FIELDS), re.IGNORECASE
)
_MAX_PREFILTER = 64
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class RuleSet:
    """What a robot obeys once its group is chosen.

    Plain patterns (no ``*``, no final ``$``) match when they are a prefix of
    the path, so the longest one is found by looking up the path's prefixes
    of each pattern length in a dict; wildcard patterns are tried longest
    first, only while they can still beat that. A single ``str.startswith``
    over every literal prefix answers the common "no rule matches" case.
    """

    __slots__ = (
        "__weakref__",
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
        plain: dict[str, bool] = {}
        wildcards: list[tuple[int, bool, str, str, Matcher]] = []
        for _, chunk in sections:
            for field, value in MEMBER_LINE.findall(chunk):
                kind = MEMBER_FIELDS.get(field)
                if kind is None:
                    kind = MEMBER_FIELDS[field.lower()]
                value = value.rstrip()
                if not value:
                    continue
                if kind > _DISALLOW:
                    self._read_extension(kind, value.decode("ascii", "replace"))
                    continue
                pattern = pattern_from_bytes(value)
                allow = kind == _ALLOW
                if "*" in pattern or pattern[-1] == "$":
                    literal = pattern.split("*", 1)[0].removesuffix("$")
                    wildcards.append((len(pattern), allow, pattern, literal, Matcher(pattern)))
                elif allow or pattern not in plain:
                    plain[pattern] = allow
        wildcards.sort(key=lambda w: (w[0], w[1]), reverse=True)
        self._plain = plain
        self._wildcards = wildcards
        self._lengths = sorted({len(p) for p in plain}, reverse=True)
        prefixes = tuple(plain) + tuple({w[3] for w in wildcards})
        # One startswith over many prefixes costs more than it saves.
        self._prefixes = prefixes if len(prefixes) <= _MAX_PREFILTER else ("",)

    def _read_extension(self, kind: int, text: str) -> None:
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
        for length, allow, pattern, literal, matcher in self._wildcards:
            if length < best_length or (length == best_length and (best[0] or not allow)):  # type: ignore[index]
                break
            if matcher.needle in path and path.startswith(literal) and matcher.matches(path):
                return allow, pattern
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
                    value = found[2].rstrip()
                    if value and pattern_from_bytes(value) == pattern:
                        return number
        return 0


@lru_cache(maxsize=256)
def build_ruleset(agent: str, sections: tuple[Section, ...]) -> RuleSet:
    """Return the RuleSet of these sections. The most recently used ones are
    kept, keyed by content, so identical groups of different files share one."""
    return RuleSet(agent, sections)


def parse_delay(text: str) -> float | None:
    """Return a Crawl-delay in seconds, or None when it is not a number >= 0."""
    try:
        delay = float(text)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


def parse_request_rate(text: str) -> RequestRate | None:
    """Return ``n/m`` (``m`` may end in s, m, h or d) as a RequestRate, or None."""
    requests, slash, period = text.partition("/")
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
    return RequestRate(count, seconds)


def parse_visit_time(text: str) -> VisitTime | None:
    """Return ``HHMM-HHMM`` as a VisitTime, or None."""
    start, dash, end = text.replace(" ", "").partition("-")
    try:
        return VisitTime(_parse_hhmm(start), _parse_hhmm(end)) if dash else None
    except ValueError:
        return None


def _parse_hhmm(text: str) -> time:
    if len(text) != 4 or not text.isdigit():
        raise ValueError(text)
    return time(int(text[:2]), int(text[2:]))
