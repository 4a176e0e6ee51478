"""Origins: the unit a robots.txt covers (RFC 9309 §2.3: scheme, host, port)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from scrapy.utils.httpobj import urlparse_cached

if TYPE_CHECKING:
    from scrapy import Request

DEFAULT_PORTS = {"http": 80, "https": 443}
# A DNS name (RFC 1035 §2.3.4): Twisted's resolver fails unhandled on others; the request waits out DOWNLOAD_TIMEOUT.
_DNS_NAME = re.compile(r"(?=.{1,253}\.?\Z)(?:[^.]{1,63}\.)*[^.]{1,63}\.?")


class InvalidOrigin(ValueError):
    """A URL no server can answer: its origin is not one any other URL shares."""


def origin_of(request: Request) -> str:
    """``scheme://host:port`` of *request*'s URL (host lower-cased, default port added), or :class:`InvalidOrigin`."""
    try:
        parsed = urlparse_cached(request)
        port = parsed.port
    except ValueError as exc:
        raise InvalidOrigin(f"invalid host or port in {request.url!r}: {exc}") from None
    if parsed.scheme not in DEFAULT_PORTS:
        raise InvalidOrigin(f"not an http(s) URL: {request.url!r}")
    host = parsed.hostname
    if not host:
        raise InvalidOrigin(f"no host in {request.url!r}")
    if ":" not in host and _DNS_NAME.fullmatch(host) is None:
        raise InvalidOrigin(f"invalid host name in {request.url[:300]!r}")
    if port == 0:
        raise InvalidOrigin(f"invalid port in {request.url!r}")
    if port is None:
        port = DEFAULT_PORTS[parsed.scheme]
    if ":" in host:
        host = f"[{host}]"
    return f"{parsed.scheme}://{host}:{port}"


def robots_url(origin: str) -> str:
    """The robots.txt URL of *origin*, without the default port, as a site's own links usually are."""
    scheme, _, hostport = origin.partition("://")
    host, _, port = hostport.rpartition(":")
    if int(port) == DEFAULT_PORTS[scheme]:
        hostport = host
    return f"{scheme}://{hostport}/robots.txt"
