"""Real Twisted web sites on loopback addresses, with a request log; sites
that misbehave (HostileSite and its handlers); the robots.txt most tests serve; a shop
whose robots.txt lists sitemaps."""

from __future__ import annotations

import gzip
import socket
import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from twisted.internet.task import deferLater
from twisted.web.http_headers import Headers
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site


@dataclass
class Page:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class LoopbackSite(Resource):
    """Serves ``pages`` (path with query -> Page, or a list of Pages served in
    turn, the last one repeating); any other path gets a small HTML page
    linking to ``links`` of that path. Logs (time, path) of each request as
    the server sees it."""

    isLeaf = True

    def __init__(
        self, pages: dict[str, Page | list[Page]] | None = None, links: dict[str, list[str]] | None = None
    ) -> None:
        super().__init__()
        self.pages: dict[str, Page | list[Page]] = pages or {}
        self.links = links or {}
        self.log: list[tuple[float, str]] = []
        self.request_headers: dict[str, Headers] = {}  # path -> headers of its last request
        self.port = None
        self.address = ""

    def render_GET(self, request):
        path = request.uri.decode()
        self.log.append((time.monotonic(), path))
        self.request_headers[path] = request.requestHeaders
        page = self.pages.get(path)
        if isinstance(page, list):
            page = page.pop(0) if len(page) > 1 else page[0]
        if page is None:
            hrefs = "".join(f'<a href="{link}">{link}</a>' for link in self.links.get(path, []))
            page = Page(f"<html><body>{path}{hrefs}</body></html>".encode())
        request.setResponseCode(page.status)
        for name, value in page.headers.items():
            request.setHeader(name, value)
        if not page.delay:
            return page.body

        def finish() -> None:
            if not request._disconnected:
                request.write(page.body)
                request.finish()

        from twisted.internet import reactor

        deferLater(reactor, page.delay, finish).addErrback(lambda _: None)
        return NOT_DONE_YET

    def requests_for(self, path: str) -> list[float]:
        return [t for t, p in self.log if p == path]

    def gaps(self) -> list[float]:
        """Seconds between the starts of consecutive requests, robots.txt aside."""
        times = [t for t, path in self.log if path != "/robots.txt"]
        return [b - a for a, b in pairwise(times)]

    def paths(self) -> list[str]:
        return [p for _, p in self.log]

    def url(self, path: str = "/") -> str:
        return f"{self.address}{path}"


class HostileSite(LoopbackSite):
    """A LoopbackSite whose ``handlers`` (path -> function of the Twisted
    request) may answer in ways a Page cannot: lying headers, broken
    connections. Records the client address of each request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handlers: dict[str, Any] = {}
        self.clients: list[tuple[str, str]] = []  # (path, client host)

    def render_GET(self, request):
        path = request.uri.decode()
        self.clients.append((path, request.getClientAddress().host))
        handler = self.handlers.get(path)
        if handler is None:
            return super().render_GET(request)
        self.log.append((0.0, path))
        return handler(request)


def serve(site: LoopbackSite, host: str) -> LoopbackSite:
    from twisted.internet import reactor

    site.port = reactor.listenTCP(0, Site(site), interface=host)
    site.address = f"http://{host}:{site.port.getHost().port}"
    return site


def listen(site: LoopbackSite, host: str, port: int = 0) -> LoopbackSite:
    from twisted.internet import reactor

    site.port = reactor.listenTCP(port, Site(site), interface=host)
    bracketed = f"[{host}]" if ":" in host else host
    site.address = f"http://{bracketed}:{site.port.getHost().port}"
    return site


def unused_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def robots(text: str, **kwargs) -> Page:
    return Page(text.encode(), headers={"Content-Type": "text/plain"}, **kwargs)


#: Forbids /private to every robot.
RULES = "User-agent: *\nDisallow: /private\n"
#: RULES, and /img/ forbidden to coccocbot-image.
IMAGE_RULES = RULES + "\nUser-agent: coccocbot-image\nDisallow: /img/\n"


def site_with(rules: str = IMAGE_RULES, **robots_kwargs) -> LoopbackSite:
    return LoopbackSite(
        pages={"/robots.txt": robots(rules, **robots_kwargs)},
        links={"/": ["/a", "/b", "/private/x", "/img/1.png"]},
    )


def broken_after(body: bytes, how: str, after: float = 0.1):
    """Write *body*, then break the connection: close it early under a larger
    Content-Length, or abort (RST) a chunked response *after* seconds."""

    def handler(request):
        from twisted.internet import reactor

        request.setHeader("Content-Type", "text/plain")
        if how == "short":
            request.setHeader("Content-Length", str(len(body) + 1000))
            request.write(body)
            request.transport.loseConnection()
        else:
            request.write(body)
            reactor.callLater(after, request.transport.abortConnection)
        return NOT_DONE_YET

    return handler


def dripping(line: bytes, every: float):
    """A robots.txt that never ends: one line every *every* seconds."""

    def handler(request):
        from twisted.internet.task import LoopingCall

        request.setHeader("Content-Type", "text/plain")
        drip = LoopingCall(request.write, line)
        drip.start(every).addErrback(lambda _: None)
        request.notifyFinish().addBoth(lambda _: drip.running and drip.stop())
        return NOT_DONE_YET

    return handler


LISTED = ["/products/1", "/products/2", "/products/secret/3", "/about"]


LISTED_GZ = ["/products/4", "/blog/5"]


def xml(body: str) -> Page:
    return Page(f'<?xml version="1.0" encoding="UTF-8"?>{body}'.encode(), headers={"Content-Type": "application/xml"})


def urlset(site: LoopbackSite, paths: list[str]) -> str:
    urls = "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in paths)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'


def shop(site: LoopbackSite, other: LoopbackSite) -> LoopbackSite:
    """Make ``site`` a shop whose robots.txt lists a sitemap index (twice)
    and another host's sitemap; the index lists a plain and a gzipped urlset."""
    site.pages["/robots.txt"] = robots(
        f"Sitemap: {site.url('/sitemap_index.xml')}\n"
        "User-agent: *\nDisallow: /products/secret\n"
        f"Sitemap: {site.url('/sitemap_index.xml')}\n"
        f"Sitemap: {other.url('/foreign.xml')}\n"
    )
    index = "".join(f"<sitemap><loc>{site.url(p)}</loc></sitemap>" for p in ("/sitemap1.xml", "/sitemap2.xml.gz"))
    site.pages["/sitemap_index.xml"] = xml(
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{index}</sitemapindex>'
    )
    site.pages["/sitemap1.xml"] = xml(urlset(site, LISTED))
    gz = f'<?xml version="1.0" encoding="UTF-8"?>{urlset(site, LISTED_GZ)}'
    site.pages["/sitemap2.xml.gz"] = Page(
        gzip.compress(gz.encode()), headers={"Content-Type": "application/octet-stream"}
    )
    return site
