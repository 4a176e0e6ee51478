"""Redis memory per origin, and the latency of the store's calls (issue 37).

The corpus's origins are stored through ``RedisStore.set`` into a fresh
redis-server, as the worker that fetched each robots.txt would (bodies cut
at ``MAX_BYTES``, as the fetcher cuts them); then ``--synthetic N`` more
origins (default 1,000,000), each a corpus body drawn at random under a
made-up host. Figures:

- bytes per origin: ``MEMORY USAGE`` of every state key of the corpus (and
  of a sample of 10,000 synthetic ones), and ``used_memory`` growth divided
  by the origins stored, which also counts Redis's key table and expiries;
- latency of the calls a request makes, one at a time, from a second
  worker whose local store is empty: ``get`` of a stored origin (the read,
  decompressing and parsing included), ``claim`` of a stored origin
  (refused: it is fresh), ``reserve`` of a Crawl-delay turn; medians and
  99th percentiles, microseconds.

The store measured is the one installed: run it at another commit to compare
(``git worktree add /tmp/before <commit>`` then ``PYTHONPATH=/tmp/before``).

    python benchmarks/redis_memory.py [--corpus DIR] [--synthetic N] [--calls N] [--json PATH]
"""

from __future__ import annotations

import argparse
import inspect
import random
import statistics
import time
from typing import Any

import benchjson
import corpus
from corpus import AGENT
from redis_bench import redis_server

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc.stores import MemoryStore, OriginState, RedisStore

#: Origins stored at once: enough to keep Redis busy, within the client's 100 connections.
BATCH = 50
SAMPLE = 10_000


async def store_all(store: RedisStore, origins: list[tuple[str, bytes, RobotsTxt]]) -> None:
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet import defer

    expires = time.time() + 86400
    for start in range(0, len(origins), BATCH):
        writes = [
            store.set(origin, OriginState(robots, False, expires), body)
            for origin, body, robots in origins[start : start + BATCH]
        ]
        await maybe_deferred_to_future(defer.gatherResults([write for write in writes if write is not None]))


def usage(client: Any, keys: list[str]) -> list[int]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return [size or 0 for size in pipe.execute()]


async def timed(calls: int, call: Any) -> dict[str, float]:
    """Microseconds per call of *call(i)*, made one after another."""
    from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

    times = []
    for i in range(calls):
        began = time.perf_counter()
        answer = call(i)
        if inspect.isawaitable(answer):
            await maybe_deferred_to_future(deferred_from_coro(answer))
        times.append((time.perf_counter() - began) * 1e6)
    times.sort()
    return {"median": statistics.median(times), "p99": times[int(len(times) * 0.99)]}


async def measure(args: argparse.Namespace, url: str) -> dict[str, Any]:
    import redis
    import redis.asyncio

    client = redis.Redis.from_url(url)
    bodies = [(f"https://{host}:443", body[:MAX_BYTES]) for host, body in corpus.load(args.corpus)]
    parsed = [(origin, body, RobotsTxt.parse(body)) for origin, body in bodies]
    writer = RedisStore(redis.asyncio.Redis.from_url(url), MemoryStore(1), agent=AGENT)

    before = client.info("memory")["used_memory"]
    await store_all(writer, parsed)
    corpus_growth = client.info("memory")["used_memory"] - before
    corpus_keys = usage(client, [writer._key(origin, "state") for origin, _, _ in parsed])

    rng = random.Random(0)
    synthetic = []
    for i in range(args.synthetic):
        origin, body, robots = rng.choice(parsed)
        synthetic.append((f"https://s{i}.{origin.removeprefix('https://')}", body, robots))
    before = client.info("memory")["used_memory"]
    began = time.monotonic()
    for start in range(0, len(synthetic), 100_000):
        await store_all(writer, synthetic[start : start + 100_000])
    fill_seconds = time.monotonic() - began
    synthetic_growth = client.info("memory")["used_memory"] - before
    sample = [writer._key(origin, "state") for origin, _, _ in rng.sample(synthetic, min(SAMPLE, len(synthetic)))]
    synthetic_keys = usage(client, sample) if synthetic else [0]

    reader = RedisStore(redis.asyncio.Redis.from_url(url), MemoryStore(args.calls + 10), agent=AGENT)
    await reader.warm_up()
    calls = min(args.calls, len(parsed))
    latency = {
        "get": await timed(calls, lambda i: reader.get(parsed[i][0])),
        "claim": await timed(calls, lambda i: reader.claim(parsed[i][0], 10)),
        "reserve": await timed(calls, lambda i: reader.reserve(f"https://paced-{i}.example:443", 0.01)),
    }
    for store in (writer, reader):
        await store.close()
    count = len(parsed)
    return {
        "origins": count,
        "body_bytes_mean": sum(len(body) for _, body, _ in parsed) / count,
        "corpus": {
            "memory_usage_mean": statistics.mean(corpus_keys),
            "memory_usage_median": statistics.median(corpus_keys),
            "used_memory_per_origin": corpus_growth / count,
        },
        "synthetic": {
            "origins": args.synthetic,
            "memory_usage_mean": statistics.mean(synthetic_keys),
            "used_memory_per_origin": synthetic_growth / max(1, args.synthetic),
            "used_memory_total": synthetic_growth,
            "fill_seconds": fill_seconds,
        },
        "latency_us": latency,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus.add_option(parser)
    parser.add_argument("--synthetic", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=2000, help="calls of each kind timed")
    parser.add_argument("--label", default="this checkout", help="the store measured, for the JSON (another commit)")
    benchjson.add_option(parser, "redis_memory")
    args = parser.parse_args()

    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.utils.defer import deferred_from_coro
    from twisted.internet import task

    with redis_server() as url:  # react() ends the process: the report is made within
        task.react(lambda _: deferred_from_coro(report(args, url)))  # an asyncio task, as in a crawl


async def report(args: argparse.Namespace, url: str) -> None:
    figures = await measure(args, url)
    c, s, lat = figures["corpus"], figures["synthetic"], figures["latency_us"]
    print(f"{figures['origins']} corpus origins, bodies {figures['body_bytes_mean']:,.0f} B on average")
    print(
        f"corpus: MEMORY USAGE {c['memory_usage_mean']:,.0f} B per origin (median {c['memory_usage_median']:,.0f}), "
        f"used_memory growth {c['used_memory_per_origin']:,.0f} B per origin"
    )
    print(
        f"synthetic {s['origins']:,}: used_memory growth {s['used_memory_per_origin']:,.0f} B per origin "
        f"({s['used_memory_total'] / 2**30:.2f} GiB), MEMORY USAGE {s['memory_usage_mean']:,.0f} B per origin, "
        f"filled in {s['fill_seconds']:.0f} s"
    )
    for name, times in lat.items():
        print(f"{name:8} median {times['median']:7,.0f} us, p99 {times['p99']:7,.0f} us")
    benchjson.write(
        args.json,
        "redis_memory",
        {
            "corpus": benchjson.corpus_name(args.corpus, figures["origins"]),
            "synthetic": args.synthetic,
            "store": args.label,
        },
        figures,
    )


if __name__ == "__main__":
    main()
