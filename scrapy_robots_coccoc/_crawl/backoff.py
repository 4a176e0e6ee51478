"""Backoff: an origin that answers 429 or 503, or sends ``Retry-After``, is paused; its requests wait, parked."""

from __future__ import annotations

import logging
import random
import re
import time
from collections import OrderedDict
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.utils.python import to_unicode
from twisted.internet.task import deferLater

from . import loop
from .origins import InvalidOrigin, origin_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from .parking import Parking
    from .storecalls import GuardedStore

logger = logging.getLogger(__name__)

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
TOO_MANY_REQUESTS = 429


class Backoff:
    """Pauses an origin on a ``ROBOTSTXT_BACKOFF_STATUSES`` answer for its ``Retry-After``, else the base pause
    doubled per incident in a row, at most ``ROBOTSTXT_BACKOFF_MAX_SECONDS``; its requests wait, parked."""

    #: After this long without an incident, an origin's next pause starts from the base again (StormCrawler's).
    FORGIVE_SECONDS = 1800.0
    #: Pauses without Retry-After vary by this share, so that paused workers do not all come back at once.
    JITTER = 0.1

    def __init__(
        self,
        crawler: Crawler,
        store: GuardedStore,
        parking: Parking,
        statuses: set[int],
        base: float,
        maximum: float,
        max_origins: int,
    ) -> None:
        self._crawler = crawler
        self._stats = crawler.stats
        self._store = store
        self._parking = parking
        self._statuses = statuses
        self._base = base
        self._max = maximum
        self._max_origins = max(1, max_origins)
        self._incidents: OrderedDict[str, tuple[int, float]] = OrderedDict()  # origin -> (in a row, pause end)
        # Sent for every answer of the download handler, before RetryMiddleware (550) turns it into a retry.
        crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)

    def paused(self, origin: str) -> bool:
        return self._store.paused_until(origin) > time.time()

    async def wait(self, request: Request, origin: str) -> None:
        """Wait, parked, until *origin*'s pause (if any) ends. Parked whatever ROBOTSTXT_MAX_PARKED_REQUESTS
        says: a paused site's backlog holding downloader places would stall every other site for the pause."""
        delay = self._store.paused_until(origin) - time.time()
        if delay > 0:
            self._stats.inc_value("robotstxt/backoff/waited")
            await self._parking.wait(request, deferLater(loop.clock(), delay), bounded=False)

    def _downloaded(self, response: Response, request: Request, spider: object = None) -> None:
        fetch = request.meta.get("robotstxt_fetch")
        if request.meta.get("dont_obey_robotstxt") and not fetch:
            return  # an unobeyed request asks for no politeness
        header = response.headers.get(b"Retry-After")
        if response.status not in self._statuses and header is None:
            return
        if fetch and header is None and response.status != TOO_MANY_REQUESTS:
            return  # a robots.txt 5xx decides the rules (RFC 9309 §2.3.1.4); only a rate limit pauses the site
        try:
            origin = origin_of(request)
        except InvalidOrigin:
            return
        now = time.time()
        asked = None if header is None else retry_after(header, now)
        if asked is None and response.status not in self._statuses:
            return  # an unreadable Retry-After on another answer
        if self._store.paused_until(origin) > now:
            # An answer to a request sent before the pause: the same incident, which a Retry-After may extend.
            if asked is not None:
                self._store.pause_later(origin, now + min(asked, self._max))
            return
        in_a_row, ended = self._incidents.pop(origin, (0, 0.0))
        # Forgiven after a quiet period counted from the end of the last pause, not from its start.
        in_a_row = 1 if now - ended > self.FORGIVE_SECONDS else in_a_row + 1
        if asked is not None:
            pause, why = min(asked, self._max), "Retry-After"
            self._stats.inc_value("robotstxt/backoff/retry_after")
        else:
            doubled = self._base * 2 ** min(in_a_row - 1, 32)
            pause = min(doubled * random.uniform(1 - self.JITTER, 1 + self.JITTER), self._max)
            why = f"backoff, incident {in_a_row} in a row"
        self._incidents[origin] = (in_a_row, now + pause)
        if len(self._incidents) > self._max_origins:
            self._incidents.popitem(last=False)
        self._stats.inc_value("robotstxt/backoff/incidents")
        self._stats.max_value("robotstxt/backoff/longest_pause", round(pause, 3))
        self._store.pause_later(origin, now + pause)
        logger.info(
            "%s answered %s: its requests wait %.1f s (%s)",
            origin,
            response.status,
            pause,
            why,
            extra={"spider": self._crawler.spider},
        )


def retry_after(value: bytes, now: float) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait (RFC 9110 §10.2.3: seconds, or an HTTP date); None if unreadable."""
    text = to_unicode(value, errors="replace").strip()
    if _SECONDS.fullmatch(text):
        return float(text)  # RFC 9110 asks for whole seconds; a decimal is read as meant
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
