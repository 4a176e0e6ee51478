"""One robots.txt fetch per origin at a time, with its waiters, refreshes and local faults. A fetch releases its
waiters in one ``finally``, whatever it raises or however it is cancelled, so that no request is stranded."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred

from .._record.entries import digest
from ..exceptions import RobotsTxtFault
from ..signals import robotstxt_sitemaps_found
from ..stores import OriginState
from . import compat, loop
from .fetcher import LocalFault, Rules, Unrestricted, describe
from .origins import robots_url
from .parking import SpiderClosing
from .sitemap.listed import MAX_SITEMAPS, listed_sitemaps

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler

    from .._parser import RobotsTxt
    from .fetcher import FetchOutcome, RobotsTxtFetcher
    from .storecalls import GuardedStore

logger = logging.getLogger(__name__)

#: Polling for a robots.txt another worker fetches: the first and the last interval, doubling between.
PEER_POLL_SECONDS = (0.01, 0.2)


class OriginCoordinator:
    """Knows, for each origin, the state to decide its requests by."""

    #: After a local fault (not the site's), the origin is tried again this soon.
    FAULT_SECONDS = 60.0

    def __init__(
        self,
        crawler: Crawler,
        store: GuardedStore,
        fetcher: RobotsTxtFetcher,
        *,
        cache_seconds: float,
        cache_min_seconds: float,
        unavailable_seconds: float,
        claim_seconds: float,
        max_origins: int,
        fetched: Callable[[str, RobotsTxt], object] | None = None,
    ) -> None:
        self._crawler = crawler
        self._stats = crawler.stats
        self._store = store
        self._fetcher = fetcher
        self._cache_seconds = cache_seconds
        self._cache_min_seconds = cache_min_seconds
        self._unavailable_seconds = unavailable_seconds
        # How long peers wait for the worker that fetches: then its claim expires and they fetch.
        self._claim_seconds = claim_seconds
        self._max_origins = max(1, max_origins)
        self._fetched = fetched  # told of each robots.txt fetched here, before its waiters go on
        # Origin -> the waiters of its fetch; an origin is here exactly while its fetch runs.
        self._waiters: dict[str, list[Deferred[OriginState]]] = {}
        self._refreshing: dict[str, OriginState] = {}  # origin -> the stale state being refreshed
        self._silent_before: set[str] = set()  # origins fetched again after being unavailable
        # Origin -> (until, cause) of a local fault; bounded like the store.
        self._faults: OrderedDict[str, tuple[float, str]] = OrderedDict()
        # Origin -> expiry of the state whose sitemaps this process announced.
        self._announced: OrderedDict[str, float] = OrderedDict()

    @property
    def busy(self) -> bool:
        return bool(self._waiters)

    def known(self, origin: str, request: Request) -> OriginState | None:
        """The state to decide *request* by if known without waiting; raises :class:`RobotsTxtFault` under a fault."""
        self._raise_fault(origin)
        if origin in self._waiters:
            return self._refreshing.get(origin)
        return self._use(origin, self._store.peek(origin), request)

    def fresh(self, origin: str) -> OriginState | None:
        """The origin's state if known here without I/O and fresh; nothing fetched, refreshed or announced."""
        if origin in self._waiters or origin in self._faults:
            return None
        state = self._store.peek(origin)
        return state if state is not None and state.expires_at > time.time() else None

    def unknown(self, origin: str) -> bool:
        """Whether nothing here decides the origin's requests yet: no fetch or fault under way, no fresh state."""
        return origin not in self._waiters and origin not in self._faults and self.fresh(origin) is None

    def waiter(self, origin: str, request: Request) -> Deferred[OriginState]:
        """A Deferred of the state to decide *request* by, from the store or a fetch (errback: RobotsTxtFault)."""
        return deferred_from_coro(self._state_for(origin, request))

    async def _state_for(self, origin: str, request: Request) -> OriginState:
        stored: OriginState | None = None
        if origin not in self._waiters:
            stored = await self._store.get(origin)
            state = self._use(origin, stored, request)
            if state is not None:
                return state
            self._raise_fault(origin)
        stale = self._refreshing.get(origin)
        if stale is not None:
            return stale
        waiter: Deferred[OriginState] = Deferred()
        if origin in self._waiters:
            self._waiters[origin].append(waiter)
        else:  # no fetch started while the store answered: start one
            if stored is not None and stored.unavailable:
                self._silent_before.add(origin)
            # Registered first: a fetch answered at once (HTTP cache, non-asyncio reactor) must release it too.
            self._start_fetch(origin, request, stale=None, waiters=[waiter])
        return await maybe_deferred_to_future(waiter)

    def _use(self, origin: str, state: OriginState | None, request: Request) -> OriginState | None:
        """Put *state* to use: start a refresh if stale, announce its sitemaps; None if a fetch must come first."""
        if state is None:
            return None
        if state.expires_at <= time.time():
            if state.unavailable:
                return None
            if origin not in self._waiters:
                self._stats.inc_value("robotstxt/refresh_count")
                self._start_fetch(origin, request, stale=state)
        self._announce(origin, state, request)
        return state

    def _raise_fault(self, origin: str) -> None:
        fault = self._faults.get(origin)
        if fault is None:
            return
        until, cause = fault
        if until <= time.time():
            del self._faults[origin]
            return
        raise RobotsTxtFault(f"robots.txt of {origin} could not be fetched here ({cause}); retried in a minute")

    def _start_fetch(
        self,
        origin: str,
        request: Request,
        stale: OriginState | None,
        waiters: list[Deferred[OriginState]] | None = None,
    ) -> None:
        self._waiters[origin] = waiters or []
        if stale is not None:
            self._refreshing[origin] = stale
        deferred_from_coro(self._fetch(origin, request, stale))

    async def _fetch(self, origin: str, request: Request, stale: OriginState | None) -> None:
        result: OriginState | RobotsTxtFault | SpiderClosing = RobotsTxtFault(
            f"robots.txt of {origin}: fetch interrupted"
        )
        try:
            result = await self._fetch_unless_a_peer_does(origin, request, stale)
        except (RobotsTxtFault, SpiderClosing) as stopped:
            result = stopped  # a closing spider sends its waiters back to the scheduler
        except Exception as exc:
            result = self._fault(origin, stale, LocalFault(describe(exc)))
            if isinstance(result, OriginState):
                self._store.set_later(origin, result, None)
        finally:
            self._refreshing.pop(origin, None)
            self._silent_before.discard(origin)
            for waiter in self._waiters.pop(origin, ()):
                if waiter.called:  # cancelled: its request left
                    continue
                if isinstance(result, (RobotsTxtFault, SpiderClosing)):
                    waiter.errback(result)
                else:
                    waiter.callback(result)

    async def _fetch_unless_a_peer_does(self, origin: str, request: Request, stale: OriginState | None) -> OriginState:
        """Fetch and store robots.txt or, while a peer holds the claim, wait (at most its lifetime) for its answer."""
        interval, longest = PEER_POLL_SECONDS
        deadline = time.monotonic() + self._claim_seconds
        while not (claimed := await self._store.claim(origin, self._claim_seconds)):
            if time.monotonic() >= deadline:
                break  # the peer is gone or stuck: fetch here
            await loop.sleep(interval)
            if compat.engine_closing(self._crawler.engine):
                raise SpiderClosing(f"{origin}: no longer waiting for another worker's fetch, the spider is closing")
            interval = min(interval * 2, longest)
            state = await self._store.get(origin)
            if state is not None and state.expires_at > time.time():
                self._announce(origin, state, request)
                return state
        stored = False
        try:
            outcome = await self._fetcher.fetch(origin, request)
            state = self._state_after(origin, outcome, stale)
            # None: the rules of a kept state are those the store already holds.
            body = outcome.body if isinstance(outcome, Rules) else None if state.robots is not None else b""
            # Not awaited: a store keeps it at once, so waiters skip a shared store's round trip. This ends the claim.
            self._store.set_later(origin, state, body)
            stored = True
        finally:
            if claimed and not stored:
                # Nothing learnt: a peer may fetch the origin now, not when the claim expires.
                self._store.release_later(origin)
        if isinstance(outcome, Rules):
            if self._fetched is not None:
                self._fetched(origin, outcome.robots)
            await self._parsed(origin, outcome, request)
        self._announce(origin, state, request)
        return state

    def _state_after(self, origin: str, outcome: FetchOutcome, stale: OriginState | None) -> OriginState:
        """The origin's state after a fetch; raises :class:`RobotsTxtFault` for a local fault on a first fetch."""
        now = time.time()
        if isinstance(outcome, Rules):
            return OriginState(outcome.robots, False, now + self._lifetime(outcome.max_age), digest(outcome.body))
        if isinstance(outcome, LocalFault):
            kept_or_fault = self._fault(origin, stale, outcome)
            if isinstance(kept_or_fault, RobotsTxtFault):
                raise kept_or_fault
            return kept_or_fault
        kept = stale is not None and not stale.unavailable
        if isinstance(outcome, Unrestricted) and not (kept and outcome.server_error):
            logger.debug(
                "robots.txt of %s gives no rules (%s): unrestricted",
                origin,
                outcome.reason,
                extra={"spider": self._crawler.spider},
            )
            return OriginState(None, False, now + self._lifetime(outcome.max_age), outcome.answer)
        reason = outcome.reason if isinstance(outcome, Unrestricted) else outcome.cause
        if kept:
            # RFC 9309 §2.3.1.4 allows the cached copy: an outage neither opens disallowed paths nor drops the site.
            assert stale is not None
            self._stats.inc_value("robotstxt/refresh_failed")
            logger.info(
                "Refresh of robots.txt of %s failed (%s): its rules stay, tried again in %s s",
                origin,
                reason,
                self._unavailable_seconds,
                extra={"spider": self._crawler.spider},
            )
            return OriginState(stale.robots, False, now + self._unavailable_seconds, stale.answer)
        self._stats.inc_value("robotstxt/unavailable/events")
        if stale is None and origin not in self._silent_before:
            self._stats.inc_value("robotstxt/unavailable/origins")
        logger.warning(
            "robots.txt of %s did not answer (%s): its requests are dropped for %s s",
            origin,
            reason,
            self._unavailable_seconds,
            extra={"spider": self._crawler.spider},
        )
        return OriginState(None, True, now + self._unavailable_seconds, f"no answer: {reason}")

    def _lifetime(self, max_age: float | None) -> float:
        """How long an answer is kept: what it asks, between ROBOTSTXT_CACHE_MIN_SECONDS (so that no-cache
        does not make every request refetch) and ROBOTSTXT_CACHE_SECONDS (RFC 9309 §2.4: a day at most)."""
        if max_age is None:
            return self._cache_seconds
        return min(self._cache_seconds, max(self._cache_min_seconds, max_age))

    def _fault(self, origin: str, stale: OriginState | None, fault: LocalFault) -> OriginState | RobotsTxtFault:
        """A fault that is not the site's: for FAULT_SECONDS a stale state stays, else the origin's requests fail."""
        self._stats.inc_value("robotstxt/local_faults")
        logger.warning(
            "robots.txt of %s could not be fetched (%s): not the site's fault, tried again in %s s",
            origin,
            fault.cause,
            self.FAULT_SECONDS,
            extra={"spider": self._crawler.spider},
        )
        until = time.time() + self.FAULT_SECONDS
        if stale is not None:
            return OriginState(stale.robots, stale.unavailable, until, stale.answer)
        self._faults[origin] = (until, fault.cause)
        while len(self._faults) > self._max_origins:
            self._faults.popitem(last=False)
        return RobotsTxtFault(f"robots.txt of {origin} could not be fetched here ({fault.cause})")

    async def _parsed(self, origin: str, rules: Rules, request: Request) -> None:
        if compat.ROBOTS_PARSED is not None:
            await compat.send_catch_log_async(
                self._crawler.signals, compat.ROBOTS_PARSED, robotparser=rules.robots, request=request
            )

    def _announce(self, origin: str, state: OriginState, request: Request) -> None:
        """Send :data:`robotstxt_sitemaps_found` once per state with sitemaps this process uses, whoever fetched it."""
        robots = state.robots
        # The cheap test first: this runs for every request of the origin.
        if robots is None or self._announced.get(origin) == state.expires_at:
            return
        listed = robots.sitemaps
        if not listed or compat.engine_closing(self._crawler.engine):
            return  # after the spider closed, none could be requested
        first = origin not in self._announced
        self._announced[origin] = state.expires_at
        self._announced.move_to_end(origin)
        while len(self._announced) > self._max_origins:
            self._announced.popitem(last=False)
        if len(listed) > MAX_SITEMAPS and first:  # a refresh does not count them again
            self._crawler.stats.inc_value("robotstxt/sitemaps/not_handed_over", len(listed) - MAX_SITEMAPS)
            logger.info(
                "robots.txt of %s lists %d sitemaps: the first %d are handed over",
                origin,
                len(listed),
                MAX_SITEMAPS,
                extra={"spider": self._crawler.spider},
            )
        sitemaps = listed_sitemaps(robots_url(origin), listed)
        self._crawler.signals.send_catch_log(
            signal=robotstxt_sitemaps_found, origin=origin, sitemaps=sitemaps, request=request
        )
