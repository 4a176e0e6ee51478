"""A real redis-server for the tests, and what the Redis tests share:
worker processes, the keys of an origin, a store's answers awaited."""

from __future__ import annotations

import inspect
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scrapy.utils.defer import deferred_from_coro

ROOT = Path(__file__).resolve().parents[1]


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


class SharedRedis:
    """Where a test's RedisStores share state: *url* (a cluster's node when *settings* say
    ``ROBOTSTXT_REDIS_CLUSTER``), *client* to read what they wrote, *settings* to give a worker."""

    def __init__(self, url: str, client: Any, settings: dict[str, Any]) -> None:
        self.url = url
        self.client = client
        self.settings = settings
        self.cluster = bool(settings.get("ROBOTSTXT_REDIS_CLUSTER"))

    def async_client(self) -> Any:
        import redis.asyncio

        return (redis.asyncio.RedisCluster if self.cluster else redis.asyncio.Redis).from_url(self.url)


def workers(
    redis_url: str,
    *start_urls: list[str],
    last_after: float = 0.0,
    addon: bool = False,
    settings: dict[str, Any] | None = None,
):
    """Start one worker process per list of start URLs, the last one
    *last_after* seconds after the others, with the add-on if *addon* and
    *settings* added to the workers'; a Deferred of their outputs."""
    from twisted.internet import defer, reactor
    from twisted.internet.task import deferLater
    from twisted.internet.utils import getProcessOutputAndValue

    from .redis_worker import ADDON_VARIABLE, SETTINGS_VARIABLE

    def run(urls: list[str]):
        args = ["-m", "tests.redis_worker", redis_url, *urls]
        env = {**os.environ, **({ADDON_VARIABLE: "1"} if addon else {}), SETTINGS_VARIABLE: json.dumps(settings or {})}
        return getProcessOutputAndValue(sys.executable, args, env=env, path=str(ROOT))

    *first, last = start_urls
    runs = [run(urls) for urls in first]
    runs.append(deferLater(reactor, last_after, run, last) if last_after else run(last))
    return defer.gatherResults(runs)


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


def warnings_of(caplog, text: str = "") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]
