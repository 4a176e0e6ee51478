"""Crawl-delay: each origin's consecutive requests start at least its delay
apart, whatever downloader slot Scrapy puts them in."""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timezone
from datetime import time as clock
from itertools import count
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from . import compat, loop

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.engine import ExecutionEngine
    from scrapy.crawler import Crawler

    from .._parser import RobotsTxt
    from .parking import Parking

logger = logging.getLogger(__name__)


def turns_horizon(spacing: float) -> float:
    """How far ahead a reserved start may be and still be believed: every
    request waiting for an origin, in every worker, holds a turn (an hour,
    or 1,000 turns, whichever is longer); a start farther off is nonsense."""
    return max(3600.0, 1000 * spacing)


class Turns:
    """The next start reserved for each paced origin: a turn starts no
    earlier than the last one allows.

    Bounded by *max_origins*: past it the least recently paced origin goes,
    unless its next start is still ahead (a turn promised to a waiting
    request): such an origin goes to the back, a few per call, so the map
    may exceed the bound by the origins with requests waiting.
    """

    #: Origins looked at per reservation when the map is full.
    EVICTION_TRIES = 4

    def __init__(self, max_origins: int) -> None:
        self._next_starts: OrderedDict[str, float] = OrderedDict()
        self.max_origins = max(1, max_origins)

    def reserve(self, origin: str, spacing: float) -> float:
        start = max(time.time(), self._next_starts.get(origin, 0.0))
        self.reserved_until(origin, start + spacing)
        return start

    def next_start(self, origin: str) -> float:
        """The earliest start of *origin*'s next turn (0.0 when none was reserved)."""
        return self._next_starts.get(origin, 0.0)

    def reserved_until(self, origin: str, next_start: float) -> None:
        """Let the next turn start no earlier than *next_start*."""
        next_starts = self._next_starts
        next_starts[origin] = max(next_start, next_starts.pop(origin, 0.0))
        now = time.time()
        for _ in range(self.EVICTION_TRIES):
            if len(next_starts) <= self.max_origins:
                break
            oldest, start = next_starts.popitem(last=False)
            if start > now:
                next_starts[oldest] = start


# Every crawler of the process takes its turns from these: the sites see one
# client, whichever spider asks (three spiders of one CrawlerProcess crawling
# a site each paced alone: requests 0.0 s apart).
_PROCESS_TURNS = Turns(1)


def process_turns(max_origins: int) -> Turns:
    """The turns of this process, bounded by the largest *max_origins* asked for."""
    _PROCESS_TURNS.max_origins = max(_PROCESS_TURNS.max_origins, max_origins)
    return _PROCESS_TURNS


class CrawlDelays:
    """Paces each origin (scheme, host, port) by the stricter of its
    Crawl-delay and its Request-rate, capped at ``ROBOTSTXT_MAX_CRAWL_DELAY``.

    Every request of a paced origin first lets its downloader slot's own
    delay run out, then reserves its start time in the store (a per-origin
    "next start", in this process for :class:`~.stores.MemoryStore`, shared
    by all workers for :class:`~.stores.RedisStore`) and waits for it,
    parked: the waits hold no downloader place, the request starts when it
    is released, and Scrapy's own slot delays (``DOWNLOAD_DELAY``,
    ``DOWNLOAD_SLOTS``, jitter, AutoThrottle) still apply, untouched. A
    refresh that changes the delay paces the next request by the new one.
    """

    #: A turn is used at most this share of the delay late (see
    #: :meth:`.Store.reserve`), and turns are reserved this share more than
    #: the delay apart: a turn used that late still starts a full delay
    #: after the one before.
    GRACE = 0.05
    #: Turns taken again at most this many times when woken late.
    MAX_TURNS = 5
    #: Shorter delays (``Request-rate: 1000000/1s``) are not paced: the
    #: reactor's timers do not keep them, so nearly every turn would be late.
    MIN_DELAY = 0.01
    #: How long a request waiting for room in its slot waits for a request
    #: to leave it before it looks again anyway.
    ROOM_RECHECK_SECONDS = 1.0
    #: How long a request released at its turn may take to reach its slot.
    ON_THE_WAY_SECONDS = 1.0

    def __init__(
        self,
        crawler: Crawler,
        max_delay: float,
        reserve: Callable[[str, float], float | Deferred[float | None] | None],
        parking: Parking,
        max_origins: int,
    ) -> None:
        self._crawler = crawler
        self._max_delay = max_delay
        self._reserve = reserve  # the store's, guarded
        self._parking = parking
        self._max_origins = max(1, max_origins)
        self._announced: OrderedDict[str, float] = OrderedDict()  # origin -> delay logged for it
        # Downloader slot key -> paced requests that claim a place in it,
        # with until when: those waiting for their turn (for ever), those
        # released at it and not in the slot yet (ON_THE_WAY_SECONDS).
        self._claims: dict[str, dict[Request, float]] = {}
        # Downloader slot key -> what requests waiting for room in it wait for.
        self._rooms: dict[str, list[Deferred[None]]] = {}
        # Requests released at their turn -> the slot key they were paced in,
        # until they reach the downloader.
        self._released: WeakKeyDictionary[Request, str] = WeakKeyDictionary()
        self._moved_logged = False
        crawler.signals.connect(self.left, signal=signals.request_left_downloader)
        crawler.signals.connect(self._reached, signal=signals.request_reached_downloader)

    def delay_for(self, robots: RobotsTxt, agent: str) -> tuple[float, float]:
        """The delay *robots* asks of *agent* (Crawl-delay or the period of
        one request of its Request-rate, the stricter), as written and capped."""
        written = robots.crawl_delay(agent) or 0.0
        rate = robots.request_rate(agent)
        if rate is not None and rate.requests > 0 and _in_window(rate.start, rate.end):
            written = max(written, rate.seconds / rate.requests)
        delay = min(written, self._max_delay)
        return written, delay if delay >= self.MIN_DELAY else 0.0

    async def wait_turn(self, request: Request, origin: str, robots: RobotsTxt, agent: str) -> None:
        """Wait, parked, until *request* may start: its origin's previous
        request started at least the delay before (nothing for an origin
        that is not paced)."""
        written, delay = self.delay_for(robots, agent)
        if delay != self._announced.get(origin, 0.0):
            self._announce(origin, written, delay)
        if not delay:
            return
        engine = self._crawler.engine
        assert engine is not None
        park = True
        for tries in count(1):
            # Again at each try: with CONCURRENT_REQUESTS_PER_IP, a host's
            # slot is keyed by its address once the DNS cache has it.
            key = compat.slot_key(engine, request)
            # First let the slot be ready to start the request at once (its
            # own delay run out, a transfer place free): the request then
            # starts when it is released, at its turn.
            await self._slot_ready(engine, request, key, park)
            # From its reservation the request claims a place in the slot:
            # requests taking turns together found it taken by the first
            # when their turns came (one transfer at a time, pages slower
            # than the delay), and every turn after was lost.
            self._claims.setdefault(key, {})[request] = math.inf
            try:
                start = self._reserve(origin, delay * (1 + self.GRACE))
                if isinstance(start, Deferred) or (start is not None and start > time.time()):
                    # The store's answer and the turn, awaited as one wait: a
                    # slow store holds no downloader place either when parked.
                    start = await self._parking.wait(request, deferred_from_coro(self._turn(start)), park=park)
            except BaseException:
                self.left(request)
                raise
            on_time = start is not None and time.time() - start <= self.GRACE * delay
            if start is None or (on_time and not self._slot_would_hold(engine, request, key)):
                # Scrapy puts it in the slot a little later: it keeps its
                # claim until then (or until it comes back without).
                self._claims.setdefault(key, {})[request] = time.monotonic() + self.ON_THE_WAY_SECONDS
                self._released[request] = key
                return
            # Woken too late (a parked request comes back only when the
            # downloader has room, a stalled reactor, a slow store), or the
            # slot would hold the request: a turn used late would squeeze
            # the next one, so take a new one. After MAX_TURNS parked tries
            # the request keeps its place, and waits where no wait for a
            # place can make it late: never unpaced.
            self.left(request)
            self._crawler.stats.inc_value("robotstxt/crawl_delay/late_turns")
            park = tries < self.MAX_TURNS

    async def _slot_ready(self, engine: ExecutionEngine, request: Request, key: str, park: bool) -> None:
        """Wait until the downloader slot of *request* (*key*) would start it at once."""
        while True:
            hold = compat.slot_hold(engine, request)
            if hold > 0:
                await self._parking.wait(request, deferLater(loop.clock(), hold), park=park)
            elif self._slot_full(engine, request, key):
                await self._wait_for_room(request, key, park)
            else:
                return

    async def _wait_for_room(self, request: Request, key: str, park: bool) -> None:
        """Wait until a request leaves the slot *key*, or a while in any case
        (a request on its way to the slot that a later middleware replaced
        never arrives nor leaves)."""
        room: Deferred[None] = Deferred()
        self._rooms.setdefault(key, []).append(room)
        room.addTimeout(self.ROOM_RECHECK_SECONDS, loop.clock(), onTimeoutCancel=_look_again)
        try:
            await self._parking.wait(request, room, park=park)
        finally:
            waiting = self._rooms.get(key, [])
            if room in waiting:
                waiting.remove(room)
                if not waiting:
                    del self._rooms[key]

    def _slot_would_hold(self, engine: ExecutionEngine, request: Request, key: str) -> bool:
        """Whether the slot of *request*, ready when its turn was reserved,
        would hold it now: another origin in it (another port of the host,
        a shared ``download_slot``) started meanwhile, or filled it."""
        return compat.slot_hold(engine, request) > 0 or self._slot_full(engine, request, key)

    def _slot_full(self, engine: ExecutionEngine, request: Request, key: str) -> bool:
        """Whether the slot of *request* (*key*) is full, the claims of other
        paced requests counted (those past their time are let go: a request
        that a later middleware replaced never arrives nor comes back)."""
        claims = self._claims.get(key, {})
        now = time.monotonic()
        for expired in [claimant for claimant, until in claims.items() if until <= now]:
            del claims[expired]
        return compat.slot_full(engine, request, (claimant for claimant in claims if claimant is not request))

    def _reached(self, request: Request, spider: object = None) -> None:
        """Count (and log once) a paced request that reached another
        downloader slot than the one it was paced in: a downloader middleware
        ordered after ours moved it, and pacing cannot see that slot."""
        if not self._released:
            return  # nothing paced is on its way: every request of the crawl comes here
        paced = self._released.pop(request, None)
        engine = self._crawler.engine
        final = None if paced is None or engine is None else compat.moved_to(engine, request, paced)
        if final is None:
            return
        self._crawler.stats.inc_value("robotstxt/crawl_delay/slot_moved")
        if not self._moved_logged:
            self._moved_logged = True
            logger.warning(
                "%s was paced in downloader slot %r, and a downloader middleware ordered after ours moved it"
                " to slot %r: where that slot is busy, paced requests may start less than their Crawl-delay"
                " apart. Set download_slot in the request or in a middleware ordered before ours. Counted in"
                " robotstxt/crawl_delay/slot_moved, not logged again.",
                request,
                paced,
                final,
                extra={"spider": self._crawler.spider},
            )

    def left(self, request: Request, spider: object = None) -> None:
        """*request* left its slot (its transfer ended), came back to the
        middleware without reaching it, or gave its turn up: its claim
        ends, and requests waiting for room there look again."""
        engine = self._crawler.engine
        if engine is None or not (self._claims or self._rooms):
            return  # nothing paced waits: every response of the crawl comes here
        key = compat.slot_key(engine, request)
        claims = self._claims.get(key)
        if claims is not None:
            claims.pop(request, None)
            if not claims:
                del self._claims[key]
        for room in self._rooms.pop(key, ()):
            _open(room)

    async def _turn(self, reserved: float | Deferred[float | None] | None) -> float | None:
        """Wait for the store's answer, then until the turn it gives starts."""
        start = await maybe_deferred_to_future(reserved) if isinstance(reserved, Deferred) else reserved
        if start is not None and start > time.time():
            await loop.sleep(start - time.time())
        return start

    def _announce(self, origin: str, written: float, delay: float) -> None:
        if origin not in self._announced and delay:
            self._crawler.stats.inc_value("robotstxt/crawl_delay/sites")
        self._announced[origin] = delay
        self._announced.move_to_end(origin)
        while len(self._announced) > self._max_origins:
            self._announced.popitem(last=False)
        capped = " (capped by ROBOTSTXT_MAX_CRAWL_DELAY)" if written > self._max_delay else ""
        logger.info(
            "Crawl-delay of %s: requests start at least %s s apart%s",
            origin,
            delay,
            capped,
            extra={"spider": self._crawler.spider},
        )


def _look_again(result: object, timeout: float) -> None:
    """What a wait for room ends with when no request left the slot in time."""


def _open(room: Deferred[None]) -> None:
    if not room.called:  # else cancelled at close, or opened already
        room.callback(None)


def _in_window(start: clock | None, end: clock | None) -> bool:
    """Whether now (UTC, as the extended standard's times are) is within a
    Request-rate's time window; no window is always."""
    if start is None or end is None:
        return True
    now = datetime.now(timezone.utc).time()
    return start <= now <= end if start <= end else now >= start or now <= end
