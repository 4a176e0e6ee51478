"""RedisStore: three real Scrapy worker processes with scrapy-redis share
robots.txt state and Crawl-delay pacing through a real Redis server."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_twisted

from .crawling import RecordingSpider, crawl, stat
from .sites import LoopbackSite, robots

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def redis_server():
    """A real redis-server on a free loopback port: ``.url``, ``.terminate()``."""
    import redis

    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    server.url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield server
    server.terminate()
    server.wait()


def workers(redis_url: str, *start_urls: list[str]):
    """Start one worker process per list of start URLs; a Deferred of their outputs."""
    from twisted.internet import defer
    from twisted.internet.utils import getProcessOutputAndValue

    env = dict(os.environ)
    runs = [
        getProcessOutputAndValue(
            sys.executable, ["-m", "tests.redis_worker", redis_url, *urls], env=env, path=str(ROOT)
        )
        for urls in start_urls
    ]
    return defer.gatherResults(runs)


def site(rules: str, pages: int) -> LoopbackSite:
    return LoopbackSite(pages={"/robots.txt": robots(rules)}, links={"/": [f"/p{i}" for i in range(1, pages)]})


@pytest_twisted.ensureDeferred
async def test_three_workers_fetch_each_robotstxt_once_and_keep_crawl_delay_together(sites, redis_server):
    paced, *fast = sites(site("User-agent: *\nCrawl-delay: 1\nDisallow: /p5\n", 7), site("", 20), site("", 20))
    # Every worker starts with pages of the paced site: all of them need its
    # robots.txt at once, and all of them send it requests.
    results = await workers(
        redis_server.url,
        [paced.url("/p1"), paced.url("/p4"), fast[0].url("/")],
        [paced.url("/p2"), paced.url("/p5"), fast[1].url("/")],
        [paced.url("/p3"), paced.url("/p6")],
    )
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    stats = [json.loads(out.decode().strip().splitlines()[-1]) for out, _, _ in results]

    for s in (paced, *fast):
        assert s.paths().count("/robots.txt") == 1, s.paths()
    assert sorted(paced.paths()) == sorted(["/robots.txt", "/p1", "/p2", "/p3", "/p4", "/p6"])
    assert all(len(s.paths()) == 21 for s in fast)  # every page once: shared dupefilter
    assert min(paced.gaps()) >= 1.0, paced.gaps()
    assert sum(s.get("robotstxt/forbidden", 0) for s in stats) == 1
    assert sum(s.get("robotstxt/crawl_delay/sites", 0) for s in stats) >= 2  # several workers paced it


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
    assert min(paced.gaps()) >= 0.3  # paced by the local slot


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
    assert min(paced.gaps()) >= 0.3
