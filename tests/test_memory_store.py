"""MemoryStore: bounded in origins and in bytes, whatever each robots.txt
weighs, the byte budget counting what a parsed file holds; turns promised
to waiting requests are never forgotten."""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._crawl.parse import parse_for
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc._parser import ruleset as _ruleset
from scrapy_robots_coccoc._parser import useragent as _useragent
from scrapy_robots_coccoc.stores import MemoryStore, OriginState


def big_robots_body(i: int, rules: int = 4000) -> bytes:
    lines = [f"User-agent: bot{i}"] + [f"Disallow: /site{i}/section-{n}/private-area/" for n in range(rules)]
    return ("\n".join(lines) + "\nUser-agent: *\nDisallow: /admin\n").encode()


def big_robots(i: int, rules: int = 4000) -> RobotsTxt:
    return RobotsTxt.parse(big_robots_body(i, rules))


def test_the_byte_budget_evicts_the_least_recently_used_origins():
    budget = 2 * 2**20
    store = MemoryStore(max_origins=1000, max_bytes=budget)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(40):
        robots = big_robots(i)
        robots.allowed("/site/x", f"bot{i}")  # rules built, as a crawl would
        store.set(f"https://site{i}.example:443", OriginState(robots, False, time.time() + 60))
        if i == 5:
            store.get("https://site0.example:443")  # used again: kept longer
    del robots
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert store.nbytes <= budget
    assert 3 <= len(store) < 40
    assert held < 2 * budget, held  # the reckoning is near what is really held
    assert store.get("https://site39.example:443") is not None
    assert store.get("https://site1.example:443") is None


def test_origins_without_rules_count_little_and_the_count_bound_holds():
    store = MemoryStore(max_origins=100, max_bytes=2**20)
    for i in range(500):
        store.set(f"https://site{i}.example:443", OriginState(None, False, time.time() + 60))
    assert len(store) == 100
    assert store.nbytes < 2**20


def test_replacing_an_origin_counts_it_once():
    store = MemoryStore(max_origins=10, max_bytes=2**30)
    for _ in range(5):
        store.set("https://a.example:443", OriginState(big_robots(1, 100), False, time.time() + 60))
    single = store.nbytes
    store.set("https://a.example:443", OriginState(None, False, time.time() + 60))
    assert len(store) == 1 and store.nbytes < single


def test_a_next_start_still_ahead_is_never_forgotten():
    # More paced origins than the bound: the one whose turns are promised
    # to waiting requests keeps them; origins whose turns are past go.
    store = MemoryStore(max_origins=2)
    first = store.reserve("http://a", 10)
    store.reserve("http://b", 0)
    store.reserve("http://c", 0)
    assert store.reserve("http://a", 10) == pytest.approx(first + 10, abs=0.01)


def many_groups() -> bytes:
    return "".join(f"User-agent: bot-{i}\nDisallow: /x{i}\n" for i in range(20_000)).encode()[:MAX_BYTES]


def many_wildcards() -> bytes:
    return ("User-agent: *\n" + "".join(f"Disallow: /*q{i}*z\n" for i in range(25_000))).encode()[:MAX_BYTES]


@pytest.mark.parametrize("body", [many_groups, many_wildcards, big_robots_body])
def test_a_parsed_files_footprint_is_what_it_holds(body):
    """What the byte budget counts: the file as fetched, the rules of the
    crawl's robot built (20,000 agent keys once went uncounted: 2.7x)."""
    text = body() if body is not big_robots_body else body(0)
    parse_for(text, "coccocbot-web")  # first-use allocations (caches, compiled expressions) out of the way
    _ruleset._SPLIT.clear()
    gc.collect()
    tracemalloc.start()
    try:
        robots = parse_for(text, "coccocbot-web")
        # Shared by all files, each bounded on its own.
        _ruleset._SPLIT.clear()
        _useragent._KEYS.clear()
        _useragent._key_of_word.cache_clear()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0.85 * traced <= robots.footprint() <= 1.25 * traced


def test_the_crawls_rules_are_built_with_the_parse_not_at_the_first_decision():
    # The middleware parses a big body in a thread: the rules built there
    # do not hold the reactor at the first request decided.
    text = many_wildcards()
    _ruleset._SPLIT.clear()
    cold = RobotsTxt.parse(text)
    started = time.perf_counter()
    cold.allowed("https://a.vn/page", "coccocbot-web")
    built_then = time.perf_counter() - started
    _ruleset._SPLIT.clear()
    warm = parse_for(text, "coccocbot-web")
    started = time.perf_counter()
    warm.allowed("https://a.vn/page", "coccocbot-web")
    assert time.perf_counter() - started < built_then / 4
