"""Distributed benchmark: 3 scrapy-redis workers crawl 40 origins without
Crawl-delay (the sites of crawl_bench.py, all 100 pages of each seeded and
split among the workers), once with the in-memory store and once with the
Redis store; pages per second of the whole cluster, Redis / memory.

Needs redis-server on the PATH (``make test`` installs Debian's). Rounds
alternate the stores; figures are medians.

    python benchmarks/redis_bench.py [--rounds N] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time

import corpus
from crawl_bench import ALL_PATHS, FAST_PORT, MIDDLEWARES, ORIGINS, host, start_sites
from scrapy import Spider

WORKERS = 3
STORES = {"memory": "scrapy_robots_coccoc.stores.MemoryStore", "redis": "scrapy_robots_coccoc.stores.RedisStore"}


class PagesSpider(Spider):
    """Counts the pages of its ``start_urls`` (given to ``crawl()``) and when
    the first and the last arrived."""

    name = "bench"
    pages, first, last = 0, 0.0, 0.0

    def parse(self, response):
        self.last = time.time()
        self.first = self.first or self.last
        self.pages += 1


def cluster_settings(redis_url: str) -> dict[str, object]:
    """The settings of a scrapy-redis worker sharing the queue and dupefilter."""
    return {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": redis_url,
        "CONCURRENT_REQUESTS": 32,
        "LOG_LEVEL": "WARNING",
    }


def worker(redis_url: str, store: str, *urls: str) -> None:
    """Crawl *urls* through the shared queue; print pages and first/last response times."""
    from scrapy.crawler import CrawlerProcess

    process = CrawlerProcess(
        {
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_USER_AGENT": "coccocbot-web",
            "DOWNLOADER_MIDDLEWARES": MIDDLEWARES["ours"],
            "ROBOTSTXT_STORE": store,
            **cluster_settings(redis_url),
            "TELNETCONSOLE_ENABLED": False,
        }
    )
    crawler = process.create_crawler(PagesSpider)
    process.crawl(crawler, start_urls=list(urls))
    process.start()
    spider = crawler.spider
    robots = crawler.stats.get_value("robotstxt/request_count", 0)
    print(json.dumps({"pages": spider.pages, "first": spider.first, "last": spider.last, "robots": robots}))


def wait_for_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    for _ in range(200):
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit(f"redis-server at {url} did not start")


def run_cluster(redis_url: str, store: str) -> dict[str, float]:
    import redis

    redis.Redis.from_url(redis_url).flushall()
    urls = [f"http://{host(i)}:{FAST_PORT}{path}" for path in ALL_PATHS for i in range(ORIGINS)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", redis_url, store, *urls[n::WORKERS]],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    span = max(r["last"] for r in results) - min(r["first"] for r in results if r["first"])
    pages = sum(r["pages"] for r in results)
    return {"pages": pages, "rate": pages / span, "robots": sum(r["robots"] for r in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    corpus.add_option(parser)
    args = parser.parse_args()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    redis_server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    sites = start_sites(args.corpus)
    assert sites.stdin is not None
    redis_url = f"redis://127.0.0.1:{port}/0"
    wait_for_redis(redis_url)
    rates: dict[str, list[float]] = {name: [] for name in STORES}
    try:
        for round_ in range(args.rounds):
            order = list(STORES) if round_ % 2 == 0 else list(reversed(STORES))
            for name in order:
                result = run_cluster(redis_url, STORES[name])
                rates[name].append(result["rate"])
                print(
                    f"round {round_ + 1} {name:6} {result['pages']} pages, {result['rate']:.0f} pages/s, "
                    f"{result['robots']} robots.txt fetches",
                    flush=True,
                )
    finally:
        sites.stdin.close()
        sites.wait()
        redis_server.terminate()
        redis_server.wait()
    memory, shared = statistics.median(rates["memory"]), statistics.median(rates["redis"])
    print(f"\nmedians of {args.rounds} rounds, {WORKERS} workers, {ORIGINS} origins x {len(ALL_PATHS)} pages")
    print(f"memory store: {memory:.0f} pages/s; Redis store: {shared:.0f} pages/s")
    print(f"Redis / memory pages per second: {shared / memory:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(*sys.argv[2:])
    else:
        main()
