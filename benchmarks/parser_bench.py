"""Parser benchmark: RobotsTxt against Protego (Scrapy's default parser) and
Google's C++ parser (fast-robotstxt), on a corpus of real robots.txt files.

Workload: every file parsed, then 8 URLs of its host decided for
``coccocbot-web`` (our first check of a file builds the rules of the group
it obeys; each round starts with no rules built, process-wide caches
included). Rounds interleave the parsers; figures are medians, ratios are
taken from those medians. Then the memory the parsed files hold, and how
often the decisions agree with Protego's, each disagreement with the rule
behind it. Without the corpus directory a small corpus generated here is used.

With ``--json PATH`` it also times each file on its own (parse, and parse
plus the first check, every file met with nothing split before; medians of
the rounds) and writes those per-file times with the figures above.

    python benchmarks/parser_bench.py [--corpus DIR] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import benchjson
import corpus
from protego import Protego
from robotstxt import RobotsMatcher

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc._parser import ruleset as _ruleset

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
#: Where --corpus defaults to: $BENCH_CORPUS, a folder of real robots.txt files, if set.
DEFAULT_CORPUS = Path(os.environ.get("BENCH_CORPUS", "generated"))
Corpus = list[tuple[bytes, list[str]]]


def load_corpus(folder: Path) -> Corpus:
    if not folder.is_dir():
        print(f"{folder}: not a folder of robots.txt files, using a generated corpus")
    named = corpus.load(folder if folder.is_dir() else None)
    return [(body, [f"https://{name}{p}" for p in PATHS]) for name, body in named]


def parse_protego(body: bytes) -> Protego:
    # Scrapy's ProtegoRobotParser decodes this way before parsing.
    return Protego.parse(body.decode("utf-8", errors="ignore"))


def check_protego(robots: Protego, url: str) -> bool:
    return robots.can_fetch(url, AGENT)


def check_ours(robots: RobotsTxt, url: str) -> bool:
    return robots.allowed(url, AGENT)


def cold_caches() -> None:
    """Forget the split wildcards of earlier rounds: each round is a crawl
    meeting these files for the first time."""
    _ruleset._SPLIT.clear()
    _ruleset._split_bytes = 0


def timed(func: Callable[[], object]) -> float:
    cold_caches()
    gc.collect()
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def all_checks(check: Callable, parsed: list, corpus: Corpus) -> None:
    """The 8 checks of every file, the first of which builds our rule set."""
    for robots, (_, urls) in zip(parsed, corpus, strict=True):
        for url in urls:
            check(robots, url)


def whole_google(corpus: Corpus) -> None:
    # Google's matcher parses the file again for every URL: that is its API.
    matcher = RobotsMatcher()
    for body, urls in corpus:
        text = body.decode("utf-8", errors="ignore")
        for url in urls:
            matcher.is_allowed(text, AGENT, url)


def whole(parse: Callable[[bytes], object], check: Callable, corpus: Corpus) -> None:
    for body, urls in corpus:
        robots = parse(body)
        for url in urls:
            check(robots, url)


def held_memory(parse: Callable[[bytes], object], check: Callable, corpus: Corpus) -> int:
    """Bytes still allocated by the parsed files after one check each."""
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


_RESERVED_ESCAPE = re.compile(rb"%(2[1-9A-Ca-c]|3[ABDFabdf]|40|5[BDbd])")


def _decode_reserved(body: bytes) -> bytes:
    return _RESERVED_ESCAPE.sub(lambda m: bytes([int(m[1], 16)]), body)


#: Why RobotsTxt and Protego may decide differently: each reason rewrites
#: the input of one side so that only that rule differs, and explains a
#: disagreement when the rewritten input makes the two decide alike.
REASONS: list[tuple[str, Callable[[bytes, str], bool]]] = [
    (
        "SPEC.md: a UTF-8 BOM is skipped (Protego, fed Scrapy's decoded text, reads '\\ufeffUser-agent')",
        lambda body, url: check_protego(parse_protego(body.removeprefix(b"\xef\xbb\xbf")), url),
    ),
    (
        "SPEC.md: only the first 500 KiB count, a cut line dropped",
        lambda body, url: check_protego(parse_protego(body[:MAX_BYTES].rsplit(b"\n", 1)[0]), url),
    ),
    (
        "RFC 9309 2.2.2 / RFC 3986 2.2: an escape of a reserved character (%26) is not that character",
        lambda body, url: not check_ours(RobotsTxt.parse(_decode_reserved(body)), url),
    ),
]


def agreement(corpus: Corpus) -> dict[str, int]:
    """Print how often the decisions agree with Protego's, and why they differ."""
    total, reasons, unexplained = 0, Counter[str](), []
    for body, urls in corpus:
        ours, theirs = RobotsTxt.parse(body), parse_protego(body)
        for url in urls:
            total += 1
            decision = check_ours(ours, url)
            if decision == check_protego(theirs, url):
                continue
            reason = next((name for name, agrees in REASONS if agrees(body, url) == decision), None)
            if reason is None:
                unexplained.append(f"{url}: ours {decision}, {ours.explain(url, AGENT)}")
            else:
                reasons[reason] += 1
    differ = sum(reasons.values()) + len(unexplained)
    print(f"agreement with Protego: {100 * (total - differ) / total:.3f}% of {total} decisions (goal >= 99.9%)")
    for reason, count in reasons.most_common():
        print(f"  {count:5d}  {reason}")
    for line in unexplained:
        print(f"  UNEXPLAINED {line}")
    return {"decisions": total, "differ": differ, "unexplained": len(unexplained)}


PER_FILE = ("parse/ours", "parse+check/ours", "parse/protego", "parse+check/protego")


def per_file_times(corpus: Corpus, rounds: int) -> dict[str, list[float]]:
    """Microseconds each file takes to parse, and to parse and answer its
    first check (our first check builds the rules), medians of *rounds*;
    each file met with nothing split before, the parsers interleaved."""
    samples: dict[str, list[list[float]]] = {name: [[] for _ in corpus] for name in PER_FILE}
    clock = time.perf_counter
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            for index, (body, urls) in enumerate(corpus):
                cold_caches()
                start = clock()
                robots = RobotsTxt.parse(body)
                parsed = clock()
                check_ours(robots, urls[0])
                checked = clock()
                samples["parse/ours"][index].append(parsed - start)
                samples["parse+check/ours"][index].append(checked - start)
                start = clock()
                theirs = parse_protego(body)
                parsed = clock()
                check_protego(theirs, urls[0])
                checked = clock()
                samples["parse/protego"][index].append(parsed - start)
                samples["parse+check/protego"][index].append(checked - start)
        finally:
            gc.enable()
    return {name: [statistics.median(times) * 1e6 for times in files] for name, files in samples.items()}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=5)
    benchjson.add_option(parser, "parser_bench")
    args = parser.parse_args()
    corpus = load_corpus(args.corpus)
    print(f"{len(corpus)} files, {len(corpus) * len(PATHS)} checks, agent {AGENT}, {args.rounds} rounds")

    samples: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        ours = [RobotsTxt.parse(body) for body, _ in corpus]
        unbuilt = [RobotsTxt.parse(body) for body, _ in corpus]
        theirs = [parse_protego(body) for body, _ in corpus]
        runs: dict[str, Callable[[], object]] = {
            "parse/ours": lambda: [RobotsTxt.parse(b) for b, _ in corpus],
            "parse/protego": lambda: [parse_protego(b) for b, _ in corpus],
            "builds/ours": lambda: [robots.group_for(AGENT) for robots in unbuilt],  # noqa: B023
            "match+build/ours": lambda: all_checks(check_ours, ours, corpus),  # noqa: B023
            "match/protego": lambda: all_checks(check_protego, theirs, corpus),  # noqa: B023
            "whole/ours": lambda: whole(RobotsTxt.parse, check_ours, corpus),
            "whole/protego": lambda: whole(parse_protego, check_protego, corpus),
            "whole/google": lambda: whole_google(corpus),
        }
        for name, run in runs.items():
            samples.setdefault(name, []).append(timed(run))

    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{'measure':<20}{'median s':>10}   rounds")
    for name, value in median.items():
        print(f"{name:<20}{value:>10.4f}   {' '.join(f'{v:.3f}' for v in samples[name])}")
    # Per file: the process-wide cache, bounded whatever the number of
    # files, is filled first and quoted on its own below.
    whole(RobotsTxt.parse, check_ours, corpus)
    mem_ours = held_memory(RobotsTxt.parse, check_ours, corpus)
    mem_protego = held_memory(parse_protego, check_protego, corpus)
    print(
        f"memory held per file: ours {mem_ours / len(corpus):.0f} B, Protego {mem_protego / len(corpus):.0f} B"
        f" -> {mem_ours / mem_protego:.3f}x (goal <= 0.15)"
    )
    # Held once for the process, not per file, so not in the figure above.
    print(
        f"  plus, shared by all files: split wildcards of {len(_ruleset._SPLIT)} rule sets,"
        f" {_ruleset._split_bytes / 2**20:.1f} MiB (bounded by {_ruleset.SPLIT_BUDGET / 2**20:.0f} MiB)"
    )
    print("ratios, ours / theirs (lower is better for us):")
    print(f"  parse vs Protego:                  {median['parse/ours'] / median['parse/protego']:.3f} (goal <= 0.15)")
    ratio = median["match+build/ours"] / median["match/protego"]
    print(f"  matching incl. builds vs Protego:  {ratio:.3f} (goal <= 0.5)")
    print(f"    of which builds:                 {median['builds/ours'] / median['match/protego']:.3f}")
    print(f"  whole workload vs Google C++:      {median['whole/ours'] / median['whole/google']:.3f} (goal <= 0.8)")
    print(f"  whole workload vs Protego:         {median['whole/ours'] / median['whole/protego']:.3f}")
    agreed = agreement(corpus)
    if args.json is None:
        return
    files = per_file_times(corpus, args.rounds)
    print("per file, microseconds (median of the rounds): p50 / p90 / p99 / max")
    for name, values in files.items():
        quantiles = [percentile(values, f) for f in (0.5, 0.9, 0.99, 1.0)]
        print(f"  {name:<20} {' / '.join(f'{q:,.1f}' for q in quantiles)}")
    benchjson.write(
        args.json,
        "parser_bench",
        {
            "corpus": benchjson.corpus_name(args.corpus if args.corpus.is_dir() else None, len(corpus)),
            "rounds": args.rounds,
            "agent": AGENT,
            "urls_per_file": len(PATHS),
        },
        {
            "seconds": median,
            "memory_per_file": {"ours": mem_ours / len(corpus), "protego": mem_protego / len(corpus)},
            "agreement": agreed,
            "per_file_us": {name: [float(f"{v:.4g}") for v in values] for name, values in files.items()},
        },
    )


if __name__ == "__main__":
    main()
