"""Prefetch: an origin's robots.txt is fetched as soon as the spider yields a request for it, so that the fetch
overlaps the request's time in the queue instead of following it."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy import signals

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from .coordinator import OriginCoordinator


class Prefetch:
    """Learns unknown origins ahead of their requests, a share of *concurrency* (``CONCURRENT_REQUESTS``) at a
    time; the other origins wait their turn in yield order, *max_pending* at most (past it an origin is fetched
    when its request reaches the downloader, as without prefetch). Each fetch is the coordinator's, so one per
    origin, with its bounds."""

    #: A prefetch holds a downloader place: with all of them, a broad crawl's thousands of queued origins would
    #: be fetched before any page. A quarter keeps ahead of the pages, which need one robots.txt per origin.
    SHARE = 4

    def __init__(self, crawler: Crawler, origins: OriginCoordinator, concurrency: int, max_pending: int) -> None:
        self._crawler = crawler
        self._origins = origins
        self._limit = max(1, concurrency // self.SHARE)
        self._max_pending = max(1, max_pending)
        self._running: set[str] = set()
        self._pending: OrderedDict[str, Request] = OrderedDict()  # origin -> the first request yielded for it
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @property
    def busy(self) -> bool:
        return bool(self._running)

    def request_yielded(self, origin: str, request: Request) -> None:
        """*request* passed the spider middlewares: fetch its origin's robots.txt now if nothing here knows it."""
        if origin in self._running or origin in self._pending or not self._origins.unknown(origin):
            return
        if len(self._running) < self._limit:
            self._start(origin, request)
        elif len(self._pending) < self._max_pending:
            self._pending[origin] = request

    def _closed(self) -> None:
        self._pending.clear()

    def _start(self, origin: str, request: Request) -> None:
        self._running.add(origin)
        self._crawler.stats.inc_value("robotstxt/prefetched")
        self._origins.waiter(origin, request).addBoth(self._done, origin)

    def _done(self, result: object, origin: str) -> None:
        """A fetch ended: start the next pending one. Its outcome, a failure too, is its requests' to meet."""
        self._running.discard(origin)
        while self._pending and len(self._running) < self._limit:
            origin, request = self._pending.popitem(last=False)
            if self._origins.unknown(origin):
                self._start(origin, request)
