"""Backoff shared through Redis: one worker's 429 pauses the site for every worker."""

from __future__ import annotations

import json
import shutil
import textwrap
from typing import Any

import pytest
import pytest_twisted

from .crawling import run_python
from .redisserver import settle, workers
from .sites import LoopbackSite, Page, robots

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


@pytest_twisted.ensureDeferred
async def test_one_workers_429_pauses_the_site_for_every_worker(sites, redis_server, shared):
    """Issue 28: a site answering 429 with Retry-After: 2 to one request gets no request of any worker
    within 2 s after it (but for what a peer sent before it could learn of the pause, 0.2 s at most plus a
    round trip)."""
    chain = {f"/q{i}": Page(f'<a href="/q{i + 1}">next</a>'.encode(), delay=0.15) for i in range(25)}
    limited = Page(b"slow down", status=429, headers={"Retry-After": "2"})
    (site,) = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow:\n"), "/p0": [limited, Page()], **chain})
    )
    results = await workers(
        redis_server.url, [site.url("/q0")], [site.url("/p0")], last_after=1.5, settings=shared.settings
    )
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    stats = [json.loads(out.decode().strip().splitlines()[-1]) for out, _, _ in results]
    incident = next(t for t, path in site.log if path == "/p0")
    later = [t - incident for t, path in site.log if t > incident and path != "/robots.txt"]
    assert not [gap for gap in later if 0.6 < gap < 1.95], later
    assert later and later[-1] >= 2, "the crawl went on after the pause"
    assert sum(s.get("robotstxt/backoff/incidents", 0) for s in stats) == 1
    assert site.paths().count("/p0") == 2, "RetryMiddleware still retried the request"


def test_a_short_pause_does_not_cut_the_life_of_a_long_one(redis_server):
    """A review: every pause set the TTL of the one sorted set holding them all, so a 1 s pause of one
    origin cut a 1 h pause of another to a minute, and workers joining later never learnt of it."""
    from scrapy_robots_coccoc.stores.redisclient import SCRIPTS

    client, pauses = redis_server.client, "robotstxt:pauses"
    client.flushall()
    client.eval(SCRIPTS["pause"], 1, pauses, "4000000000", "https://a:443", "1", 3660, pauses, "PUBLISH")
    client.eval(SCRIPTS["pause"], 1, pauses, "4000000000", "https://b:443", "1", 61, pauses, "PUBLISH")
    assert client.ttl(pauses) > 3600
    assert client.zscore(pauses, "https://a:443") == 4000000000


@pytest_twisted.ensureDeferred
async def test_a_pause_reaches_a_listening_peer_at_once_not_at_its_next_read(shared_store):
    """A peer learnt of a pause only at its next read of the pauses, 0.2 s later at most, letting requests of
    the paused site through meanwhile: the pause is announced, and a listening peer knows it within a round trip."""
    import time

    from .redisserver import sleep

    pausing, peer = shared_store(), shared_store()
    await settle(pausing.warm_up())
    await settle(peer.warm_up())
    peer._polled_at = float("inf")  # the peer never reads the pauses: only the announcement can tell it
    peer._down_until = time.time() + 60  # nor while it takes Redis for down (after a call timed out)
    until = time.time() + 30
    await settle(pausing.pause("https://busy:443", until))
    waited = 0.0
    while peer.paused_until("https://busy:443") == 0.0 and waited < 1.0:
        await sleep(0.005)
        waited += 0.005
    assert peer.paused_until("https://busy:443") == pytest.approx(until, abs=0.05)
    assert waited < 0.1, waited


@pytest_twisted.ensureDeferred
async def test_a_pause_made_while_redis_is_taken_for_down_is_shared_all_the_same(redis_server, new_store):
    """A worker that took Redis for down (one call over the socket timeout: RETRY_SECONDS) kept its pauses to
    itself for good: its peers sent to the paused site for the whole pause."""
    import time

    pausing, peer = new_store(), new_store()
    pausing._down_until = time.time() + 60
    until = time.time() + 30
    await settle(pausing.pause("https://busy:443", until))
    assert redis_server.client.zscore("robotstxt:pauses", "https://busy:443") == pytest.approx(until, abs=0.05)
    assert peer.paused_until("https://busy:443") == 0.0  # its first read starts now
    from .redisserver import sleep

    await sleep(0.1)
    assert peer.paused_until("https://busy:443") == pytest.approx(until, abs=0.05)


# Two RedisStores under the select reactor (so: the blocking client in threads, and a listener thread each): JSON of
# how soon the peer learnt the pause, on which thread, how long the closes took and the listener threads left.
THREADED_LISTENER_SCRIPT = textwrap.dedent(
    """
    import json, sys, threading, time
    from scrapy.utils.reactor import install_reactor
    from tests.redis_worker import SELECT_REACTOR
    install_reactor(SELECT_REACTOR)
    import redis
    from scrapy.settings import Settings
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred
    from twisted.internet.task import deferLater
    from scrapy_robots_coccoc.stores import MemoryStore, RedisStore
    from scrapy_robots_coccoc.stores.redisclient import redis_client

    ORIGIN, CHANNEL = "https://busy:443", "{robotstxt:pauses}:0"
    shared = json.loads(sys.argv[2])
    cluster = shared.get("ROBOTSTXT_REDIS_CLUSTER")
    client = (redis.RedisCluster if cluster else redis.Redis).from_url(sys.argv[1])
    numsub = client.pubsub_shardnumsub if cluster else client.pubsub_numsub
    publish = client.spublish if cluster else client.publish

    def listeners():
        return [t.name for t in threading.enumerate() if t.name == "robotstxt-redis-pauses" and t.is_alive()]

    async def until_true(condition, seconds):
        began = time.monotonic()
        while not condition() and time.monotonic() - began < seconds:
            await deferLater(reactor, 0.005)
        return time.monotonic() - began

    async def main():
        settings = Settings({"TWISTED_REACTOR": SELECT_REACTOR, "REDIS_URL": sys.argv[1], **shared})
        pausing, peer = (RedisStore(redis_client(settings), MemoryStore(100)) for _ in range(2))
        await pausing.warm_up()
        await peer.warm_up()
        await until_true(lambda: dict(numsub(CHANNEL))[CHANNEL.encode()] == 2, 5)
        peer._polled_at = float("inf")  # only the announcement can tell the peer
        told_on = []
        pause_here = peer._local.pause
        peer._local.pause = lambda *args: (told_on.append(threading.current_thread().name), pause_here(*args))
        until = time.time() + 30
        await pausing.pause(ORIGIN, until)
        learnt = await until_true(lambda: peer.paused_until(ORIGIN) > 0, 2)
        known = peer.paused_until(ORIGIN)
        running = listeners()
        began = time.monotonic()
        await pausing.close()
        await peer.close()
        closing = time.monotonic() - began
        ended = await until_true(lambda: not listeners(), 3)
        publish(CHANNEL, ("https://late:443 %r" % (time.time() + 30)).encode())
        await deferLater(reactor, 0.2)
        print(json.dumps({"learnt": learnt, "error": known - until, "told_on": told_on, "running": running,
                          "closing": closing, "ended": ended, "left": listeners(),
                          "subscribers": dict(numsub(CHANNEL))[CHANNEL.encode()],
                          "late": peer.paused_until("https://late:443")}))

    ensureDeferred(main()).addBoth(lambda r: (print(r, file=sys.stderr) if r is not None else None, reactor.stop()))
    reactor.run()
    """
)


def test_under_another_reactor_a_listener_thread_tells_the_peer_and_ends_with_the_store(shared):
    """The listener thread (non-asyncio reactors) had no test: a peer learns a pause from it at once, on the
    reactor's thread, and closing the store ends the thread and its subscription at once."""
    result = run_python("-c", THREADED_LISTENER_SCRIPT, shared.url, json.dumps(shared.settings))
    assert result["running"] == ["robotstxt-redis-pauses"] * 2
    assert result["learnt"] < 0.1, result
    assert abs(result["error"]) < 0.05, result
    assert result["told_on"] == ["MainThread"], result
    assert result["closing"] < 0.5, result
    assert result["ended"] < 0.2, result
    assert result["left"] == [] and result["subscribers"] == 0 and result["late"] == 0.0, result


@pytest_twisted.ensureDeferred
async def test_a_warm_up_that_ends_after_the_close_starts_no_listener(redis_server, new_store):
    """A warm-up still waiting for Redis when the store closed (a crawl over at once, a Redis that hangs past
    CLOSE_SECONDS) subscribed once it ended: a listener left behind the closed store, for the process's life."""
    import signal

    from scrapy.utils.defer import deferred_from_coro

    from .redisserver import sleep

    store = new_store()
    store.CLOSE_SECONDS = 0.1
    redis_server.process.send_signal(signal.SIGSTOP)  # Redis hangs: the warm-up's calls wait
    try:
        warming = deferred_from_coro(store.warm_up())
        await settle(store.close())
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
    await warming
    await sleep(0.3)
    assert redis_server.client.pubsub_numsub("{robotstxt:pauses}:0") == [(b"{robotstxt:pauses}:0", 0)]


@pytest_twisted.ensureDeferred
async def test_a_pause_write_the_store_timeout_cancelled_is_shared_once_redis_answers(redis_server, new_store):
    """The middleware bounds each store call by ROBOTSTXT_STORE_TIMEOUT and cancels it past that: a pause write
    cancelled while Redis did not answer (the client retries a silent server for some 15 s, more than the 10 s of
    the timeout) was neither written nor kept to write again, and the peers never learnt of the pause. Once a call
    succeeds it is written."""
    import time

    from twisted.internet import defer, protocol, reactor

    from .redisserver import sleep

    store = new_store()
    redis_server.terminate()
    redis_server.wait()
    held: list[Any] = []

    class Silent(protocol.Protocol):
        """Takes the commands and never answers (a Redis hanging, a network dropping the answers)."""

        def connectionMade(self) -> None:
            held.append(self.transport)

    port = reactor.listenTCP(redis_server.port, protocol.Factory.forProtocol(Silent), interface="127.0.0.1")
    until = time.time() + 30
    with pytest.raises(defer.TimeoutError):
        await store.pause("https://busy:443", until).addTimeout(0.3, reactor)  # as the middleware's guard does
    assert held, "the write never reached the silent server"
    for transport in held:
        transport.abortConnection()
    await port.stopListening()
    redis_server.start()
    await settle(store.get("https://other:443"))  # Redis answers again
    for _ in range(100):
        if redis_server.client.zscore("robotstxt:pauses", "https://busy:443") is not None:
            break
        await sleep(0.01)
    assert redis_server.client.zscore("robotstxt:pauses", "https://busy:443") == pytest.approx(until, abs=0.05)


@pytest_twisted.ensureDeferred
async def test_a_pause_reaches_no_crawl_of_another_database(redis_server, new_store):
    """Redis's channels are one for all its databases, unlike its keys: a crawl on database 1 paused the site
    for a crawl on database 0 that shares nothing else with it, for as long as the first crawl said."""
    import time

    from .redisserver import sleep

    pausing, other = new_store(redis_server.url[:-1] + "1"), new_store()
    await settle(pausing.warm_up())
    await settle(other.warm_up())
    await settle(pausing.pause("https://busy:443", time.time() + 30))
    await sleep(0.3)
    assert other.paused_until("https://busy:443") == 0.0


@pytest_twisted.ensureDeferred
async def test_a_worker_whose_acl_forbids_the_channel_still_shares_its_pauses(redis_server, new_store, caplog):
    """Redis 7 gives a new ACL user no channel (acl-pubsub-default resetchannels): the PUBLISH in pause.lua (a
    redis.call then) failed the script after it stored the pause, so the worker took Redis for down at every
    pause, with a WARNING. The pause is stored without error, peers read it from the set, and the listener that
    SUBSCRIBE is refused to tries again quietly."""
    import time

    from .redisserver import sleep, warnings_of

    redis_server.client.acl_setuser("worker", enabled=True, passwords=["+secret"], keys=["*"], commands=["+@all"])
    assert redis_server.client.acl_getuser("worker")["channels"] == []
    pausing = new_store(f"redis://worker:secret@127.0.0.1:{redis_server.port}/0", max_age=3600)
    pausing.RETRY_SECONDS = 0.1
    peer = new_store()
    await settle(pausing.warm_up())
    until = time.time() + 30
    await settle(pausing.pause("https://busy:443", until))
    assert redis_server.client.zscore("robotstxt:pauses", "https://busy:443") == pytest.approx(until, abs=0.05)
    peer.paused_until("https://busy:443")  # its first read of the set
    await sleep(0.3)
    assert peer.paused_until("https://busy:443") == pytest.approx(until, abs=0.05)
    assert pausing._down_until == 0.0
    assert warnings_of(caplog) == []
