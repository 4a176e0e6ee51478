"""Sitemap benchmark: peak memory, time and reactor stalls of real crawls
reading one large sitemap, with RobotsSitemapMixin (ours: read as a stream
within the sitemaps protocol's bounds) and with stock ``SitemapSpider``.

Scenarios (each crawl reads one sitemap, the robots.txt of its site aside):

- ``xml-50mb``: a plain XML sitemap of 50,000 URLs in 50 MB (each entry a
  product page with ``lastmod``, ``changefreq``, ``priority`` and three
  ``image:image``), in the spider's ``sitemap_urls``;
- ``gz-50mb``: the same sitemap as a ``.xml.gz`` file;
- ``bomb-1gb``: the gzip bomb of issue 30, listed by robots.txt with a small
  sitemap: a ``<urlset>`` of one ``<url>`` then zero bytes, 1 MB that
  inflates to 1 GB (10^9 zero bytes: less than Scrapy's default
  ``DOWNLOAD_MAXSIZE``, so stock reads all of it); the zeros generated once,
  as a stream, and cached in the temporary directory.

Modes of the two 50 MB scenarios: ``read``, where ``sitemap_rules`` routes
none of the URLs (the cost of reading the sitemap alone), and ``route``,
where it routes all 50,000 (robots.txt disallows them: each request is
made and dropped by our spider middleware before it is queued, nothing is
downloaded). Both spiders run with our add-on, the same settings.

The sites run in a child process, on 127.0.0.2 (the 50 MB sitemaps; its
robots.txt lists none) and 127.0.0.3 (the bomb); each crawl in a fresh
process, killed when its RSS passes 3 GiB or when it has not ended after
120 s. The crawling process measures its peak RSS growth (``VmHWM`` minus
its value before the crawl), the time from engine start to spider close,
and the longest reactor stall (the largest lateness of a 10 ms
``LoopingCall``), with the CPU time its thread spent in it. Figures are
medians of the rounds; the ratios are ours over stock's medians.

    python benchmarks/sitemap_bench.py [--rounds N] [--scenarios xml-50mb/read,bomb-1gb] [--json PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import benchjson

SCENARIOS = ("xml-50mb/read", "xml-50mb/route", "gz-50mb/read", "gz-50mb/route", "bomb-1gb")
SPIDERS = ("ours", "stock")
HOST, BOMB_HOST = "127.0.0.2", "127.0.0.3"
URLS = 50_000
ENTRY_BYTES = 1000  # 50,000 entries of 1,000 bytes: 50 MB, within the protocol's 52,428,800
BOMB_BYTES = 10**9
SETTINGS: dict[str, Any] = {
    "ADDONS": {"scrapy_robots_coccoc.Addon": 0},
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
}
PROBE_INTERVAL = 0.01
RSS_KILL_BYTES = 3 * 2**30
CRAWL_TIMEOUT = 120.0
URLSET = (
    '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
)


def entry(base: str, i: int) -> str:
    """One product's ``<url>``, padded to ENTRY_BYTES with its slug."""
    images = "".join(
        f"<image:image><image:loc>{base}/img/{i:06d}/{k}.jpg</image:loc>"
        f"<image:title>Product {i} view {k}</image:title></image:image>"
        for k in range(3)
    )
    tail = (
        "</loc><lastmod>2024-05-01T10:00:00+00:00</lastmod><changefreq>weekly</changefreq>"
        f"<priority>0.8</priority>{images}</url>"
    )
    head = f"<url><loc>{base}/products/{i:06d}/"
    return head + "x" * (ENTRY_BYTES - len(head) - len(tail)) + tail


def sitemap(base: str) -> bytes:
    return (URLSET + "".join(entry(base, i) for i in range(URLS)) + "</urlset>").encode()


def bomb_zeros() -> Path:
    """The bomb's zero bytes as one gzip member, generated on first use as a stream (1 MiB at a time); the
    member before them, with the site's own URL, is made as it is served (gzip readers read every member)."""
    path = Path(tempfile.gettempdir()) / "scrapy-robots-coccoc-bench" / f"sitemap-bomb-zeros-{BOMB_BYTES}.gz"
    if path.exists():
        return path
    path.parent.mkdir(exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(2**20)
    with partial.open("wb") as out:
        left = BOMB_BYTES
        while left > 0:
            out.write(compressor.compress(zeros[: min(left, len(zeros))]))
            left -= len(zeros)
        out.write(compressor.flush())
    partial.replace(path)
    return path


def serve() -> None:
    """Serve the benchmark's sites on HOST and BOMB_HOST until stdin closes; print their URLs."""
    from twisted.internet import reactor, stdio
    from twisted.internet.protocol import Protocol
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    class Pages(Resource):
        isLeaf = True

        def __init__(self) -> None:
            super().__init__()
            self.pages: dict[str, tuple[bytes, str]] = {}

        def render_GET(self, request: Any) -> bytes:
            body, kind = self.pages.get(request.path.decode(), (b"<html></html>", "text/html"))
            request.setHeader("Content-Type", kind)
            return body

    def listen(host: str) -> tuple[str, dict[str, tuple[bytes, str]]]:
        site = Pages()
        port = reactor.listenTCP(0, Site(site), interface=host)
        return f"http://{host}:{port.getHost().port}", site.pages

    rules = "User-agent: *\nDisallow: /products/\n"
    base, pages = listen(HOST)
    plain = sitemap(base)
    pages.update(
        {
            "/robots.txt": (rules.encode(), "text/plain"),
            "/sitemap.xml": (plain, "application/xml"),
            "/sitemap.xml.gz": (gzip.compress(plain, 6), "application/gzip"),
        }
    )
    bomb_base, bomb_pages = listen(BOMB_HOST)
    head = gzip.compress(f"{URLSET}<url><loc>{bomb_base}/products/bomb</loc></url>".encode())
    small = f"{URLSET}<url><loc>{bomb_base}/products/small</loc></url></urlset>"
    listed = f"Sitemap: {bomb_base}/bomb.xml.gz\nSitemap: {bomb_base}/small.xml\n"
    bomb_pages.update(
        {
            "/robots.txt": ((rules + listed).encode(), "text/plain"),
            "/bomb.xml.gz": (head + bomb_zeros().read_bytes(), "application/gzip"),
            "/small.xml": (small.encode(), "application/xml"),
        }
    )

    class StopOnClose(Protocol):
        def connectionLost(self, reason: object = None) -> None:
            reactor.stop()

    stdio.StandardIO(StopOnClose())
    print(json.dumps({"base": base, "bomb_base": bomb_base, "sitemap_bytes": len(plain)}), flush=True)
    reactor.run()


def high_water_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def crawl(spider_kind: str, scenario: str, base: str, bomb_base: str) -> None:
    """Run one crawl and print its figures as JSON."""
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.spiders import SitemapSpider
    from twisted.internet.task import LoopingCall

    from scrapy_robots_coccoc import RobotsSitemapMixin

    kind, _, mode = scenario.partition("/")
    routed = mode != "read"

    class Stock(SitemapSpider):
        name = "stock"
        sitemap_rules = (("/products/" if routed else "/routes-nothing/", "parse_page"),)

        def parse_page(self, response: Any) -> None:
            return None

    class Ours(RobotsSitemapMixin, Stock):
        name = "ours"

    if kind == "bomb-1gb":
        arguments: dict[str, Any] = (
            {"robots_sitemap_origins": [bomb_base]}
            if spider_kind == "ours"
            else {"sitemap_urls": [f"{bomb_base}/robots.txt"]}
        )
    else:
        arguments = {"sitemap_urls": [f"{base}/sitemap.xml{'.gz' if kind == 'gz-50mb' else ''}"]}
    process = CrawlerProcess(SETTINGS)
    crawler = process.create_crawler(Ours if spider_kind == "ours" else Stock)
    times = {"stall": 0.0, "stall_cpu": 0.0}
    probes: list[LoopingCall] = []

    def probe() -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        times["stall"] = max(times["stall"], now - times["last"] - PROBE_INTERVAL)
        times["stall_cpu"] = max(times["stall_cpu"], cpu - times["last_cpu"])
        times["last"], times["last_cpu"] = now, cpu

    def started() -> None:
        times["started"] = times["last"] = time.perf_counter()
        times["last_cpu"] = time.thread_time()
        probes.append(LoopingCall(probe))
        probes[0].start(PROBE_INTERVAL, now=False)

    def closed() -> None:
        times["closed"] = time.perf_counter()
        probes[0].stop()

    crawler.signals.connect(started, signal=signals.engine_started)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    baseline = high_water_kb()
    process.crawl(crawler, **arguments)
    process.start()
    assert crawler.stats is not None
    stats = crawler.stats.get_stats()
    print(
        json.dumps(
            {
                "rss_mb": (high_water_kb() - baseline) / 1024,
                "seconds": times["closed"] - times["started"],
                "stall": times["stall"],
                "stall_cpu": times["stall_cpu"],
                # The pages routed, all dropped before the queue (robots.txt forbids them).
                "requests": stats.get("robotstxt/forbidden", 0),
                "truncated": stats.get("robotstxt/sitemaps/truncated", 0),
                "finished": stats.get("finish_reason") == "finished",
            }
        )
    )


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:")), 0)
    except FileNotFoundError:
        return 0


@dataclass
class Result:
    rss_mb: float = 0.0
    seconds: float = 0.0
    stall: float = 0.0
    stall_cpu: float = 0.0
    requests: int = 0
    truncated: int = 0
    finished: bool = False
    #: Why the crawl has no figures of its own (killed, crashed); empty if it has.
    failure: str = ""


def run_one(spider_kind: str, scenario: str, site: dict[str, Any]) -> Result:
    """Run one crawl in a fresh process, killed past the RSS or time bound."""
    command = [sys.executable, __file__, "crawl", spider_kind, scenario, site["base"], site["bomb_base"]]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err)
        started = time.perf_counter()
        while child.poll() is None:
            elapsed, rss = time.perf_counter() - started, rss_bytes(child.pid)
            if rss > RSS_KILL_BYTES or elapsed > CRAWL_TIMEOUT:
                child.kill()
                child.wait()
                if rss > RSS_KILL_BYTES:
                    return Result(failure=f"killed at {rss / 2**30:.1f} GiB after {elapsed:.1f} s")
                return Result(failure=f"killed: no end after {CRAWL_TIMEOUT:.0f} s")
            time.sleep(0.05)
        out.seek(0)
        lines = out.read().decode().strip().splitlines()
        if child.returncode or not lines:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
            return Result(failure=f"crashed (exit {child.returncode}): {' '.join(tail)[:120]}")
        return Result(**json.loads(lines[-1]))


KEYS = ("rss_mb", "seconds", "stall", "stall_cpu", "requests", "truncated")


def medians(results: list[Result]) -> dict[str, float] | None:
    measured = [r for r in results if not r.failure]
    return {key: statistics.median(getattr(r, key) for r in measured) for key in KEYS} if measured else None


def line(results: list[Result]) -> str:
    median = medians(results)
    failures = sorted({r.failure for r in results if r.failure})
    if median is None:
        return "; ".join(failures)
    return (
        f"{median['rss_mb']:7.1f} MB {median['seconds']:6.2f} s {median['stall']:5.2f}/{median['stall_cpu']:4.2f} s"
        f" {median['requests']:6.0f} req" + (f"; {'; '.join(failures)}" if failures else "")
    )


def ratios(ours: list[Result], stock: list[Result]) -> dict[str, float | None]:
    """Ours over stock's medians, of peak RSS growth and of time."""
    mine, theirs = medians(ours), medians(stock)
    if mine is None or theirs is None:
        return {"rss": None, "seconds": None}
    return {
        key: (mine[figure] / theirs[figure] if theirs[figure] else None)
        for key, figure in (("rss", "rss_mb"), ("seconds", "seconds"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, of: " + ", ".join(SCENARIOS))
    benchjson.add_option(parser, "sitemap_bench")
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    if unknown := set(scenarios) - set(SCENARIOS):
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")

    server = subprocess.Popen([sys.executable, __file__, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    site = json.loads(server.stdout.readline())
    results: dict[tuple[str, str], list[Result]] = {}
    begun = time.perf_counter()
    try:
        for round_ in range(args.rounds):
            order = list(SPIDERS) if round_ % 2 == 0 else list(reversed(SPIDERS))
            for scenario in scenarios:
                for spider in order:
                    result = run_one(spider, scenario, site)
                    results.setdefault((scenario, spider), []).append(result)
                    print(f"round {round_ + 1} {scenario:15} {spider:5} {line([result])}", flush=True)
    finally:
        server.stdin.close()
        server.wait()

    print(
        f"\nmedians of {args.rounds} rounds ({time.perf_counter() - begun:.0f} s in all); the 50 MB sitemap is"
        f" {site['sitemap_bytes']:,} bytes. Per spider: peak RSS growth, time, longest reactor stall / CPU s of"
        " the reactor's thread in it, page requests routed. Ratios: ours / stock."
    )
    print(f"{'scenario':15} | {'ours':44} | {'stock':44} | RSS ratio | time ratio")
    figures: dict[str, Any] = {}
    for scenario in scenarios:
        ours, stock = results[(scenario, "ours")], results[(scenario, "stock")]
        ratio = ratios(ours, stock)
        shown = {key: f"{value:9.3f}" if value is not None else "        -" for key, value in ratio.items()}
        print(f"{scenario:15} | {line(ours):44} | {line(stock):44} | {shown['rss']} | {shown['seconds']}")
        figures[scenario] = {
            "ratios": ratio,
            **{
                spider: {
                    "median": medians(runs),
                    "failures": sorted({r.failure for r in runs if r.failure}),
                    "rounds": [asdict(r) for r in runs],
                }
                for spider, runs in (("ours", ours), ("stock", stock))
            },
        }
    benchjson.write(
        args.json,
        "sitemap_bench",
        {
            "rounds": args.rounds,
            "urls": URLS,
            "sitemap_bytes": site["sitemap_bytes"],
            "bomb_bytes": BOMB_BYTES,
            "rss_kill_mb": RSS_KILL_BYTES / 2**20,
            "crawl_timeout_s": CRAWL_TIMEOUT,
        },
        {"scenarios": figures},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
    elif sys.argv[1:2] == ["crawl"]:
        crawl(*sys.argv[2:6])
    else:
        main()
