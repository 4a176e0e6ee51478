"""The one door to Scrapy internals and to names that differ between Scrapy versions (2.13 to the newest).

:func:`check` fails at start-up when one is missing; ``tests/test_compat.py`` holds a canary per name."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import signals as scrapy_signals
from scrapy.core import downloader as downloader_module
from scrapy.core.downloader import Downloader, Slot
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.core.engine import ExecutionEngine
from scrapy.downloadermiddlewares.httpproxy import HttpProxyMiddleware
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import dnscache
from scrapy.spiders import CrawlSpider, SitemapSpider
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import CancelledError

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.signalmanager import SignalManager

SCRAPY_VERSION = tuple(int(part) for part in re.findall(r"\d+", scrapy.__version__)[:2])
#: Scrapy 2.14 to 2.19's RobotsTxtMiddleware checks only the first request waiting for a robots.txt fetch.
STOCK_MIDDLEWARE_SKIPS_WAITERS = (2, 14) <= SCRAPY_VERSION <= (2, 19)

#: Scrapy's own robots.txt middleware, which ours replaces.
STOCK_ROBOTSTXT_MIDDLEWARE = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"

#: The clock of ``Slot.lastseen``: ``time.monotonic`` from Scrapy 2.18, ``time.time`` before.
_SLOT_CLOCK: Callable[[], float] = getattr(downloader_module, "monotonic", None) or time.time

#: HttpProxyMiddleware's meta key for the proxy a ``Proxy-Authorization`` header is for (dropped for any other).
PROXY_AUTH_META = "_auth_proxy"

#: TunnelError gives the proxy's answer to CONNECT in its message only.
_TUNNEL_STATUS = re.compile(r"\[\{'status': (\d{3}),")

#: Scrapy's ``robots_parsed`` signal (2.18+); None where Scrapy has none.
ROBOTS_PARSED: object | None = getattr(scrapy_signals, "robots_parsed", None)

#: What a download cancelled over ``download_maxsize`` fails with: Twisted's error, Scrapy's own from 2.14.
_DOWNLOAD_CANCELLED: tuple[type[BaseException], ...] = tuple(
    error for error in (CancelledError, getattr(scrapy.exceptions, "DownloadCancelledError", None)) if error
)


class ScrapyIncompatible(RuntimeError):
    """A Scrapy internal this package relies on is missing."""


def check() -> None:
    """Raise :class:`ScrapyIncompatible` naming every internal this Scrapy lacks."""
    missing = [
        name
        for name, present in (
            ("ExecutionEngine.download or download_async", _has(ExecutionEngine, "download_async", "download")),
            ("ExecutionEngine._slot", "_slot" in ExecutionEngine.__init__.__code__.co_names),
            ("Downloader.active", "active" in Downloader.__init__.__code__.co_names),
            ("Downloader.slots", "slots" in Downloader.__init__.__code__.co_names),
            ("Slot.latercall", "latercall" in Slot.__init__.__code__.co_names),
            ("Slot.queue", "queue" in Slot.__init__.__code__.co_names),
            ("Slot.transferring", "transferring" in Slot.__init__.__code__.co_names),
            (
                "HttpProxyMiddleware's _auth_proxy meta key",
                PROXY_AUTH_META in HttpProxyMiddleware._set_proxy_and_creds.__code__.co_consts,
            ),
            ("SitemapSpider._cbs", "_cbs" in SitemapSpider.__init__.__code__.co_names),
            ("SitemapSpider._follow", "_follow" in SitemapSpider.__init__.__code__.co_names),
            ("CrawlSpider._errback", hasattr(CrawlSpider, "_errback")),
        )
        if not present
    ]
    if missing:
        raise ScrapyIncompatible(
            f"scrapy-robots-coccoc does not support Scrapy {scrapy.__version__}: it lacks {', '.join(missing)}"
        )


def _has(cls: type, *names: str) -> bool:
    return any(hasattr(cls, name) for name in names)


async def download(engine: ExecutionEngine, request: Request) -> Response:
    """Download *request* outside the scheduler: ``ExecutionEngine.download_async`` (2.14+), else ``download``."""
    if hasattr(engine, "download_async"):
        return await engine.download_async(request)
    return await maybe_deferred_to_future(engine.download(request))


async def send_catch_log_async(signal_manager: SignalManager, signal: object, **kwargs: Any) -> None:
    """``SignalManager.send_catch_log_async`` from Scrapy 2.14, else ``send_catch_log_deferred``."""
    if hasattr(signal_manager, "send_catch_log_async"):
        await signal_manager.send_catch_log_async(signal=signal, **kwargs)
    else:
        await maybe_deferred_to_future(signal_manager.send_catch_log_deferred(signal=signal, **kwargs))


def downloader_active(engine: ExecutionEngine) -> set[Request]:
    """``Downloader.active``: the requests counted against ``CONCURRENT_REQUESTS``."""
    return engine.downloader.active


def offsite(engine: ExecutionEngine, request: Request) -> bool:
    """Whether an enabled downloader ``OffsiteMiddleware`` will drop *request* (``Downloader.middleware``): its
    ``dont_filter`` and ``allow_offsite`` exceptions, then its public ``should_follow``."""
    if request.dont_filter or request.meta.get("allow_offsite") or engine.spider is None:
        return False
    return any(
        isinstance(middleware, OffsiteMiddleware) and not middleware.should_follow(request, engine.spider)
        for middleware in engine.downloader.middleware.middlewares
    )


def has_errback(request: Request) -> bool:
    """Whether an errback of the spider's waits for *request*'s failure. ``CrawlSpider`` gives every request of its
    rules its own ``_errback``, which passes the failure to the rule's errback only if the rule has one
    (``CrawlSpider._rules``, the ``rule`` meta key)."""
    errback = request.errback
    spider = getattr(errback, "__self__", None)
    if not isinstance(spider, CrawlSpider) or getattr(errback, "__func__", None) is not CrawlSpider._errback:
        return errback is not None
    rules = getattr(spider, "_rules", ())
    index = request.meta.get("rule")
    return not isinstance(index, int) or not 0 <= index < len(rules) or rules[index].errback is not None


def wake_engine(engine: ExecutionEngine) -> None:
    """Make the engine look for requests to start on its next turn (``ExecutionEngine._slot.nextcall``)."""
    if engine._slot is not None:
        engine._slot.nextcall.schedule()


def close_spider(engine: ExecutionEngine, reason: str) -> None:
    """Close the spider with *reason*: ``close_spider_async`` on Scrapy 2.14+, ``close_spider`` before."""
    if hasattr(engine, "close_spider_async"):
        deferred_from_coro(engine.close_spider_async(reason=reason))
    elif engine.spider is not None:
        engine.close_spider(engine.spider, reason)


def engine_closing(engine: ExecutionEngine | None) -> bool:
    """Whether the engine is stopped or closing the spider (``_slot.closing``); one not running yet is not."""
    return engine is None or engine._slot is None or engine._slot.closing is not None


def slot_key(engine: ExecutionEngine, request: Request) -> str:
    """``Downloader.get_slot_key``: the slot *request* goes (or went) through."""
    return engine.downloader.get_slot_key(request)


def moved_to(engine: ExecutionEngine, request: Request, paced_key: str) -> str | None:
    """The slot *request* reached if not *paced_key* nor its IP's (``CONCURRENT_REQUESTS_PER_IP``), else None."""
    key = slot_key(engine, request)
    return None if key in (paced_key, dnscache.get(paced_key)) else key


def _live_slot(engine: ExecutionEngine, request: Request) -> Slot | None:
    return engine.downloader.slots.get(slot_key(engine, request))


def slot_full(engine: ExecutionEngine, request: Request, on_the_way: Iterable[Request] = ()) -> bool:
    """Whether *request*'s slot would queue it if released now, *on_the_way* (released toward it) counted."""
    live = _live_slot(engine, request)
    if live is None:
        return False
    taken = live.transferring.union((queued for queued, _ in live.queue), on_the_way)
    return len(taken) >= live.concurrency


def slot_hold(engine: ExecutionEngine, request: Request) -> float:
    """At most how long *request*'s slot would hold it if released now: its delay at the largest draw, or its
    scheduled release (``Slot.latercall``), whichever is later."""
    live = _live_slot(engine, request)
    if live is None:
        return 0.0
    scheduled = _seconds_until(live.latercall)
    if not live.delay:
        return scheduled
    return max(scheduled, live.lastseen + _longest_draw(live) - _SLOT_CLOCK())


def slot_delay(engine: ExecutionEngine, request: Request) -> float:
    """The delay of *request*'s slot (``DOWNLOAD_DELAY``, AutoThrottle's) at its largest draw; 0 without a slot."""
    live = _live_slot(engine, request)
    return 0.0 if live is None or not live.delay else _longest_draw(live)


def _longest_draw(live: Slot) -> float:
    # 2.19+ draws delay x (1 +/- jitter); before, randomize_delay drew 0.5x to 1.5x.
    jitter = live.jitter if hasattr(live, "jitter") else 0.5 if live.randomize_delay else 0.0
    return float(live.delay * (1 + jitter))


def _seconds_until(call: Any) -> float:
    """Seconds until a slot's scheduled release, 0 if none: a Twisted ``DelayedCall`` before Scrapy 2.14, then a
    ``CallLaterResult`` wrapping one or an asyncio ``TimerHandle``."""
    handle = getattr(call, "_timer_handle", None)
    if handle is not None:
        return 0.0 if handle.cancelled() else max(0.0, handle.when() - asyncio.get_running_loop().time())
    delayed = getattr(call, "_delayed_call", call)
    if delayed is None or not delayed.active():
        return 0.0
    return max(0.0, delayed.getTime() - delayed.seconds())  # on the clock of the reactor that scheduled it


def proxy_refused(exc: BaseException) -> bool:
    """Whether *exc* is a proxy's 4xx answer to CONNECT (407, 403): the proxy's refusal, not the site's silence."""
    found = _TUNNEL_STATUS.search(str(exc)) if isinstance(exc, TunnelError) else None
    return found is not None and 400 <= int(found[1]) < 500


def sitemap_callbacks(spider: SitemapSpider) -> list[tuple[re.Pattern[str], Callable[..., Any]]]:
    """``SitemapSpider._cbs``: the compiled ``sitemap_rules``."""
    return spider._cbs


def sitemap_follow(spider: SitemapSpider) -> list[re.Pattern[str]]:
    """``SitemapSpider._follow``: the compiled ``sitemap_follow``."""
    return spider._follow


def over_download_bound(exc: BaseException) -> bool:
    """Whether *exc* is Scrapy giving a response up past its ``download_maxsize``: while inflating it
    (``_DecompressionMaxSizeExceeded``), or cancelled over its announced size."""
    if isinstance(exc, IgnoreRequest):
        return isinstance(exc.__cause__, _DecompressionMaxSizeExceeded)
    return isinstance(exc, _DOWNLOAD_CANCELLED) and "max size" in str(exc)
