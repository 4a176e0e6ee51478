"""Corpus crawl benchmark: what Crawl-delay pacing costs the rest of a broad
crawl (issue 14, "Politeness that costs the rest of the crawl nothing").

Each robots.txt of the corpus is served as its own loopback origin (one
Twisted server process in a child, listening on 127.0.0.2-127.0.0.250 with
several ports per address: origin ``i`` is ``127.0.0.{2 + i % 249}:{PORT + i //
249}``). An origin serves its corpus file as ``/robots.txt``, with every
``Crawl-delay`` and ``Request-rate`` line removed, except that one origin in
eight (``i % 8 == 0``) gets ``Crawl-delay: 5`` in each of its groups (and a
``User-agent: *`` group if it has none), which our side caps at
``ROBOTSTXT_MAX_CRAWL_DELAY = 0.2`` so that the run fits. Its home page ``/``
links 7 pages (8 URLs per origin); the crawl starts from every home page and
follows links, as a broad crawl does.

Three configurations, each crawl in a fresh process, rounds interleaved
(the order rotates), all with the same settings (``CONCURRENT_REQUESTS``,
Scrapy's default scheduler, ``ROBOTSTXT_USER_AGENT = coccocbot-web``):

- ``paced``: ours (RobotsTxtMiddleware at 100, RobotsTxtBodyMiddleware at
  595, Scrapy's own disabled), ``ROBOTSTXT_CRAWL_DELAY_ENABLED = True``;
- ``unpaced``: ours, ``ROBOTSTXT_CRAWL_DELAY_ENABLED = False``;
- ``stock``: Scrapy's RobotsTxtMiddleware with Protego (it ignores Crawl-delay);
- ``recorded``: ``paced`` with the compliance record kept (``ROBOTSTXT_RECORD_DIR``, a fresh temporary
  directory per crawl); its crawl also reports the record's bytes, decisions and WARC records, and the CPU
  time of the record's writing process (a child of the crawl, not in the crawl's own CPU figure).

The figure is pages per second: responses the spider received (robots.txt
excluded) / wall time of the crawl, medians of the rounds; ratios are against
``stock``. A probe samples the downloader every 0.1 s: requests in its active
set, those transferring, those queued in a downloader slot (the rest of the
active set is in the middlewares, e.g. waiting for a Crawl-delay turn in place)
and, for ours, requests parked outside it. The crawling process also notes
its peak RSS growth (``VmHWM`` at the end minus its value before the crawl).

    .venv/bin/python benchmarks/corpus_crawl_bench.py [--corpus DIR] [--origins N[,N...]]
        [--rounds N] [--concurrency N] [--configs paced,unpaced,stock] [--profile CONFIG] [--json PATH]

``--corpus`` defaults to $BENCH_CORPUS when set, else the generated
corpus of corpus.py. ``--origins`` defaults to 800 (spread evenly
over the corpus, 6,400 URLs): on a shared 2-core machine Scrapy 2.19 makes
only ~180 pages/s here (CPU-bound; most of it Scrapy's own per-response work,
e.g. ``scrapy.utils.asyncio._parallel_asyncio`` starting CONCURRENT_ITEMS
tasks per callback), so the full 4,231 x 8 takes ~3 minutes per crawl, far
too long for 15 crawls in ~10 minutes; ``--origins 0`` crawls them all, and a
list (``--origins 250,500,1000,2000``) crawls each number in turn, the sites
served afresh for each. ``--configs`` runs only the configurations named.
``--profile CONFIG`` runs one crawl of that configuration under cProfile and
prints where its time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import benchjson
import corpus

DEFAULT_ORIGINS = 800
ADDRESSES = 249  # 127.0.0.2 .. 127.0.0.250
BASE_PORT = 27300
PACED_EVERY = 8
WRITTEN_DELAY = b"5"
MAX_CRAWL_DELAY = 0.2
PAGES = (
    "/about/",
    "/news/",
    "/news/2024/article-1.html",
    "/products/item-2.html",
    "/blog/post-3.html",
    "/contact.html",
    "/category/general/?page=2",
)
OURS = {
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "scrapy_robots_coccoc.RobotsTxtMiddleware": 100,
    "scrapy_robots_coccoc.RobotsTxtBodyMiddleware": 595,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "paced": {"DOWNLOADER_MIDDLEWARES": OURS, "ROBOTSTXT_CRAWL_DELAY_ENABLED": True},
    "unpaced": {"DOWNLOADER_MIDDLEWARES": OURS, "ROBOTSTXT_CRAWL_DELAY_ENABLED": False},
    "stock": {},
    # paced, with the compliance record kept (ROBOTSTXT_RECORD_DIR: a fresh directory per crawl).
    "recorded": {"DOWNLOADER_MIDDLEWARES": OURS, "ROBOTSTXT_CRAWL_DELAY_ENABLED": True},
}

_PACING_LINE = re.compile(rb"^[ \t]*(?:crawl-delay|request-rate)[ \t]*:[^\r\n]*(?:\r\n|\n|\r)?", re.I | re.M)
_AGENT_LINE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t]*user-agent[ \t]*:", re.I)
_STAR_AGENT = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t]*user-agent[ \t]*:[ \t]*\*[ \t]*(?:#.*)?$", re.I)


def origin_host(index: int) -> str:
    return f"127.0.0.{2 + index % ADDRESSES}"


def origin_port(index: int) -> int:
    return BASE_PORT + index // ADDRESSES


def origin_url(index: int) -> str:
    return f"http://{origin_host(index)}:{origin_port(index)}"


def is_paced(index: int) -> bool:
    return index % PACED_EVERY == 0


def default_corpus() -> Path | None:
    """$BENCH_CORPUS, a folder of real robots.txt files, if set; else the generated corpus."""
    folder = os.environ.get("BENCH_CORPUS")
    return Path(folder) if folder and Path(folder).is_dir() else None


def select(folder: Path | None, origins: int) -> list[bytes]:
    """The corpus files of the crawl: *origins* of them spread evenly over
    the corpus (all for 0 or more than it has)."""
    bodies = [body for _, body in corpus.load(folder)]
    if 0 < origins < len(bodies):
        bodies = [bodies[i * len(bodies) // origins] for i in range(origins)]
    return bodies


def rewrite(body: bytes, paced: bool) -> bytes:
    """*body* without pacing lines, plus a Crawl-delay in every group if *paced*."""
    body = _PACING_LINE.sub(b"", body)
    if not paced:
        return body
    out: list[bytes] = []
    lines = body.splitlines(keepends=True)
    for number, line in enumerate(lines):
        out.append(line)
        following = lines[number + 1] if number + 1 < len(lines) else b""
        if _AGENT_LINE.match(line) and not _AGENT_LINE.match(following):
            if not line.endswith((b"\n", b"\r")):
                out.append(b"\n")
            out.append(b"Crawl-delay: " + WRITTEN_DELAY + b"\n")
    if not any(_STAR_AGENT.match(line.strip(b"\r\n")) for line in lines):
        if out and not out[-1].endswith((b"\n", b"\r")):
            out.append(b"\n")
        out.append(b"\nUser-agent: *\nCrawl-delay: " + WRITTEN_DELAY + b"\n")
    return b"".join(out)


def serve(folder: Path | None, origins: int, as_written: bool = False) -> None:
    """Serve the origins until stdin closes; each file *as_written*, or rewritten (see :func:`rewrite`)."""
    from twisted.internet import reactor, stdio
    from twisted.internet.protocol import Protocol
    from twisted.web.resource import Resource
    from twisted.web.server import NOT_DONE_YET, Site

    index_page = (
        "<html><head><title>home</title></head><body><h1>home</h1><ul>"
        + "".join(f'<li><a href="{page}">{page}</a></li>' for page in PAGES)
        + "</ul></body></html>"
    ).encode()
    filler = "<p>" + "lorem ipsum dolor sit amet " * 40 + "</p>"
    latency = float(os.environ.get("BENCH_ROBOTS_LATENCY") or 0)

    class Origin(Resource):
        isLeaf = True

        def __init__(self, robots_txt: bytes) -> None:
            super().__init__()
            self.robots_txt = robots_txt

        def render_GET(self, request: Any) -> bytes | int:
            path = request.path.decode()
            if path == "/robots.txt":
                request.setHeader(b"Content-Type", b"text/plain")
                if not latency:
                    return self.robots_txt
                # As a far site answers: the page is sent after $BENCH_ROBOTS_LATENCY seconds.
                reactor.callLater(latency, lambda: request.finish() if request.write(self.robots_txt) is None else 0)
                return NOT_DONE_YET
            if path == "/":
                return index_page
            return f"<html><body><h1>{path}</h1>{filler}</body></html>".encode()

    for index, body in enumerate(select(folder, origins)):
        site = Site(Origin(body if as_written else rewrite(body, is_paced(index))))
        site.noisy = False
        reactor.listenTCP(origin_port(index), site, interface=origin_host(index), backlog=128)

    class StopOnClose(Protocol):
        def connectionLost(self, reason: object = None) -> None:
            reactor.stop()

    stdio.StandardIO(StopOnClose())
    print("ready", flush=True)
    reactor.run()


def high_water_kb() -> int:
    """The peak resident set size of this process so far (VmHWM), in KiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def crawl(config: str, origins: int, concurrency: int, profile: bool) -> None:
    """Run one crawl and print its figures as JSON (last line)."""
    from scrapy import Request, Spider, signals
    from scrapy.crawler import CrawlerProcess

    samples: list[tuple[int, int, int, int]] = []
    paced_prefixes = tuple(origin_url(i) + "/" for i in range(origins) if is_paced(i))

    class Bench(Spider):
        name = "corpus_bench"
        pages = paced_pages = 0
        started = cpu_started = unpaced_done = 0.0

        async def start(self):  # type: ignore[override]
            self.started = time.perf_counter()
            self.cpu_started = time.process_time()
            from twisted.internet.task import LoopingCall

            probe = LoopingCall(sample)
            probes.append(probe)
            probe.start(0.1, now=False)
            for index in range(origins):
                yield Request(origin_url(index) + "/")

        def parse(self, response):  # type: ignore[override]
            self.pages += 1
            if response.url.startswith(paced_prefixes):
                self.paced_pages += 1
            else:
                self.unpaced_done = time.perf_counter()
            if urlsplit(response.url).path == "/":
                yield from response.follow_all(css="a")

    def sample() -> None:
        engine = crawler.engine
        if engine is None:
            return
        downloader = engine.downloader
        transferring = sum(len(slot.transferring) for slot in downloader.slots.values())
        queued = sum(len(slot.queue) for slot in downloader.slots.values())
        parked = 0
        for middleware in downloader.middleware.middlewares:
            parking = getattr(middleware, "_parking", None)
            if parking is not None:
                parked = len(parking)
        samples.append((len(downloader.active), transferring, queued, parked))

    probes: list[Any] = []  # the probe, made once the reactor runs
    record_dir = Path(tempfile.mkdtemp(prefix="corpus-bench-record-")) if config == "recorded" else None
    process = CrawlerProcess(
        {
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_USER_AGENT": "coccocbot-web",
            "ROBOTSTXT_MAX_CRAWL_DELAY": MAX_CRAWL_DELAY,
            "CONCURRENT_REQUESTS": concurrency,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "DOWNLOAD_TIMEOUT": 30,
            **CONFIGS[config],
            **({"ROBOTSTXT_RECORD_DIR": str(record_dir)} if record_dir else {}),
        }
    )
    crawler = process.create_crawler(Bench)
    crawler.signals.connect(lambda: [probe.stop() for probe in probes if probe.running], signal=signals.spider_closed)
    baseline_kb = high_water_kb()
    process.crawl(crawler)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    process.start()
    finished = time.perf_counter()
    if profiler is not None:
        import pstats

        profiler.disable()
        for order in ("tottime", "cumulative"):
            pstats.Stats(profiler, stream=sys.stderr).sort_stats(order).print_stats(30)
    spider = crawler.spider
    stats = crawler.stats
    assert spider is not None and stats is not None

    def mean(column: int) -> float:
        return statistics.fmean(row[column] for row in samples) if samples else 0.0

    print(
        json.dumps(
            {
                "pages": spider.pages,
                "paced_pages": spider.paced_pages,
                "seconds": finished - spider.started,
                "unpaced_done": spider.unpaced_done - spider.started,
                "cpu": time.process_time() - spider.cpu_started,
                "children_cpu": children_cpu(),
                "robots": stats.get_value("robotstxt/request_count", 0),
                "forbidden": stats.get_value("robotstxt/forbidden", 0),
                "parked": stats.get_value("robotstxt/parked", 0),
                "late_turns": stats.get_value("robotstxt/crawl_delay/late_turns", 0),
                "delay_sites": stats.get_value("robotstxt/crawl_delay/sites", 0),
                "active": mean(0),
                "transferring": mean(1),
                "slot_queued": mean(2),
                "parked_now": mean(3),
                "parked_max": max((row[3] for row in samples), default=0),
                "rss_mb": (high_water_kb() - baseline_kb) / 1024,
                **(record_figures(record_dir) if record_dir else {}),
            }
        ),
        flush=True,
    )


def children_cpu() -> float:
    """CPU seconds of the crawl's child processes that ended: the compliance record's writing process."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def record_figures(directory: Path) -> dict[str, float]:
    """The record's size on disk, its decisions and WARC records; the directory is removed."""
    import gzip

    from warcio.archiveiterator import ArchiveIterator

    decisions_file, warc_file = next(directory.glob("decisions-*")), next(directory.glob("robots-*"))
    with gzip.open(decisions_file) as lines:
        decisions = sum(1 for _ in lines)
    with warc_file.open("rb") as stream:
        records = sum(1 for _ in ArchiveIterator(stream))
    figures = {
        "record_bytes": decisions_file.stat().st_size + warc_file.stat().st_size,
        "decisions_bytes": decisions_file.stat().st_size,
        "warc_bytes": warc_file.stat().st_size,
        "decisions": decisions,
        "warc_records": records,
    }
    shutil.rmtree(directory)
    return figures


def start_sites(folder: Path | None, origins: int, as_written: bool = False) -> subprocess.Popen[bytes]:
    """Start serve() in a child process; return once it listens."""
    command = [
        sys.executable,
        __file__,
        "serve",
        str(origins),
        str(int(as_written)),
        *([str(folder)] if folder else []),
    ]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdout is not None
    if server.stdout.readline().strip() != b"ready":
        server.wait()
        raise SystemExit("the sites did not start (ports taken?)")
    return server


def stop_sites(server: subprocess.Popen[bytes]) -> None:
    """Stop the sites start_sites() started: they serve until their stdin closes."""
    assert server.stdin is not None
    server.stdin.close()
    server.wait()


def interleaved(configs: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round, configuration) of every crawl, the order rotating each round so that none always goes first."""
    for round_ in range(rounds):
        shift = round_ % len(configs)
        for config in configs[shift:] + configs[:shift]:
            yield round_, config


def run_one(config: str, origins: int, concurrency: int, profile: bool = False) -> dict[str, float]:
    command = [sys.executable, __file__, "crawl", config, str(origins), str(concurrency), str(int(profile))]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"crawl {config} failed:\n{done.stderr[-3000:]}")
    if profile:
        print(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe(result: dict[str, float]) -> str:
    return (
        f"{result['pages']:6.0f} pages {result['seconds']:6.2f} s = {result['pages'] / result['seconds']:5.0f} pages/s "
        f"({result['cpu']:5.2f} s CPU); unpaced origins done at {result['unpaced_done']:6.2f} s; "
        f"robots.txt {result['robots']:.0f}, forbidden {result['forbidden']:.0f}, paced pages "
        f"{result['paced_pages']:.0f}; mean active {result['active']:4.1f}, transferring "
        f"{result['transferring']:4.1f}, in slot queues {result['slot_queued']:4.1f}, parked "
        f"{result['parked_now']:5.1f} (max {result['parked_max']:.0f})"
    )


def measure(
    folder: Path | None, total: int, origins: int, args: argparse.Namespace
) -> dict[str, list[dict[str, float]]]:
    """Crawl *origins* of the *total* corpus files in every configuration of
    *args*, round after round; print each crawl and the medians."""
    paced = sum(is_paced(i) for i in range(origins))
    print(
        f"corpus {folder or 'generated (corpus.py)'}: {origins} of {total} files as origins x {1 + len(PAGES)} URLs, "
        f"{paced} with Crawl-delay (capped at {MAX_CRAWL_DELAY} s), CONCURRENT_REQUESTS={args.concurrency}",
        flush=True,
    )

    configs = args.configs
    server = start_sites(folder, origins)
    results: dict[str, list[dict[str, float]]] = {config: [] for config in configs}
    try:
        if args.profile:
            print(describe(run_one(args.profile, origins, args.concurrency, profile=True)))
            return results
        for round_, config in interleaved(configs, args.rounds):
            result = run_one(config, origins, args.concurrency)
            results[config].append(result)
            print(f"round {round_ + 1} {config:7} {describe(result)}", flush=True)
    finally:
        stop_sites(server)

    def rate(config: str) -> float:
        return statistics.median(r["pages"] / r["seconds"] for r in results[config])

    def median(config: str, key: str) -> float:
        return statistics.median(r[key] for r in results[config])

    print(f"\nmedians of {args.rounds} rounds")
    for config in configs:
        print(
            f"{config:7}: {rate(config):6.0f} pages/s, {median(config, 'pages'):.0f} pages in "
            f"{median(config, 'seconds'):.2f} s, {median(config, 'cpu'):.2f} s CPU "
            f"({median(config, 'pages') / median(config, 'cpu'):.0f} pages per CPU second), unpaced origins done at "
            f"{median(config, 'unpaced_done'):.2f} s, robots.txt fetched {median(config, 'robots'):.0f}, "
            f"forbidden {median(config, 'forbidden'):.0f}, peak RSS growth {median(config, 'rss_mb'):.0f} MB"
        )
    if "recorded" in results and "paced" in results:
        recorded = results["recorded"]
        print(
            f"recorded / paced pages per second: {rate('recorded') / rate('paced'):.2f}x; record "
            f"{median('recorded', 'record_bytes') / 1e6:.2f} MB: decisions "
            f"{median('recorded', 'decisions_bytes') / median('recorded', 'decisions'):.0f} B per request "
            f"({median('recorded', 'decisions'):.0f} decided), WARC "
            f"{median('recorded', 'warc_bytes') / origins:.0f} B per origin "
            f"({statistics.median(r['warc_records'] for r in recorded):.0f} records); its writing process "
            f"{median('recorded', 'children_cpu'):.2f} s CPU"
        )
    for config in ("paced", "unpaced"):
        if config not in results or "stock" not in results:
            continue
        paired = [
            (r["pages"] / r["seconds"]) / (s["pages"] / s["seconds"])
            for r, s in zip(results[config], results["stock"], strict=True)
        ]
        print(
            f"{config} / stock pages per second: {rate(config) / rate('stock'):.2f}x "
            f"(median of the rounds' own ratios {statistics.median(paired):.2f}x)"
        )
    return results


def summary(origins: int, results: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """The JSON of one size: per configuration, the medians and the rounds."""
    configs = {}
    for config, rounds in results.items():
        medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        medians["pages_per_s"] = statistics.median(r["pages"] / r["seconds"] for r in rounds)
        configs[config] = {"median": medians, "rounds": rounds}
    return {"origins": origins, "configs": configs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--origins",
        default=str(DEFAULT_ORIGINS),
        help="origins to crawl, 0 for all; a comma-separated list crawls each number in turn",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="CONCURRENT_REQUESTS")
    parser.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"comma-separated, of: {', '.join(CONFIGS)} (default: all)",
    )
    parser.add_argument("--profile", choices=CONFIGS, help="one crawl of CONFIG under cProfile, then stop")
    corpus.add_option(parser)
    benchjson.add_option(parser, "corpus_crawl_bench")
    args = parser.parse_args()
    args.configs = args.configs.split(",")
    if unknown := set(args.configs) - set(CONFIGS):
        parser.error(f"unknown configurations: {', '.join(sorted(unknown))}")
    folder: Path | None = args.corpus or default_corpus()
    total = len(corpus.load(folder))
    sizes = []
    for size in (int(s) for s in args.origins.split(",")):
        origins = total if size <= 0 or size > total else size
        if origins > ADDRESSES * 200:
            raise SystemExit(f"at most {ADDRESSES * 200} origins")
        sizes.append(origins)

    measured = []
    for number, origins in enumerate(sizes):
        if number:
            print()
        results = measure(folder, total, origins, args)
        if args.profile:
            return
        measured.append(summary(origins, results))
    benchjson.write(
        args.json,
        "corpus_crawl_bench",
        {
            "corpus": benchjson.corpus_name(folder, total),
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "urls_per_origin": 1 + len(PAGES),
            "paced_every": PACED_EVERY,
            "max_crawl_delay": MAX_CRAWL_DELAY,
            "configs": args.configs,
        },
        {"sizes": measured},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(Path(sys.argv[4]) if sys.argv[4:] else None, int(sys.argv[2]), sys.argv[3] == "1")
    elif sys.argv[1:2] == ["crawl"]:
        crawl(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
    else:
        main()
