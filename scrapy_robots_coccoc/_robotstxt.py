"""``RobotsTxt``: a robots.txt file read the way Coc Coc's robots read it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple
from weakref import ref

from ._ruleset import MEMBER_LINE, RequestRate, Rule, RuleSet, Section, VisitTime, build_ruleset
from ._urlpattern import path_of
from ._useragent import agent_of_line, robot_name

#: Bytes of a robots.txt that are read; RFC 9309 asks crawlers to read at least 500 KiB.
MAX_BYTES = 500 * 1024

_BOM = b"\xef\xbb\xbf"
# Fields are found with bytes.find over the lower-cased file, which runs at C
# speed over comments, blank lines and the HTML some sites serve; each hit is
# then checked to stand at the start of its line.
_USER_AGENT = re.compile(rb"user[- ]?agent[ \t]*:([^\n#]*)")
_SITEMAP = re.compile(rb"site-?map[ \t]*:[ \t]*([^\n#]*)")


def _no_group() -> None:
    return None


class Decision(NamedTuple):
    """Why a URL is allowed or not: the group's agent value that was obeyed
    (None when no group applies) and the rule that decided (None when no
    rule matched, which allows)."""

    allowed: bool
    agent: str | None
    rule: Rule | None


class RobotsTxt:
    """A parsed robots.txt. Build it with :meth:`parse`; it never raises."""

    __slots__ = ("_chosen", "_groups", "sitemaps")

    def __init__(self, groups: dict[str, tuple[Section, ...]], sitemaps: list[str]) -> None:
        # Agent value -> the raw sections of every group naming it. Rule sets
        # are built from them on demand and kept in a bounded cache shared by
        # all files, so a crawl holding 100,000 robots.txt files keeps them
        # compact and only the origins being crawled expanded.
        self._groups = groups
        # The last robot asked about and a weak reference to its RuleSet.
        self._chosen: tuple[str, Callable[[], RuleSet | None]] = ("", _no_group)
        #: Sitemap URLs in file order, duplicates removed.
        self.sitemaps: list[str] = sitemaps

    @classmethod
    def parse(cls, body: bytes | str) -> RobotsTxt:
        """Parse a robots.txt body; bytes are UTF-8, only the first 500 KiB count."""
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        body = body[:MAX_BYTES]
        if body.startswith(_BOM):
            body = body[len(_BOM) :]
        if b"\r" in body:
            body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lower = body.lower()
        groups: dict[str, list[Section]] = {}
        agent_lines = _field_lines(lower, b"user", _USER_AGENT)
        run: list[str] = []
        starts_run = True
        newlines, counted_to = 0, 0
        for index, (line_end, match) in enumerate(agent_lines):
            if starts_run:
                run = []
            agent = agent_of_line(match.group(1))
            if agent and agent not in run:
                run.append(agent)
                groups.setdefault(agent, [])
            next_start = agent_lines[index + 1][1].start() if index + 1 < len(agent_lines) else len(body)
            # A User-agent line after a member line starts a new group.
            starts_run = MEMBER_LINE.search(lower, line_end, next_start) is not None
            if starts_run and run:
                newlines += body.count(b"\n", counted_to, line_end)
                counted_to = line_end
                section = (newlines + 1, body[line_end:next_start])
                for name in run:
                    groups[name].append(section)
        sitemaps = {
            body[match.start(1) : match.end(1)].strip().decode("utf-8", "replace"): None
            for _, match in _field_lines(lower, b"site", _SITEMAP)
        }
        sitemaps.pop("", None)
        return cls({agent: tuple(sections) for agent, sections in groups.items()}, list(sitemaps))

    def allowed(self, url: str, user_agent: str) -> bool:
        """Return whether the robot named by *user_agent* may fetch *url*."""
        chosen_for, ruleset_ref = self._chosen
        ruleset = ruleset_ref() if chosen_for == user_agent else None
        if ruleset is None:
            ruleset = self.group_for(user_agent)
            if ruleset is None:
                return True
        path = path_of(url)
        found = ruleset.match(path)
        return found is None or found[0] or path == "/robots.txt"

    def explain(self, url: str, user_agent: str) -> Decision:
        """Return the decision for *url* with the group and rule behind it."""
        group = self.group_for(user_agent)
        if group is None:
            return Decision(True, None, None)
        path = path_of(url)
        rule = None if path == "/robots.txt" else group.decide(path)
        return Decision(rule is None or rule.allow, group.agent, rule)

    def group_for(self, user_agent: str) -> RuleSet | None:
        """Return the rules the robot obeys: the group whose agent value is the
        longest prefix of its name, else ``*``, else None."""
        name = robot_name(user_agent)
        agent = next((name[:end] for end in range(len(name), 0, -1) if name[:end] in self._groups), "*")
        if agent not in self._groups:
            self._chosen = (user_agent, _no_group)
            return None
        ruleset = build_ruleset(agent, self._groups[agent])
        self._chosen = (user_agent, ref(ruleset))
        return ruleset

    def crawl_delay(self, user_agent: str) -> float | None:
        """Return the Crawl-delay of the robot's group in seconds, as written."""
        group = self.group_for(user_agent)
        return None if group is None else group.crawl_delay

    def request_rate(self, user_agent: str) -> RequestRate | None:
        """Return the Request-rate of the robot's group (extended standard)."""
        group = self.group_for(user_agent)
        return None if group is None else group.request_rate

    def visit_time(self, user_agent: str) -> VisitTime | None:
        """Return the Visit-time of the robot's group (extended standard)."""
        group = self.group_for(user_agent)
        return None if group is None else group.visit_time


def _field_lines(lower: bytes, word: bytes, field: re.Pattern[bytes]) -> list[tuple[int, re.Match[bytes]]]:
    """Return (end of line, match) for each line that starts with *field*."""
    found = []
    pos = lower.find(word)
    while pos >= 0:
        line_start = lower.rfind(b"\n", 0, pos) + 1
        if pos == line_start or not lower[line_start:pos].strip():
            match = field.match(lower, pos)
            if match:
                line_end = lower.find(b"\n", pos)
                found.append((len(lower) if line_end < 0 else line_end, match))
        pos = lower.find(word, pos + 1)
    return found
