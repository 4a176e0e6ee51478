"""What the crawl says about robots.txt: a line per origin when its rules are known, a log line and a signal per
dropped request, and at close the origins where robots.txt forbade everything."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy import signals

from ..exceptions import OriginUnavailable, RobotsTxtForbidden, UsageDisallowed
from ..signals import robotstxt_request_dropped
from . import compat

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.exceptions import IgnoreRequest

    from .._parser import RobotsTxt
    from .pacing import CrawlDelays

logger = logging.getLogger(__name__)

#: Origins named at most in the close WARNING.
NAMED_ORIGINS = 10


def drop_kind(reason: IgnoreRequest) -> str:
    """The kind of a drop, as the signal and the log name it."""
    if isinstance(reason, RobotsTxtForbidden):
        return "forbidden"
    if isinstance(reason, UsageDisallowed):
        return "usage"
    if isinstance(reason, OriginUnavailable):
        return "unavailable"
    return "fault"


def _usage_of(robots: RobotsTxt, origin: str, agent: str) -> str:
    """The usage preferences of the robot's group, for the origin's line: those of ``/``, or that some paths have
    their own; nothing when the group states none."""
    group = robots.group_for(agent)
    if group is None or not group.states_usage:
        return ""
    home = robots.usage(f"{origin}/", agent)
    return f"; usage preferences for /: {home}" if home else "; usage preferences for some paths, none for /"


class CrawlReport:
    """Makes robots.txt's decisions visible in the log, the stats and signals."""

    def __init__(self, crawler: Crawler, delays: CrawlDelays | None, max_origins: int) -> None:
        self._crawler = crawler
        self._delays = delays
        self._max_origins = max(1, max_origins)
        self._known: OrderedDict[str, None] = OrderedDict()  # origins whose rules were logged
        # Origin -> [allowed, forbidden] requests, bounded like the store.
        self._decided: OrderedDict[str, list[int]] = OrderedDict()
        self._start_requests = [0, 0]  # allowed, forbidden
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    def rules_known(self, origin: str, request: Request, robots: RobotsTxt, agent: str) -> None:
        """Log, once per origin, the group the robot obeys and the Crawl-delay enforced."""
        if origin in self._known:
            return
        self._known[origin] = None
        if len(self._known) > self._max_origins:
            self._known.popitem(last=False)
        group = robots.group_for(agent)
        if group is None:
            obeyed = f"no group for {agent!r} and no '*' group: everything allowed"
        else:
            count = group.rule_count()
            obeyed = f"{agent!r} obeys group {group.agent!r} ({count} rule{'' if count == 1 else 's'})"
        delay = "not paced (ROBOTSTXT_CRAWL_DELAY_ENABLED is off)"
        if self._delays is not None:
            written, kept = self._delays.delay_for(robots, agent)
            delay = self._delays.describe(written, kept)
            engine = self._crawler.engine
            slot = 0.0 if engine is None or not kept else compat.slot_delay(engine, request)
            if slot > kept:
                delay += f", requests {slot:g} s apart: DOWNLOAD_DELAY at its longest draw is larger"
        listed = len(robots.sitemaps)
        logger.info(
            "robots.txt of %s: %s; Crawl-delay %s; %d sitemap%s listed%s",
            origin,
            obeyed,
            delay,
            listed,
            "" if listed == 1 else "s",
            _usage_of(robots, origin, agent),
            extra={"spider": self._crawler.spider},
        )

    def decided(self, origin: str, request: Request, allowed: bool) -> None:
        """Count a decision, for the close report (a sitemap seed asks for no page: not counted)."""
        if request.meta.get("robotstxt_only"):
            return
        counts = self._decided.get(origin)
        if counts is None:
            counts = self._decided[origin] = [0, 0]
            if len(self._decided) > self._max_origins:
                self._decided.popitem(last=False)
        counts[not allowed] += 1
        if request.meta.get("is_start_request"):
            self._start_requests[not allowed] += 1

    def dropped(self, request: Request, reason: IgnoreRequest) -> None:
        """A request dropped by robots.txt: a DEBUG line and :data:`robotstxt_request_dropped`."""
        kind = drop_kind(reason)
        text = str(reason) if kind in ("forbidden", "usage") else f"Dropped ({reason})"
        logger.debug(
            "%(reason)s: %(request)s", {"reason": text, "request": request}, extra={"spider": self._crawler.spider}
        )
        self._crawler.signals.send_catch_log(
            signal=robotstxt_request_dropped, request=request, kind=kind, reason=reason
        )

    def _closed(self) -> None:
        forbidden = [(origin, counts[1]) for origin, counts in self._decided.items() if counts[1] and not counts[0]]
        if not forbidden:
            return
        named = ", ".join(f"{origin} ({count})" for origin, count in forbidden[:NAMED_ORIGINS])
        more = f" and {len(forbidden) - NAMED_ORIGINS} more" if len(forbidden) > NAMED_ORIGINS else ""
        allowed_starts, forbidden_starts = self._start_requests
        plainly = ""
        if forbidden_starts and not allowed_starts:
            plainly = f"every start request ({forbidden_starts}) was forbidden, so nothing was crawled from them. "
        logger.warning(
            "robots.txt forbade every request the spider made to %d origin%s: %s%s. %sSee the "
            "'Forbidden by robots.txt' DEBUG lines for the group and rule of each",
            len(forbidden),
            "" if len(forbidden) == 1 else "s",
            named,
            more,
            plainly[:1].upper() + plainly[1:],
            extra={"spider": self._crawler.spider},
        )
