from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted

from scrapy_robots_coccoc.stores import MemoryStore, RedisStore

from .redisserver import RedisServer, settle
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
