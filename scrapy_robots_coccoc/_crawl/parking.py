"""Parking: a request waiting in the middleware (for robots.txt, a turn, a pause) leaves the downloader's
active set, so it holds no ``CONCURRENT_REQUESTS`` place, and comes back when there is room."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakSet

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import CancelledError, Deferred

from . import compat, loop

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

T = TypeVar("T")


class SpiderClosing(Exception):
    """The spider is closing: the waiting request goes back to the scheduler."""


class Parking:
    """Lets requests wait outside the downloader's active set, ``ROBOTSTXT_MAX_PARKED_REQUESTS`` at most."""

    #: While requests wait, how often to look for a closing spider and for room that no departure announced.
    WATCH_SECONDS = 0.2

    def __init__(self, crawler: Crawler, max_parked: int) -> None:
        self._crawler = crawler
        self._max_parked = max_parked
        self._total_concurrency = crawler.settings.getint("CONCURRENT_REQUESTS")
        # Waiting request -> the Deferred it waits for (cancelled on close); parked ones count against the bound.
        self._waiting: dict[Request, Deferred[Any]] = {}
        self._parked: set[Request] = set()
        # Every request parked so far, for robotstxt/parked: one request may park several times.
        self._counted: WeakSet[Request] = WeakSet()
        # Parked requests still in the active set until the next loop turn (see _leave_soon).
        self._leaving: set[Request] = set()
        # Requests done waiting, in turn for a place in the downloader.
        self._returning: deque[tuple[Request, Deferred[None]]] = deque()
        self._closing = False
        self._watch: loop.Timer | None = None
        crawler.signals.connect(self._on_departure, signal=signals.request_left_downloader)
        crawler.signals.connect(self._keep_open, signal=signals.spider_idle)
        crawler.signals.connect(self._stop_watching, signal=signals.spider_closed)

    def __len__(self) -> int:
        return len(self._waiting) + len(self._returning)

    async def wait(self, request: Request, deferred: Deferred[T], *, park: bool = True, bounded: bool = True) -> T:
        """Wait for *deferred*, parked if *park*, the request holds a place and the bound allows (unless not
        *bounded*); raise :class:`SpiderClosing` if the spider closes meanwhile."""
        engine = self._crawler.engine
        assert engine is not None
        active = compat.downloader_active(engine)
        closing = compat.engine_closing(engine)
        room = not bounded or len(self._parked) < self._max_parked
        parks = park and not closing and request in active and room
        self._waiting[request] = deferred
        if closing:
            # Nothing to wait for: leave as every waiting request left.
            self._closing = True
            deferred.cancel()
        elif parks:
            self._parked.add(request)
            if request not in self._counted:
                self._counted.add(request)
                self._crawler.stats.inc_value("robotstxt/parked")
            self._leave_soon(request)
        self._watch_soon()
        try:
            try:
                result = await maybe_deferred_to_future(deferred)
            finally:
                del self._waiting[request]
                self._parked.discard(request)
                left = parks and request not in self._leaving
                self._leaving.discard(request)
            if left:
                await self._return(request, active)
            return result
        except (CancelledError, asyncio.CancelledError):
            if self._closing:
                raise SpiderClosing from None
            raise
        finally:
            if parks:
                active.add(request)

    def _leave_soon(self, request: Request) -> None:
        """Take *request* out of the active set on the next loop turn, with all parked in this one: at once, its
        place would be refilled in the same turn again and again, stalling the reactor."""
        if not self._leaving:
            loop.call_later(0, self._leave)
        self._leaving.add(request)

    def _leave(self) -> None:
        engine = self._crawler.engine
        if engine is None or not self._leaving:
            return
        active = compat.downloader_active(engine)
        active.difference_update(self._leaving)
        self._leaving.clear()
        compat.wake_engine(engine)  # the engine may start other requests now

    async def _return(self, request: Request, active: set[Request]) -> None:
        if self._has_room(active, departing=0):
            return
        turn: Deferred[None] = Deferred()
        self._returning.append((request, turn))
        await maybe_deferred_to_future(turn)

    def _has_room(self, active: set[Request], departing: int) -> bool:
        return not self._total_concurrency or len(active) - departing < self._total_concurrency

    def _admit(self, departing: int = 0) -> None:
        """Give returning requests the free places; *departing* counts one leaving but still in the active set."""
        engine = self._crawler.engine
        if engine is None:
            return
        active = compat.downloader_active(engine)
        while self._returning and self._has_room(active, departing):
            request, turn = self._returning.popleft()
            active.add(request)  # taken now, before the engine fills it
            turn.callback(None)

    def _on_departure(self, request: Request, spider: object = None, response: Response | None = None) -> None:
        # Sent when a transfer ends, before the request leaves the active set.
        self._admit(departing=1)

    def _look_around(self) -> None:
        self._watch = None
        if compat.engine_closing(self._crawler.engine):
            self._closing = True
            for deferred in [*self._waiting.values(), *(turn for _, turn in self._returning)]:
                deferred.cancel()
            self._returning.clear()
        else:
            self._admit()
        if self:
            self._watch_soon()  # unless a request admitted above waited again already

    def _keep_open(self) -> None:
        if self:
            self._admit()
            raise DontCloseSpider

    def _watch_soon(self) -> None:
        if self._watch is None:
            self._watch = loop.call_later(self.WATCH_SECONDS, self._look_around)

    def _stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
