"""A crawl with no Twisted reactor (``TWISTED_REACTOR_ENABLED = False``,
Scrapy 2.15+), importing the reactor forbidden as ``AsyncCrawlerProcess``
forbids it, against a site served by asyncio on 127.0.0.2:

    python -m tests.reactorless_crawl ROBOTS_DELAY [REDIS_URL] [--record DIR]

The site's robots.txt (``Crawl-delay: 0.3``, ``Disallow: /x``) answers after
ROBOTS_DELAY seconds; with a Redis URL the crawl uses RedisStore and closes
after 0.3 s; with ``--record`` it keeps the compliance record under DIR.
Prints JSON: the pages crawled, when each path was served, the robotstxt/
stats, the Redis keys left and our WARNINGs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

from scrapy.crawler import AsyncCrawlerRunner
from scrapy.utils.reactorless import install_reactor_import_hook

from .crawling import SETTINGS, RecordingSpider

ROBOTS = b"User-agent: *\nCrawl-delay: 0.3\nDisallow: /x\n"


async def main(robots_delay: float, redis_url: str | None, record_dir: str | None) -> None:
    served: list[tuple[float, str]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        path = (await reader.readline()).split()[1].decode()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        served.append((time.monotonic(), path))
        if path == "/robots.txt":
            try:
                await asyncio.sleep(robots_delay)
            except asyncio.CancelledError:
                return  # the crawl is over
        body = ROBOTS if path == "/robots.txt" else b"<html></html>"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%b" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.2", 0)
    site = f"http://127.0.0.2:{server.sockets[0].getsockname()[1]}"
    settings = {**SETTINGS, "TWISTED_REACTOR_ENABLED": False}
    if redis_url:
        settings.update(
            {
                "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
                "REDIS_URL": redis_url,
                "CLOSESPIDER_TIMEOUT": 0.3,
                "DOWNLOAD_TIMEOUT": 0.5,
            }
        )
    if record_dir:
        settings["ROBOTSTXT_RECORD_DIR"] = record_dir
    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("scrapy_robots_coccoc").addHandler(handler)
    crawler = AsyncCrawlerRunner(settings).create_crawler(RecordingSpider)
    await crawler.crawl_async(urls=[f"{site}/{page}" for page in ("a", "b", "c", "x")], follow=False)
    server.close()
    keys: list[str] = []
    if redis_url:
        import redis

        keys = sorted(key.decode() for key in redis.Redis.from_url(redis_url).keys("*"))
    start = served[0][0] if served else 0.0
    stats = crawler.stats.get_stats() if crawler.stats else {}
    print(
        json.dumps(
            {
                "crawled": sorted(url.removeprefix(site) for url in crawler.spider.crawled),
                "served": [(round(at - start, 3), path) for at, path in served],
                "stats": {k: v for k, v in stats.items() if k.startswith("robotstxt/")},
                "keys": keys,
                "warnings": warnings,
            }
        )
    )


if __name__ == "__main__":
    install_reactor_import_hook()
    args = sys.argv[1:]
    record = args[args.index("--record") + 1] if "--record" in args else None
    if record:
        args = args[: args.index("--record")]
    asyncio.run(main(float(args[0]), args[1] if len(args) > 1 else None, record))
