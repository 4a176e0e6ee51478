"""The robots.txt files the benchmarks run on: a folder of real files
(``--corpus DIR``, one file per site, named after its host), or else a small
corpus generated here, so that ``make bench`` runs on a fresh clone.

The generated files are shaped like a crawl's: most are short, a few run to
tens of kilobytes; groups for several robots, repeated and multi-agent
groups, wildcards, ``$``, queries, percent-escapes, Vietnamese paths,
comments, CRLF, BOMs, Crawl-delay and Sitemap lines. They are deterministic
(one seed), and for ``coccocbot-web`` every file obeys the same policy that
the crawl benchmarks count on: ``/private/`` is forbidden, the pages
``/``, ``/sN/`` and ``/sN/pM.html`` are allowed, and no Crawl-delay applies.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

AGENT = "coccocbot-web"
GENERATED_FILES = 500

# Groups that coccocbot-web may obey (by Coc Coc's rules or Protego's): only
# rules that leave the benchmark's pages alone go in them.
OUR_AGENTS = ("*", "coccocbot", "coccocbot-web")
OTHER_AGENTS = (
    "googlebot",
    "Googlebot-Image",
    "bingbot",
    "Slurp",
    "YandexBot",
    "Baiduspider",
    "AhrefsBot",
    "SemrushBot",
    "MJ12bot",
    "DotBot",
    "facebookexternalhit",
    "Applebot",
    "coccocbot-image",
)
WORDS = (
    "admin",
    "cart",
    "checkout",
    "login",
    "account",
    "search",
    "tmp",
    "cgi-bin",
    "api",
    "wp-admin",
    "includes",
    "feeds",
    "print",
    "compare",
    "wishlist",
    "ajax",
    "user",
    "tag",
    "author",
    "json",
    "tìm-kiếm",
    "giỏ-hàng",
    "%7Euser",
)
SHAPES = (
    "/{w}/",
    "/{w}",
    "/{w}*",
    "/*?{w}=",
    "/*?*{w}",
    "/{w}/*.php$",
    "/*/{w}/",
    "/{w}/{v}/",
    "/*.pdf$",
    "/*.json$",
    "/{w}?*",
)


def _path(rng: random.Random) -> str:
    return rng.choice(SHAPES).format(w=rng.choice(WORDS), v=rng.choice(WORDS))


def _rule_count(rng: random.Random) -> int:
    """Heavy-tailed like real files: a median of a few rules, a few thousand at most."""
    return min(int(rng.paretovariate(1.1) * 3), 3000)


def _group(rng: random.Random, agents: list[str], ours: bool) -> list[str]:
    lines = [f"User-agent: {agent}" for agent in agents]
    rules = [f"{rng.choice(('Disallow', 'Disallow', 'Allow'))}: {_path(rng)}" for _ in range(_rule_count(rng))]
    if ours:
        rules.insert(rng.randrange(len(rules) + 1), "Disallow: /private/")
    else:
        if rng.random() < 0.2:
            rules.append("Disallow: /")
        if rng.random() < 0.2:
            rules.append(f"Crawl-delay: {rng.choice(('1', '2.5', '10', '30'))}")
    if rng.random() < 0.3:
        rules.insert(rng.randrange(len(rules) + 1), f"# {rng.choice(WORDS)} pages")
    if rng.random() < 0.1:
        rules.append("Disallow:")
    return lines + rules


def generate_one(rng: random.Random, host: str) -> bytes:
    groups = [_group(rng, ["*"], ours=True)]
    for agent in OUR_AGENTS[1:]:
        if rng.random() < 0.35:
            groups.append(_group(rng, [agent], ours=True))
    others = rng.sample(OTHER_AGENTS, rng.randrange(0, 5))
    while others:
        take = rng.randrange(1, 3)
        groups.append(_group(rng, others[:take], ours=False))
        others = others[take:]
    rng.shuffle(groups)
    lines = [f"# robots.txt for {host}"] if rng.random() < 0.5 else []
    for group in groups:
        lines += [*group, ""]
    lines += [f"Sitemap: https://{host}/sitemap{n or ''}.xml" for n in range(rng.randrange(0, 4))]
    newline = "\r\n" if rng.random() < 0.1 else "\n"
    body = newline.join(lines).encode()
    return b"\xef\xbb\xbf" + body if rng.random() < 0.02 else body


def generate(count: int = GENERATED_FILES, seed: int = 0) -> list[tuple[str, bytes]]:
    """*count* (host, robots.txt body) pairs, the same for the same seed."""
    rng = random.Random(seed)
    hosts = [f"site{index:04d}.example" for index in range(count)]
    return [(host, generate_one(rng, host)) for host in hosts]


# Crawl-delay and Request-rate lines (Google robots.cc's spellings too).
_PACING_LINE = re.compile(rb"(?im)^[ \t]*(?:crawl-?delay|request-rate)[ \t]*:[^\n]*$")


def unpaced(body: bytes) -> bytes:
    """*body* without its Crawl-delay and Request-rate lines: a throughput
    comparison with Scrapy's stock middleware, which ignores them, would
    otherwise measure the sites' delays (a real corpus has Crawl-delay 10
    on 100-page origins: 17 minutes each)."""
    return _PACING_LINE.sub(b"", body)


def read(folder: Path) -> list[tuple[str, bytes]]:
    """(host, body) for each file of *folder*, in name order."""
    return [(path.name, path.read_bytes()) for path in sorted(folder.iterdir()) if path.is_file()]


def load(folder: Path | None) -> list[tuple[str, bytes]]:
    return read(folder) if folder else generate()


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        type=Path,
        metavar="DIR",
        help=f"a folder of robots.txt files, one per site (default: {GENERATED_FILES} generated files)",
    )
