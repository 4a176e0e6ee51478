"""Parser benchmark: RobotsTxt against Protego (Scrapy's default parser) and
Google's C++ parser (fast-robotstxt), on a corpus of real robots.txt files.

Workload: every file parsed, then 8 URLs of its host decided for
``coccocbot-web``. Rounds interleave the parsers; figures are medians.

    python benchmarks/parser_bench.py [CORPUS_DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

from protego import Protego
from robotstxt import RobotsMatcher

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._ruleset import build_ruleset

AGENT = "coccocbot-web"
PATHS = (
    "/",
    "/search?q=robots+txt&page=2",
    "/category/shoes/running/item-12345.html",
    "/search",
    "/admin",
    "/wp-admin/",
    "/cart",
    "/images/products/photo-800x600.jpg",
)
DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "robotstxt"


def load_corpus(folder: Path) -> list[tuple[bytes, list[str]]]:
    files = []
    for path in sorted(folder.iterdir()):
        if path.is_file():
            urls = [f"https://{path.name}{p}" for p in PATHS]
            files.append((path.read_bytes(), urls))
    return files


def parse_protego(body: bytes) -> Protego:
    # Scrapy's ProtegoRobotParser decodes this way before parsing.
    return Protego.parse(body.decode("utf-8", errors="ignore"))


def check_protego(robots: Protego, url: str) -> bool:
    return robots.can_fetch(url, AGENT)


def check_ours(robots: RobotsTxt, url: str) -> bool:
    return robots.allowed(url, AGENT)


def timed(func: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    result = func()
    elapsed = time.perf_counter() - start
    return result if isinstance(result, float) else elapsed


def first_checks(check: Callable, parsed: list, corpus) -> None:
    for robots, (_, urls) in zip(parsed, corpus, strict=True):
        check(robots, urls[0])


def warm_checks(check: Callable, parsed: list, corpus) -> float:
    """Seconds spent in the 8 checks of each file, timed per file right after
    an untimed first check: the steady state of a crawl that asks about many
    URLs of the site it is crawling."""
    total = 0.0
    for robots, (_, urls) in zip(parsed, corpus, strict=True):
        check(robots, urls[0])
        start = time.perf_counter()
        for url in urls:
            check(robots, url)
        total += time.perf_counter() - start
    return total


def whole_google(corpus: list[tuple[bytes, list[str]]]) -> None:
    matcher = RobotsMatcher()
    for body, urls in corpus:
        text = body.decode("utf-8", errors="ignore")
        for url in urls:
            matcher.is_allowed(text, AGENT, url)


def whole(parse: Callable[[bytes], object], check: Callable) -> Callable:
    def run(corpus: list[tuple[bytes, list[str]]]) -> None:
        for body, urls in corpus:
            robots = parse(body)
            for url in urls:
                check(robots, url)

    return run


def held_memory(parse: Callable[[bytes], object], check: Callable, corpus) -> int:
    """Bytes still allocated by the parsed files after one check each."""
    build_ruleset.cache_clear()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = []
    for body, urls in corpus:
        robots = parse(body)
        check(robots, urls[0])
        kept.append(robots)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    corpus = load_corpus(args.corpus)
    n_checks = sum(len(urls) for _, urls in corpus)
    print(f"{len(corpus)} files, {n_checks} checks, agent {AGENT}, {args.rounds} rounds")

    samples: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        ours = [RobotsTxt.parse(body) for body, _ in corpus]
        theirs = [parse_protego(body) for body, _ in corpus]
        runs = {
            "parse/ours": lambda: [RobotsTxt.parse(b) for b, _ in corpus],
            "parse/protego": lambda: [parse_protego(b) for b, _ in corpus],
            "first check/ours": partial(first_checks, check_ours, ours, corpus),
            "first check/protego": partial(first_checks, check_protego, theirs, corpus),
            "check/ours": partial(warm_checks, check_ours, ours, corpus),
            "check/protego": partial(warm_checks, check_protego, theirs, corpus),
            "whole/ours": lambda: whole(RobotsTxt.parse, check_ours)(corpus),
            "whole/protego": lambda: whole(parse_protego, check_protego)(corpus),
            "whole/google": lambda: whole_google(corpus),
        }
        for name, run in runs.items():
            samples.setdefault(name, []).append(timed(run))

    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{'measure':<22}{'median s':>10}")
    for name, value in median.items():
        print(f"{name:<22}{value:>10.4f}")
    mem_ours = held_memory(RobotsTxt.parse, check_ours, corpus)
    mem_protego = held_memory(parse_protego, check_protego, corpus)
    print(f"memory held: ours {mem_ours / 1e6:.1f} MB, protego {mem_protego / 1e6:.1f} MB")
    print("ratios (higher is better for us):")
    print(f"  parse speed vs Protego:        {median['parse/protego'] / median['parse/ours']:.2f}x (goal >= 5)")
    print(f"  check speed vs Protego:        {median['check/protego'] / median['check/ours']:.2f}x (goal >= 2)")
    first = median["first check/protego"] / median["first check/ours"]
    print(f"  first check vs Protego:        {first:.2f}x (ours builds the group's rules here)")
    print(f"  whole workload vs Google C++:  {median['whole/google'] / median['whole/ours']:.2f}x (goal > 1)")
    print(f"  whole workload vs Protego:     {median['whole/protego'] / median['whole/ours']:.2f}x")
    print(f"  memory, Protego / ours:        {mem_protego / mem_ours:.2f}x (goal >= 4)")


if __name__ == "__main__":
    main()
