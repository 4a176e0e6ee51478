"""``RobotsTxtMiddleware``: decide every request by its origin's robots.txt and pace the site by its
Crawl-delay, orchestrating the machinery in ``_crawl``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary, WeakSet, ref

from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.python import to_unicode

from ._crawl import compat, loop
from ._crawl import settings as _settings
from ._crawl.backoff import Backoff
from ._crawl.coordinator import OriginCoordinator
from ._crawl.fetcher import RobotsTxtFetcher
from ._crawl.origins import InvalidOrigin, origin_of
from ._crawl.pacing import CrawlDelays
from ._crawl.parking import Parking, SpiderClosing
from ._crawl.prefetch import Prefetch
from ._crawl.record import ComplianceRecord
from ._crawl.report import CrawlReport
from ._crawl.storecalls import GuardedStore
from ._crawl.usage import UsageCheck
from ._parser.useragent import robot_name
from .body import RobotsTxtBodyMiddleware
from .exceptions import (
    CrawlDelayOverCap,
    OriginUnavailable,
    RobotsTxtFault,
    RobotsTxtForbidden,
    RobotsTxtOnly,
    UsageDisallowed,
)
from .stores import MemoryStore, StoreSetupError

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from ._parser import RobotsTxt
    from .stores import OriginState, Store

logger = logging.getLogger(__name__)

#: The middleware of each running crawler, for RobotsTxtSpiderMiddleware.
_OF_CRAWLER: WeakKeyDictionary[Crawler, ref[RobotsTxtMiddleware]] = WeakKeyDictionary()

# The dont_filter of a request sent back to the scheduler at close.
_SENT_BACK_DONT_FILTER = "_robotstxt_dont_filter"

#: The finish reason of a crawl stopped because its store cannot work.
STORE_UNUSABLE = "robotstxt_store_unusable"
#: The finish reason of a crawl stopped because its compliance record cannot be written.
RECORD_UNWRITABLE = "robotstxt_record_unwritable"

COMPRESSION_MIDDLEWARE = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"


class RobotsTxtMiddleware:
    """A drop-in replacement for Scrapy's ``RobotsTxtMiddleware``."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        compat.check()
        self.crawler = crawler
        self._stats = crawler.stats
        self._user_agent = _settings.user_agent(settings)
        self._default_user_agent: str = settings.get("USER_AGENT") or "Scrapy"
        self._crawl_agent = _settings.robot_agent(settings)
        self._usage = UsageCheck(crawler)
        crawler.signals.connect(self._warn_if_unnamed, signal=signals.spider_opened)
        max_retries = _settings.count(settings, "ROBOTSTXT_MAX_RETRIES", 1)
        max_origins = _settings.count(settings, "ROBOTSTXT_MAX_ORIGINS", 100_000, minimum=1)
        self._unusable: RobotsTxtFault | None = None
        self._finish_reason = STORE_UNUSABLE  # of a crawl stopped because of _unusable
        store = self._build_store(crawler, max_origins)
        self._record = self._build_record(crawler, max_origins)
        fetcher = RobotsTxtFetcher(
            crawler,
            _settings.count(settings, "ROBOTSTXT_MAX_REDIRECTS", 5),
            max_retries,
            self._check_middlewares(crawler),
            self._record,
        )
        guarded = GuardedStore(
            store,
            crawler,
            _settings.number(settings, "ROBOTSTXT_STORE_TIMEOUT", 10, positive=True),
            max_origins,
        )
        concurrency = settings.getint("CONCURRENT_REQUESTS")
        max_parked = _settings.count(settings, "ROBOTSTXT_MAX_PARKED_REQUESTS", max(100, 10 * concurrency))
        self._parking = Parking(crawler, max_parked)
        self._delays = (
            CrawlDelays(
                crawler,
                _settings.number(settings, "ROBOTSTXT_MAX_CRAWL_DELAY", 10),
                guarded.reserve,
                self._parking,
                max_origins,
                _settings.choice(settings, "ROBOTSTXT_CRAWL_DELAY_OVER_CAP", ("clamp", "honour", "skip")),
            )
            if settings.getbool("ROBOTSTXT_CRAWL_DELAY_ENABLED", True)
            else None
        )
        self._report = CrawlReport(crawler, self._delays, max_origins)
        self._backoff = (
            Backoff(
                crawler,
                guarded,
                self._parking,
                {int(status) for status in settings.getlist("ROBOTSTXT_BACKOFF_STATUSES", [429, 503])},
                _settings.number(settings, "ROBOTSTXT_BACKOFF_BASE_SECONDS", 60),
                _settings.number(settings, "ROBOTSTXT_BACKOFF_MAX_SECONDS", 3600),
                max_origins,
            )
            if settings.getbool("ROBOTSTXT_BACKOFF_ENABLED", True)
            else None
        )
        self._origins = OriginCoordinator(
            crawler,
            guarded,
            fetcher,
            cache_seconds=_settings.number(settings, "ROBOTSTXT_CACHE_SECONDS", 86400),
            cache_min_seconds=_settings.number(settings, "ROBOTSTXT_CACHE_MIN_SECONDS", 60),
            unavailable_seconds=_settings.number(settings, "ROBOTSTXT_UNAVAILABLE_SECONDS", 3600),
            # A crashed peer's fetch lock holds the others one hop's worst case, an hour at most.
            claim_seconds=min(settings.getfloat("DOWNLOAD_TIMEOUT", 180) * (max_retries + 1) + 5, 3600.0),
            max_origins=max_origins,
            fetched=self._fetched,
        )
        self._prefetch = (
            Prefetch(crawler, self._origins, concurrency) if settings.getbool("ROBOTSTXT_PREFETCH", False) else None
        )
        # Requests returned to the scheduler when the spider closed.
        self._sent_back: WeakSet[Request] = WeakSet()
        self._learning = 0  # origins being made known for the sitemap mixin, outside any download
        crawler.signals.connect(self._keep_open_while_fetching, signal=signals.spider_idle)
        _OF_CRAWLER[crawler] = ref(self)  # a strong value would keep its crawler (the key) alive

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _build_store(self, crawler: Crawler, max_origins: int) -> Store:
        """The ``ROBOTSTXT_STORE``; one that cannot work here stops the crawl at start-up with one ERROR line
        (an exception would end in a long traceback), and no request is decided meanwhile."""
        path = crawler.settings.get("ROBOTSTXT_STORE", "scrapy_robots_coccoc.stores.MemoryStore")
        try:
            return build_from_crawler(load_object(path), crawler)
        except StoreSetupError as exc:
            logger.error("ROBOTSTXT_STORE %s: %s. The crawl stops.", path, exc, extra={"crawler": crawler})
            self._stop_at_start(f"ROBOTSTXT_STORE unusable: {exc}", STORE_UNUSABLE)
            return MemoryStore(max_origins)

    def _build_record(self, crawler: Crawler, max_origins: int) -> ComplianceRecord | None:
        """The compliance record of ``ROBOTSTXT_RECORD_DIR``; a directory that cannot hold it stops the crawl at
        start-up with one ERROR line, as an unusable store does."""
        directory = crawler.settings.get("ROBOTSTXT_RECORD_DIR")
        if not directory:
            return None
        try:
            return ComplianceRecord(crawler, str(directory), self._usage.purposes, max_origins, self._record_failed)
        except OSError as exc:
            logger.error(
                "ROBOTSTXT_RECORD_DIR %s cannot hold the compliance record (%s). The crawl stops.",
                directory,
                exc,
                extra={"crawler": crawler},
            )
            self._stop_at_start(f"compliance record unwritable: {exc}", RECORD_UNWRITABLE)
            return None

    def _stop_at_start(self, cause: str, reason: str) -> None:
        """Decide no request (each fails with *cause*), and close the spider with *reason* once the engine runs."""
        self._unusable, self._finish_reason = RobotsTxtFault(cause), reason
        self.crawler.signals.connect(self._stop, signal=signals.engine_started)

    def _stop(self) -> None:
        engine, reason = self.crawler.engine, self._finish_reason
        # A turn later: the engine runs once engine_started has been sent.
        loop.call_later(0, lambda: compat.close_spider(engine, reason))

    def _record_failed(self, cause: str) -> None:
        """The record cannot be written: no request is decided from now on, and the crawl stops."""
        self._unusable, self._finish_reason = RobotsTxtFault(cause), RECORD_UNWRITABLE
        self._stop()

    @staticmethod
    def _check_middlewares(crawler: Crawler) -> bool:
        """Warn about a setup that fetches robots.txt twice or unbounded; whether the body is bounded."""
        enabled = build_component_list(crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
        names = [name if isinstance(name, str) else f"{name.__module__}.{name.__qualname__}" for name in enabled]
        if compat.STOCK_ROBOTSTXT_MIDDLEWARE in names:
            logger.warning(
                "Scrapy's own RobotsTxtMiddleware is enabled beside scrapy_robots_coccoc's: every robots.txt "
                "is fetched twice and both policies apply. Set DOWNLOADER_MIDDLEWARES[%r] = None.",
                compat.STOCK_ROBOTSTXT_MIDDLEWARE,
            )
        body = f"{RobotsTxtBodyMiddleware.__module__}.{RobotsTxtBodyMiddleware.__qualname__}"
        public = "scrapy_robots_coccoc.RobotsTxtBodyMiddleware"
        position = next((i for i, name in enumerate(names) if name in (body, public)), None)
        compression = names.index(COMPRESSION_MIDDLEWARE) if COMPRESSION_MIDDLEWARE in names else -1
        if position is None or position < compression:
            project = crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")
            disabled = any(
                value is None and load_object(key) is RobotsTxtBodyMiddleware for key, value in project.items()
            )
            advice = (
                "The project disables it (None in DOWNLOADER_MIDDLEWARES); remove that entry"
                if disabled
                else f"Add DOWNLOADER_MIDDLEWARES[{public!r}] = 595, or enable scrapy_robots_coccoc.Addon"
            )
            logger.warning(
                "%s is not enabled above HttpCompressionMiddleware (590): robots.txt bodies are bounded only by "
                "DOWNLOAD_MAXSIZE. %s.",
                public,
                advice,
            )
            return False
        return True

    async def process_request(self, request: Request, spider: object = None) -> Request | Response | None:
        if _SENT_BACK_DONT_FILTER in request.meta:
            # Back from a close: its own dont_filter again, or its redirects
            # would pass the duplicate and offsite filters for ever after.
            request.dont_filter = request.meta.pop(_SENT_BACK_DONT_FILTER)
        if request.meta.get("dont_obey_robotstxt") or not request.url.startswith(("http://", "https://")):
            return None
        origin: str | None = None
        try:
            if self._unusable is not None:
                raise self._unusable
            origin = self._origin_of(request)
            if self._prefetch is not None:
                self._prefetch.reached(origin)
            state = self._origins.known(origin, request)
            if state is None:
                state = await self._parking.wait(request, self._origins.waiter(origin, request))
            robots = self._decide(request, origin, state)
            if request.meta.get("robotstxt_only"):
                # The request only wanted the origin's robots.txt known (the
                # sitemap mixin seeds a crawl this way): nothing to download.
                raise RobotsTxtOnly(f"robots.txt of {origin} known; robotstxt_only request not downloaded")
            if robots is not None:
                self._usage.note(request, robots, self._user_agent_of(request))
            if self._record is not None:
                # Nothing is downloaded before its decision is on record; written before the Crawl-delay turn,
                # which must stay the last wait, or a slow write releases several turns of a site at once.
                self._record.decided(request, origin, self._user_agent_of(request), state, None)
                await self._record.written()
            await self._wait_to_start(request, origin, state)
        except SpiderClosing:
            if request not in self._sent_back:
                # Back to the scheduler: a persistent one keeps it for the next run.
                self._stats.inc_value("robotstxt/rescheduled_on_close")
                returned = request.replace(dont_filter=True)  # it was let through once already
                returned.meta[_SENT_BACK_DONT_FILTER] = request.dont_filter
                self._sent_back.add(returned)
                return returned
            # Back at once (downloaded outside the scheduler: a media pipeline,
            # scrapy shell): returned again, it would go round for ever.
            self._stats.inc_value("robotstxt/dropped_on_close")
            closing = RobotsTxtFault(f"spider closing: {request} not downloaded")
            self._faulted(request, origin, closing)
            raise closing from None
        except RobotsTxtFault as fault:
            # Counted per request, like forbidden and unavailable ones: the
            # fault itself is logged once per origin.
            self._stats.inc_value("robotstxt/fault/dropped")
            self._faulted(request, origin, fault)
            if self._record is not None:
                await self._record.caught_up()
            raise
        except (RobotsTxtForbidden, UsageDisallowed, OriginUnavailable) as decided:
            if self._record is not None:
                await self._record.caught_up()
            self._report.dropped(request, decided)
            raise
        return None

    def _faulted(self, request: Request, origin: str | None, fault: RobotsTxtFault) -> None:
        """Report a request dropped for a fault, nothing decided by robots.txt."""
        if self._record is not None:
            self._record.decided(request, origin, self._user_agent_of(request), None, fault)
        self._report.dropped(request, fault)

    async def learn(self, request: Request) -> None:
        """Make *request*'s origin known, fetching its robots.txt if need be, and so announce its sitemaps
        (:data:`~scrapy_robots_coccoc.signals.robotstxt_sitemaps_found`); nothing is downloaded for *request*
        itself. Raises :class:`OriginUnavailable` or :class:`RobotsTxtFault`, as a downloaded request would end."""
        self._learning += 1
        try:
            if self._unusable is not None:
                raise self._unusable
            origin = self._origin_of(request)
            state = self._origins.known(origin, request)
            if state is None:
                state = await maybe_deferred_to_future(self._origins.waiter(origin, request))
        except SpiderClosing as closing:
            raise RobotsTxtFault(str(closing)) from None
        finally:
            self._learning -= 1
        if state.unavailable:
            raise OriginUnavailable(f"robots.txt of {origin} did not answer: site unavailable for now")

    def before_queue(self, request: Request) -> bool:
        """Drop *request*, as :meth:`process_request` would, if its origin's rules are known here and forbid
        it; True when dropped. A request with an errback is left to the downloader, whose exception its
        errback must see. With ``ROBOTSTXT_PREFETCH`` an unknown origin's robots.txt is prefetched; nothing is
        waited for."""
        if request.meta.get("dont_obey_robotstxt") or not request.url.startswith(("http://", "https://")):
            return False
        try:
            origin = origin_of(request)
        except InvalidOrigin:
            return False
        state = self._origins.fresh(origin)
        if state is None:
            if self._prefetch is not None and self._unusable is None and not self._offsite(request):
                self._prefetch.request_yielded(origin, request)
            return False
        if state.robots is None or compat.has_errback(request) or request.meta.get("robotstxt_only"):
            return False
        if self._record is not None and self._record.backlogged:
            return False  # decided when downloaded: the record's unwritten decisions stay bounded
        try:
            self._decide(request, origin, state)
        except RobotsTxtForbidden as forbidden:
            if not isinstance(forbidden, CrawlDelayOverCap):  # of robotstxt/forbidden; skips count on their own
                self._stats.inc_value("robotstxt/forbidden/before_queue")
            self._report.dropped(request, forbidden)
            return True
        except UsageDisallowed as disallowed:
            self._report.dropped(request, disallowed)
            return True
        return False

    def process_response(self, request: Request, response: Response, spider: object = None) -> Response:
        if self._delays is not None:
            self._delays.left(request)
        if not request.meta.get("robotstxt_fetch"):
            self._usage.annotate(request, response, robot_name(self._user_agent_of(request)))
        return response

    def process_exception(self, request: Request, exception: Exception, spider: object = None) -> None:
        if self._delays is not None:
            self._delays.left(request)

    async def _wait_to_start(self, request: Request, origin: str, state: OriginState) -> None:
        """Wait out the origin's pause, then its Crawl-delay turn; a pause that began meanwhile is waited out
        too, the turn given back."""
        while True:
            if self._backoff is not None:
                await self._backoff.wait(request, origin)
            if self._delays is not None and state.robots is not None:
                await self._delays.wait_turn(request, origin, state.robots, self._crawl_agent)
            if self._backoff is None or not self._backoff.paused(origin):
                return
            if self._delays is not None:
                self._delays.left(request)

    def _fetched(self, origin: str, robots: RobotsTxt) -> None:
        """A robots.txt fetched here is a request to its site: the first page waits its Crawl-delay after it."""
        if self._delays is not None:
            self._delays.fetched(origin, robots, self._crawl_agent)

    def _origin_of(self, request: Request) -> str:
        try:
            return origin_of(request)
        except InvalidOrigin as exc:
            self._stats.inc_value("robotstxt/invalid_url")
            raise RobotsTxtFault(str(exc)) from None

    def _decide(self, request: Request, origin: str, state: OriginState) -> RobotsTxt | None:
        """Raise the exception *request* is dropped with, if any; return the rules that let it go (None: none).
        The compliance record, if kept, gets a drop here; a request let go, before its Crawl-delay turn."""
        try:
            return self._verdict(request, origin, state)
        except (RobotsTxtForbidden, UsageDisallowed, OriginUnavailable) as dropped:
            if self._record is not None:
                # A Crawl-delay is the crawl robot's, whatever the request's agent.
                agent = self._crawl_agent if isinstance(dropped, CrawlDelayOverCap) else self._user_agent_of(request)
                self._record.decided(request, origin, agent, state, dropped)
            raise

    def _verdict(self, request: Request, origin: str, state: OriginState) -> RobotsTxt | None:
        """What :meth:`_decide` decides: the stats, the report, and the exception or rules."""
        if state.unavailable:
            self._stats.inc_value("robotstxt/unavailable/dropped")
            raise OriginUnavailable(f"robots.txt of {origin} did not answer: site unavailable for now")
        robots = state.robots
        if robots is None:
            return None
        user_agent = self._user_agent_of(request)
        self._report.rules_known(origin, request, robots, user_agent)
        asked = None if self._delays is None else self._delays.skipped(robots, self._crawl_agent)
        if asked is not None:
            self._report.decided(origin, request, allowed=False)
            self._stats.inc_value("robotstxt/crawl_delay/skipped")
            raise CrawlDelayOverCap(f"Crawl-delay {asked} s over ROBOTSTXT_MAX_CRAWL_DELAY: origin skipped")
        if not robots.allowed(request.url, user_agent):
            self._report.decided(origin, request, allowed=False)
            decision = robots.explain(request.url, user_agent)
            self._stats.inc_value("robotstxt/forbidden")
            raise RobotsTxtForbidden(f"Forbidden by robots.txt (group {decision.agent!r}, {decision.rule})")
        try:
            self._usage.decide(request, robots, user_agent)
        except UsageDisallowed:
            self._report.decided(origin, request, allowed=False)
            raise
        self._report.decided(origin, request, allowed=True)
        return robots

    def _warn_if_unnamed(self, spider: object) -> None:
        """Warn once when the User-Agent the crawl sends does not name the robot it obeys as: a crawler is known by
        its user agent (draft-illyes-webbotauth-cbcp), and sites address their rules to that name. The header is
        DEFAULT_REQUEST_HEADERS' (set first), else the spider's ``user_agent``, else USER_AGENT, as Scrapy sends it."""
        name = robot_name(self._crawl_agent)
        settings = self.crawler.settings
        headers = {str(key).lower(): value for key, value in settings.getdict("DEFAULT_REQUEST_HEADERS").items()}
        sent = str(headers.get("user-agent") or getattr(spider, "user_agent", None) or settings.get("USER_AGENT") or "")
        if self._user_agent is not None and name and name not in sent.casefold():
            logger.warning(
                "The crawl obeys robots.txt as %r (ROBOTSTXT_USER_AGENT) but its User-Agent header, %r, does not "
                "name it: sites cannot tell which rules it follows. Set USER_AGENT to a value naming %r.",
                name,
                sent,
                name,
                extra={"crawler": self.crawler},
            )

    def _user_agent_of(self, request: Request) -> str:
        agent = request.meta.get("robotstxt_user_agent") or self._user_agent
        if not agent:
            agent = request.headers.get(b"User-Agent") or self._default_user_agent
        return to_unicode(agent, errors="replace")  # a header may hold any bytes

    def _offsite(self, request: Request) -> bool:
        engine = self.crawler.engine
        return engine is None or compat.offsite(engine, request)

    def _keep_open_while_fetching(self) -> None:
        if self._origins.busy or self._learning or (self._prefetch is not None and self._prefetch.busy):
            raise DontCloseSpider


def of_crawler(crawler: Crawler) -> RobotsTxtMiddleware | None:
    """The crawler's RobotsTxtMiddleware, None when it is not enabled."""
    middleware = _OF_CRAWLER.get(crawler)
    return None if middleware is None else middleware()
