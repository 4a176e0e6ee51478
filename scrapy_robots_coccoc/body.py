"""The middleware that bounds robots.txt bodies before Scrapy inflates them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from ._parser.body import decoded, encodings_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class RobotsTxtBodyMiddleware:
    """Bounds robots.txt bodies, whatever ``DOWNLOAD_MAXSIZE`` says: above ``HttpCompressionMiddleware`` (590; the
    add-on puts it at 595), it inflates a body compressed despite our ``Accept-Encoding: identity`` as a stream, no
    further than the 500 KiB the parser reads. Other responses pass untouched."""

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
