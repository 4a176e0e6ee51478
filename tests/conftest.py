from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import pytest_twisted

from scrapy_robots_coccoc.stores import MemoryStore, RedisStore

from .redisserver import RedisServer, SharedRedis, settle
from .sites import LoopbackSite, serve


@pytest.fixture
def sites():
    """Start LoopbackSites on their own loopback addresses: sites(n) or sites(site, ...)."""
    started: list[LoopbackSite] = []

    def start(*configured: LoopbackSite) -> list[LoopbackSite]:
        for site in configured:
            started.append(serve(site, f"127.0.0.{len(started) + 2}"))
        return list(configured)

    yield start
    for site in started:
        site.port.stopListening()


@pytest.fixture
def own_sites():
    """Sites started by a test itself (custom address or port); stopped after it."""
    started: list[LoopbackSite] = []
    yield started
    for site in started:
        site.port.stopListening()


@pytest.fixture
def redis_server():
    server = RedisServer()
    yield server
    server.terminate()
    server.wait()


async def _stores(client: Callable[[str | None], Any]):
    """new(url=None, **options): a RedisStore on *client(url)*, closed afterwards."""
    stores: list[RedisStore] = []

    def new(url: str | None = None, **options: Any) -> RedisStore:
        stores.append(RedisStore(client(url), MemoryStore(100), **options))
        return stores[-1]

    yield new
    for store in stores:
        await settle(store.close())


@pytest_twisted.async_yield_fixture
async def new_store(redis_server):
    """new_store(url=None, **options): a RedisStore on redis.asyncio, closed afterwards."""
    import redis.asyncio

    async for new in _stores(lambda url: redis.asyncio.Redis.from_url(url or redis_server.url)):
        yield new


def _start_cluster():
    """A started RedisCluster, or the test skipped if redis-server or redis-cli is missing."""
    import shutil

    from .rediscluster import RedisCluster

    missing = [name for name in ("redis-server", "redis-cli") if not shutil.which(name)]
    if missing:
        pytest.skip(f"a Redis Cluster needs {' and '.join(missing)}, not installed")
    return RedisCluster()


@pytest.fixture(scope="session")
def redis_cluster():
    """A real Redis Cluster (3 masters, 3 replicas) shared by the session: use `cluster` to have it flushed first."""
    started = _start_cluster()
    yield started
    started.stop()


@pytest.fixture
def cluster(redis_cluster):
    """The session's Redis Cluster, flushed: for tests that neither kill nor reshard its nodes."""
    redis_cluster.flush()
    yield redis_cluster


@pytest.fixture
def fresh_cluster():
    """A Redis Cluster of the test's own, stopped after it: for tests that kill, restart or reshard nodes."""
    started = _start_cluster()
    yield started
    started.stop()


@pytest.fixture(params=["server", "cluster"])
def shared(request, redis_server) -> SharedRedis:
    """Where workers share state, each distributed test run on both: one Redis server, or a Redis Cluster (the
    scrapy-redis queue stays on the server, as the docs advise)."""
    if request.param == "server":
        return SharedRedis(redis_server.url, redis_server.client, {})
    cluster = request.getfixturevalue("cluster")
    return SharedRedis(
        cluster.url, cluster.client, {"ROBOTSTXT_REDIS_CLUSTER": True, "ROBOTSTXT_REDIS_URL": cluster.url}
    )


@pytest_twisted.async_yield_fixture
async def shared_store(shared):
    """shared_store(**options): a RedisStore on where *shared* says (redis.asyncio), closed afterwards."""
    async for new in _stores(lambda _: shared.async_client()):
        yield new
