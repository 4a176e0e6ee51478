"""Crawl benchmark: our RobotsTxtMiddleware against Scrapy's stock
RobotsTxtMiddleware with Protego, in real crawls of loopback sites.

40 origins (each its own loopback address, so its own downloader slot) x 100
linked pages, plus one link per section page that robots.txt forbids;
CONCURRENT_REQUESTS=32. Origin N serves the Nth robots.txt of the corpus
(see corpus.py: the generated files forbid those links and set no
Crawl-delay; the files of a real corpus may forbid anything, and are served
without their Crawl-delay and Request-rate lines, which Scrapy's stock
middleware ignores: corpus_crawl_bench.py measures pacing). Scenarios:

- ``normal``: the crawl starts from each origin's home page; the figure is
  pages per second of the whole crawl.
- ``slow``: the same, but the first origin's robots.txt answers after 5 s;
  the figure is the time by which the other 39 origins are done, against
  ``normal``.
- ``seeded`` and ``slow-seeded``: the same two crawls started from all 100
  URLs of every origin, so that many requests to the slow origin wait for
  its robots.txt at once (a broad crawl resumed from a queue looks like this).

The sites run in a child process (so that serving does not share the
crawler's core), each crawl in a fresh process of its own; rounds alternate
the two middlewares and figures are medians.

    python benchmarks/crawl_bench.py [--rounds N] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import corpus

ORIGINS = 40
SECTIONS, LEAVES = 9, 10  # root + 9 sections + 90 leaves = 100 pages
SLOW_SECONDS = 5.0
FAST_PORT, SLOW_PORT = 18081, 18082
SCENARIOS = ("normal", "slow", "seeded", "slow-seeded")
MIDDLEWARES = {
    "ours": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_robots_coccoc.RobotsTxtMiddleware": 100,
    },
    "stock": {},
}


def host(index: int) -> str:
    return f"127.0.1.{index + 1}"


def links_of(path: str) -> list[str]:
    if path == "/":
        return [f"/s{s}/" for s in range(SECTIONS)]
    if path.count("/") == 2 and path.endswith("/"):
        section = path.strip("/")
        return [f"/{section}/p{leaf}.html" for leaf in range(LEAVES)] + [f"/private/{section}.html"]
    return []


ALL_PATHS = ["/", *links_of("/"), *(leaf for section in links_of("/") for leaf in links_of(section)[:-1])]


def serve(folder: Path | None = None) -> None:
    """Serve the sites on every address, on a fast port and on a port where
    the first origin's robots.txt is slow, until stdin closes."""
    from twisted.internet import reactor, stdio
    from twisted.internet.protocol import Protocol
    from twisted.web.resource import Resource
    from twisted.web.server import NOT_DONE_YET, Site

    bodies = [corpus.unpaced(body) for _, body in corpus.load(folder)]

    class Pages(Resource):
        isLeaf = True

        def __init__(self, robots_txt: bytes, robots_delay: float) -> None:
            super().__init__()
            self.robots_txt = robots_txt
            self.robots_delay = robots_delay

        def render_GET(self, request):
            path = request.path.decode()
            if path == "/robots.txt":
                request.setHeader("Content-Type", "text/plain")
                if not self.robots_delay:
                    return self.robots_txt

                def finish() -> None:
                    if not request._disconnected:
                        request.write(self.robots_txt)
                        request.finish()

                reactor.callLater(self.robots_delay, finish)
                return NOT_DONE_YET
            hrefs = "".join(f'<a href="{link}">{link}</a>' for link in links_of(path))
            return f"<html><body><h1>{path}</h1>{hrefs}</body></html>".encode()

    for index in range(ORIGINS):
        robots_txt = bodies[index % len(bodies)]
        reactor.listenTCP(FAST_PORT, Site(Pages(robots_txt, 0)), interface=host(index))
        slow = Pages(robots_txt, SLOW_SECONDS if index == 0 else 0)
        reactor.listenTCP(SLOW_PORT, Site(slow), interface=host(index))

    class StopOnClose(Protocol):
        def connectionLost(self, reason=None) -> None:
            reactor.stop()

    stdio.StandardIO(StopOnClose())
    print("ready", flush=True)
    reactor.run()


def crawl(middleware: str, scenario: str) -> None:
    """Run one crawl and print its figures as JSON."""
    from scrapy import Spider
    from scrapy.crawler import CrawlerProcess

    port = SLOW_PORT if scenario.startswith("slow") else FAST_PORT
    slow_origin = f"http://{host(0)}:{port}"
    seeded = scenario.endswith("seeded")
    paths = ALL_PATHS if seeded else ["/"]

    class Bench(Spider):
        name = "bench"
        start_urls = tuple(f"http://{host(index)}:{port}{path}" for path in paths for index in range(ORIGINS))
        pages = 0
        started = cpu_started = 0.0
        others_done = 0.0

        async def start(self):
            self.started = time.perf_counter()
            self.cpu_started = time.process_time()
            async for request in super().start():
                yield request

        def parse(self, response):
            self.pages += 1
            if not response.url.startswith(slow_origin):
                self.others_done = time.perf_counter()
            if not seeded:
                yield from response.follow_all(css="a")

    process = CrawlerProcess(
        {
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_USER_AGENT": "coccocbot-web",
            "DOWNLOADER_MIDDLEWARES": MIDDLEWARES[middleware],
            "CONCURRENT_REQUESTS": 32,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "DOWNLOAD_TIMEOUT": 30,
        }
    )
    crawler = process.create_crawler(Bench)
    process.crawl(crawler)
    process.start()
    spider = crawler.spider
    finished, cpu = time.perf_counter(), time.process_time() - spider.cpu_started
    print(
        json.dumps(
            {
                "pages": spider.pages,
                "seconds": finished - spider.started,
                "cpu": cpu,
                "others_done": spider.others_done - spider.started,
                "forbidden": crawler.stats.get_value("robotstxt/forbidden", 0),
            }
        )
    )


def start_sites(folder: Path | None) -> subprocess.Popen[bytes]:
    """Start serve() in a child process; return once it listens."""
    command = [sys.executable, __file__, "serve", *([str(folder)] if folder else [])]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdout is not None
    server.stdout.readline()
    return server


def run_one(middleware: str, scenario: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "crawl", middleware, scenario], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--throughput-only", action="store_true", help="run the normal crawl only")
    corpus.add_option(parser)
    args = parser.parse_args()

    server = start_sites(args.corpus)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        for round_ in range(args.rounds):
            order = list(MIDDLEWARES) if round_ % 2 == 0 else list(reversed(MIDDLEWARES))
            for middleware in order:
                for scenario in SCENARIOS[:1] if args.throughput_only else SCENARIOS:
                    result = run_one(middleware, scenario)
                    results.setdefault((middleware, scenario), []).append(result)
                    print(
                        f"round {round_ + 1} {middleware:5} {scenario:11} {result['pages']} pages "
                        f"{result['seconds']:.2f} s ({result['cpu']:.2f} s CPU), "
                        f"other origins done at {result['others_done']:.2f} s",
                        flush=True,
                    )
    finally:
        server.stdin.close()
        server.wait()

    def median(middleware: str, scenario: str, key: str) -> float:
        return statistics.median(r[key] for r in results[(middleware, scenario)])

    print(f"\nmedians of {args.rounds} rounds, {ORIGINS} origins x {1 + SECTIONS * (1 + LEAVES)} pages")

    def rate(middleware: str, per: str = "seconds") -> float:
        return median(middleware, "normal", "pages") / median(middleware, "normal", per)

    for middleware in MIDDLEWARES:
        print(f"{middleware:5}: {rate(middleware):7.0f} pages/s, {rate(middleware, 'cpu'):7.0f} pages per CPU second")
        for normal, slow in () if args.throughput_only else (("normal", "slow"), ("seeded", "slow-seeded")):
            slowdown = median(middleware, slow, "others_done") / median(middleware, normal, "others_done")
            print(
                f"       {normal:6}: with a {SLOW_SECONDS:.0f} s robots.txt the other {ORIGINS - 1} origins"
                f" take {slowdown:.2f}x their time without it"
            )
    print(f"ours / stock pages per second: {rate('ours') / rate('stock'):.2f}x")
    paired = [
        stock["seconds"] / ours["seconds"]
        for ours, stock in zip(results[("ours", "normal")], results[("stock", "normal")], strict=True)
    ]
    print(f"ours / stock pages per second, median of the rounds' own ratios: {statistics.median(paired):.2f}x")
    print(f"ours / stock pages per CPU second: {rate('ours', 'cpu') / rate('stock', 'cpu'):.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(Path(sys.argv[2]) if sys.argv[2:] else None)
    elif sys.argv[1:2] == ["crawl"]:
        crawl(sys.argv[2], sys.argv[3])
    else:
        main()
