"""Redis 100 ms away: 3 scrapy-redis workers crawl 8 origins whose
robots.txt says Crawl-delay 0.2 (30 pages each, all seeded and split among
the workers), so that every request reserves its turn in Redis. Rounds
alternate a run where the store talks to Redis directly and one where it
goes through a TCP proxy adding 100 ms per round trip (the scrapy-redis
queue stays direct: it is not ours to measure).

Figures, medians over rounds: pages per second of the whole cluster, proxied
/ direct; the worst reactor lateness any worker saw (a LoopingCall probe
every 10 ms); the smallest gap between consecutive requests to an origin,
against 0.95 x its Crawl-delay; the workers that logged the slow-Redis
WARNING.

    python benchmarks/redis_latency_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

from redis_bench import WORKERS, PagesSpider, cluster_settings, wait_for_redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.redis_worker import LatencyProxy  # noqa: E402

ORIGINS, PAGES, CRAWL_DELAY = 8, 30, 0.2
DELAY_EACH_WAY = 0.05


def host(index: int) -> str:
    return f"127.0.2.{index + 1}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(port: str) -> None:
    """Serve the origins until stdin closes; then print the start times of
    each origin's requests (robots.txt aside) as JSON."""
    from twisted.internet import reactor, stdio
    from twisted.internet.protocol import Protocol
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    starts: dict[str, list[float]] = {}

    class Pages(Resource):
        isLeaf = True

        def __init__(self, origin: str) -> None:
            super().__init__()
            self.origin = origin

        def render_GET(self, request):
            if request.path == b"/robots.txt":
                return f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode()
            starts.setdefault(self.origin, []).append(time.monotonic())
            return b"<html><body>page</body></html>"

    for index in range(ORIGINS):
        reactor.listenTCP(int(port), Site(Pages(host(index))), interface=host(index))

    class StopOnClose(Protocol):
        def connectionLost(self, reason=None) -> None:
            print(json.dumps(starts), flush=True)
            reactor.stop()

    stdio.StandardIO(StopOnClose())
    print("ready", flush=True)
    reactor.run()


def worker(redis_url: str, store_url: str, *urls: str) -> None:
    """Crawl *urls* through the shared queue with a lag probe; print figures as JSON."""
    import logging

    from scrapy.crawler import CrawlerProcess

    from tests.crawling import SETTINGS
    from tests.redis_worker import LagProbe

    class Slow(logging.Handler):
        seen = 0

        def emit(self, record: logging.LogRecord) -> None:
            Slow.seen += "Redis store is slow" in record.getMessage()

    process = CrawlerProcess(
        {
            **SETTINGS,
            "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
            "ROBOTSTXT_REDIS_URL": store_url,
            **cluster_settings(redis_url),
        }
    )
    logging.getLogger("scrapy_robots_coccoc.stores").addHandler(Slow())
    crawler = process.create_crawler(PagesSpider)
    process.crawl(crawler, start_urls=list(urls))
    from twisted.internet import reactor

    probe = LagProbe()
    reactor.callWhenRunning(probe.start)
    process.start()
    spider = crawler.spider
    print(
        json.dumps(
            {"pages": spider.pages, "first": spider.first, "last": spider.last, "lag": probe.stop(), "slow": Slow.seen}
        )
    )


def run_cluster(redis_url: str, store_url: str, port: int) -> dict[str, float]:
    import redis

    redis.Redis.from_url(redis_url).flushall()
    sites = subprocess.Popen(
        [sys.executable, __file__, "serve", str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert sites.stdout is not None and sites.stdin is not None
    sites.stdout.readline()
    urls = [f"http://{host(i)}:{port}/p{page}" for page in range(PAGES) for i in range(ORIGINS)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", redis_url, store_url, *urls[n::WORKERS]],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in range(WORKERS)
    ]
    results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    sites.stdin.close()
    starts = json.loads(sites.stdout.readline())
    sites.wait()
    span = max(r["last"] for r in results) - min(r["first"] for r in results if r["first"])
    pages = sum(r["pages"] for r in results)
    gaps = [b - a for times in starts.values() for a, b in pairwise(times)]
    return {
        "pages": pages,
        "rate": pages / span,
        "lag": max(r["lag"] for r in results),
        "gap": min(gaps),
        "slow": sum(bool(r["slow"]) for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    redis_port, site_port = free_port(), free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    wait_for_redis(redis_url)
    figures: dict[str, list[dict[str, float]]] = {"direct": [], "proxied": []}
    try:
        with LatencyProxy(redis_port, DELAY_EACH_WAY) as proxy:
            store_urls = {"direct": redis_url, "proxied": proxy.url()}
            for round_ in range(args.rounds):
                order = list(figures) if round_ % 2 == 0 else list(reversed(figures))
                for name in order:
                    result = run_cluster(redis_url, store_urls[name], site_port)
                    figures[name].append(result)
                    print(
                        f"round {round_ + 1} {name:7} {result['pages']} pages, {result['rate']:.1f} pages/s, "
                        f"worst reactor lag {result['lag']:.3f} s, smallest gap {result['gap']:.3f} s, "
                        f"{result['slow']} of {WORKERS} workers warned of slow Redis",
                        flush=True,
                    )
    finally:
        redis_server.terminate()
        redis_server.wait()

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in figures[name])

    ratios = [p["rate"] / d["rate"] for p, d in zip(figures["proxied"], figures["direct"], strict=True)]
    print(f"\nmedians of {args.rounds} rounds, {WORKERS} workers, {ORIGINS} origins x {PAGES} pages, Crawl-delay 0.2")
    for name in figures:
        print(
            f"{name:7}: {median(name, 'rate'):.1f} pages/s, worst reactor lag {median(name, 'lag'):.3f} s "
            f"(max {max(r['lag'] for r in figures[name]):.3f}), smallest gap {median(name, 'gap'):.3f} s "
            f"(min {min(r['gap'] for r in figures[name]):.3f}; 0.95 x Crawl-delay = {0.95 * CRAWL_DELAY:.3f})"
        )
    print(f"proxied / direct pages per second: {statistics.median(ratios):.2f}x (median of per-round ratios)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(*sys.argv[2:])
    elif sys.argv[1:2] == ["worker"]:
        worker(*sys.argv[2:])
    else:
        main()
