"""RedisStore on a real Redis Cluster (3 masters, 3 replicas on loopback)
and what only a shared store shows: workers share an unavailable robots.txt;
a master crashing mid-crawl, and slots resharded mid-crawl, lose no request
and fetch no robots.txt twice but for origins first met during the outage;
the blocking cluster client under another reactor.

The distributed tests of test_redis_crawls, test_redis_backoff and
test_redis_turns run on the cluster too (the ``shared`` fixture)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
import pytest_twisted
from twisted.internet.protocol import Protocol, ServerFactory
from twisted.internet.threads import deferToThread

from scrapy_robots_coccoc.stores import RedisStore

from .redis_worker import SETTINGS_VARIABLE
from .redisserver import ROOT, key, sleep, workers
from .sites import LoopbackSite, robots

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


def outputs(results: list[tuple[bytes, bytes, int]]) -> list[dict[str, Any]]:
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    return [json.loads(out.decode().strip().splitlines()[-1]) for out, _, _ in results]


def chain(rules: str, pages: int, then: str | None = None) -> LoopbackSite:
    """A site whose page /c<i> links /c<i+1> only, so one worker at a time has its next page; the last links
    *then* (another site's URL), if given."""
    links = {f"/c{i}": [f"/c{i + 1}"] for i in range(pages - 1)}
    links[f"/c{pages - 1}"] = [then] if then else []
    return LoopbackSite(pages={"/robots.txt": robots(rules)}, links=links)


class Dropping(Protocol):
    """Drops each connection as it comes: robots.txt gets no answer. The factory counts them."""

    def connectionMade(self) -> None:
        self.factory.connections += 1
        self.transport.abortConnection()


@pytest_twisted.ensureDeferred
async def test_workers_share_an_unavailable_origin(redis_server, shared):
    """An origin whose robots.txt gets no answer is unavailable for every worker: one attempt, and every worker's
    requests there reach their errbacks as OriginUnavailable."""
    from twisted.internet import reactor

    factory = ServerFactory.forProtocol(Dropping)
    factory.connections = 0
    port = reactor.listenTCP(0, factory, interface="127.0.0.200")
    try:
        url = f"http://127.0.0.200:{port.getHost().port}"
        settings = {**shared.settings, "ROBOTSTXT_MAX_RETRIES": 0}
        results = await workers(
            redis_server.url, [f"{url}/a", f"{url}/b"], [f"{url}/c"], [f"{url}/d"], settings=settings
        )
    finally:
        await port.stopListening()
    failures = [f for out in outputs(results) for f in out["failures"].values()]
    assert factory.connections == 1
    assert failures == ["OriginUnavailable"] * 4


#: Pages of each paced site: 9 s of turns, past the failover (2.5 s) and a worker's retry of the cluster (5 s).
PAGES = 60


@pytest_twisted.ensureDeferred
async def test_a_master_crashing_mid_crawl_loses_no_request(sites, redis_server, fresh_cluster):
    """Three workers crawl six paced sites (Crawl-delay 0.15, so every request reserves its turn on the cluster)
    and, at their end, six sites more. Once every robots.txt of the first six is stored, the master holding most
    of their keys is killed: its replica takes over within seconds. Every page is crawled exactly once, nothing
    fails, a worker that found the cluster failing came back to it, and no robots.txt was fetched twice but
    during the outage, when each worker decides alone (once per origin it had not met: at most three)."""
    late = sites(*(chain("", 3) for _ in range(6)))
    early = sites(*(chain("User-agent: *\nCrawl-delay: 0.15\n", PAGES, then=s.url("/c0")) for s in late))
    settings = {"ROBOTSTXT_REDIS_CLUSTER": True, "ROBOTSTXT_REDIS_URL": fresh_cluster.url}
    crawling = workers(redis_server.url, *([s.url("/c0") for s in early[i::3]] for i in range(3)), settings=settings)
    while not all(s.paths().count("/robots.txt") for s in early):
        await sleep(0.05)
    await sleep(0.3)  # their states stored
    holders = Counter(fresh_cluster.master_of(key("next", s.address)).port for s in early)
    victim = next(node for node in fresh_cluster.masters() if node.port == holders.most_common(1)[0][0])
    killed_at = time.monotonic()
    await deferToThread(fresh_cluster.kill, victim)
    await deferToThread(fresh_cluster.wait_for_failover, victim)
    # Workers that found the cluster failing try it again RETRY_SECONDS after their last failed call, which may
    # end up to three 1 s connection timeouts after the failover.
    outage = (killed_at, time.monotonic() + RedisStore.RETRY_SECONDS + 3.0)

    ended = await crawling
    results = outputs(ended)
    crawled = Counter(url for out in results for url in out["crawled"])
    expected = {s.url(f"/c{i}") for s in early for i in range(PAGES)} | {
        s.url(f"/c{i}") for s in late for i in range(3)
    }
    assert set(crawled) == expected and set(crawled.values()) == {1}
    assert [out["failures"] for out in results] == [{}] * 3
    for site in (*early, *late):
        fetches = [t for t, path in site.log if path == "/robots.txt"]
        assert 1 <= len(fetches) <= 3  # during the outage, a worker decides alone: once each, at most
        assert all(outage[0] <= t <= outage[1] for t in fetches[1:]), (fetches, outage)
    logs = [err.decode() for _, err, _ in ended]
    assert any("Redis store unreachable" in log for log in logs), "no worker met the crashed master"
    assert any("Redis store reachable again" in log for log in logs), "no worker came back to the cluster"


@pytest_twisted.ensureDeferred
async def test_slots_resharded_mid_crawl_lose_nothing(sites, redis_server, fresh_cluster):
    """Mid-crawl, the slots of two paced sites move to another master, one at once (MOVED), the other held
    half-migrated for a second (ASK): every page is crawled once, each robots.txt fetched once unless a worker
    logged a failed call (then once per worker at most), and the sites' keys end on their new master."""
    moved = sites(*(chain("User-agent: *\nCrawl-delay: 0.1\n", 25) for _ in range(3)))
    settings = {"ROBOTSTXT_REDIS_CLUSTER": True, "ROBOTSTXT_REDIS_URL": fresh_cluster.url}
    crawling = workers(redis_server.url, *([s.url("/c0")] for s in moved), settings=settings)
    while not all(s.paths().count("/c5") for s in moved):
        await sleep(0.05)
    targets = []
    for index, site in enumerate(moved[:2]):
        slot = fresh_cluster.slot_of(key("state", site.address))
        target = next(m for m in fresh_cluster.masters() if m.port != fresh_cluster.owner_of_slot(slot).port)
        targets.append((site, target))
        if index == 0:
            await deferToThread(fresh_cluster.move_slot, slot, target)
        else:
            await deferToThread(fresh_cluster.begin_move, slot, target, 1)
            await sleep(1.0)
            await deferToThread(fresh_cluster.finish_move, slot)

    ended = await crawling
    results = outputs(ended)
    crawled = Counter(url for out in results for url in out["crawled"])
    assert set(crawled) == {s.url(f"/c{i}") for s in moved for i in range(25)} and set(crawled.values()) == {1}
    # A call Redis kept answering TRYAGAIN (a slot half migrated) counts as a failure: that worker goes on alone
    # for a while, and may fetch an origin it had not met. Never silently.
    fetches = [s.paths().count("/robots.txt") for s in moved]
    failed = any("Redis store unreachable" in err.decode() for _, err, _ in ended)
    redis_lines = [line for _, err, _ in ended for line in err.decode().splitlines() if "Redis" in line]
    assert all(1 <= count <= 3 for count in fetches) and (failed or fetches == [1] * 3), (fetches, redis_lines)
    for site, target in targets:
        assert fresh_cluster.master_of(key("state", site.address)).port == target.port


def test_under_another_reactor_the_blocking_cluster_client_runs_in_the_store_s_threads(cluster):
    """The select reactor: the blocking RedisCluster client, in the store's threads, claims, stores, reads and
    reserves turns on the cluster as on one server."""
    settings = {"ROBOTSTXT_REDIS_CLUSTER": True, "ROBOTSTXT_REDIS_URL": cluster.url}
    run = subprocess.run(
        [sys.executable, "-m", "tests.redis_worker", "--store-calls", cluster.url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, SETTINGS_VARIABLE: json.dumps(settings)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["client"] == "ThreadedRedis"
    assert result["claims"] == [True] * 8 and all(result["states"])
    assert min(result["gaps"]) >= 0.095, result
    assert all(cluster.client.exists(key("state", f"http://site{i}.example:80")) for i in range(8))


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"ROBOTSTXT_REDIS_PREFIX": "{crawl1}robotstxt"}, "may not hold { or }"),
        ({"_old_redis": True}, "redis 8.0 or newer"),
    ],
)
def test_a_cluster_store_that_cannot_work_says_why_at_start_up(settings, problem, monkeypatch):
    """A hash tag in the prefix put every origin in one slot and the pauses' channel in another than their set,
    where SPUBLISH went nowhere, silently; redis-py before 8 has no asyncio cluster pub/sub (the listener died)."""
    import redis.asyncio
    from scrapy.settings import Settings

    from scrapy_robots_coccoc.stores import StoreSetupError
    from scrapy_robots_coccoc.stores.redisclient import redis_client

    if settings.pop("_old_redis", False):
        monkeypatch.delattr(redis.asyncio.RedisCluster, "pubsub")
    with pytest.raises(StoreSetupError, match=problem):
        redis_client(
            Settings({"ROBOTSTXT_REDIS_CLUSTER": True, "ROBOTSTXT_REDIS_URL": "redis://127.0.0.1:1", **settings})
        )


@pytest_twisted.ensureDeferred
async def test_pauses_reach_a_peer_after_the_master_holding_them_fails_over(fresh_cluster):
    """The pauses set and its channel share one slot: once its master has failed over, a pause made by one
    worker still reaches the other, by the announcement on the new master or by the catch-up read, within the
    worker's retry of the cluster."""
    import redis.asyncio

    from scrapy_robots_coccoc.stores import MemoryStore

    from .redisserver import settle

    stores = [RedisStore(redis.asyncio.RedisCluster.from_url(fresh_cluster.url), MemoryStore(100)) for _ in range(2)]
    pausing, peer = stores
    try:
        for store in stores:
            await settle(store.warm_up())
        victim = fresh_cluster.master_of("robotstxt:pauses")
        await deferToThread(fresh_cluster.kill, victim)
        await deferToThread(fresh_cluster.wait_for_failover, victim)
        until = time.time() + 60
        await settle(pausing.pause("https://busy:443", until))
        waited = 0.0
        while peer.paused_until("https://busy:443") == 0.0 and waited < RedisStore.RETRY_SECONDS + 5:
            await sleep(0.05)
            waited += 0.05
        assert peer.paused_until("https://busy:443") == pytest.approx(until, abs=0.05), waited
        assert fresh_cluster.client.zscore("robotstxt:pauses", "https://busy:443") == pytest.approx(until, abs=0.05)
    finally:
        for store in stores:
            await settle(store.close())
