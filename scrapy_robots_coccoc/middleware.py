"""``RobotsTxtMiddleware``: fetch each origin's robots.txt once, decide every
request by it, and pace the site by its Crawl-delay.

It orchestrates; the rules live in the parser, the per-origin outcome in a
store, the pacing in :mod:`.crawldelay`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured, StopDownload
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.python import to_unicode
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from ._robotstxt import MAX_BYTES, RobotsTxt
from .crawldelay import CrawlDelays
from .signals import robotstxt_sitemaps_found
from .stores import OriginState

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from .stores import Store

logger = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# How often to look for a robots.txt another worker is fetching: from the
# first to the last interval, doubling.
PEER_POLL_SECONDS = (0.01, 0.2)


class RobotsTxtMiddleware:
    """A drop-in replacement for Scrapy's ``RobotsTxtMiddleware``."""

    DOWNLOAD_PRIORITY = 1000

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self._stats = crawler.stats
        self._user_agent: str | None = settings.get("ROBOTSTXT_USER_AGENT")
        self._default_user_agent: str = settings.get("USER_AGENT") or "Scrapy"
        # The agent whose Crawl-delay paces a site: the crawl's own robot.
        self._crawl_agent: str = self._user_agent or self._default_user_agent
        self._max_redirects = settings.getint("ROBOTSTXT_MAX_REDIRECTS", 5)
        self._max_retries = settings.getint("ROBOTSTXT_MAX_RETRIES", 1)
        self._cache_seconds = settings.getfloat("ROBOTSTXT_CACHE_SECONDS", 86400)
        self._unavailable_seconds = settings.getfloat("ROBOTSTXT_UNAVAILABLE_SECONDS", 3600)
        self._max_parked = settings.getint("ROBOTSTXT_MAX_PARKED_REQUESTS", 10_000)
        # How long workers sharing a store wait for the one that fetches an
        # origin's robots.txt: one hop's worst case. A longer fetch may be
        # repeated by a peer; a crashed worker holds its peers no longer.
        self._claim_seconds = settings.getfloat("DOWNLOAD_TIMEOUT", 180) * (self._max_retries + 1) + 5
        self._store: Store = build_from_crawler(
            load_object(settings.get("ROBOTSTXT_STORE", "scrapy_robots_coccoc.stores.MemoryStore")), crawler
        )
        self._delays = (
            CrawlDelays(crawler, settings.getfloat("ROBOTSTXT_MAX_CRAWL_DELAY", 10), self._store)
            if settings.getbool("ROBOTSTXT_CRAWL_DELAY_ENABLED", True)
            else None
        )
        # Origin -> Deferreds of the requests waiting for its robots.txt; an
        # origin is in here exactly while its fetch is in flight.
        self._waiters: dict[str, list[Deferred[OriginState]]] = {}
        self._refreshing: dict[str, OriginState] = {}  # origin -> the stale state being refreshed
        self._parked: set[Request] = set()
        crawler.signals.connect(self._keep_open_while_fetching, signal=signals.spider_idle)
        crawler.signals.connect(self._truncate_robotstxt, signal=signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_request(self, request: Request, spider: object = None) -> Response | None:
        if request.meta.get("dont_obey_robotstxt") or not request.url.startswith(("http://", "https://")):
            return
        origin = origin_of(request)
        state = await self._state_for(origin, request)
        self._decide(request, origin, state)
        if request.meta.get("robotstxt_only"):
            # The request only wanted the origin's robots.txt known (the
            # sitemap mixin seeds a crawl this way): nothing to download.
            return Response(request.url, request=request, flags=["robotstxt_only"])
        if self._delays is not None and state.robots is not None:
            wait = self._delays.apply(request, origin, state.robots.crawl_delay(self._crawl_agent))
            if wait > 0:
                with self._parked_while_waiting(request):
                    await sleep(wait)
        return None

    async def _state_for(self, origin: str, request: Request) -> OriginState:
        """The state to decide *request* by, fetching robots.txt when needed."""
        if origin in self._waiters:
            # A fetch is in flight: decide by the rules it refreshes, or wait
            # for it (without asking a shared store again and again).
            return self._refreshing.get(origin) or await self._wait_for(origin, request)
        state = self._store.get(origin)
        now = time.time()
        if state is None or (state.expires_at <= now and state.unavailable):
            return await self._wait_for(origin, request)
        if state.expires_at <= now:
            # Stale rules: refresh in the background, keep deciding by them.
            self._stats.inc_value("robotstxt/refresh_count")
            self._refreshing[origin] = state
            self._start_fetch(origin, request)
        return state

    def _decide(self, request: Request, origin: str, state: OriginState) -> None:
        if state.unavailable:
            self._stats.inc_value("robotstxt/unavailable/dropped")
            raise IgnoreRequest(f"robots.txt of {origin} did not answer: site unavailable for now")
        robots = state.robots
        if robots is None:
            return
        user_agent = self._user_agent_of(request)
        if not robots.allowed(request.url, user_agent):
            decision = robots.explain(request.url, user_agent)
            reason = f"group {decision.agent!r}, {decision.rule}"
            logger.debug(
                "Forbidden by robots.txt (%(reason)s): %(request)s",
                {"reason": reason, "request": request},
                extra={"spider": self.crawler.spider},
            )
            self._stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest(f"Forbidden by robots.txt ({reason})")

    def _user_agent_of(self, request: Request) -> str:
        agent = request.meta.get("robotstxt_user_agent") or self._user_agent
        if not agent:
            agent = request.headers.get(b"User-Agent") or self._default_user_agent
        return to_unicode(agent)

    async def _wait_for(self, origin: str, request: Request) -> OriginState:
        """Wait for the origin's robots.txt, starting the fetch if none is in
        flight, without holding one of the downloader's concurrency places."""
        if origin not in self._waiters:
            self._start_fetch(origin, request)
        waiter: Deferred[OriginState] = Deferred()
        self._waiters[origin].append(waiter)
        with self._parked_while_waiting(request):
            return await maybe_deferred_to_future(waiter)

    def _start_fetch(self, origin: str, request: Request) -> None:
        self._waiters[origin] = []
        deferred_from_coro(self._fetch_and_store(origin, request))

    async def _fetch_and_store(self, origin: str, request: Request) -> None:
        state = await self._fetch_unless_a_peer_does(origin, request)
        self._refreshing.pop(origin, None)
        for waiter in self._waiters.pop(origin, ()):
            waiter.callback(state)

    async def _fetch_unless_a_peer_does(self, origin: str, request: Request) -> OriginState:
        """Fetch and store robots.txt, or, while another worker sharing the
        store fetches it, wait for what that worker stores."""
        interval, longest = PEER_POLL_SECONDS
        while not self._store.claim(origin, self._claim_seconds):
            await sleep(interval)
            interval = min(interval * 2, longest)
            state = self._store.get(origin)
            if state is not None and state.expires_at > time.time():
                return state
        try:
            state, body = await self._fetch(origin, request)
        except Exception:
            logger.exception("Error while fetching robots.txt of %s", origin, extra={"spider": self.crawler.spider})
            state, body = self._unrestricted()
        self._store.set(origin, state, body)
        return state

    async def _fetch(self, origin: str, request: Request) -> tuple[OriginState, bytes]:
        """GET robots.txt, following up to ``ROBOTSTXT_MAX_REDIRECTS`` hops."""
        parsed = urlparse_cached(request)
        url = f"{parsed.scheme}://{parsed.netloc}/robots.txt"
        for hop in range(self._max_redirects + 1):
            self._stats.inc_value("robotstxt/request_count")
            try:
                response = await self.crawler.engine.download_async(self._robotstxt_request(url))
            except IgnoreRequest:
                return self._unrestricted()
            except Exception as exc:
                return self._unavailable(origin, exc)
            self._stats.inc_value("robotstxt/response_count")
            self._stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            location = response.headers.get(b"Location")
            if response.status in REDIRECT_STATUSES and location:
                if hop == self._max_redirects:
                    break
                self._stats.inc_value("robotstxt/redirect_count")
                url = urljoin(response.url, to_unicode(location, errors="replace"))
                continue
            if response.status != 200:
                break
            return await self._parsed(response, origin, request)
        return self._unrestricted()

    def _robotstxt_request(self, url: str) -> Request:
        return Request(
            url,
            priority=self.DOWNLOAD_PRIORITY,
            dont_filter=True,
            callback=NO_CALLBACK,
            # Uncompressed: the 500 KiB cut then applies to the text itself,
            # not to a compressed stream that could inflate to far more.
            headers={"Accept-Encoding": "identity"},
            meta={
                "dont_obey_robotstxt": True,
                "dont_redirect": True,
                "handle_httpstatus_all": True,
                "allow_offsite": True,
                "max_retry_times": self._max_retries,
                "robotstxt_fetch": True,
            },
        )

    async def _parsed(self, response: Response, origin: str, request: Request) -> tuple[OriginState, bytes]:
        robots = RobotsTxt.parse(response.body)
        await self.crawler.signals.send_catch_log_async(
            signal=signals.robots_parsed, robotparser=robots, request=request
        )
        if robots.sitemaps:
            await self.crawler.signals.send_catch_log_async(
                signal=robotstxt_sitemaps_found, origin=origin, sitemaps=robots.sitemaps, request=request
            )
        return OriginState(robots, False, time.time() + self._cache_seconds), response.body

    def _unrestricted(self) -> tuple[OriginState, bytes]:
        return OriginState(None, False, time.time() + self._cache_seconds), b""

    def _unavailable(self, origin: str, exc: Exception) -> tuple[OriginState, bytes]:
        self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
        self._stats.inc_value("robotstxt/unavailable/origins")
        logger.info(
            "robots.txt of %s did not answer (%s): its requests are dropped for %s s",
            origin,
            exc,
            self._unavailable_seconds,
            extra={"spider": self.crawler.spider},
        )
        return OriginState(None, True, time.time() + self._unavailable_seconds), b""

    @contextmanager
    def _parked_while_waiting(self, request: Request) -> Iterator[None]:
        """Take a waiting request out of the downloader's active set, so that
        a slow robots.txt does not hold a concurrency place other sites could
        use, and put it back before it goes on to download."""
        engine = self.crawler.engine
        active = engine.downloader.active if engine else set()
        if request not in active or len(self._parked) >= self._max_parked:
            yield
            return
        active.discard(request)
        self._parked.add(request)
        slot = getattr(engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()  # the engine may now start another request
        try:
            yield
        finally:
            self._parked.discard(request)
            active.add(request)

    def _keep_open_while_fetching(self) -> None:
        if self._waiters or self._parked:
            raise DontCloseSpider

    def _truncate_robotstxt(self, data: bytes, request: Request, spider: object = None) -> None:
        """Stop a robots.txt download once the parser has all it will read."""
        if not request.meta.get("robotstxt_fetch"):
            return
        received = request.meta.get("robotstxt_received", 0) + len(data)
        request.meta["robotstxt_received"] = received
        if received >= MAX_BYTES:
            self._stats.inc_value("robotstxt/truncated")
            raise StopDownload(fail=False)


def origin_of(request: Request) -> str:
    """Return ``scheme://host:port`` of a request, the unit robots.txt covers."""
    parsed = urlparse_cached(request)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{parsed.hostname}:{port}"


async def sleep(seconds: float) -> None:
    """Wait without blocking the reactor."""
    from twisted.internet import reactor

    await maybe_deferred_to_future(deferLater(reactor, seconds))
