"""``python -m scrapy_robots_coccoc``: check URLs against a robots.txt as the
middleware would, and say which group and rule decided. Runs without Scrapy.

Exit codes: 0 all allowed, 1 some disallowed, 2 bad arguments, 3 unreadable.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.client import HTTPException, HTTPMessage, HTTPResponse
from typing import IO, TextIO
from urllib.parse import urlsplit

from . import __version__
from ._parser import MAX_BYTES, Decision, RobotsTxt
from ._parser.body import MAX_DOWNLOAD_BYTES, complete_lines, decoded, encodings_of
from ._parser.useragent import robot_name

EXIT_ALLOWED, EXIT_DISALLOWED, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3
DEFAULT_AGENT = "coccocbot-web"
FETCH_TIMEOUT = 10
HTTP_SCHEMES = ("http://", "https://")
# What no request line can carry.
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")
# A URL's scheme: two characters at least, so that C:\robots.txt stays a file.
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]+:", re.IGNORECASE)
# What a terminal may take for a command (cursor moves, a new title).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Unreadable(Exception):
    """robots.txt could not be read: the message says why."""


def is_other_url(argument: str) -> bool:
    """Whether *argument* is a URL with a scheme other than http(s)
    (``ftp://``, ``file://``, ``data:`` …), which the middleware never fetches."""
    return bool(_SCHEME.match(argument)) and not argument.lower().startswith(HTTP_SCHEMES)


def read_robots(source: str) -> tuple[bytes, str]:
    """The robots.txt body from a file, ``-`` (stdin) or a URL, and where it came
    from; one byte more than the parser reads, so that the report tells a cut."""
    if source == "-":
        return read_bounded(sys.stdin.buffer), "stdin"
    if source.lower().startswith(HTTP_SCHEMES):
        return fetch(source)
    try:
        with open(source, "rb") as file:
            return read_bounded(file), source
    except OSError as exc:
        raise Unreadable(f"cannot read {source}: {exc.strerror or exc}") from exc


def read_bounded(stream: IO[bytes]) -> bytes:
    return stream.read(MAX_BYTES + 1)


class FiveRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects as the middleware does: 5 hops at most, only to requestable
    http(s) URLs (urllib follows ``ftp://``); another redirect fails: all allowed."""

    max_redirections = 5

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if not requestable(newurl):
            raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl}", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def requestable(url: str) -> bool:
    """Whether *url* is an http(s) URL with a host, a valid port, no user name (the middleware
    follows no redirect to one either) and nothing a request line cannot carry."""
    if not url.lower().startswith(HTTP_SCHEMES) or _UNSENDABLE.search(url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port out of range
    except ValueError:
        return False
    return bool(parts.hostname) and port != 0 and parts.username is None


def fetch(url: str) -> tuple[bytes, str]:
    """GET a robots.txt as the middleware reads it: 200 gives rules, another answer unrestricted access,
    and no HTTP answer within ``FETCH_TIMEOUT`` seconds in all, however slowly the site sends, is an error."""
    outcome: list[tuple[bytes, str] | Unreadable] = []

    def run() -> None:
        try:
            outcome.append(_get(url))
        except Unreadable as exc:
            outcome.append(exc)

    # One bound over the whole fetch (redirects, headers, body): a timeout
    # bounds each socket read only. A thread left behind ends with the process.
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(FETCH_TIMEOUT)
    if not outcome:
        raise Unreadable(f"robots.txt did not arrive within {FETCH_TIMEOUT} s")
    if isinstance(outcome[0], Unreadable):
        raise outcome[0]
    return outcome[0]


def _get(url: str) -> tuple[bytes, str]:
    opener = urllib.request.build_opener(FiveRedirects)
    try:
        request = urllib.request.Request(url, headers={"User-Agent": f"{DEFAULT_AGENT} (robots.txt checker)"})
        with opener.open(request, timeout=FETCH_TIMEOUT) as response:
            if response.status != 200:
                return b"", f"{response.url} (HTTP {response.status}: everything allowed)"
            # As the middleware, a compressed body is inflated no further than the parser reads.
            headers = response.headers.get_all("Content-Encoding", [])
            encodings = encodings_of(value.encode("latin-1") for value in headers)
            limit = MAX_DOWNLOAD_BYTES if encodings else MAX_BYTES + 1
            body, broken = read_body(response, limit)
            # Compressed, the text of a body stopped at the limit may end mid-line.
            broken = broken or (bool(encodings) and len(body) >= limit)
            text = decoded(body, encodings)
            named = b", ".join(encodings)[:100].decode("latin-1")
            if text is None:
                return b"", f"{response.url} (HTTP 200, unreadable Content-Encoding {named!r}: everything allowed)"
            # Broken off mid-way: as for the middleware, its complete lines count.
            text = complete_lines(text, cut=True) if broken else text
            return text, f"{response.url} (HTTP 200{', ' + named if named else ''})"
    except urllib.error.HTTPError as exc:
        return b"", f"{url} (HTTP {exc.code}: everything allowed)"
    except (urllib.error.URLError, OSError, HTTPException, ValueError) as exc:
        # No answer, not HTTP, broken off, or a URL that cannot be requested (``http://[::1/``).
        reason = getattr(exc, "reason", None) or exc
        raise Unreadable(f"cannot fetch {url}: {reason!s:.200}") from exc


def read_body(stream: HTTPResponse, limit: int) -> tuple[bytes, bool]:
    """At most *limit* bytes of the body, and whether it broke off before its end."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        try:
            chunk = stream.read1(limit - size)
        except TimeoutError as exc:
            # Silent midway: no answer, as DOWNLOAD_TIMEOUT is for the middleware.
            raise Unreadable(f"robots.txt stopped arriving for {FETCH_TIMEOUT} s") from exc
        except (HTTPException, OSError):
            return b"".join(chunks), True
        if not chunk:
            # Closed before the Content-Length announced is broken off too:
            # read1 gives b"" there, where read would raise IncompleteRead.
            return b"".join(chunks), bool(stream.length)
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def describe(source: str, body: bytes, agent: str) -> str:
    """The report's first line: where robots.txt came from, its size (and
    whether it was cut at 500 KiB), and the robot name a User-Agent stands for."""
    if len(body) > MAX_BYTES:
        size = f"more than {MAX_BYTES:,} bytes: cut at 500 KiB, the rest is ignored"
    else:
        size = f"{len(body)} bytes"
    name = robot_name(agent)
    robot = agent if name == agent.lower() else f"{agent} (robot name {name!r})"
    return f"robots.txt: {source}, {size}; agent: {robot}"


def report(robots: RobotsTxt, agent: str, decisions: Sequence[tuple[str, Decision]], out: TextIO) -> None:
    """Print each URL's decision, then the Crawl-delay and the sitemaps."""
    for url, decision in decisions:
        group = f"group {decision.agent!r}" if decision.agent else "no group"
        why = decision.rule or "no rule"
        print(f"{'allowed' if decision.allowed else 'disallowed':<10}  {url}  [{group}; {why}]", file=out)
    delay = robots.crawl_delay(agent)
    print(f"Crawl-delay: {'none' if delay is None else f'{delay:g} s'}", file=out)
    print(f"Sitemaps: {len(robots.sitemaps)}", file=out)
    for sitemap in robots.sitemaps:
        print(f"  {printable(sitemap)}", file=out)


def printable(text: str) -> str:
    """*text* with control characters percent-encoded: a site's bytes must not move the terminal's cursor."""
    return _CONTROL.sub(lambda found: f"%{ord(found[0]):02X}", text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scrapy-robots-coccoc",
        description="Check URLs against a robots.txt with Coc Coc's rules.",
        epilog="exit codes: 0 all allowed, 1 some disallowed, 2 bad arguments, 3 robots.txt unreadable",
    )
    parser.add_argument("robots", help="robots.txt: a file, - for stdin, or an http(s) URL")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("urls", nargs="*", metavar="URL", help="URLs or paths (with ?query) to check")
    parser.add_argument(
        "-a",
        "--agent",
        default=DEFAULT_AGENT,
        help=f"robot name or User-Agent header (default {DEFAULT_AGENT})",
    )
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_intermixed_args(argv)  # exits with 2 and a usage line on bad arguments
    if is_other_url(args.robots):
        print(f"error: cannot fetch {args.robots}: give an http:// or https:// URL, a file or -", file=sys.stderr)
        return EXIT_USAGE
    for url in args.urls:
        if is_other_url(url):
            print(f"error: cannot check {url}: give http:// or https:// URLs, or paths", file=sys.stderr)
            return EXIT_USAGE
    try:
        body, source = read_robots(args.robots)
    except Unreadable as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)  # may quote the site's own bytes
        return EXIT_UNREADABLE
    robots = RobotsTxt.parse(body)
    decisions = [(url, robots.explain(url, args.agent)) for url in args.urls]
    try:
        print(describe(source, body, args.agent), file=out)
        report(robots, args.agent, decisions, out)
        out.flush()  # here, not at exit, where a closed pipe would make the exit code 120
    except BrokenPipeError:
        # The reader stopped reading (``| head -1``): the decisions still give
        # the exit code, and the flush at exit must not fail again.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_ALLOWED if all(decision.allowed for _, decision in decisions) else EXIT_DISALLOWED


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
