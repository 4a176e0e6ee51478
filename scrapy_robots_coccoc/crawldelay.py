"""Crawl-delay: each origin's consecutive requests start at least its delay
apart, whatever downloader slot Scrapy puts them in."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from datetime import datetime, timezone
from datetime import time as clock
from inspect import isawaitable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from ._robotstxt import RobotsTxt
    from .stores import Store

logger = logging.getLogger(__name__)


class CrawlDelays:
    """Paces each origin (scheme, host, port) by the stricter of its
    Crawl-delay and its Request-rate, capped at ``ROBOTSTXT_MAX_CRAWL_DELAY``.

    Every request of a paced origin reserves its start time, a per-origin
    "next start" kept here, or in the store when the store shares it among
    workers (:class:`~.stores.RedisStore`), and waits for it in the
    middleware, parked: the wait holds no downloader place, and Scrapy's own
    slot delays (``DOWNLOAD_DELAY``, ``DOWNLOAD_SLOTS``, jitter, AutoThrottle)
    apply on top of it, untouched. A refresh that changes the delay paces the
    next request by the new one.
    """

    def __init__(self, crawler: Crawler, max_delay: float, store: Store, max_origins: int) -> None:
        settings = crawler.settings
        self._crawler = crawler
        self._max_delay = max_delay
        self._store = store
        self._max_origins = max(1, max_origins)
        # The project's slot delays, read once (never written): the most a
        # slot can hold a request we release, whatever Scrapy's version
        # draws (+/-50 % before DOWNLOAD_DELAY_JITTER existed).
        self._slot_delays = {
            key: float(slot.get("delay", 0)) for key, slot in settings.getdict("DOWNLOAD_SLOTS").items()
        }
        self._project_delay = settings.getfloat("DOWNLOAD_DELAY")
        self._jitter = max(settings.getfloat("DOWNLOAD_DELAY_JITTER", 0.5), 0.5)
        # Origin -> (its delay, the next start free in this process), least
        # recently used first.
        self._paced: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def delay_for(self, robots: RobotsTxt, agent: str) -> tuple[float, float]:
        """The delay *robots* asks of *agent* (Crawl-delay or the period of
        one request of its Request-rate, the stricter), as written and capped."""
        written = robots.crawl_delay(agent) or 0.0
        rate = robots.request_rate(agent)
        if rate is not None and rate.requests > 0 and _in_window(rate.start, rate.end):
            written = max(written, rate.seconds / rate.requests)
        return written, min(written, self._max_delay)

    async def turn(self, request: Request, origin: str, robots: RobotsTxt, agent: str) -> float:
        """Reserve the next start of *request* to *origin*; return how many
        seconds it must wait for it (0 for an origin that is not paced)."""
        written, delay = self.delay_for(robots, agent)
        known, next_start = self._paced.get(origin, (0.0, 0.0))
        if delay != known:
            self._announce(origin, written, delay)
        if not delay:
            self._paced.pop(origin, None)
            return 0.0
        least, most = self._slot_delay(request)
        if least >= delay:
            return 0.0  # the project's own slot delay is the stricter
        # A released request may still wait for its slot's delay: the spacing
        # covers it, so that transfers start the Crawl-delay apart.
        spacing = delay + most
        now = time.time()
        start = self._store.reserve(origin, spacing)
        if isawaitable(start):
            start = await start
        if start is None:  # the store does not pace: this process does
            start = max(now, next_start)
        self._paced[origin] = (delay, start + spacing)
        self._paced.move_to_end(origin)
        while len(self._paced) > self._max_origins:
            self._paced.popitem(last=False)
        return max(0.0, start - now)

    def _slot_delay(self, request: Request) -> tuple[float, float]:
        """The least and the most the project's own delay may hold *request*
        in its downloader slot after the previous one."""
        if not (self._project_delay or self._slot_delays):
            return 0.0, 0.0
        engine = self._crawler.engine
        assert engine is not None
        delay = self._slot_delays.get(engine.downloader.get_slot_key(request), self._project_delay)
        return delay * max(0.0, 1 - self._jitter), delay * (1 + self._jitter)

    def _announce(self, origin: str, written: float, delay: float) -> None:
        if origin not in self._paced and delay:
            self._crawler.stats.inc_value("robotstxt/crawl_delay/sites")
        capped = " (capped by ROBOTSTXT_MAX_CRAWL_DELAY)" if written > self._max_delay else ""
        logger.info(
            "Crawl-delay of %s: requests start at least %s s apart%s",
            origin,
            delay,
            capped,
            extra={"spider": self._crawler.spider},
        )


def _in_window(start: clock | None, end: clock | None) -> bool:
    """Whether now (UTC, as the extended standard's times are) is within a
    Request-rate's time window; no window is always."""
    if start is None or end is None:
        return True
    now = datetime.now(timezone.utc).time()
    return start <= now <= end if start <= end else now >= start or now <= end
