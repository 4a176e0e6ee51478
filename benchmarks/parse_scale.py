"""Per-check cost with many sites in rotation: a crawl asks about site after
site, so each check may meet a file whose rules it has not used lately.

N parsed files (corpus files repeated, each parsed on its own) are checked
round-robin, one URL each turn, after one warm-up pass. Goal: at 10,000 sites
<= 0.5x Protego's cost, and flat from 100 to 100,000 sites.

    python benchmarks/parse_scale.py [--corpus DIR] [--sizes 100,1000,10000,100000] [--rounds N]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from parser_bench import AGENT, DEFAULT_CORPUS, PATHS, load_corpus, parse_protego

from scrapy_robots_coccoc import RobotsTxt


def per_check(parsed: list, check, urls: list[str], rounds: int) -> float:
    """Median over *rounds* of the microseconds per check, every site visited once a round."""
    for robots, url in zip(parsed, urls, strict=True):
        check(robots, url)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for robots, url in zip(parsed, urls, strict=True):
            check(robots, url)
        samples.append((time.perf_counter() - start) / len(parsed) * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=__import__("pathlib").Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--protego-max", type=int, default=10000, help="largest N Protego is run at")
    args = parser.parse_args()
    corpus = load_corpus(args.corpus)
    print(f"{'sites':>8}{'ours us':>10}{'Protego us':>12}{'ratio':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        files = list(itertools.islice(itertools.cycle(corpus), size))
        urls = [site_urls[index % len(PATHS)] for index, (_, site_urls) in enumerate(files)]
        ours = per_check(
            [RobotsTxt.parse(body) for body, _ in files], lambda r, u: r.allowed(u, AGENT), urls, args.rounds
        )
        theirs = float("nan")
        if size <= args.protego_max:
            parsed = [parse_protego(body) for body, _ in files]
            theirs = per_check(parsed, lambda r, u: r.can_fetch(u, AGENT), urls, args.rounds)
        print(f"{size:>8}{ours:>10.2f}{theirs:>12.2f}{ours / theirs:>8.3f}")


if __name__ == "__main__":
    main()
