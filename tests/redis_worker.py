"""One worker of a crawl spread over processes with scrapy-redis, sharing
robots.txt state and Crawl-delay pacing through our RedisStore, and the
tools the Redis tests and benchmarks measure it with.

    python -m tests.redis_worker REDIS_URL URL [URL ...]

The worker starts from its URLs; every request goes through the shared
scrapy-redis queue and dupefilter, so any worker may download it. Prints its
stats, and the exception class each failed URL's errback saw (``failures``),
as JSON on the last line, with the URLs it downloaded (``crawled``). With
``REDIS_WORKER_ADDON`` set it enables the add-on; ``REDIS_WORKER_SETTINGS``
holds more settings, as a JSON object.

    python -m tests.redis_worker --store-calls REDIS_URL

Runs RedisStore calls under Twisted's select reactor (not asyncio) and
prints the answers and the reactor's worst lateness as JSON.

    python -m tests.redis_worker --proxy UPSTREAM_PORT DELAY

Serves a :class:`LatencyProxy` to a local Redis; prints its port.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

SELECT_REACTOR = "twisted.internet.selectreactor.SelectReactor"
#: Set in a worker's environment, the worker enables scrapy_robots_coccoc.Addon.
ADDON_VARIABLE = "REDIS_WORKER_ADDON"
#: A JSON object of settings a worker adds to its own.
SETTINGS_VARIABLE = "REDIS_WORKER_SETTINGS"


class LatencyProxy:
    """A TCP proxy on 127.0.0.1 that delivers each direction's bytes
    *delay* seconds late (a round trip 2 x *delay*), in order. It runs in a
    process of its own, so that its timing depends neither on the reactor
    it slows down nor on that process's GIL.
    ``with LatencyProxy(port, 0.05) as proxy: proxy.url()``."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.port = 0

    def __enter__(self) -> LatencyProxy:
        args = [sys.executable, "-m", "tests.redis_worker", "--proxy", str(self.upstream_port), str(self.delay)]
        root = Path(__file__).resolve().parents[1]
        self._process = subprocess.Popen(args, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        self.port = int(self._process.stdout.readline())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._process.terminate()
        self._process.wait()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


async def proxy(upstream_port: int, delay: float) -> None:
    """Serve as :class:`LatencyProxy`: print the port, run until killed."""
    loop = asyncio.get_running_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await chunks.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        delivering = asyncio.ensure_future(deliver())
        while True:
            data = await reader.read(65536)
            chunks.put_nowait((loop.time() + delay, data))
            if not data:
                break
        await delivering

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


class LagProbe:
    """How late the reactor runs a call due every *interval* seconds: the
    worst lateness seen between ``start()`` and ``stop()`` (``worst``, which
    ``stop()`` returns), and the most CPU time the reactor's thread spent
    between two calls (``worst_cpu``: load on the machine stretches the
    lateness of a call, not the CPU time of the work that held it back)."""

    def __init__(self, interval: float = 0.01) -> None:
        from twisted.internet.task import LoopingCall

        self.interval = interval
        self.worst = 0.0
        self.worst_cpu = 0.0
        self._last = 0.0
        self._last_cpu = 0.0
        self._call = LoopingCall(self._tick)

    def start(self) -> LagProbe:
        self._last, self._last_cpu = time.monotonic(), time.thread_time()
        self._call.start(self.interval, now=False)
        return self

    def stop(self) -> float:
        self._call.stop()
        return self.worst

    def _tick(self) -> None:
        now, cpu = time.monotonic(), time.thread_time()
        self.worst = max(self.worst, now - self._last - self.interval)
        self.worst_cpu = max(self.worst_cpu, cpu - self._last_cpu)
        self._last, self._last_cpu = now, cpu


def main(redis_url: str, *urls: str) -> None:
    from scrapy.crawler import CrawlerProcess

    from .crawling import SETTINGS, RecordingSpider

    process = CrawlerProcess(
        {
            **SETTINGS,
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "SCHEDULER_PERSIST": True,
            "REDIS_URL": redis_url,
            "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
            "LOG_LEVEL": "INFO",
            **({"ADDONS": {"scrapy_robots_coccoc.Addon": 0}} if os.environ.get(ADDON_VARIABLE) else {}),
            **json.loads(os.environ.get(SETTINGS_VARIABLE) or "{}"),
        }
    )
    crawler = process.create_crawler(RecordingSpider)
    process.crawl(crawler, urls=list(urls))
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, int | float | str)}
    failures = {url: type(exc).__name__ for url, exc in crawler.spider.failures.items()}
    print(json.dumps({**stats, "failures": failures, "crawled": crawler.spider.crawled}))


def store_calls(redis_url: str) -> None:
    """Concurrent calls of each kind through a RedisStore built for a
    non-asyncio reactor (so: its own threads), with a lag probe, and the
    settings of ``REDIS_WORKER_SETTINGS``."""
    from scrapy.utils.reactor import install_reactor

    install_reactor(SELECT_REACTOR)
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from twisted.internet import defer, task

    from scrapy_robots_coccoc.stores import OriginState, RedisStore

    async def calls(reactor: Any) -> None:
        settings = json.loads(os.environ.get(SETTINGS_VARIABLE) or "{}")
        crawler = Crawler(Spider, {"REDIS_URL": redis_url, "TWISTED_REACTOR": SELECT_REACTOR, **settings})
        store = RedisStore.from_crawler(crawler)
        probe = LagProbe().start()
        origins = [f"http://site{i}.example:80" for i in range(8)]
        claims = await defer.gatherResults([defer.ensureDeferred(store.claim(o, 10)) for o in origins])
        await defer.gatherResults(
            [defer.ensureDeferred(store.set(o, OriginState(None, False, time.time() + 60), b"")) for o in origins]
        )
        fresh = [RedisStore.from_crawler(crawler) for _ in range(2)]
        states = await defer.gatherResults([defer.ensureDeferred(s.get(o)) for s in fresh for o in origins])
        starts = await defer.gatherResults([defer.ensureDeferred(store.reserve(origins[0], 0.1)) for _ in range(5)])
        for each in (store, *fresh):
            await each.close()
        print(
            json.dumps(
                {
                    "client": type(store._redis).__name__,
                    "claims": claims,
                    "states": [s is not None and not s.unavailable and s.robots is None for s in states],
                    "gaps": [b - a for a, b in pairwise(sorted(starts))],
                    "lag": probe.stop(),
                }
            )
        )

    task.react(lambda reactor: defer.ensureDeferred(calls(reactor)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--store-calls"]:
        store_calls(*sys.argv[2:])
    elif sys.argv[1:2] == ["--proxy"]:
        asyncio.run(proxy(int(sys.argv[2]), float(sys.argv[3])))
    else:
        main(*sys.argv[1:])
