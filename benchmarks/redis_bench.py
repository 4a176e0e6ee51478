"""Distributed benchmark: 3 scrapy-redis workers crawl 40 origins without
Crawl-delay (the sites of crawl_bench.py, all 100 pages of each seeded and
split among the workers), with each store: the in-memory one (``memory``),
the Redis store on one server (``redis``), and on a Redis Cluster of three
masters and three replicas (``cluster``, the tests' own, its queue still on
the one server); pages per second of the workers together, each against
``redis``.

Needs redis-server and redis-cli on the PATH (``make test`` installs
Debian's). Rounds rotate the stores; figures are medians.

    python benchmarks/redis_bench.py [--rounds N] [--stores memory,redis,cluster] [--corpus DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import benchjson
import corpus
from crawl_bench import ALL_PATHS, FAST_PORT, MIDDLEWARES, ORIGINS, host, start_sites
from scrapy import Spider

WORKERS = 3
STORES = ("memory", "redis", "cluster")


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


def store_settings(store: str, cluster_url: str) -> dict[str, object]:
    """The settings that pick *store* (one of STORES)."""
    if store == "memory":
        return {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.MemoryStore"}
    shared: dict[str, object] = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore"}
    if store == "cluster":
        shared.update(ROBOTSTXT_REDIS_CLUSTER=True, ROBOTSTXT_REDIS_URL=cluster_url)
    return shared


def worker(redis_url: str, settings: str, *urls: str) -> None:
    """Crawl *urls* through the shared queue, with *settings* (JSON); print pages and first/last response times."""
    from scrapy.crawler import CrawlerProcess

    process = CrawlerProcess(
        {
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_USER_AGENT": "coccocbot-web",
            "DOWNLOADER_MIDDLEWARES": MIDDLEWARES["ours"],
            **json.loads(settings),
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


@contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server on a free loopback port, without persistence: its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        wait_for_redis(url)
        yield url
    finally:
        server.terminate()
        server.wait()


def run_cluster(redis_url: str, settings: dict[str, object], cluster: Any = None) -> dict[str, float]:
    import redis

    redis.Redis.from_url(redis_url).flushall()
    if cluster is not None:
        cluster.flush()
    urls = [f"http://{host(i)}:{FAST_PORT}{path}" for path in ALL_PATHS for i in range(ORIGINS)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", redis_url, json.dumps(settings), *urls[n::WORKERS]],
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
    parser.add_argument("--stores", type=lambda text: text.split(","), default=list(STORES))
    corpus.add_option(parser)
    benchjson.add_option(parser, "redis_bench")
    args = parser.parse_args()

    sites = start_sites(args.corpus)
    assert sites.stdin is not None
    rates: dict[str, list[float]] = {name: [] for name in args.stores}
    with redis_server() as redis_url, _cluster("cluster" in args.stores) as cluster:
        for round_ in range(args.rounds):
            shift = round_ % len(args.stores)
            for name in args.stores[shift:] + args.stores[:shift]:
                settings = store_settings(name, cluster.url if cluster else "")
                result = run_cluster(redis_url, settings, cluster if name == "cluster" else None)
                rates[name].append(result["rate"])
                print(
                    f"round {round_ + 1} {name:7} {result['pages']} pages, {result['rate']:.0f} pages/s, "
                    f"{result['robots']} robots.txt fetches",
                    flush=True,
                )
    sites.stdin.close()
    sites.wait()
    medians = {name: statistics.median(rates[name]) for name in args.stores}
    print(f"\nmedians of {args.rounds} rounds, {WORKERS} workers, {ORIGINS} origins x {len(ALL_PATHS)} pages")
    for name, rate in medians.items():
        against = f", {rate / medians['redis']:.2f}x redis" if "redis" in medians and name != "redis" else ""
        print(f"{name:7} {rate:.0f} pages/s{against}")
    benchjson.write(
        args.json,
        "redis_bench",
        {"workers": WORKERS, "origins": ORIGINS, "pages": len(ALL_PATHS), "rounds": args.rounds},
        {"pages_per_second": rates, "medians": medians},
    )


@contextmanager
def _cluster(wanted: bool) -> Iterator[Any]:
    """The tests' Redis Cluster (3 masters, 3 replicas), if *wanted*."""
    if not wanted:
        yield None
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.rediscluster import RedisCluster

    cluster = RedisCluster()
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(*sys.argv[2:])
    else:
        main()
