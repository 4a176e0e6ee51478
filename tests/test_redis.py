"""RedisStore against a real Redis server: the store's own guarantees
(bad values read back, locks that end, exact shared pacing, a reactor left
free), and real Scrapy worker processes with scrapy-redis that share
robots.txt state and Crawl-delay pacing through it."""

from __future__ import annotations

import gc
import inspect
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy.settings import Settings
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import defer
from twisted.python import log as twisted_log

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc.stores import MemoryStore, OriginState, RedisStore
from scrapy_robots_coccoc.stores.redisclient import redis_client

from .crawling import REACTORLESS_SCRAPY, RecordingSpider, crawl, run_python, run_reactorless, stat
from .redis_worker import SELECT_REACTOR, LagProbe, LatencyProxy
from .sites import LoopbackSite, Page, robots

ROOT = Path(__file__).resolve().parents[1]
ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A real redis-server on a free loopback port, without persistence:
    ``.url``, ``.client``; it can be stopped and started again (empty)."""

    def __init__(self) -> None:
        import redis

        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis.from_url(self.url)
        self.start()

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def terminate(self) -> None:
        self.process.terminate()

    def wait(self) -> None:
        self.process.wait()


@pytest.fixture
def redis_server():
    server = RedisServer()
    yield server
    server.terminate()
    server.wait()


def workers(redis_url: str, *start_urls: list[str], last_after: float = 0.0):
    """Start one worker process per list of start URLs, the last one
    *last_after* seconds after the others; a Deferred of their outputs."""
    from twisted.internet import defer, reactor
    from twisted.internet.task import deferLater
    from twisted.internet.utils import getProcessOutputAndValue

    def run(urls: list[str]):
        args = ["-m", "tests.redis_worker", redis_url, *urls]
        return getProcessOutputAndValue(sys.executable, args, env=dict(os.environ), path=str(ROOT))

    *first, last = start_urls
    runs = [run(urls) for urls in first]
    runs.append(deferLater(reactor, last_after, run, last) if last_after else run(last))
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
    assert min(paced.gaps()) >= 0.95, paced.gaps()
    assert sum(s.get("robotstxt/forbidden", 0) for s in stats) == 1
    # Which worker takes which paced request is the shared queue's choice;
    # turns across workers are the store-level and late-worker tests' job.
    assert sum(s.get("robotstxt/crawl_delay/sites", 0) for s in stats) >= 1


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
async def test_close_waits_for_the_writes_under_way(redis_server, new_store):
    """Writes the middleware does not wait for, made as the spider closes,
    reach Redis before the connections close (on Scrapy 2.13 the release
    of a fetch lock had not even started when the store closed)."""
    other = "https://example.org:443"
    with LatencyProxy(redis_server.port, 0.05) as proxy:
        store = new_store(proxy.url())
        assert await settle(store.claim(other, 60)) is True
        state = OriginState(None, False, time.time() + 60)
        writes = [store.set(ORIGIN, state, b""), store.release(other)]
        await settle(store.close())
    assert all(write.called for write in writes)
    assert redis_server.client.hget(key("state"), "outcome") == b"unrestricted"
    assert redis_server.client.exists(key("fetching", other)) == 0


@pytest_twisted.ensureDeferred
async def test_a_worker_releases_only_its_own_lock(redis_server, new_store):
    """A claim that failed counts as granted, and a lock may expire during a
    long fetch and be taken by a peer: releasing it let a third worker fetch
    while the peer still did."""
    store, peer = new_store(), new_store()
    assert await settle(peer.claim(ORIGIN, 60)) is True
    await settle(store.release(ORIGIN))  # never granted to this worker
    assert await settle(new_store().claim(ORIGIN, 60)) is False
    redis_server.client.delete(key("fetching"))  # the peer's lock expired ...
    assert await settle(store.claim(ORIGIN, 60)) is True  # ... this worker's claim ...
    redis_server.client.delete(key("fetching"))  # ... expired too ...
    assert await settle(peer.claim(ORIGIN, 60)) is True  # ... and the peer claimed again
    await settle(store.release(ORIGIN))
    assert await settle(new_store().claim(ORIGIN, 60)) is False


@pytest_twisted.ensureDeferred
async def test_release_leaves_a_lock_of_another_type_alone(redis_server, new_store, caplog):
    redis_server.client.hset(key("fetching"), "worker", "1")  # another version's, or a hand's
    store = new_store()
    await settle(store.release(ORIGIN))  # WRONGTYPE was an outage: 5 s without sharing
    assert warnings_of(caplog) == []
    assert redis_server.client.type(key("fetching")) == b"hash"


@pytest_twisted.ensureDeferred
async def test_close_waits_for_a_claim_granted_as_it_came_and_its_release(redis_server, new_store, caplog):
    """A claim under way when the store closed lost its connection after
    Redis had granted it: the release that the ended fetch made next was
    skipped (Redis taken for down), and the lock held its lifetime."""
    with LatencyProxy(redis_server.port, 0.1) as proxy:
        store = new_store(proxy.url())
        claim = deferred_from_coro(store.claim(ORIGIN, 60))
        closed = deferred_from_coro(store.close())
        assert await claim is True
        store.release(ORIGIN)  # the fetch, ended by the close, lets go
        await closed
    assert redis_server.client.exists(key("fetching")) == 0
    assert warnings_of(caplog) == []


# The same under the select reactor, where a close resumes at once when
# the last call under way ends (a read, before the claim that follows it):
# JSON of whether the claim was granted and the keys left.
CLAIM_AT_CLOSE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.selectreactor.SelectReactor")
    import redis
    from scrapy.settings import Settings
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred
    from scrapy_robots_coccoc.stores import MemoryStore, RedisStore
    from scrapy_robots_coccoc.stores.redisclient import redis_client
    from tests.redis_worker import LatencyProxy, SELECT_REACTOR

    async def main():
        with LatencyProxy(int(sys.argv[2]), 0.1) as proxy:
            settings = Settings({"TWISTED_REACTOR": SELECT_REACTOR, "REDIS_URL": proxy.url()})
            store = RedisStore(redis_client(settings), MemoryStore(100))
            async def read_then_claim():  # as a fetch waiting for a peer does
                await store.get("https://example.com:443")
                return await store.claim("https://example.com:443", 60)

            claim = ensureDeferred(read_then_claim())
            closed = ensureDeferred(store.close())
            granted = await claim
            released = store.release("https://example.com:443")
            await closed
            await released
        keys = redis.Redis.from_url(sys.argv[1]).keys("*")
        print(json.dumps({"granted": granted, "keys": [key.decode() for key in keys]}))

    ensureDeferred(main()).addBoth(lambda r: (print(r, file=sys.stderr) if r is not None else None, reactor.stop()))
    reactor.run()
    """
)


def test_close_waits_for_a_claim_granted_as_it_came_under_the_select_reactor(redis_server):
    result = run_python("-c", CLAIM_AT_CLOSE_SCRIPT, redis_server.url, str(redis_server.port))
    assert result == {"granted": True, "keys": []}


@pytest_twisted.ensureDeferred
async def test_close_waits_for_a_held_lock_at_most_close_seconds(redis_server, new_store, caplog):
    store = new_store()
    store.CLOSE_SECONDS = 0.2
    assert await settle(store.claim(ORIGIN, 60)) is True  # and never set or released
    began = time.monotonic()
    await settle(store.close())
    assert time.monotonic() - began < 1.0
    (warning,) = warnings_of(caplog)
    assert "1 calls or fetch locks still under way" in warning
    assert redis_server.client.pttl(key("fetching")) > 0  # expires on its own


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


@pytest_twisted.ensureDeferred
async def test_a_write_cancelled_by_its_timeout_ends_quietly(redis_server, new_store):
    """The store timeout cancels a write, which on the asyncio loop ends a
    turn later: that end was relayed to the cancelled caller again, an
    AlreadyCalledError logged as an unhandled error in a Deferred."""
    from twisted.internet import reactor

    errors: list[dict[str, Any]] = []
    twisted_log.addObserver(errors.append)
    try:
        with LatencyProxy(redis_server.port, 0.3) as proxy:
            store = new_store(proxy.url())
            answer = store.set(ORIGIN, OriginState(None, False, time.time() + 60), b"")
            with pytest.raises(defer.TimeoutError):
                await answer.addTimeout(0.05, reactor)
            await settle(store.close())  # once the cancelled write has ended
        del answer
        gc.collect()
    finally:
        twisted_log.removeObserver(errors.append)
    assert [twisted_log.textFromEventDict(e) for e in errors if e.get("isError")] == []


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


# The store itself, against a real Redis server.

ORIGIN = "https://example.com:443"


def key(kind: str, origin: str = ORIGIN) -> str:
    return f"robotstxt:{{{origin}}}:{kind}"


async def settle(answer: Any) -> Any:
    """A store's answer, awaited on the asyncio loop as the middleware does."""
    return await deferred_from_coro(answer) if inspect.isawaitable(answer) else answer


async def sleep(seconds: float) -> None:
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    await deferLater(reactor, max(0.0, seconds))


@pytest_twisted.async_yield_fixture
async def new_store(redis_server):
    """new_store(url=None, **options): a RedisStore on redis.asyncio, closed afterwards."""
    import redis.asyncio

    stores: list[RedisStore] = []

    def new(url: str | None = None, **options: Any) -> RedisStore:
        stores.append(RedisStore(redis.asyncio.Redis.from_url(url or redis_server.url), MemoryStore(100), **options))
        return stores[-1]

    yield new
    for store in stores:
        await settle(store.close())


def warnings_of(caplog, text: str = "") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


FRESH = {"outcome": "rules", "body": "User-agent: *\nDisallow: /", "expires_at": "{soon}"}
POISONS = {
    "wrong type": b"\x00\xff garbage",
    "garbage outcome": {**FRESH, "outcome": b"\xff\xfe"},  # fresh expiry: must not pass for fresh
    "missing outcome": {k: v for k, v in FRESH.items() if k != "outcome"},
    "missing expiry": {k: v for k, v in FRESH.items() if k != "expires_at"},
    "missing body": {k: v for k, v in FRESH.items() if k != "body"},
    "garbage expiry": {**FRESH, "expires_at": "soon"},
    "infinite expiry": {**FRESH, "expires_at": "inf"},
    "nan expiry": {**FRESH, "expires_at": "nan"},
    "unbelievably far expiry": {**FRESH, "expires_at": "1e300"},
    # Fresh to Lua's tonumber() or to Python's float(), not both: neither
    # side may take it as fresh (a claim refused while get() finds nothing
    # held every worker back until the claim's deadline).
    "hexadecimal expiry": {**FRESH, "expires_at": "{soon_hex}"},
    "expiry with underscores": {**FRESH, "expires_at": "{soon_underscores}"},
    # Larger than any worker writes: never read whole.
    "oversized body": {**FRESH, "body": "Disallow: /\n" * 50_000},
    "oversized outcome": {**FRESH, "outcome": "rules" * 200_000},
    # A fresh expiry to both sides but for its size.
    "oversized expiry": {**FRESH, "expires_at": "{soon_padded}"},
}


@pytest.mark.parametrize("poison", POISONS)
@pytest_twisted.ensureDeferred
async def test_unreadable_state_is_missing_with_one_warning_and_a_fetch_replaces_it(
    poison, redis_server, new_store, caplog
):
    value = POISONS[poison]
    if isinstance(value, bytes):
        redis_server.client.set(key("state"), value)
    else:
        soon = int(time.time() + 600)
        spelled = {
            "{soon}": repr(soon + 0.5),
            "{soon_hex}": hex(soon),
            "{soon_underscores}": f"{soon:_}",
            "{soon_padded}": "0" * 600_000 + repr(soon + 0.5),
        }
        redis_server.client.hset(key("state"), mapping={k: spelled.get(v, v) for k, v in value.items()})
    store = new_store()

    assert await settle(store.get(ORIGIN)) is None
    assert await settle(store.get(ORIGIN)) is None
    (warning,) = warnings_of(caplog)
    assert ORIGIN in warning
    assert await settle(store.claim(ORIGIN, 10)) is True  # taken as absent: fetch it
    state = OriginState(None, False, time.time() + 60)
    await settle(store.set(ORIGIN, state, b""))
    assert await settle(new_store().get(ORIGIN)) == state


@pytest_twisted.ensureDeferred
async def test_every_fetch_lock_ends(redis_server, new_store, caplog):
    other = "https://other.example:443"
    redis_server.client.set(key("fetching"), "1")  # poisoned, or left by another version: no expiry
    redis_server.client.set(key("fetching", other), "1", px=10**9)
    store = new_store()

    assert await settle(store.claim(ORIGIN, 10)) is True  # taken over
    assert 0 < redis_server.client.pttl(key("fetching")) <= 10_000
    (warning,) = warnings_of(caplog)
    assert ORIGIN in warning and "without expiry" in warning
    assert await settle(store.claim(other, 10)) is False  # a peer's, but cut to our lifetime
    assert 0 < redis_server.client.pttl(key("fetching", other)) <= 10_000


@pytest.mark.parametrize("value", [b"inf", b"nan", b"soon", b"1e12", {"a": "b"}])
@pytest_twisted.ensureDeferred
async def test_unbelievable_next_start_is_ignored(value, redis_server, new_store, caplog):
    if isinstance(value, dict):
        redis_server.client.hset(key("next"), mapping=value)
    else:
        redis_server.client.set(key("next"), value)
    store = new_store()

    asked = time.time()
    first = await settle(store.reserve(ORIGIN, 0.5))
    second = await settle(store.reserve(ORIGIN, 0.5))
    assert asked <= first < asked + 0.1
    assert second - first == pytest.approx(0.5, abs=0.01)
    (warning,) = warnings_of(caplog)
    assert ORIGIN in warning


@pytest.mark.parametrize("loss", ["deleted", "flushed", "garbled"])
@pytest_twisted.ensureDeferred
async def test_a_lost_next_start_gives_no_turn_before_the_workers_own_next(loss, redis_server, new_store):
    store, client = new_store(), redis_server.client
    first = await settle(store.reserve(ORIGIN, 0.5))
    if loss == "deleted":
        client.delete(key("next"))
    elif loss == "flushed":
        client.flushall()
    else:
        client.set(key("next"), "soon")
    second = await settle(store.reserve(ORIGIN, 0.5))
    assert second - first == pytest.approx(0.5, abs=0.01)
    # Redis has the worker's turns again: a peer's turn comes after them.
    assert await settle(new_store().reserve(ORIGIN, 0.5)) == pytest.approx(second + 0.5, abs=0.01)


@pytest_twisted.ensureDeferred
async def test_turns_paced_alone_while_redis_was_down_hold_once_it_is_back(redis_server, new_store):
    store = new_store()
    store.RETRY_SECONDS = 0.0  # try Redis again at every call
    first = await settle(store.reserve(ORIGIN, 0.5))
    redis_server.terminate()
    redis_server.wait()
    alone = [await settle(store.reserve(ORIGIN, 0.5)) for _ in range(2)]
    redis_server.start()  # empty: its record of turns is gone
    back = await settle(store.reserve(ORIGIN, 0.5))
    assert [alone[0] - first, alone[1] - alone[0], back - alone[1]] == pytest.approx([0.5] * 3, abs=0.01)


@pytest_twisted.ensureDeferred
async def test_a_next_start_hundreds_of_turns_ahead_is_believed(redis_server, new_store, caplog):
    """Two workers parking 160 requests each hold 320 turns of one origin:
    the 321st comes after them, not at once."""
    ahead = time.time() + 400 * 1.05
    redis_server.client.set(key("next"), f"{ahead:.6f}")
    store = new_store()

    start = await settle(store.reserve(ORIGIN, 1.05))
    assert start == pytest.approx(ahead, abs=0.05)
    assert warnings_of(caplog) == []


@pytest_twisted.ensureDeferred
async def test_reserved_turns_stay_apart_across_workers_stalls_and_restarts(new_store):
    """Three workers take turns at one origin; the process stalls now and
    then, so that some wake too late and give their turn up; one worker
    restarts halfway. No two starts come closer than spacing - grace."""
    spacing, grace = 0.1, 0.005
    starts: list[float] = []
    given_up = 0

    async def worker(number: int, turns: int) -> None:
        nonlocal given_up
        store = new_store()
        for turn in range(turns):
            if number == 0 and turn == turns // 2:
                store = new_store()  # a restarted worker: new connections, nothing known locally
            stall = turn % 3 == number
            while True:
                start = await settle(store.reserve(ORIGIN, spacing))
                await sleep(start - time.time())
                if stall:
                    time.sleep(0.15)  # the whole process stalls
                    stall = False
                if time.time() <= start + grace:
                    break
                given_up += 1
            starts.append(time.time())

    from twisted.internet import defer

    await defer.gatherResults([defer.ensureDeferred(worker(n, 5)) for n in range(3)])
    starts.sort()
    gaps = [b - a for a, b in pairwise(starts)]
    assert len(starts) == 15
    assert min(gaps) >= spacing - grace, gaps
    assert given_up >= 3  # the stalls were felt, and did not squeeze anyone


@pytest_twisted.ensureDeferred
async def test_a_burst_of_turns_for_one_origin_is_reserved_in_a_call_or_two(redis_server, new_store):
    """A page's 30 links to a paced origin ask for turns at once: they are
    reserved together, consecutive and spacing apart, not one call (and one
    new connection) each."""
    from twisted.internet import defer

    store = new_store()
    await settle(store.warm_up())

    def calls() -> int:
        return redis_server.client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

    before = calls()
    starts = await defer.gatherResults([defer.ensureDeferred(settle(store.reserve(ORIGIN, 0.1))) for _ in range(30)])
    assert calls() - before <= 2
    gaps = [b - a for a, b in pairwise(sorted(starts))]
    assert gaps == pytest.approx([0.1] * 29, abs=1e-6)
    # The next turn comes after all of them, from any worker.
    assert await settle(new_store().reserve(ORIGIN, 0.1)) == pytest.approx(max(starts) + 0.1, abs=0.01)


@pytest_twisted.ensureDeferred
async def test_without_redis_a_worker_paces_alone_and_answers_at_once(new_store, caplog):
    store = new_store(f"redis://127.0.0.1:{free_port()}/0")
    first = await settle(store.reserve(ORIGIN, 0.5))  # finds Redis down
    second = store.reserve(ORIGIN, 0.5)  # known down: no awaitable
    assert second - first == pytest.approx(0.5, abs=0.01)
    assert store.claim(ORIGIN, 10) is True and store.get(ORIGIN) is None
    assert len(warnings_of(caplog, "Redis store unreachable")) == 1


@pytest_twisted.ensureDeferred
async def test_store_calls_leave_the_reactor_free_and_slow_redis_warns_once(redis_server, new_store, caplog):
    import redis
    from twisted.internet import defer

    with LatencyProxy(redis_server.port, 0.05) as proxy:  # 100 ms per round trip
        # The probe would see a client that blocks the reactor.
        probe = LagProbe().start()
        await sleep(0.03)
        redis.Redis.from_url(proxy.url()).ping()
        await sleep(0.03)
        assert probe.stop() > 0.1

        store = new_store(proxy.url())
        probe = LagProbe().start()
        began = time.monotonic()
        for round_ in range(3):
            origins = [f"http://site{n}.example:80" for n in range(10 * round_, 10 * round_ + 10)]
            calls = [store.claim(o, 10) for o in origins] + [store.reserve(ORIGIN, 0.01) for _ in range(5)]
            assert all(await defer.gatherResults([deferred_from_coro(c) for c in calls]))
            states = [OriginState(None, False, time.time() + 60) for _ in origins]
            await defer.gatherResults(
                [deferred_from_coro(store.set(o, s, b"")) for o, s in zip(origins, states, strict=True)]
            )
            fresh = new_store(proxy.url(), slow_seconds=10)  # another reader, that does not warn
            assert await defer.gatherResults([deferred_from_coro(fresh.get(o)) for o in origins]) == states
        assert time.monotonic() - began >= 0.6  # every round trip took its 100 ms
        assert probe.stop() < 0.1
    assert len(warnings_of(caplog, "Redis store is slow")) == 1


@pytest_twisted.ensureDeferred
async def test_keys_of_an_origin_share_one_cluster_slot(redis_server, new_store):
    from redis.crc import key_slot

    store = new_store()
    origins = [ORIGIN, "http://[::1]:8080", "http://b.example:80", "http://c.example:81"]
    for origin in origins:
        assert await settle(store.claim(origin, 10))
        await settle(store.reserve(origin, 1.0))
    slots: dict[str, set[int]] = {}
    for name in redis_server.client.keys("*"):
        slots.setdefault(name[name.index(b"{") + 1 : name.index(b"}")].decode(), set()).add(key_slot(name))
    assert sorted(slots) == sorted(origins)
    assert all(len(s) == 1 for s in slots.values())
    assert len(set.union(*slots.values())) == len(origins)  # origins spread over the cluster


def test_the_client_suits_the_loop_that_runs_the_crawl(redis_server):
    """Chosen at start-up: redis.asyncio under an asyncio loop (the asyncio
    reactor these tests run, or no reactor); a clear error when it cannot tell."""
    import redis.asyncio

    assert isinstance(redis_client(Settings({"REDIS_URL": redis_server.url})), redis.asyncio.Redis)
    assert isinstance(redis_client(Settings({"TWISTED_REACTOR_ENABLED": False})), redis.asyncio.Redis)
    code = (
        "from scrapy.settings import Settings; from scrapy_robots_coccoc.stores.redisclient import redis_client; "
        "redis_client(Settings())"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode != 0
    assert "RedisStore was built before a Twisted reactor was installed" in run.stderr


@pytest_twisted.ensureDeferred
async def test_a_url_asking_for_decoded_answers_still_shares_state(redis_server):
    # Every read failed with decode_responses=True: nothing was shared.
    url = f"{redis_server.url}?decode_responses=True&socket_timeout=5"
    clients = len(redis_server.client.client_list())
    writer, reader = (RedisStore(redis_client(Settings({"REDIS_URL": url})), MemoryStore(100)) for _ in range(2))
    try:
        state = OriginState(None, False, time.time() + 60)
        await settle(writer.set(ORIGIN, state, b""))
        assert await settle(reader.get(ORIGIN)) == state
    finally:
        for store in (writer, reader):
            await settle(store.close())
    # Closing the store closes the pool built from the URL.
    assert len(redis_server.client.client_list()) == clients


def test_other_reactors_get_threads_of_the_store_s_own(redis_server):
    with LatencyProxy(redis_server.port, 0.05) as proxy:
        run = subprocess.run(
            [sys.executable, "-m", "tests.redis_worker", "--store-calls", proxy.url()],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["client"] == "ThreadedRedis"
    assert result["claims"] == [True] * 8 and all(result["states"])
    assert min(result["gaps"]) >= 0.095
    assert result["lag"] < 0.1
    assert "Redis store is slow" in run.stderr


# Crawls: the middleware and the store together.


@pytest_twisted.ensureDeferred
async def test_three_workers_keep_crawl_delay_exactly_with_slow_responses_and_a_late_worker(sites, redis_server):
    """Pages answer slower (0.8 s) than the Crawl-delay (0.5 s), and the last
    worker joins late: consecutive requests still start >= 0.95 x 0.5 s apart."""
    slow = LoopbackSite(
        pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.5\n")}
        | {f"/p{i}": Page(b"<html>slow</html>", delay=0.8) for i in range(1, 10)},
    )
    (paced,) = sites(slow)
    urls = [paced.url(f"/p{i}") for i in range(1, 10)]
    results = await workers(redis_server.url, urls[0::3], urls[1::3], urls[2::3], last_after=1.5)
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    assert sorted(paced.paths()) == sorted(["/robots.txt", *(f"/p{i}" for i in range(1, 10))])
    assert min(paced.gaps()) >= 0.475, paced.gaps()


def latency_sites(count: int) -> list[LoopbackSite]:
    return [site("User-agent: *\nCrawl-delay: 0.2\n", 20) for _ in range(count)]


class ProbedSpider(RecordingSpider):
    """Probes the reactor from the first request until the spider is idle
    (Scrapy's own start-up and close are not ours to measure)."""

    lag = None

    async def start(self):
        from scrapy import signals

        probe = LagProbe().start()

        def idle() -> None:
            if self.lag is None:
                self.lag = probe.stop()

        self.crawler.signals.connect(idle, signal=signals.spider_idle, weak=False)
        async for request in super().start():
            yield request


@pytest_twisted.ensureDeferred
async def test_redis_100_ms_away_costs_little_throughput_and_never_stalls_the_reactor(sites, redis_server, caplog):
    """Crawl-delay 0.2 on every site, so that every request asks Redis."""
    durations, lags = {}, {}
    for name, delay in (("direct", 0.0), ("proxied", 0.05)):
        redis_server.client.flushall()
        started = sites(*latency_sites(4))
        with LatencyProxy(redis_server.port, delay) as proxy:
            settings = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": proxy.url()}
            began = time.monotonic()
            crawler = await crawl(settings, spider=ProbedSpider, urls=[s.url("/") for s in started])
            durations[name] = time.monotonic() - began
            lags[name] = crawler.spider.lag
        assert len(crawler.spider.crawled) == 4 * 20
        # Paced throughout; the times are taken by servers on the crawl's
        # own reactor, so a stall of the crawl may shift one of them (the
        # 0.95 x bound is held by the tests with servers of their own).
        assert all(min(s.gaps()) >= 0.15 for s in started), (name, [min(s.gaps()) for s in started])
    assert lags["proxied"] < 0.1, lags
    # 0.86-0.87 alone; 0.80 once in a full CI run on two busy cores. The
    # benchmark (redis_latency_bench.py, longer crawls) holds the 0.8 goal.
    assert durations["direct"] / durations["proxied"] >= 0.75, durations
    assert len(warnings_of(caplog, "Redis store is slow")) == 1


@pytest_twisted.ensureDeferred
async def test_a_failed_refresh_keeps_the_stored_rules_for_every_worker(redis_server, new_store):
    body = b"User-agent: *\nDisallow: /private\n"
    first = new_store()
    await settle(first.set(ORIGIN, OriginState(RobotsTxt.parse(body), False, time.time() + 60), body))
    kept = OriginState(RobotsTxt.parse(body), False, time.time() + 120)
    await settle(first.set(ORIGIN, kept, None))  # a refresh that got no answer
    state = await settle(new_store().get(ORIGIN))
    assert state is not None and state.expires_at == kept.expires_at
    assert state.robots is not None and not state.robots.allowed("/private/x", "bot")
    assert 60 < redis_server.client.ttl(key("state")) <= 240


@pytest_twisted.ensureDeferred
async def test_sitemaps_reach_a_worker_that_did_not_fetch_robotstxt(sites, redis_server):
    from .test_sitemaps import LISTED, ProductSpider, shop

    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    shared = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": redis_server.url}
    # One worker fetches robots.txt for its pages; it has no sitemap spider.
    await crawl(shared, urls=[site.url("/a")], follow=False)
    assert site.paths().count("/robots.txt") == 1
    # Another worker, whose spider wants the site's sitemaps, never fetches
    # robots.txt: the sitemaps come with the state the first one stored.
    second = await crawl(shared, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert site.paths().count("/robots.txt") == 1
    assert "/sitemap_index.xml" in site.paths()
    assert {site.url(p) for p in LISTED if p.startswith("/products/") and "secret" not in p} <= set(
        second.spider.products
    )
