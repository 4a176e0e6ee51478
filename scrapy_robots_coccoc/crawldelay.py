"""Crawl-delay as the download delay of each site's downloader slot, or, with
a shared store, as start times reserved across all workers."""

from __future__ import annotations

import logging
import time
from inspect import isawaitable
from typing import TYPE_CHECKING

from scrapy import signals

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Downloader, Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from .stores import Store

logger = logging.getLogger(__name__)


class CrawlDelays:
    """Keeps every downloader slot that fetches from a site at least as slow
    as that site's Crawl-delay (capped at ``ROBOTSTXT_MAX_CRAWL_DELAY``).

    The delay goes into the downloader's per-slot settings, so it survives
    Scrapy's clean-up of idle slots, and onto the live slot. Random jitter is
    made one-sided (from the delay up to delay x (1 + jitter)), and after each
    response, where AutoThrottle adjusts delays, the slot is lifted back to
    the floor if it went below.

    When the store paces origins itself (a store shared by several workers),
    each request reserves its start time there instead, so that requests
    from all workers together keep the Crawl-delay.
    """

    #: Added to shared reservations: a busy worker may send its request some
    #: tens of milliseconds after the time it reserved.
    SHARED_MARGIN = 0.1

    def __init__(self, crawler: Crawler, max_delay: float, store: Store) -> None:
        self._crawler = crawler
        self._max_delay = max_delay
        self._store = store
        self._project_slots = crawler.settings.getdict("DOWNLOAD_SLOTS")
        self._project_delay = crawler.settings.getfloat("DOWNLOAD_DELAY")
        self._jitter = crawler.settings.getfloat("DOWNLOAD_DELAY_JITTER", 0.5)
        if crawler.settings.getpriority("RANDOMIZE_DOWNLOAD_DELAY") and not crawler.settings.getbool(
            "RANDOMIZE_DOWNLOAD_DELAY", True
        ):
            self._jitter = 0.0
        # Slot key -> (floor, the slot delay that keeps every draw above it).
        self._floors: dict[str, tuple[float, float]] = {}
        self._announced: dict[str, float] = {}  # origin -> delay logged for it
        crawler.signals.connect(self._after_response, signal=signals.response_downloaded)

    def delay_for(self, crawl_delay: float | None) -> float:
        """Return the delay a Crawl-delay asks for, capped; 0 for none."""
        return 0.0 if crawl_delay is None else min(crawl_delay, self._max_delay)

    async def turn(self, request: Request, origin: str, crawl_delay: float | None) -> float:
        """Make *request* honour the origin's Crawl-delay; return how many
        seconds it must wait before it goes to the downloader (0 when its
        slot's delay paces it)."""
        delay = self.delay_for(crawl_delay)
        if not delay:
            return 0.0
        start = self._store.reserve(origin, delay + self.SHARED_MARGIN)
        if isawaitable(start):
            start = await start
        if start is not None:
            self._announce(origin, crawl_delay, delay)
            return max(0.0, start - time.time())
        self._pace_slot(request, origin, crawl_delay, delay)
        return 0.0

    def _pace_slot(self, request: Request, origin: str, crawl_delay: float, delay: float) -> None:
        downloader = self._downloader
        key = downloader.get_slot_key(request)
        project = self._project_slots.get(key, {})
        floor = max(delay, float(project.get("delay", self._project_delay)))
        if self._floors.get(key, (None,))[0] == floor:
            return
        jitter = float(project.get("jitter", self._jitter))
        # Slot.download_delay() draws from delay x (1 +/- jitter): centre it so
        # that the lowest draw is the floor itself.
        slot_settings = downloader.per_slot_settings.setdefault(key, dict(project))
        slot_settings["delay"] = floor * (1 + jitter / 2)
        slot_settings["jitter"] = jitter / (2 + jitter)
        self._floors[key] = (floor, slot_settings["delay"])
        slot = downloader.slots.get(key)
        if slot is not None:
            slot.delay = slot_settings["delay"]
            if hasattr(slot, "jitter"):
                slot.jitter = slot_settings["jitter"]
        self._announce(origin, crawl_delay, floor)

    def _announce(self, origin: str, crawl_delay: float, floor: float) -> None:
        if self._announced.get(origin) == floor:
            return
        if origin not in self._announced:
            self._crawler.stats.inc_value("robotstxt/crawl_delay/sites")
        self._announced[origin] = floor
        capped = " (capped by ROBOTSTXT_MAX_CRAWL_DELAY)" if crawl_delay > self._max_delay else ""
        logger.info(
            "Crawl-delay %s s of %s: requests start at least %s s apart%s",
            crawl_delay,
            origin,
            floor,
            capped,
            extra={"spider": self._crawler.spider},
        )

    @property
    def _downloader(self) -> Downloader:
        assert self._crawler.engine is not None
        return self._crawler.engine.downloader

    def _after_response(self, response: Response, request: Request, spider: object = None) -> None:
        key = request.meta.get("download_slot")
        if key not in self._floors:
            return
        slot_delay = self._floors[key][1]
        slot: Slot | None = self._downloader.slots.get(key)
        if slot is not None and slot.delay < slot_delay:
            slot.delay = slot_delay
