"""Redirects of the robots.txt fetch (docs/contract.md, section 3, "Fetching
robots.txt"): followed up to 5 hops, across hosts, to http and https URLs
only; any other target, or one Scrapy cannot request, is a failed redirect,
which leaves the robot unrestricted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import pytest_twisted

from .crawling import bad_records, bounded_crawl, crawl, stat
from .sites import LoopbackSite, Page, robots, site_with


@pytest_twisted.ensureDeferred
async def test_redirects_followed_across_hosts_up_to_five_hops(sites):
    target, hops = sites(site_with(), LoopbackSite())
    # robots.txt -> /r1 -> ... -> /r4 -> other host's robots.txt: 5 hops.
    hops.pages["/robots.txt"] = Page(status=301, headers={"Location": "/r1"})
    for i in range(1, 4):
        hops.pages[f"/r{i}"] = Page(status=302, headers={"Location": f"/r{i + 1}"})
    hops.pages["/r4"] = Page(status=307, headers={"Location": target.url("/robots.txt")})
    crawler = await crawl({"REDIRECT_MAX_TIMES": 1}, urls=[hops.url("/private/x"), hops.url("/ok")], follow=False)
    assert crawler.spider.crawled == [hops.url("/ok")]
    assert stat(crawler, "robotstxt/redirect_count") == 5

    hops.pages["/r4"] = Page(status=302, headers={"Location": "/r5"})
    hops.pages["/r5"] = Page(status=302, headers={"Location": target.url("/robots.txt")})
    crawler = await crawl(urls=[hops.url("/private/x")], follow=False)
    assert crawler.spider.crawled == [hops.url("/private/x")]  # past 5 hops: unrestricted


def non_web_locations(tmp_path: Path) -> dict[str, str]:
    rules = tmp_path / "robots.txt"
    rules.write_text("User-agent: *\nDisallow: /\n")
    return {
        "file": rules.as_uri(),
        "data": "data:text/plain,User-agent: *%0ADisallow: /",
        "ftp": "ftp://127.0.0.1/robots.txt",
        "s3": "s3://bucket/robots.txt",
        "javascript": "javascript:alert(1)",
        "empty": "",
        "malformed": "http://[::1",
        "port-zero": "http://127.0.0.1:0/robots.txt",
        "port-out-of-range": "http://127.0.0.1:99999/robots.txt",
        # Not DNS names: Twisted's resolver failed with an unhandled error,
        # and the fetch waited for its whole DOWNLOAD_TIMEOUT.
        "label-too-long": f"http://{'a' * 64}.test/robots.txt",
        "empty-label": "http://a..test/robots.txt",
    }


@pytest.mark.parametrize("status", [301, 302])
@pytest.mark.parametrize(
    "kind",
    [
        "file",
        "data",
        "ftp",
        "s3",
        "javascript",
        "empty",
        "malformed",
        "port-zero",
        "port-out-of-range",
        "label-too-long",
        "empty-label",
    ],
)
@pytest_twisted.ensureDeferred
async def test_redirect_off_the_web_is_unrestricted(sites, caplog, tmp_path, kind, status):
    caplog.set_level(logging.INFO)
    location = non_web_locations(tmp_path)[kind]
    (site,) = sites(LoopbackSite(pages={"/robots.txt": Page(status=status, headers={"Location": location})}))
    urls = [site.url("/"), site.url("/private/x")]
    crawler = await bounded_crawl(urls=urls, follow=False)
    # A "Disallow: /" read from the target would have forbidden both.
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/forbidden") is None
    assert stat(crawler, "robotstxt/redirect_count") is None
    assert stat(crawler, "robotstxt/unavailable/origins") is None
    assert site.paths().count("/robots.txt") == 1
    assert bad_records(caplog) == []


@pytest.mark.parametrize("kind", ["file", "data", "javascript"])
@pytest_twisted.ensureDeferred
async def test_redirect_off_the_web_at_a_later_hop_is_unrestricted(sites, caplog, tmp_path, kind):
    caplog.set_level(logging.INFO)
    location = non_web_locations(tmp_path)[kind]
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = Page(status=301, headers={"Location": "/hop1"})
    site.pages["/hop1"] = Page(status=307, headers={"Location": "/hop2"})
    site.pages["/hop2"] = Page(status=302, headers={"Location": location})
    urls = [site.url("/"), site.url("/private/x")]
    crawler = await bounded_crawl(urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/redirect_count") == 2
    assert site.paths()[:3] == ["/robots.txt", "/hop1", "/hop2"]
    assert bad_records(caplog) == []


@pytest_twisted.ensureDeferred
async def test_redirect_scrapy_cannot_follow_is_the_sites_doing(sites, caplog):
    # Scrapy refuses a URL with credentials ("invalid hostname"): a failed
    # redirect, which allows, not a fault of ours, which would drop the site.
    caplog.set_level(logging.INFO)
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = Page(status=302, headers={"Location": site.url("/rules").replace("//", "//u:p@")})
    site.pages["/rules"] = robots("User-agent: *\nDisallow: /\n")
    urls = [site.url("/"), site.url("/private/x")]
    crawler = await bounded_crawl(urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/redirect_count") == 1
    assert stat(crawler, "robotstxt/local_faults") is None
    assert site.paths().count("/robots.txt") == 1
    assert bad_records(caplog) == []
