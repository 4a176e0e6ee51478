"""How long an origin's rules live: what the robots.txt response asks (Cache-Control, Expires), between
ROBOTSTXT_CACHE_MIN_SECONDS and ROBOTSTXT_CACHE_SECONDS."""

from __future__ import annotations

import pytest
import pytest_twisted
from scrapy.http.headers import Headers

from scrapy_robots_coccoc._crawl.fetcher import cache_lifetime

from .crawling import crawl
from .sites import LoopbackSite, robots


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"Cache-Control": "max-age=300"}, 300.0),
        ({"Cache-Control": 'public, MAX-AGE="120"'}, 120.0),
        ({"Cache-Control": "max-age=0"}, 0.0),
        ({"Cache-Control": "no-cache"}, None),
        ({"Cache-Control": "max-age=300, no-store"}, 300.0),
        ({"Cache-Control": "max-age=soon"}, None),
        ({"Cache-Control": "max-age=\u00b2"}, None),  # a digit to str.isdigit, not to float
        ({"Expires": "Thu, 01 Jan 2037 00:00:10 GMT", "Date": "Thu, 01 Jan 2037 00:00:00 GMT"}, 10.0),
        ({"Expires": "Thu, 19 Nov 1981 08:52:00 GMT", "Cache-Control": "no-store, no-cache"}, None),
        ({"Expires": "0"}, None),
        ({"Cache-Control": "max-age=5", "Expires": "Thu, 01 Jan 2037 00:00:10 GMT"}, 5.0),
    ],
)
def test_the_lifetime_a_response_asks_for(headers, seconds):
    assert cache_lifetime(Headers(headers)) == seconds


def paced(cache_control: str) -> LoopbackSite:
    page = robots("User-agent: *\nCrawl-delay: 0.3\n")
    page.headers["Cache-Control"] = cache_control
    # A chain of pages, each decided after the one before it answered: over 1.5 s at Crawl-delay 0.3.
    return LoopbackSite(pages={"/robots.txt": page}, links={f"/p{i}": [f"/p{i + 1}"] for i in range(5)})


@pytest_twisted.ensureDeferred
async def test_a_short_max_age_refreshes_the_rules_sooner(sites):
    """Issue 28: rules were kept ROBOTSTXT_CACHE_SECONDS whatever the site said."""
    (site,) = sites(paced("max-age=1"))
    await crawl({"ROBOTSTXT_CACHE_MIN_SECONDS": 0.5}, urls=[site.url("/p0")])
    assert site.paths().count("/robots.txt") >= 2, site.paths()


@pytest_twisted.ensureDeferred
async def test_max_age_0_is_held_to_the_floor_and_a_long_max_age_to_the_ceiling(sites):
    floor, ceiling = sites(paced("max-age=0"), paced("max-age=86400"))
    await crawl({"ROBOTSTXT_CACHE_SECONDS": 1}, urls=[floor.url("/p0"), ceiling.url("/p0")])
    assert floor.paths().count("/robots.txt") >= 2, "ROBOTSTXT_CACHE_SECONDS stays the ceiling, whatever the floor"
    assert ceiling.paths().count("/robots.txt") >= 2, "a day asked is still capped by ROBOTSTXT_CACHE_SECONDS"

    (kept,) = sites(paced("max-age=0"))
    await crawl(urls=[kept.url("/p0")])
    assert kept.paths().count("/robots.txt") == 1, "max-age=0 must not make every request refetch"
