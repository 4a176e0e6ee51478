"""Broad crawl benchmark: every URL of N origins as a start request, each origin
paced by its own robots.txt, this checkout against another commit of the
project, stock Scrapy and a crawl that ignores robots.txt, in one run.

The benchmark that would have caught issue 34: corpus_crawl_bench.py follows
links from 800 home pages with one origin in eight paced, a shape in which
neither a cost that grows with the number of origins nor a stall of the
unpaced path shows.

Each robots.txt of the corpus is served as written (its own Crawl-delay and
Request-rate lines kept) as its own loopback origin, by corpus_crawl_bench.py's
server; the crawl's start requests are all 8 URLs of every origin (origin by
origin, 33,848 for the whole corpus of 4,231 files), with an errback each
when ``--errbacks`` is given.
Settings are a broad crawl's: ``CONCURRENT_REQUESTS = 64``,
``CONCURRENT_REQUESTS_PER_DOMAIN = 8``, ``DOWNLOAD_DELAY = 0``,
``ROBOTSTXT_USER_AGENT = coccocbot-web``, every Crawl-delay capped at
``--max-crawl-delay`` (0.05 s; 0 turns pacing off).

Configurations, each crawl in a fresh process, rounds interleaved (the order
rotates):

- ``head``: this checkout (or the commit ``--head REF``), enabled through
  ``scrapy_robots_coccoc.Addon``;
- ``base``: the same at ``--base REF`` (checked out with ``git worktree`` under
  ``build/bench-base/`` and put first on the child's ``sys.path``);
- ``stock``: Scrapy's own RobotsTxtMiddleware (Protego, no Crawl-delay);
- ``off``: ``ROBOTSTXT_OBEY = False``: what the crawl costs without robots.txt.

Figures per crawl: pages (responses to the spider), pages/s over the crawl's
wall time, robots.txt requests, requests that ended in their errback (by
exception class), requests dropped before queueing without one, requests
*unaccounted* for (neither downloaded nor failed nor counted as dropped: lost
or never requested, e.g. at ``--timeout``), the finish reason and the peak
RSS growth. Ratios are medians of the rounds' figures, against ``stock``,
``base`` and ``off``.

    .venv/bin/python benchmarks/broad_crawl_bench.py --corpus DIR [--origins 500,2000,0]
        [--max-crawl-delay 0.05] [--base REF] [--configs head,base,stock,off] [--rounds 3]
        [--timeout 600] [--errbacks] [--set NAME=JSON] [--robots-latency S] [--json PATH]

``make bench-compare BASE=REF CORPUS=DIR`` runs it on the whole corpus with
pacing capped and off. ``--origins 0`` is the whole corpus; a list runs each
size in turn, the sites served afresh for each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import benchjson
import corpus
import corpus_crawl_bench as sites

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
CONFIGS = ("head", "base", "stock", "off")
URLS = ("/", *sites.PAGES)


def settings_of(config: str, max_crawl_delay: float, timeout: float) -> dict[str, Any]:
    common: dict[str, Any] = {
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "DOWNLOAD_DELAY": 0,
        "DOWNLOAD_TIMEOUT": 30,
        "CLOSESPIDER_TIMEOUT": timeout,
        "ROBOTSTXT_USER_AGENT": "coccocbot-web",
        "ROBOTSTXT_MAX_CRAWL_DELAY": max_crawl_delay,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
    }
    if config in ("head", "base"):
        return {**common, "ADDONS": {"scrapy_robots_coccoc.Addon": 0}}
    return {**common, "ROBOTSTXT_OBEY": config == "stock"}


def crawl(config: str, origins: int, max_crawl_delay: float, timeout: float, errbacks: bool, extra: str) -> None:
    """Run one crawl and print its figures as JSON (last line)."""
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    failures: Counter[str] = Counter()

    class Broad(Spider):
        name = "broad_bench"
        pages = 0
        started = 0.0

        async def start(self):  # type: ignore[override]
            self.started = time.perf_counter()
            for index in range(origins):
                for path in URLS:
                    yield Request(sites.origin_url(index) + path, errback=self.failed if errbacks else None)

        def parse(self, response):  # type: ignore[override]
            self.pages += 1

        def failed(self, failure):  # type: ignore[no-untyped-def]
            failures[type(failure.value).__name__] += 1

    process = CrawlerProcess({**settings_of(config, max_crawl_delay, timeout), **json.loads(extra)})
    crawler = process.create_crawler(Broad)
    baseline_kb = sites.high_water_kb()
    process.crawl(crawler)
    process.start()
    finished = time.perf_counter()
    spider, stats = crawler.spider, crawler.stats
    assert isinstance(spider, Broad) and stats is not None
    before_queue = stats.get_value("robotstxt/forbidden/before_queue", 0)
    # Without errbacks, the requests robots.txt dropped are known by their stats only.
    dropped = sum(failures.values()) + before_queue
    if not errbacks:
        keys = ("robotstxt/forbidden", "robotstxt/unavailable/dropped", "robotstxt/fault/dropped")
        dropped = sum(stats.get_value(key, 0) for key in keys)
    import scrapy_robots_coccoc

    print(
        json.dumps(
            {
                "pages": spider.pages,
                "seconds": finished - spider.started,
                "cpu": time.process_time(),
                "robots": stats.get_value("robotstxt/request_count", 0),
                "failures": dict(failures),
                "before_queue": before_queue,
                "unaccounted": origins * len(URLS) - spider.pages - dropped,
                "finish_reason": stats.get_value("finish_reason"),
                "rss_mb": (sites.high_water_kb() - baseline_kb) / 1024,
                "package": str(Path(scrapy_robots_coccoc.__file__).parent),
            }
        ),
        flush=True,
    )


def base_checkout(ref: str) -> Path:
    """A work tree of the project at *ref* (for ``--base`` or ``--head``), made once per commit under
    build/bench-base/."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=PROJECT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = PROJECT / "build" / "bench-base" / commit[:12]
    if not (tree / "scrapy_robots_coccoc").is_dir():
        subprocess.run(["git", "worktree", "prune"], cwd=PROJECT, check=True)
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(tree), commit],
            cwd=PROJECT,
            check=True,
            capture_output=True,
        )
    return tree


def run_one(config: str, origins: int, args: argparse.Namespace) -> dict[str, Any]:
    source = args.base_tree if config == "base" else args.head_tree
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(HERE)])}
    command = [sys.executable, __file__, "crawl", config, str(origins), str(args.max_crawl_delay), str(args.timeout)]
    command += [str(int(args.errbacks)), json.dumps(dict(args.set) if config == "head" else {})]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode:
        raise SystemExit(f"crawl {config} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if config in ("head", "base") and Path(result["package"]).parent != source:
        raise SystemExit(f"crawl {config} imported {result['package']}, not the package of {source}")
    return result


def rate(result: dict[str, Any]) -> float:
    return result["pages"] / result["seconds"]


def describe(result: dict[str, Any]) -> str:
    failed = ", ".join(f"{name} {count}" for name, count in sorted(result["failures"].items())) or "none"
    return (
        f"{result['pages']:6d} pages {result['seconds']:7.2f} s = {rate(result):5.0f} pages/s "
        f"({result['cpu']:.0f} s CPU); robots.txt "
        f"{result['robots']}; errbacks: {failed}; before queue {result['before_queue']}; unaccounted "
        f"{result['unaccounted']}; {result['finish_reason']}; peak RSS growth {result['rss_mb']:.0f} MB"
    )


def measure(folder: Path | None, origins: int, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Crawl *origins* origins in every configuration, round after round; print each crawl and the ratios."""
    print(
        f"{origins} origins x {len(URLS)} start requests, Crawl-delay capped at {args.max_crawl_delay} s"
        + (f", base {args.base}" if "base" in args.configs else ""),
        flush=True,
    )
    server = sites.start_sites(folder, origins, as_written=True)
    results: dict[str, list[dict[str, Any]]] = {config: [] for config in args.configs}
    try:
        for round_, config in sites.interleaved(args.configs, args.rounds):
            result = run_one(config, origins, args)
            results[config].append(result)
            print(f"round {round_ + 1} {config:5} {describe(result)}", flush=True)
    finally:
        sites.stop_sites(server)
    print(f"medians of {args.rounds} rounds")
    for config, rounds in results.items():
        line = f"{config:5}: {statistics.median(map(rate, rounds)):5.0f} pages/s"
        for other in ("stock", "base", "off"):
            if other in results and other != config:
                line += f", {ratio(rounds, results[other], rate):.2f}x {other}"
        rss = ratio(rounds, results["stock"], lambda r: r["rss_mb"]) if "stock" in results else None
        line += f"; peak RSS {'' if rss is None else f'{rss:.2f}x stock, '}"
        line += f"{statistics.median(r['rss_mb'] for r in rounds):.0f} MB; unaccounted "
        line += f"{statistics.median(r['unaccounted'] for r in rounds):.0f}"
        print(line, flush=True)
    return results


def ratio(rounds: list[dict[str, Any]], others: list[dict[str, Any]], figure: Any) -> float:
    """The ratio of the medians of *figure* over two configurations' rounds."""
    below = statistics.median(map(figure, others))
    return statistics.median(map(figure, rounds)) / below if below else float("nan")


def setting(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    return name, json.loads(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--origins", default="500", help="origins to crawl, 0 for all; a comma-separated list runs each"
    )
    parser.add_argument("--max-crawl-delay", type=float, default=0.05, help="ROBOTSTXT_MAX_CRAWL_DELAY (0: unpaced)")
    parser.add_argument("--base", help="a commit of the project to compare with (the base configuration)")
    parser.add_argument("--head", help="a commit of the project to measure instead of this checkout")
    parser.add_argument("--configs", help=f"comma-separated, of: {', '.join(CONFIGS)} (default: all, base if --base)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--errbacks", action="store_true", help="give every start request an errback")
    parser.add_argument(
        "--robots-latency", type=float, default=0.0, metavar="S", help="robots.txt answered after S seconds"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=setting,
        metavar="NAME=JSON",
        help="a setting of the head crawl only, to measure it against base (e.g. ROBOTSTXT_PREFETCH=false)",
    )
    parser.add_argument("--timeout", type=float, default=600, help="CLOSESPIDER_TIMEOUT of each crawl")
    corpus.add_option(parser)
    benchjson.add_option(parser, "broad_crawl_bench")
    args = parser.parse_args()
    default = [config for config in CONFIGS if config != "base" or args.base]
    args.configs = args.configs.split(",") if args.configs else default
    if unknown := set(args.configs) - set(CONFIGS):
        parser.error(f"unknown configurations: {', '.join(sorted(unknown))}")
    if "base" in args.configs and not args.base:
        parser.error("the base configuration needs --base REF")
    args.base_tree = base_checkout(args.base) if args.base else None
    args.head_tree = base_checkout(args.head) if args.head else PROJECT
    os.environ["BENCH_ROBOTS_LATENCY"] = str(args.robots_latency)  # read by the sites' server
    folder: Path | None = args.corpus or sites.default_corpus()
    total = len(corpus.load(folder))
    measured = []
    for size in (int(s) for s in args.origins.split(",")):
        origins = total if size <= 0 or size > total else size
        measured.append({"origins": origins, "configs": measure(folder, origins, args)})
    benchjson.write(
        args.json,
        "broad_crawl_bench",
        {
            "corpus": benchjson.corpus_name(folder, total),
            "rounds": args.rounds,
            "max_crawl_delay": args.max_crawl_delay,
            "base": args.base,
            "head": args.head,
            "configs": args.configs,
            "errbacks": args.errbacks,
            "head_settings": dict(args.set),
            "robots_latency": args.robots_latency,
            "settings": settings_of("head", args.max_crawl_delay, args.timeout),
        },
        {"sizes": measured},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["crawl"]:
        crawl(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6] == "1", sys.argv[7])
    else:
        main()
