"""Crawls sharing a RedisStore: worker processes with scrapy-redis that fetch
each robots.txt once and keep Crawl-delay together, a worker going on alone
when Redis is down or fails, fetch locks released when a spider closes, a
Redis far away that never stalls the reactor, sitemaps shared."""

from __future__ import annotations

import json
import logging
import shutil
import textwrap

import pytest
import pytest_twisted

from .crawling import (
    REACTORLESS_SCRAPY,
    ProductSpider,
    RecordingSpider,
    collector_frozen,
    crawl,
    run_python,
    run_reactorless,
    stat,
)
from .redis_worker import SELECT_REACTOR, LagProbe, LatencyProxy
from .redisserver import free_port, key, sleep, warnings_of, workers
from .sites import LISTED, LoopbackSite, Page, robots, shop

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"


def site(rules: str, pages: int) -> LoopbackSite:
    return LoopbackSite(pages={"/robots.txt": robots(rules)}, links={"/": [f"/p{i}" for i in range(1, pages)]})


# --- Workers sharing robots.txt and turns ---


@pytest_twisted.ensureDeferred
async def test_three_workers_fetch_each_robotstxt_once_and_keep_crawl_delay_together(sites, redis_server, shared):
    paced, *fast = sites(site("User-agent: *\nCrawl-delay: 0.5\nDisallow: /p5\n", 7), site("", 20), site("", 20))
    # Every worker starts with pages of the paced site: all of them need its
    # robots.txt at once, and all of them send it requests.
    results = await workers(
        redis_server.url,
        [paced.url("/p1"), paced.url("/p4"), fast[0].url("/")],
        [paced.url("/p2"), paced.url("/p5"), fast[1].url("/")],
        [paced.url("/p3"), paced.url("/p6")],
        settings=shared.settings,
    )
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    stats = [json.loads(out.decode().strip().splitlines()[-1]) for out, _, _ in results]

    for s in (paced, *fast):
        assert s.paths().count("/robots.txt") == 1, s.paths()
        assert shared.client.exists(key("state", s.address)) == 1
    assert sorted(paced.paths()) == sorted(["/robots.txt", "/p1", "/p2", "/p3", "/p4", "/p6"])
    assert all(len(s.paths()) == 21 for s in fast)  # every page once: shared dupefilter
    assert min(paced.gaps()) >= 0.475, paced.gaps()
    assert sum(s.get("robotstxt/forbidden", 0) for s in stats) == 1
    # Which worker takes which paced request is the shared queue's choice;
    # turns across workers are the store-level and late-worker tests' job.
    assert sum(s.get("robotstxt/crawl_delay/sites", 0) for s in stats) >= 1


@pytest_twisted.ensureDeferred
async def test_three_workers_keep_crawl_delay_exactly_with_slow_responses_and_a_late_worker(
    sites, redis_server, shared
):
    """Pages answer slower (0.5 s) than the Crawl-delay (0.3 s), and the last
    worker joins late: the k-th request still reaches the site no earlier than
    k delays after the first.

    Issue 34: a bound on each gap between arrivals at the server failed on a
    loaded machine (0.283 s against 0.285): one request arriving late shortens
    the next gap without any turn being taken early. Counted from the first
    request, one late arrival cannot add up; the margin is one request's
    lateness at the server, which load cannot push past 0.1 s."""
    slow = LoopbackSite(
        pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\n")}
        | {f"/p{i}": Page(b"<html>slow</html>", delay=0.5) for i in range(1, 10)},
    )
    (paced,) = sites(slow)
    urls = [paced.url(f"/p{i}") for i in range(1, 10)]
    results = await workers(
        redis_server.url, urls[0::3], urls[1::3], urls[2::3], last_after=1.5, settings=shared.settings
    )
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    assert sorted(paced.paths()) == sorted(["/robots.txt", *(f"/p{i}" for i in range(1, 10))])
    starts = [t for t, path in paced.log]  # robots.txt takes the first turn
    late = [k for k, t in enumerate(starts) if t - starts[0] < k * 0.3 - 0.1]
    assert not late, [round(t - starts[0], 3) for t in starts]


@pytest_twisted.ensureDeferred
async def test_sitemaps_reach_a_worker_that_did_not_fetch_robotstxt(sites, redis_server, shared):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    store = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": redis_server.url}
    store.update(shared.settings)
    # One worker fetches robots.txt for its pages; it has no sitemap spider.
    await crawl(store, urls=[site.url("/a")], follow=False)
    assert site.paths().count("/robots.txt") == 1
    # Another worker, whose spider wants the site's sitemaps, never fetches
    # robots.txt: the sitemaps come with the state the first one stored.
    second = await crawl(store, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert site.paths().count("/robots.txt") == 1
    assert "/sitemap_index.xml" in site.paths()
    assert {site.url(p) for p in LISTED if p.startswith("/products/") and "secret" not in p} <= set(
        second.spider.products
    )


# --- Redis down, failing or far away ---


@pytest_twisted.ensureDeferred
async def test_redis_down_warns_and_the_worker_goes_on_alone(sites, caplog):
    (paced,) = sites(site("User-agent: *\nCrawl-delay: 0.3\nDisallow: /p2\n", 4))
    settings = {
        "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
    }
    crawler = await crawl(settings, urls=[paced.url("/")])
    assert sorted(crawler.spider.crawled) == sorted(paced.url(p) for p in ("/", "/p1", "/p3"))
    assert stat(crawler, "robotstxt/forbidden") == 1
    warnings = [r for r in caplog.records if "Redis store unreachable" in r.getMessage()]
    assert len(warnings) == 1
    assert min(paced.gaps()) >= 0.95 * 0.3  # paced by this worker alone


@pytest_twisted.ensureDeferred
async def test_redis_failing_mid_crawl_warns_once_and_loses_no_request(sites, redis_server, caplog):
    paced, other = sites(site("User-agent: *\nCrawl-delay: 0.3\n", 6), site("User-agent: *\nDisallow: /p2\n", 3))
    paced.links["/"] += [other.url("/p1"), other.url("/p2")]

    class KillsRedis(RecordingSpider):
        def parse(self, response):
            if not self.crawled:
                redis_server.terminate()  # after the first page: robots.txt of `other` comes later
                redis_server.wait()
            yield from super().parse(response)

    settings = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": redis_server.url}
    crawler = await crawl(settings, spider=KillsRedis, urls=[paced.url("/")])
    expected = [paced.url(p) for p in ("/", "/p1", "/p2", "/p3", "/p4", "/p5")] + [other.url("/p1")]
    assert sorted(crawler.spider.crawled) == sorted(expected)
    assert list(crawler.spider.failures) == [other.url("/p2")]
    assert other.paths().count("/robots.txt") == 1
    assert sum("Redis store unreachable" in r.getMessage() for r in caplog.records) == 1
    assert min(paced.gaps()) >= 0.95 * 0.3


def latency_sites(count: int) -> list[LoopbackSite]:
    return [site("User-agent: *\nCrawl-delay: 0.2\n", 10) for _ in range(count)]


class ProbedSpider(RecordingSpider):
    """Probes the reactor from the first request until the spider is idle
    for the last time (Scrapy's own start-up and close are not ours to
    measure): it is idle too while every request waits for its turn."""

    lag = None

    async def start(self):
        from scrapy import signals

        probe = LagProbe().start()

        def idle() -> None:
            self.lag = probe.worst

        self.crawler.signals.connect(idle, signal=signals.spider_idle, weak=False)
        self.crawler.signals.connect(probe.stop, signal=signals.spider_closed, weak=False)
        async for request in super().start():
            yield request


@pytest_twisted.ensureDeferred
async def test_redis_half_a_second_away_never_stalls_the_reactor(sites, redis_server, caplog):
    """Redis 0.5 s away (a round trip) and Crawl-delay 0.2 on every site, so
    that every request asks it: every page is crawled, one WARNING says the
    store is slow, and the reactor never waits for Redis. A call that did
    would hold it 0.5 s; the worst lateness stays under 0.35 s, the test
    session's heap frozen out of the collector.

    This test compared the crawl's time with Redis near and far, and failed
    on a loaded machine ({'direct': 4.61, 'proxied': 6.41}): throughput is
    the benchmark's to measure (benchmarks/redis_latency_bench.py). Pacing
    through Redis is held by the tests whose sites are served apart from the
    crawls (test_three_workers_keep_crawl_delay_exactly_...)."""
    import redis

    started = sites(*latency_sites(4))
    with LatencyProxy(redis_server.port, 0.25) as proxy, collector_frozen():
        # The probe would see a client that blocks the reactor.
        probe = LagProbe().start()
        await sleep(0.03)
        redis.Redis.from_url(proxy.url()).ping()
        await sleep(0.03)
        assert probe.stop() >= 0.45
        settings = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": proxy.url()}
        crawler = await crawl(settings, spider=ProbedSpider, urls=[s.url("/") for s in started])
    assert len(crawler.spider.crawled) == 4 * 10
    assert crawler.spider.lag < 0.35, crawler.spider.lag
    assert len(warnings_of(caplog, "Redis store is slow")) == 1


# --- Fetch locks ---


@pytest_twisted.ensureDeferred
async def test_an_unbounded_download_timeout_still_bounds_the_fetch_lock(sites, redis_server, caplog):
    (paced,) = sites(site("User-agent: *\nDisallow: /p2\n", 3))
    settings = {
        "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
        "REDIS_URL": redis_server.url,
        # A lock of DOWNLOAD_TIMEOUT x tries: inf was refused by Redis at every claim.
        "DOWNLOAD_TIMEOUT": "inf",
        "ROBOTSTXT_MAX_RETRIES": 10**21,
    }
    crawler = await crawl(settings, urls=[paced.url("/")])
    assert sorted(crawler.spider.crawled) == [paced.url("/"), paced.url("/p1")]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert stat(crawler, "robotstxt/store_errors") is None


# A worker whose spider closes during a robots.txt fetch, under the reactor
# named: the keys left in Redis, and the WARNINGs we logged.
STOPPED_FETCH_SCRIPT = textwrap.dedent(
    """
    import json, logging, sys
    from scrapy.utils.reactor import install_reactor
    install_reactor(sys.argv[2])
    import redis
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred
    from scrapy.crawler import CrawlerRunner
    from tests.crawling import SETTINGS, RecordingSpider
    from tests.sites import LoopbackSite, robots, serve

    site = serve(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\\nDisallow: /x\\n", delay=3)}), "127.0.0.2")
    settings = {**SETTINGS, "TWISTED_REACTOR": sys.argv[2], "REDIS_URL": sys.argv[1],
                "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
                "CLOSESPIDER_TIMEOUT": 0.3, "DOWNLOAD_TIMEOUT": 0.5, "ROBOTSTXT_MAX_RETRIES": 3}
    warnings = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())
    logging.getLogger("scrapy_robots_coccoc").addHandler(handler)

    async def main():
        crawler = CrawlerRunner(settings).create_crawler(RecordingSpider)
        await crawler.crawl(urls=[site.url("/a")], follow=False)
        keys = redis.Redis.from_url(sys.argv[1]).keys("*")
        print(json.dumps({"rescheduled": crawler.stats.get_value("robotstxt/rescheduled_on_close"),
                          "keys": sorted(k.decode() for k in keys), "warnings": warnings}))

    d = ensureDeferred(main())
    d.addBoth(lambda r: (print(r, file=sys.stderr) if r is not None else None, reactor.stop()))
    reactor.run()
    """
)


@pytest.mark.parametrize("reactor", [ASYNCIO_REACTOR, SELECT_REACTOR])
def test_a_fetch_that_ends_with_nothing_stored_releases_its_lock(redis_server, reactor):
    """A worker closing during a robots.txt fetch held the origin from its
    peers until the lock expired (365 s with the defaults). Under the select
    reactor the fetch ends after the engine stopped: the store closes after it."""
    result = run_python("-c", STOPPED_FETCH_SCRIPT, redis_server.url, reactor)
    assert result["rescheduled"] == 1
    assert result["keys"] == []  # no lock left, and nothing learnt, so nothing stored
    assert result["warnings"] == []


@pytest.mark.skipif(not REACTORLESS_SCRAPY, reason="TWISTED_REACTOR_ENABLED arrived in Scrapy 2.15")
def test_without_a_reactor_a_fetch_ended_by_the_close_releases_its_lock(redis_server):
    """With no reactor, close waited for a reactor turn that never came."""
    result = run_reactorless("3", redis_server.url)
    assert result["stats"]["robotstxt/rescheduled_on_close"] == 4
    assert result["keys"] == []
    assert result["warnings"] == []


@pytest_twisted.ensureDeferred
async def test_a_fetch_waiting_for_a_peer_stops_when_the_spider_closes(sites, redis_server, caplog):
    """It went on polling Redis after the close, until the peer's lock expired."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /x\n")}))
    redis_server.client.set(key("fetching", site.url("")), "peer", px=60_000)
    settings = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": redis_server.url}
    crawler = await crawl({**settings, "CLOSESPIDER_TIMEOUT": 0.3}, urls=[site.url("/a")], follow=False)
    assert stat(crawler, "robotstxt/rescheduled_on_close") == 1
    commands = redis_server.client.info("stats")["total_commands_processed"]
    await sleep(0.5)
    assert redis_server.client.info("stats")["total_commands_processed"] == commands + 1  # this INFO's own
    assert warnings_of(caplog) == []
