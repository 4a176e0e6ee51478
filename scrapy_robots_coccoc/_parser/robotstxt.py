"""``RobotsTxt``: a robots.txt file read the way Coc Coc's robots read it."""

from __future__ import annotations

import re
import sys
from typing import NamedTuple

from .lexer import END_SPACE, MEMBER_LINE, fold_case, member_field
from .ruleset import RequestRate, Rule, RuleSet, Section, VisitTime
from .urlpattern import path_of
from .usage import NO_PREFERENCES, UsagePreferences
from .useragent import EXACT, agent_key, robot_name

#: Bytes of a robots.txt that are read; RFC 9309 §2.5 asks crawlers to read at least 500 KiB.
MAX_BYTES = 500 * 1024

_BOM = b"\xef\xbb\xbf"
# One pass finds User-agent values (group 1), Sitemap values (group 2) and RSL License values (group 3), the last two
# site-wide. As Google robots.cc (KeyIsUserAgent, KeyIsSitemap): "useragent", "user agent" (only with its colon, else
# three words) and "site-map" too.
_AGENT_OR_SITEWIDE = re.compile(
    rb"\n[ \t]*(?=[uUsSlL])(?:(?:%s[ \t]*:|%s[ \t]+(?=[^\s:#]+%s(?:#|\n|\Z)))[ \t]*([^\n#]*)|%s|%s)"
    % (
        fold_case(rb"user[- ]?agent"),
        fold_case(rb"user-?agent"),
        END_SPACE,
        member_field(rb"site-?map"),
        member_field(rb"license"),
    )
)


class Decision(NamedTuple):
    """Why a URL is allowed or not: the agent value of the group obeyed and the rule that decided (None: none did)."""

    allowed: bool
    agent: str | None
    rule: Rule | None


class RobotsTxt:
    """A parsed robots.txt. Build it with :meth:`parse`; it never raises."""

    __slots__ = ("_chosen", "_groups", "_licenses", "_sitemaps", "truncated")

    def __init__(
        self,
        groups: dict[str, Section | tuple[Section, ...] | RuleSet],
        sitemaps: list[str],
        truncated: bool = False,
        licenses: list[str] | None = None,
    ) -> None:
        # Group key -> its groups' section(s), replaced by their RuleSet when first obeyed: built only if used.
        self._groups = groups
        self._chosen: tuple[str | None, RuleSet | None] = (None, None)
        # One string rather than a list of them: a store holds many files.
        self._sitemaps = "\n".join(sitemaps)
        self._licenses = "\n".join(licenses or ())
        #: Whether the body was longer than MAX_BYTES, so only its first 500 KiB (to the last whole line) were read.
        self.truncated = truncated

    @classmethod
    def parse(cls, body: bytes | str) -> RobotsTxt:
        """Parse a robots.txt body (bytes are UTF-8; only the first 500 KiB count) in time linear in its size."""
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        truncated = len(body) > MAX_BYTES
        if truncated:
            body = _cut(body)
        if body.startswith(_BOM):
            body = body[len(_BOM) :]
        if b"\r" in body:
            body = body.replace(b"\r\n", b"\n")
            if b"\r" in body:
                body = body.replace(b"\r", b"\n")
        text = b"\n" + body
        groups: dict[str, list[Section]] = {}
        agent_lines = []
        sitemaps: dict[str, None] = {}
        licenses: dict[str, None] = {}
        for match in _AGENT_OR_SITEWIDE.finditer(text):
            if match[1] is not None:
                agent_lines.append(match)
            elif match[2] is not None:
                sitemaps[match[2].strip().decode("utf-8", "replace")] = None
            else:
                licenses[match[3].strip().decode("utf-8", "replace")] = None
        run: dict[str, None] = {}
        starts_run = True
        newlines, counted_to = 0, 0
        for index, match in enumerate(agent_lines):
            if starts_run:
                run = {}
            key = agent_key(match[1])
            if key is not None:
                run[key] = None
            line_end = match.end()
            next_start = agent_lines[index + 1].start() if index + 1 < len(agent_lines) else len(text)
            # A User-agent line after a member line starts a new group.
            starts_run = MEMBER_LINE.search(text, line_end, next_start) is not None
            # The last group stands even without rules (RFC 9309 §2.1): its robots obey it, not "*".
            if (starts_run or next_start == len(text)) and run:
                newlines += text.count(b"\n", counted_to, line_end)
                counted_to = line_end
                section = b"%d" % newlines + text[line_end:next_start]
                for key in run:
                    groups.setdefault(key, []).append(section)
        sitemaps.pop("", None)
        licenses.pop("", None)
        return cls(
            {key: sections[0] if len(sections) == 1 else tuple(sections) for key, sections in groups.items()},
            list(sitemaps),
            truncated,
            list(licenses),
        )

    @property
    def sitemaps(self) -> list[str]:
        """Sitemap URLs in file order, duplicates removed."""
        return self._sitemaps.split("\n") if self._sitemaps else []

    @property
    def licenses(self) -> list[str]:
        """RSL ``License`` URLs (rslstandard.org: the licence terms of the site's content), in file order, duplicates
        removed; site-wide, like Sitemap lines."""
        return self._licenses.split("\n") if self._licenses else []

    def footprint(self) -> int:
        """An estimate of the bytes this parsed file holds, built rule sets included, for stores bounded in bytes."""
        groups = self._groups
        size = (
            sys.getsizeof(self) + sys.getsizeof(groups) + sys.getsizeof(self._sitemaps) + sys.getsizeof(self._licenses)
        )
        size += sum(map(sys.getsizeof, groups))
        seen: set[int] = set()
        for group in groups.values():
            if isinstance(group, RuleSet):
                size += group.footprint()
                continue
            if isinstance(group, tuple):
                size += sys.getsizeof(group)
            for section in (group,) if isinstance(group, bytes) else group:
                if id(section) not in seen:
                    seen.add(id(section))
                    size += sys.getsizeof(section)
        return size

    def allowed(self, url: str, user_agent: str) -> bool:
        """Return whether the robot named by *user_agent* may fetch *url*."""
        chosen_for, ruleset = self._chosen
        if chosen_for != user_agent:
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

    def usage(self, url: str, user_agent: str) -> UsagePreferences:
        """Return the usage preferences the robot's group states for *url*: its longest matching ``Content-Usage``
        rules (draft-ietf-aipref-attach) combined with its ``Content-Signal`` lines; none for a URL it forbids, as
        preferences attach only to what may be crawled."""
        group = self.group_for(user_agent)
        if group is None or not group.states_usage:
            return NO_PREFERENCES
        path = path_of(url)
        found = group.match(path)
        if found is not None and not found[0] and path != "/robots.txt":
            return NO_PREFERENCES
        return group.usage(path)

    def group_for(self, user_agent: str) -> RuleSet | None:
        """Return the rules the robot obeys: the group whose agent value longest matches its name, else ``*``."""
        chosen_for, ruleset = self._chosen
        if chosen_for == user_agent:
            # Asked again (Crawl-delay, Request-rate, explain): last time's answer, no lookup per name prefix.
            return ruleset
        key = self._key_for(robot_name(user_agent))
        ruleset = None
        if key is not None:
            group = self._groups[key]
            if isinstance(group, RuleSet):
                ruleset = group
            else:
                sections = (group,) if isinstance(group, bytes) else group
                ruleset = self._groups[key] = RuleSet(key.removeprefix(EXACT), sections)
        self._chosen = (user_agent, ruleset)
        return ruleset

    def _key_for(self, name: str) -> str | None:
        groups = self._groups
        # A value that is not a plain token matches only that exact name, so it beats any prefix of it.
        if EXACT + name in groups:
            return EXACT + name
        # A token matches every name it is a prefix of (docs/contract.md); the longest wins, "*" when none does.
        for end in range(len(name), 0, -1):
            if name[:end] in groups:
                return name[:end]
        return "*" if "*" in groups else None

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


def _cut(body: bytes) -> bytes:
    """The first MAX_BYTES of *body* less the line they cut: ``Allow: /public`` cut to ``Allow: /`` opens the site."""
    if body[MAX_BYTES] in b"\r\n":
        return body[:MAX_BYTES]
    head = body[:MAX_BYTES]
    return head[: max(head.rfind(b"\n"), head.rfind(b"\r")) + 1]
