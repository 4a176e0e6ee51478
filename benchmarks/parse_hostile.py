"""Hostile 500 KiB robots.txt bodies: parse time against a normal 500 KiB
file and against Protego on the same body. The middleware parses on the
reactor, so a slow parse stops every download of the crawl.

Goal per body: <= 0.25 s, and within 5x the normal file or 2x Protego.

    python benchmarks/parse_hostile.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from parser_bench import cold_caches
from protego import Protego

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc._parser.urlpattern import _KEPT_IN_RULES

AGENT = "coccocbot-web"


def fill(unit: bytes, prefix: bytes = b"") -> bytes:
    """*prefix* then *unit* repeated up to MAX_BYTES."""
    return (prefix + unit * (MAX_BYTES // len(unit) + 1))[:MAX_BYTES]


def lines_until_full(line: bytes, prefix: bytes = b"") -> bytes:
    """*prefix* then *line* % 0, % 1, ... up to MAX_BYTES: distinct lines."""
    count = MAX_BYTES // len(line % 0) + 1
    return (prefix + b"".join(line % index for index in range(count)))[:MAX_BYTES]


def normal() -> bytes:
    lines = [b"User-agent: *"]
    for index in range(30000):
        lines.append(b"Disallow: /section-%d/private/" % index if index % 3 else b"Allow: /section-%d/" % index)
        if index % 50 == 0:
            lines.append(b"\n# comment\nUser-agent: bot%d" % index)
    return (b"\n".join(lines) + b"\n")[:MAX_BYTES]


# Each byte the normal form escapes (but the line ends and "#"), each after an "a".
EVERY_BYTE_TO_ESCAPE = b"".join(b"%ca" % byte for byte in range(256) if byte not in _KEPT_IN_RULES + b"\r\n#")

BODIES: dict[str, Callable[[], bytes]] = {
    "normal file": normal,
    "one line of 'user '": lambda: fill(b"user "),
    "one line of 'sitemap '": lambda: fill(b"sitemap "),
    "one line of 'disallow: '": lambda: fill(b"disallow: ", b"User-agent: *\n"),
    "27,500 User-agent lines": lambda: fill(b"User-agent: a-bot\n"),
    "User-agent/Disallow pairs": lambda: fill(b"User-agent: a\nDisallow: /\n"),
    "rules with many '*'": lambda: fill(b"Disallow: /*a*b*c*d*e*f*g*h*$\n", b"User-agent: *\n"),
    "one 500 KiB line": lambda: fill(b"a", b"User-agent: *\nDisallow: /"),
    "500 KiB of spaces": lambda: fill(b" ", b"User-agent: *\nDisallow:"),
    "spaces inside a value": lambda: fill(b" ", b"User-agent: *\nDisallow: /x \nDisallow: /a")[:-2] + b"b\n",
    "500 KiB of newlines": lambda: fill(b"\n", b"User-agent: *\n"),
    "500 KiB of '#'": lambda: fill(b"#"),
    # Every other character is escaped in the normal form.
    "'<a' pairs in one value": lambda: fill(b"<a", b"User-agent: *\nDisallow: /"),
    "'%7e' escapes in one value": lambda: fill(b"%7e", b"User-agent: *\nDisallow: /"),
    "every byte to escape in turn": lambda: fill(EVERY_BYTE_TO_ESCAPE, b"User-agent: *\nDisallow: /"),
    # Lines of white space only, after a rule: each once cost four regular
    # expression attempts (0.08 s, 3.7x Protego).
    "lines of one space": lambda: fill(b" \n", b"User-agent: *\nDisallow: /x\n"),
    # Each rule passes the cheap tests for /a/b (its last piece, "b", is in
    # the path) and fails the whole match: every check tries them all.
    "'*' rules /a/b nearly matches": lambda: lines_until_full(b"Disallow: /*x%d*b\n", b"User-agent: *\n"),
}


def parse_ours(body: bytes) -> None:
    # What the middleware does: parse, then decide the first request, with
    # nothing split by an earlier round.
    cold_caches()
    RobotsTxt.parse(body).allowed("/a/b", AGENT)


def parse_protego(body: bytes) -> None:
    Protego.parse(body.decode("utf-8", "ignore")).can_fetch("/a/b", AGENT)


def median_seconds(func: Callable[[bytes], object], body: bytes, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        func(body)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def next_check_ms(check: Callable[[], object], rounds: int) -> float:
    """Milliseconds a later check costs, the first one done."""
    check()
    return 1000 * median_seconds(lambda _: check(), b"", rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-protego", action="store_true", help="skip Protego (slow on some bodies)")
    args = parser.parse_args()
    print(f"median of {args.rounds} rounds; parse + first check, then a later check")
    print(f"{'body':<30}{'ours s':>9}{'Protego s':>11}{'/normal':>9}{'/Protego':>10}  goal    check ms (Protego)")
    baseline = 0.0
    for name, make in BODIES.items():
        body = make()
        ours = median_seconds(parse_ours, body, args.rounds)
        robots = RobotsTxt.parse(body)
        check = next_check_ms(lambda: robots.allowed("/a/b", AGENT), args.rounds)  # noqa: B023
        if args.no_protego:
            theirs = their_check = float("nan")
        else:
            theirs = median_seconds(parse_protego, body, args.rounds)
            protego = Protego.parse(body.decode("utf-8", "ignore"))
            their_check = next_check_ms(lambda: protego.can_fetch("/a/b", AGENT), args.rounds)  # noqa: B023
        baseline = baseline or ours
        if ours > 0.25:
            verdict = "MISSED"
        elif ours <= 5 * baseline or ours <= 2 * theirs:
            verdict = "met"
        else:  # not within 5x the normal file; without Protego the other half is unknown
            verdict = "?" if args.no_protego else "MISSED"
        print(
            f"{name:<30}{ours:>9.4f}{theirs:>11.4f}{ours / baseline:>9.2f}{ours / theirs:>10.3f}"
            f"  {verdict:<6}  {check:>7.3f} ({their_check:.3f})"
        )


if __name__ == "__main__":
    main()
