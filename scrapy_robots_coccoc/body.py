"""robots.txt bodies in a crawl: bounded whatever ``DOWNLOAD_MAXSIZE`` says,
inflated no further than the parser reads (see ``_content``), and parsed off
the reactor.

:class:`RobotsTxtBodyMiddleware` sees robots.txt responses before Scrapy's
``HttpCompressionMiddleware`` (order 590) could inflate them whole.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from ._content import decoded, encodings_of
from ._robotstxt import RobotsTxt

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: Bodies larger than this are parsed in a thread: a hostile one may take a
#: tenth of a second, which the reactor (every download of the crawl) must
#: not wait for; the interpreter hands it the GIL every few milliseconds.
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parsed(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, with the rules *agent* obeys built, without holding
    the reactor for long: in the asyncio loop's own executor, or in
    Twisted's thread pool under another reactor."""
    if len(body) <= PARSE_IN_THREAD_BYTES:
        return parse_for(body, agent)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        return await maybe_deferred_to_future(deferToThread(parse_for, body, agent))
    return await loop.run_in_executor(None, parse_for, body, agent)


def parse_for(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, and the rules *agent* obeys built (wildcards split):
    on a hostile body that takes longer than the parse itself, and would
    otherwise fall on the reactor at the first request decided. A store
    then also counts the bytes of what the crawl uses."""
    robots = RobotsTxt.parse(body)
    robots.allowed("/", agent)
    return robots


class RobotsTxtBodyMiddleware:
    """Bounds robots.txt bodies, whatever ``DOWNLOAD_MAXSIZE`` says.

    Enabled above ``HttpCompressionMiddleware`` (at 595; the add-on does it),
    it sees robots.txt responses before they are inflated: a body compressed
    despite our ``Accept-Encoding: identity`` is inflated as a stream, no
    further than the 500 KiB the parser reads. Other responses pass untouched.
    """

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self._crawler = crawler
        self._stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: object = None) -> Response:
        if not request.meta.get("robotstxt_fetch"):
            return response
        encodings = encodings_of(response.headers.getlist(b"Content-Encoding"))
        if not encodings:
            return response
        headers = response.headers.copy()
        del headers[b"Content-Encoding"]
        body = decoded(response.body, encodings)
        if body is None:
            # The site sent rules we cannot read: worth a look, not silence.
            self._stats.inc_value("robotstxt/unreadable")
            logger.warning(
                "robots.txt at %s is unreadable (Content-Encoding %r: not supported here, or corrupt): "
                "its rules are ignored, the site is unrestricted",
                response.url,
                b", ".join(encodings)[:100].decode("latin-1"),
                extra={"spider": self._crawler.spider},
            )
            return response.replace(body=b"", headers=headers, flags=[*response.flags, "robotstxt_unreadable"])
        self._stats.inc_value("robotstxt/compressed")
        return response.replace(body=body, headers=headers)
