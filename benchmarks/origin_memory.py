"""Memory per cached origin: what the middleware's store holds for each
origin of a broad crawl, against what Scrapy's stock middleware keeps (one
ProtegoRobotParser per netloc, never evicted).

Each corpus file stands for one origin; every origin is checked once, as a
crawl would, before memory is measured with tracemalloc.

    python benchmarks/origin_memory.py [--corpus DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable

import benchjson
import corpus
from corpus import AGENT
from scrapy.robotstxt import ProtegoRobotParser

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc.stores import MemoryStore, OriginState


def fill_ours(bodies: list[tuple[str, bytes]]) -> MemoryStore:
    store = MemoryStore(max_origins=len(bodies))
    for origin, body in bodies:
        robots = RobotsTxt.parse(body)
        robots.allowed(f"{origin}/some/page.html", AGENT)
        store.set(origin, OriginState(robots, False, time.time() + 86400))
    return store


def fill_stock(bodies: list[tuple[str, bytes]]) -> dict[str, ProtegoRobotParser]:
    parsers = {}
    for origin, body in bodies:
        parser = ProtegoRobotParser(body, spider=None)
        parser.allowed(f"{origin}/some/page.html", AGENT)
        parsers[origin] = parser
    return parsers


def held(fill: Callable[[list[tuple[str, bytes]]], object], bodies: list[tuple[str, bytes]]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = fill(bodies)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus.add_option(parser)
    benchjson.add_option(parser, "origin_memory")
    args = parser.parse_args()
    bodies = [(f"https://{host}:443", body) for host, body in corpus.load(args.corpus)]
    raw = sum(len(body) for _, body in bodies)
    ours, stock = held(fill_ours, bodies), held(fill_stock, bodies)
    count = len(bodies)
    print(f"{count} origins, robots.txt bodies average {raw / count:,.0f} bytes")
    print(f"ours : {ours / count:9,.0f} bytes per cached origin ({ours / 2**20:.1f} MB)")
    print(f"stock: {stock / count:9,.0f} bytes per cached origin ({stock / 2**20:.1f} MB)")
    print(f"stock / ours: {stock / ours:.1f}x; 100,000 origins at our rate: {ours / count * 100_000 / 2**20:,.0f} MB")
    benchjson.write(
        args.json,
        "origin_memory",
        {"corpus": benchjson.corpus_name(args.corpus, count)},
        {
            "origins": count,
            "body_bytes_mean": raw / count,
            "bytes_per_origin": {"ours": ours / count, "stock": stock / count},
        },
    )


if __name__ == "__main__":
    main()
