from __future__ import annotations

import pytest

from .redisserver import RedisServer
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
