"""Crawl-delay as the download delay of each site's downloader slot, or, with
a shared store, as start times reserved across all workers."""

from __future__ import annotations

import copy
import logging
import time
from collections import OrderedDict
from inspect import isawaitable
from typing import TYPE_CHECKING, Any

from scrapy import signals

from . import _compat

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Downloader
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from .stores import Store

logger = logging.getLogger(__name__)


class CrawlDelays:
    """Keeps every downloader slot that fetches from a site at least as slow
    as that site's Crawl-delay (capped at ``ROBOTSTXT_MAX_CRAWL_DELAY``).

    The delay goes into the downloader's per-slot settings, so it survives
    Scrapy's clean-up of idle slots, and onto the live slot; the project's
    own settings are never touched. Random jitter is made one-sided (never
    below the delay), after each response (where AutoThrottle adjusts
    delays) the slot is lifted back to the floor if it went below, and a
    refresh that lowers or removes the Crawl-delay gives the slot back the
    project's own delay at once.

    When the store paces origins itself (a store shared by several workers),
    each request reserves its start time there instead, so that requests
    from all workers together keep the Crawl-delay.
    """

    #: Added to shared reservations: a busy worker may send its request some
    #: tens of milliseconds after the time it reserved.
    SHARED_MARGIN = 0.1

    def __init__(self, crawler: Crawler, max_delay: float, store: Store, max_origins: int) -> None:
        self._crawler = crawler
        self._max_delay = max_delay
        self._store = store
        self._max_origins = max(1, max_origins)
        # A deep copy: DOWNLOAD_SLOTS's nested dicts belong to the settings.
        self._project_slots: dict[str, dict[str, Any]] = copy.deepcopy(crawler.settings.getdict("DOWNLOAD_SLOTS"))
        self._project_delay = crawler.settings.getfloat("DOWNLOAD_DELAY")
        # Slot key -> (floor, the slot settings that keep every draw above it).
        self._floors: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._announced: OrderedDict[str, float] = OrderedDict()  # origin -> delay logged for it
        crawler.signals.connect(self._after_response, signal=signals.response_downloaded)

    def delay_for(self, crawl_delay: float | None) -> float:
        """Return the delay a Crawl-delay asks for, capped; 0 for none."""
        return 0.0 if crawl_delay is None else min(crawl_delay, self._max_delay)

    async def turn(self, request: Request, origin: str, crawl_delay: float | None) -> float:
        """Make *request* honour the origin's Crawl-delay; return how many
        seconds it must wait before it goes to the downloader (0 when its
        slot's delay paces it)."""
        delay = self.delay_for(crawl_delay)
        if delay:
            start = self._store.reserve(origin, delay + self.SHARED_MARGIN)
            if isawaitable(start):
                start = await start
            if start is not None:
                self._announce(origin, crawl_delay, delay)
                return max(0.0, start - time.time())
        if delay or self._floors:  # else there is no slot to pace or give back
            self._pace_slot(request, origin, crawl_delay, delay)
        return 0.0

    def _pace_slot(self, request: Request, origin: str, crawl_delay: float | None, delay: float) -> None:
        downloader = self._downloader
        key = downloader.get_slot_key(request)
        project = self._project_slots.get(key, {})
        paced = delay > float(project.get("delay", self._project_delay))
        current = self._floors.get(key)
        if current is not None:
            self._floors.move_to_end(key)
        if (current[0] if current else 0.0) == (delay if paced else 0.0):
            return
        if paced:
            floor = {**project, **_compat.slot_floor(delay, _compat.slot_jitter(downloader, project))}
            self._floors[key] = (delay, floor)
            self._set_slot(downloader, key, floor)
            while len(self._floors) > self._max_origins:
                self._restore(downloader, next(iter(self._floors)))
        else:
            self._restore(downloader, key)
        self._announce(origin, crawl_delay, delay if paced else 0.0)

    def _restore(self, downloader: Downloader, key: str) -> None:
        """Give a slot back the project's own delay."""
        del self._floors[key]
        project = self._project_slots.get(key)
        per_slot = _compat.slot_settings(downloader)
        if project is None:
            per_slot.pop(key, None)
        else:
            per_slot[key] = dict(project)
        project = project or {}
        delay = float(project.get("delay", self._project_delay))
        live = _compat.slot(downloader, key)
        if live is not None:
            _compat.apply_to_slot(live, _compat.slot_floor(delay, _compat.slot_jitter(downloader, project)))

    @staticmethod
    def _set_slot(downloader: Downloader, key: str, settings: dict[str, Any]) -> None:
        _compat.slot_settings(downloader)[key] = settings
        live = _compat.slot(downloader, key)
        if live is not None:
            _compat.apply_to_slot(live, settings)

    def _announce(self, origin: str, crawl_delay: float | None, delay: float) -> None:
        if self._announced.get(origin, 0.0) == delay:
            return
        if origin not in self._announced:
            self._crawler.stats.inc_value("robotstxt/crawl_delay/sites")
        self._announced[origin] = delay
        self._announced.move_to_end(origin)
        while len(self._announced) > self._max_origins:
            self._announced.popitem(last=False)
        capped = " (capped by ROBOTSTXT_MAX_CRAWL_DELAY)" if (crawl_delay or 0) > self._max_delay else ""
        logger.info(
            "Crawl-delay %s s of %s: requests start at least %s s apart%s",
            crawl_delay,
            origin,
            delay,
            capped,
            extra={"spider": self._crawler.spider},
        )

    @property
    def _downloader(self) -> Downloader:
        assert self._crawler.engine is not None
        return self._crawler.engine.downloader

    def _after_response(self, response: Response, request: Request, spider: object = None) -> None:
        key = request.meta.get("download_slot")
        floor = self._floors.get(key) if key is not None else None
        if floor is None:
            return
        live = _compat.slot(self._downloader, key)
        if live is not None and live.delay < floor[1]["delay"]:
            _compat.apply_to_slot(live, floor[1])
