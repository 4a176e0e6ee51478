"""Prefetch: an origin's robots.txt is fetched as soon as the spider yields a request for it, so that the fetch
overlaps the request's time in the queue instead of following it."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from . import compat

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from .coordinator import OriginCoordinator


class Prefetch:
    """Learns unknown origins ahead of their requests, in yield order: half of *concurrency*
    (``CONCURRENT_REQUESTS``) at a time, and at most WINDOW times *concurrency* origins ahead of the downloader
    (prefetched, no request of theirs reached it yet). As many others wait their turn; past that an origin is
    fetched when its request reaches the downloader, as without prefetch. Each fetch is the coordinator's, so one
    per origin, with its bounds."""

    #: Origins ahead of the downloader at most, in CONCURRENT_REQUESTS: enough that its requests find their rules
    #: known, few enough that a broad crawl's thousands of queued origins are not all fetched (and held) first.
    WINDOW = 4
    #: How long a prefetched origin counts as ahead: its requests may never reach this downloader (another worker
    #: takes them, another middleware drops them), and the window must not stay full of them.
    AHEAD_SECONDS = 30.0

    def __init__(self, crawler: Crawler, origins: OriginCoordinator, concurrency: int) -> None:
        self._crawler = crawler
        self._origins = origins
        # A prefetch holds a downloader place: the pages keep the other half, whatever order the scheduler
        # gives them in.
        self._limit = max(1, concurrency // 2)
        self._window = max(1, concurrency) * self.WINDOW
        self._running: set[str] = set()
        self._ahead: OrderedDict[str, float] = OrderedDict()  # origin -> when it was prefetched
        self._pending: OrderedDict[str, Request] = OrderedDict()  # origin -> the first request yielded for it

    @property
    def busy(self) -> bool:
        return bool(self._running)

    def request_yielded(self, origin: str, request: Request) -> None:
        """*request* passed the spider middlewares: fetch its origin's robots.txt soon if nothing here knows it."""
        if origin in self._ahead or origin in self._pending or not self._origins.unknown(origin):
            return
        if self._has_room():
            self._start(origin, request)
        elif len(self._pending) < self._window:
            self._pending[origin] = request

    def reached(self, origin: str) -> None:
        """A request of *origin* reached the downloader: the origin is no longer ahead of it."""
        if self._ahead.pop(origin, None) is not None:
            self._start_pending()
        else:
            self._pending.pop(origin, None)  # fetched by the downloader's request now, if need be

    def _has_room(self) -> bool:
        """Whether another fetch may start, once the origins ahead for too long are let go; never once the spider
        closes (what waits then is dropped)."""
        if compat.engine_closing(self._crawler.engine):
            self._pending.clear()
            return False
        expired = time.monotonic() - self.AHEAD_SECONDS
        while self._ahead and next(iter(self._ahead.values())) < expired:
            self._ahead.popitem(last=False)
        return len(self._running) < self._limit and len(self._ahead) < self._window

    def _start(self, origin: str, request: Request) -> None:
        self._running.add(origin)
        self._ahead[origin] = time.monotonic()
        self._crawler.stats.inc_value("robotstxt/prefetched")
        self._origins.waiter(origin, request).addBoth(self._done, origin)

    def _done(self, result: object, origin: str) -> None:
        """A fetch ended: start the next pending one. Its outcome, a failure too, is its requests' to meet."""
        self._running.discard(origin)
        self._start_pending()

    def _start_pending(self) -> None:
        while self._pending and self._has_room():
            origin, request = self._pending.popitem(last=False)
            if self._origins.unknown(origin):
                self._start(origin, request)
