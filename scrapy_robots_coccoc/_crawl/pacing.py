"""Crawl-delay: each origin's consecutive requests start at least its delay apart, whatever their slot."""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from itertools import count
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from .._parser.delay import asked_delay, kept_delay
from . import compat, loop

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.engine import ExecutionEngine
    from scrapy.crawler import Crawler

    from .._parser import RobotsTxt
    from .parking import Parking

logger = logging.getLogger(__name__)


def turns_horizon(spacing: float) -> float:
    """How far ahead a reserved start is still believable: every waiting request in every worker holds a
    turn, so an hour or 1,000 turns, whichever is longer."""
    return max(3600.0, 1000 * spacing)


class Turns:
    """The next start reserved for each paced origin, bounded by *max_origins*: past it the least recently
    paced goes, unless a turn is still promised to it (it goes to the back), so waiting origins may exceed it."""

    EVICTION_TRIES = 4

    def __init__(self, max_origins: int) -> None:
        self._next_starts: OrderedDict[str, float] = OrderedDict()
        self.max_origins = max(1, max_origins)

    def reserve(self, origin: str, spacing: float) -> float:
        start = max(time.time(), self._next_starts.get(origin, 0.0))
        self.reserved_until(origin, start + spacing)
        return start

    def next_start(self, origin: str) -> float:
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


# Every crawler of the process takes its turns from these: a site sees one client, whichever spider asks.
_PROCESS_TURNS = Turns(1)


def process_turns(max_origins: int) -> Turns:
    _PROCESS_TURNS.max_origins = max(_PROCESS_TURNS.max_origins, max_origins)
    return _PROCESS_TURNS


class Pauses:
    """Until when each paused origin (a 429 or 503 answer, a ``Retry-After``) starts no request, bounded by
    *max_origins*: past it the pause ending first goes."""

    def __init__(self, max_origins: int) -> None:
        self._until: dict[str, float] = {}
        self.max_origins = max(1, max_origins)

    def pause(self, origin: str, until: float) -> None:
        """No request of *origin* before *until* (a later pause already noted stands)."""
        if until > self._until.get(origin, 0.0):
            self._until[origin] = until
        if len(self._until) > self.max_origins:
            now = time.time()
            for ended in [key for key, value in self._until.items() if value <= now]:
                del self._until[ended]
            while len(self._until) > self.max_origins:
                del self._until[min(self._until, key=self._until.__getitem__)]

    def until(self, origin: str) -> float:
        """When *origin*'s pause ends (0.0 when it has none)."""
        return self._until.get(origin, 0.0) if self._until else 0.0


# The pauses of this process: a site that asked one spider to slow down asked them all.
_PROCESS_PAUSES = Pauses(1)


def process_pauses(max_origins: int) -> Pauses:
    _PROCESS_PAUSES.max_origins = max(_PROCESS_PAUSES.max_origins, max_origins)
    return _PROCESS_PAUSES


#: A delay honoured over the cap is still kept to this: one site must not hold a crawl open for days.
HONOURED_AT_MOST = 3600.0


class CrawlDelays:
    """Paces each origin by the stricter of its Crawl-delay and Request-rate, capped at ROBOTSTXT_MAX_CRAWL_DELAY:
    a request waits, parked, for its slot's own delay, then for the start it reserves in the store."""

    #: A turn may be used this share of the delay late (see ``Store.reserve``), so turns are reserved this much
    #: more than the delay apart: a late turn still starts a full delay after the one before.
    GRACE = 0.05
    MAX_TURNS = 5
    ROOM_RECHECK_SECONDS = 1.0
    #: How long a request released at its turn keeps its claim: a later middleware may replace it on the way.
    ON_THE_WAY_SECONDS = 1.0

    def __init__(
        self,
        crawler: Crawler,
        max_delay: float,
        reserve: Callable[[str, float], float | Deferred[float | None] | None],
        parking: Parking,
        max_origins: int,
        over_cap: str = "clamp",
    ) -> None:
        self._crawler = crawler
        self._max_delay = max_delay
        self._over_cap = over_cap  # ROBOTSTXT_CRAWL_DELAY_OVER_CAP: "clamp", "honour" or "skip"
        self._reserve = reserve
        self._parking = parking
        self._max_origins = max(1, max_origins)
        self._announced: OrderedDict[str, float] = OrderedDict()  # origin -> delay logged for it
        # Slot key -> paced requests claiming a place in it -> until when (for ever until released at their turn).
        self._claims: dict[str, dict[Request, float]] = {}
        self._rooms: dict[str, list[Deferred[None]]] = {}
        # Request released at its turn -> the slot key it was paced in, until it reaches the downloader.
        self._released: WeakKeyDictionary[Request, str] = WeakKeyDictionary()
        self._moved_logged = False
        crawler.signals.connect(self.left, signal=signals.request_left_downloader)
        crawler.signals.connect(self._reached, signal=signals.request_reached_downloader)

    def delay_for(self, robots: RobotsTxt, agent: str) -> tuple[float, float]:
        """The delay *robots* asks of *agent*, as written and as kept (see ``_parser.delay``)."""
        asked = asked_delay(robots, agent)[0]
        return asked, kept_delay(asked, HONOURED_AT_MOST if self._over_cap == "honour" else self._max_delay)

    def skipped(self, robots: RobotsTxt, agent: str) -> float | None:
        """The delay asked when it is over the cap and the origin is to be skipped, else None."""
        asked = asked_delay(robots, agent)[0]
        return asked if self._over_cap == "skip" and asked > self._max_delay else None

    async def wait_turn(self, request: Request, origin: str, robots: RobotsTxt, agent: str) -> None:
        """Wait, parked, until *request* may start: at least the delay after its origin's previous request."""
        written, delay = self.delay_for(robots, agent)
        if delay != self._announced.get(origin, 0.0):
            self._announce(origin, written, delay)
        if not delay:
            return
        engine = self._crawler.engine
        assert engine is not None
        park = True
        for tries in count(1):
            # Again at each try: with CONCURRENT_REQUESTS_PER_IP a slot is keyed by the IP once resolved.
            key = compat.slot_key(engine, request)
            # The slot must be ready first (its delay run out, a place free) so the request starts at its turn.
            await self._slot_ready(engine, request, key, park)
            # Claimed from the reservation on, or requests taking turns together find the slot full at theirs.
            self._claims.setdefault(key, {})[request] = math.inf
            try:
                start = self._reserve(origin, delay * (1 + self.GRACE))
                if isinstance(start, Deferred) or (start is not None and start > time.time()):
                    # The store's answer and the turn in one parked wait: a slow store holds no place either.
                    start = await self._parking.wait(request, deferred_from_coro(self._turn(start)), park=park)
            except BaseException:
                self.left(request)
                raise
            on_time = start is not None and time.time() - start <= self.GRACE * delay
            if start is None or (on_time and not self._slot_would_hold(engine, request, key)):
                self._claims.setdefault(key, {})[request] = time.monotonic() + self.ON_THE_WAY_SECONDS
                self._released[request] = key
                return
            # Woken late, or the slot would hold it: a late turn would squeeze the next, so take a new one.
            # After MAX_TURNS tries it waits unparked, where no wait for a place makes it late: never unpaced.
            self.left(request)
            self._crawler.stats.inc_value("robotstxt/crawl_delay/late_turns")
            park = tries < self.MAX_TURNS

    async def _slot_ready(self, engine: ExecutionEngine, request: Request, key: str, park: bool) -> None:
        while True:
            hold = compat.slot_hold(engine, request)
            if hold > 0:
                await self._parking.wait(request, deferLater(loop.clock(), hold), park=park)
            elif self._slot_full(engine, request, key):
                await self._wait_for_room(request, key, park)
            else:
                return

    async def _wait_for_room(self, request: Request, key: str, park: bool) -> None:
        """Wait until a request leaves the slot *key*, or ROOM_RECHECK_SECONDS: one that was replaced never leaves."""
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
        """Whether the slot, ready at the reservation, would hold *request* now: another origin used it meanwhile."""
        return compat.slot_hold(engine, request) > 0 or self._slot_full(engine, request, key)

    def _slot_full(self, engine: ExecutionEngine, request: Request, key: str) -> bool:
        """Whether the slot *key* is full, the live claims of other paced requests counted."""
        claims = self._claims.get(key, {})
        now = time.monotonic()
        for expired in [claimant for claimant, until in claims.items() if until <= now]:
            del claims[expired]
        return compat.slot_full(engine, request, (claimant for claimant in claims if claimant is not request))

    def _reached(self, request: Request, spider: object = None) -> None:
        """Count, and log once, a paced request that a later middleware moved to a slot pacing cannot see."""
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
        """*request* left its slot, came back, or gave its turn up: its claim ends, and waiters for room look again."""
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
        """Count a newly paced origin; log a delay that a refresh changed (the first is in the origin's line)."""
        known = origin in self._announced
        if not known and delay:
            self._crawler.stats.inc_value("robotstxt/crawl_delay/sites")
        self._announced[origin] = delay
        self._announced.move_to_end(origin)
        while len(self._announced) > self._max_origins:
            self._announced.popitem(last=False)
        if known:
            logger.info(
                "Crawl-delay of %s is now %s",
                origin,
                self.describe(written, delay),
                extra={"spider": self._crawler.spider},
            )

    def describe(self, written: float, delay: float) -> str:
        """The delay enforced, for a log line: "none", or seconds and the cap that set them."""
        if written > self._max_delay and self._over_cap == "skip":
            return f"asked {written} s, over ROBOTSTXT_MAX_CRAWL_DELAY: origin skipped (ROBOTSTXT_CRAWL_DELAY_OVER_CAP)"
        if not delay:
            return "none"
        if written > self._max_delay:
            if self._over_cap == "honour":
                return f"{delay} s (over ROBOTSTXT_MAX_CRAWL_DELAY, honoured: ROBOTSTXT_CRAWL_DELAY_OVER_CAP)"
            return f"{delay} s (asked {written} s, capped by ROBOTSTXT_MAX_CRAWL_DELAY)"
        return f"{delay} s"

    def fetched(self, origin: str, robots: RobotsTxt, agent: str) -> None:
        """Count the robots.txt request as the origin's last: its first page waits a full delay after it."""
        delay = self.delay_for(robots, agent)[1]
        if delay:
            self._reserve(origin, delay * (1 + self.GRACE))


def _look_again(result: object, timeout: float) -> None:
    """What a wait for room ends with when no request left the slot in time."""


def _open(room: Deferred[None]) -> None:
    if not room.called:  # else cancelled at close, or opened already
        room.callback(None)
