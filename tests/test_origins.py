"""Exact origins (docs/contract.md, section 3, "Fetching robots.txt"): the
URL's own scheme, host and port; a request whose host or port is invalid
fails with IgnoreRequest and touches no origin."""

from __future__ import annotations

import logging
import socket

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest

from .crawling import bad_records, bounded_crawl, stat
from .sites import RULES, LoopbackSite, listen, robots, unused_port


@pytest_twisted.ensureDeferred
async def test_port_zero_and_dead_port_touch_no_other_origin(own_sites, caplog):
    caplog.set_level(logging.INFO)
    host = "127.0.0.77"
    live = LoopbackSite(pages={"/robots.txt": robots(RULES)})
    try:
        # Port 80, so that "port 0 means the default port" would hit it.
        own_sites.append(listen(live, host, 80))
    except Exception:
        own_sites.append(listen(live, host))
    dead = unused_port(host)
    zero_urls = [f"http://{host}:0/page", f"http://{host}:0/private/x"]
    dead_urls = [f"http://{host}:{dead}/page", f"http://{host}:{dead}/private/x"]
    urls = [*zero_urls, *dead_urls, live.url("/private/x"), live.url("/a")]
    crawler = await bounded_crawl({"DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 0}, urls=urls, follow=False)
    failures = crawler.spider.failures
    assert crawler.spider.crawled == [live.url("/a")]
    for url in zero_urls:
        assert isinstance(failures[url], IgnoreRequest), failures.get(url)
        assert "port" in str(failures[url]), str(failures[url])
    for url in dead_urls:
        assert isinstance(failures[url], IgnoreRequest), failures.get(url)
        assert str(failures[url]), "the IgnoreRequest must say why"
    # The live origin's own rules still decide its requests.
    assert isinstance(failures[live.url("/private/x")], IgnoreRequest)
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert live.paths() == ["/robots.txt", "/a"]
    assert stat(crawler, "robotstxt/unavailable/origins") == 1  # the dead port only
    assert stat(crawler, "robotstxt/invalid_url") == 2
    assert bad_records(caplog) == []


@pytest_twisted.ensureDeferred
async def test_a_host_that_is_no_dns_name_touches_no_origin(sites, caplog):
    caplog.set_level(logging.INFO)
    urls = [f"http://{'a' * 64}.test/page", "http://a..test/page"]
    crawler = await bounded_crawl({"DOWNLOAD_TIMEOUT": 5}, urls=urls, follow=False, timeout=3)
    for url in urls:
        assert "invalid host name" in str(crawler.spider.failures[url]), crawler.spider.failures
    assert stat(crawler, "robotstxt/invalid_url") == 2
    assert stat(crawler, "robotstxt/fault/dropped") == 2
    assert stat(crawler, "robotstxt/request_count") is None
    assert bad_records(caplog) == []


def has_ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
@pytest_twisted.ensureDeferred
async def test_ipv6_literal_site_is_obeyed(own_sites):
    site = listen(LoopbackSite(pages={"/robots.txt": robots(RULES)}), "::1")
    own_sites.append(site)
    assert site.address.startswith("http://[::1]:")
    urls = [site.url("/private/x"), site.url("/a"), site.url("/b")]
    crawler = await bounded_crawl({"DNS_RESOLVER": "scrapy.resolver.CachingHostnameResolver"}, urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls[1:]), crawler.spider.failures
    assert isinstance(crawler.spider.failures[urls[0]], IgnoreRequest)
    assert site.paths().count("/robots.txt") == 1
    assert stat(crawler, "robotstxt/forbidden") == 1
