"""Per-check cost with many sites in rotation: a crawl asks about site after
site, so each check may meet a file whose rules it has not used lately.

N parsed files (each parsed on its own) are checked round-robin, one URL each
turn, after one warm-up pass. Every size checks the same mix of files, so
that only the number of sites in rotation differs: below the corpus's size
the (shuffled) corpus is cut into rotations of N files, each measured in
turn; above it, every file stands N / corpus-size times (give or take one),
spread over the rotation. Goal: at 10,000 sites <= 0.5x Protego's cost, and
flat from 100 to 100,000 sites.

    python benchmarks/parse_scale.py [--corpus DIR] [--sizes 100,1000,10000,100000] [--rounds N]
        [--protego-max N] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchjson
from parser_bench import AGENT, DEFAULT_CORPUS, PATHS, Corpus, load_corpus, parse_protego

from scrapy_robots_coccoc import RobotsTxt

Site = tuple[bytes, str]


def rotations(corpus: Corpus, size: int) -> list[list[Site]]:
    """The rotations of *size* sites that together check every corpus file
    as often as any other size does: one URL per site."""
    sites = [(body, urls[index % len(PATHS)]) for index, (body, urls) in enumerate(corpus)]
    random.Random(13).shuffle(sites)
    if size <= len(sites):
        return [sites[start : start + size] for start in range(0, len(sites), size)]
    spread = [sites[index * len(sites) // size] for index in range(size)]
    random.Random(size).shuffle(spread)
    return [spread]


def per_check(
    parse: Callable[[bytes], object], check: Callable[[Any, str], bool], groups: list[list[Site]], rounds: int
) -> float:
    """Median over *rounds* of the microseconds per check, every site of
    every rotation visited once a round."""
    totals = [0.0] * rounds
    checks = 0
    for sites in groups:
        parsed = [(parse(body), url) for body, url in sites]
        for robots, url in parsed:
            check(robots, url)
        for round_ in range(rounds):
            start = time.perf_counter()
            for robots, url in parsed:
                check(robots, url)
            totals[round_] += time.perf_counter() - start
        checks += len(parsed)
    return statistics.median(totals) / checks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--protego-max", type=int, default=10000, help="largest N Protego is run at")
    benchjson.add_option(parser, "parse_scale")
    args = parser.parse_args()
    corpus = load_corpus(args.corpus)
    print(f"{len(corpus)} files; {'sites':>8}{'ours us':>10}{'Protego us':>12}{'ratio':>8}")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        groups = rotations(corpus, size)
        ours = per_check(RobotsTxt.parse, lambda r, u: r.allowed(u, AGENT), groups, args.rounds)
        theirs = float("nan")
        if size <= args.protego_max:
            theirs = per_check(parse_protego, lambda r, u: r.can_fetch(u, AGENT), groups, args.rounds)
        print(f"{size:>22}{ours:>10.2f}{theirs:>12.2f}{ours / theirs:>8.3f}")
        rows.append({"sites": size, "ours_us": ours, "protego_us": None if math.isnan(theirs) else theirs})
    benchjson.write(
        args.json,
        "parse_scale",
        {
            "corpus": benchjson.corpus_name(args.corpus if args.corpus.is_dir() else None, len(corpus)),
            "rounds": args.rounds,
            "protego_max": args.protego_max,
        },
        {"unit": "microseconds per check, median of the rounds", "sizes": rows},
    )


if __name__ == "__main__":
    main()
