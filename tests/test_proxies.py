"""The robots.txt request goes the way of its page: from its bind address,
through its proxy, with its proxy credentials. A proxy that refuses or
cannot be reached is a local fault, not the site's silence."""

from __future__ import annotations

import socket

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from scrapy_robots_coccoc.exceptions import OriginUnavailable, RobotsTxtFault, RobotsTxtForbidden

from .crawling import RecordingSpider, bounded_crawl, stat
from .sites import RULES, HostileSite, LoopbackSite, Page, robots, unused_port


@pytest_twisted.ensureDeferred
async def test_robotstxt_request_leaves_from_the_bindaddress_of_its_page(sites):
    (site,) = sites(HostileSite(pages={"/robots.txt": robots(RULES)}))
    meta = {"bindaddress": ("127.0.0.99", 0)}
    crawler = await bounded_crawl(urls=[site.url("/private/x"), site.url("/a")], follow=False, meta=meta)
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert dict(site.clients) == {"/robots.txt": "127.0.0.99", "/a": "127.0.0.99"}


@pytest_twisted.ensureDeferred
async def test_robotstxt_request_goes_through_the_proxy_of_its_page(sites):
    (proxy,) = sites(HostileSite())
    target = f"http://127.0.0.98:{unused_port('127.0.0.98')}"  # reached only through the proxy
    proxy.pages[f"{target}/robots.txt"] = robots(RULES)
    meta = {"proxy": proxy.address}
    urls = [f"{target}/private/x", f"{target}/a"]
    crawler = await bounded_crawl(urls=urls, follow=False, meta=meta)
    assert crawler.spider.crawled == [f"{target}/a"], crawler.spider.failures
    assert isinstance(crawler.spider.failures[f"{target}/private/x"], IgnoreRequest)
    assert proxy.paths() == [f"{target}/robots.txt", f"{target}/a"]


class AuthenticatingProxy(HostileSite):
    """A proxy (fake: it serves its pages by absolute URL) that answers 407
    to a request without a Proxy-Authorization header."""

    def render_GET(self, request):
        if request.getHeader("Proxy-Authorization") != "Basic dXNlcjpwYXNz":  # user:pass
            self.log.append((0.0, "407 " + request.uri.decode()))
            request.setResponseCode(407)
            return b""
        return super().render_GET(request)


@pytest.mark.parametrize(
    ("meta", "headers"),
    [
        ({"proxy": "http://user:pass@{proxy}"}, {}),
        ({"proxy": "http://{proxy}"}, {"Proxy-Authorization": "Basic dXNlcjpwYXNz"}),
    ],
    ids=["in-the-proxy-url", "in-a-header"],
)
@pytest_twisted.ensureDeferred
async def test_robotstxt_goes_through_an_authenticating_proxy_with_the_pages_credentials(sites, meta, headers):
    """Including after a redirect to another origin, where HttpProxyMiddleware
    has moved the credentials of the proxy URL into a header."""
    (proxy,) = sites(AuthenticatingProxy())
    target = f"http://127.0.0.98:{unused_port('127.0.0.98')}"  # reached only through the proxy
    other = f"http://127.0.0.97:{unused_port('127.0.0.97')}"
    proxy.pages[f"{target}/robots.txt"] = robots("User-agent: *\nAllow: /\n")
    proxy.pages[f"{target}/start"] = Page(status=301, headers={"Location": f"{other}/private/x"})
    proxy.pages[f"{other}/robots.txt"] = robots(RULES)
    meta = {"proxy": meta["proxy"].format(proxy=proxy.address.removeprefix("http://"))}

    class Spider(RecordingSpider):
        async def start(self):
            for url in self.urls:
                yield Request(url, meta=dict(meta), headers=headers, errback=self.failed, dont_filter=True)

    crawler = await bounded_crawl(spider=Spider, urls=[f"{target}/start"], follow=False)
    assert crawler.spider.crawled == []
    assert isinstance(crawler.spider.failures[f"{other}/private/x"], RobotsTxtForbidden)
    assert not [path for path in proxy.paths() if path.startswith("407")]


@pytest_twisted.ensureDeferred
async def test_a_proxy_asking_for_credentials_is_a_local_fault_not_a_site_without_rules(sites):
    (proxy,) = sites(AuthenticatingProxy())
    target = f"http://127.0.0.98:{unused_port('127.0.0.98')}"
    proxy.pages[f"{target}/robots.txt"] = robots(RULES)
    urls = [f"{target}/private/x", f"{target}/a"]
    crawler = await bounded_crawl(urls=urls, follow=False, meta={"proxy": proxy.address})
    assert crawler.spider.crawled == []
    assert all(isinstance(crawler.spider.failures[url], RobotsTxtFault) for url in urls)
    assert stat(crawler, "robotstxt/local_faults") == 1
    assert proxy.paths() == [f"407 {target}/robots.txt"]


class RefusingTunnelProxy(HostileSite):
    """A proxy that answers 407 to CONNECT, as Scrapy asks for https URLs."""

    def render_CONNECT(self, request):
        self.log.append((0.0, "CONNECT " + request.uri.decode()))
        request.setResponseCode(407)
        return b""


@pytest_twisted.ensureDeferred
async def test_a_proxy_refusing_a_tunnel_is_a_local_fault_not_a_silent_site(sites):
    """For https, the proxy's 407 comes as Scrapy's TunnelError: it was "no
    answer", and the site's pages were dropped for an hour (for every
    worker, with a shared store)."""
    (proxy,) = sites(RefusingTunnelProxy())
    target = f"https://127.0.0.98:{unused_port('127.0.0.98')}"
    urls = [f"{target}/private/x", f"{target}/a"]
    crawler = await bounded_crawl(urls=urls, follow=False, meta={"proxy": proxy.address})
    assert all(isinstance(crawler.spider.failures[url], RobotsTxtFault) for url in urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/local_faults") == 1
    assert stat(crawler, "robotstxt/unavailable/events") is None
    assert proxy.paths() == [f"CONNECT {target.removeprefix('https://')}"]


@pytest_twisted.ensureDeferred
async def test_an_unreachable_proxy_is_a_local_fault_not_a_silent_site(sites):
    """A refused connection to the page's proxy was the site's silence: its
    pages were dropped for an hour (for every worker, with a shared store)."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES)}))
    dead = f"http://127.0.0.50:{unused_port('127.0.0.50')}"  # nothing listens there
    urls = [site.url("/a"), site.url("/private/x")]
    crawler = await bounded_crawl(urls=urls, follow=False, meta={"proxy": dead})
    assert all(isinstance(crawler.spider.failures[url], RobotsTxtFault) for url in urls), crawler.spider.failures
    assert "unreachable" in str(crawler.spider.failures[urls[0]])
    assert stat(crawler, "robotstxt/local_faults") == 1
    assert stat(crawler, "robotstxt/unavailable/events") is None
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_a_site_silent_behind_a_live_proxy_is_a_silent_site(sites):
    """Scrapy 2.13's download timeout is a Twisted ConnectError: through a
    proxy it passed for the proxy's failure."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES)}))
    with socket.socket() as proxy:  # accepts, never answers
        proxy.bind(("127.0.0.60", 0))
        proxy.listen(8)
        address = f"http://127.0.0.60:{proxy.getsockname()[1]}"
        crawler = await bounded_crawl(
            {"DOWNLOAD_TIMEOUT": 0.5, "ROBOTSTXT_MAX_RETRIES": 0},
            urls=[site.url("/a")],
            follow=False,
            meta={"proxy": address},
        )
    assert isinstance(crawler.spider.failures[site.url("/a")], OriginUnavailable), crawler.spider.failures
    assert stat(crawler, "robotstxt/local_faults") is None
