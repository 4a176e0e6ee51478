"""``python -m scrapy_robots_coccoc``: check URLs against a robots.txt the
way the middleware would, and say which group and rule decided.

Exit codes: 0 every URL allowed, 1 some URL disallowed, 2 bad arguments,
3 robots.txt could not be read. Runs without Scrapy.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.client import HTTPException, HTTPMessage, HTTPResponse
from typing import IO, TextIO
from urllib.parse import urlsplit

from . import __version__
from ._robotstxt import MAX_BYTES, RobotsTxt
from ._useragent import robot_name

EXIT_ALLOWED, EXIT_DISALLOWED, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3
DEFAULT_AGENT = "coccocbot-web"
FETCH_TIMEOUT = 10
HTTP_SCHEMES = ("http://", "https://")
# What no request line can carry.
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")
# A URL's scheme: two characters at least, so that C:\robots.txt stays a file.
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]+:", re.IGNORECASE)


class Unreadable(Exception):
    """robots.txt could not be read: the message says why."""


def is_other_url(argument: str) -> bool:
    """Whether *argument* is a URL with a scheme other than http(s)
    (``ftp://``, ``file://``, ``data:`` …), which the middleware never fetches."""
    return bool(_SCHEME.match(argument)) and not argument.lower().startswith(HTTP_SCHEMES)


def read_robots(source: str) -> tuple[bytes, str]:
    """Return the robots.txt body from a file, ``-`` (stdin) or a URL, and a
    note on how it was obtained. One byte more than the parser reads is read,
    so that the report can tell a file that was cut."""
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
    """Follow redirects as the middleware does: 5 hops at most, to http(s)
    URLs that can be requested only (urllib would follow one to ``ftp://``);
    any other redirect is a failed one, everything allowed."""

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
    """Whether *url* is an http(s) URL with a host and a valid port, and
    nothing a request line cannot carry (white space, control characters)."""
    if not url.lower().startswith(HTTP_SCHEMES) or _UNSENDABLE.search(url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port out of range
    except ValueError:
        return False
    return bool(parts.hostname) and port != 0


def fetch(url: str) -> tuple[bytes, str]:
    """GET a robots.txt as the middleware reads it: 200 gives rules, any
    other answer gives unrestricted access, no answer (or none in
    ``FETCH_TIMEOUT`` seconds, or not HTTP) is an error."""
    deadline = time.monotonic() + FETCH_TIMEOUT
    opener = urllib.request.build_opener(FiveRedirects)
    try:
        request = urllib.request.Request(url, headers={"User-Agent": f"{DEFAULT_AGENT} (robots.txt checker)"})
        with opener.open(request, timeout=FETCH_TIMEOUT) as response:
            if response.status != 200:
                return b"", f"{response.url} (HTTP {response.status}: everything allowed)"
            return read_by(response, deadline), f"{response.url} (HTTP 200)"
    except urllib.error.HTTPError as exc:
        return b"", f"{url} (HTTP {exc.code}: everything allowed)"
    except (urllib.error.URLError, OSError, HTTPException, ValueError) as exc:
        # No answer, one that is not HTTP or broke off, or a URL that cannot
        # be requested (``http://[::1/``, a space in the host).
        reason = getattr(exc, "reason", None) or exc
        raise Unreadable(f"cannot fetch {url}: {reason!s:.200}") from exc


def read_by(stream: HTTPResponse, deadline: float) -> bytes:
    """:func:`read_bounded`, given up at *deadline* (a timeout bounds each
    read, not a body that drips in a byte at a time)."""
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_BYTES:
        if time.monotonic() > deadline:
            raise Unreadable(f"robots.txt did not arrive within {FETCH_TIMEOUT} s")
        try:
            chunk = stream.read1(MAX_BYTES + 1 - size)
        except TimeoutError as exc:
            # Silent midway: no answer, as DOWNLOAD_TIMEOUT is for the middleware.
            raise Unreadable(f"robots.txt stopped arriving for {FETCH_TIMEOUT} s") from exc
        except (HTTPException, OSError):
            return complete_lines(chunks)
        if not chunk:
            # Closed before the Content-Length announced (read1 gives b""
            # where read would raise IncompleteRead): broken off too.
            return complete_lines(chunks) if stream.length else b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def complete_lines(chunks: list[bytes]) -> bytes:
    """A body broken off mid-way: as for the middleware, its complete lines count."""
    received = b"".join(chunks)
    return received[: received.rfind(b"\n") + 1]


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


def report(robots: RobotsTxt, agent: str, urls: Sequence[str], out: TextIO) -> int:
    """Print each URL's decision, then the Crawl-delay and the sitemaps."""
    code = EXIT_ALLOWED
    for url in urls:
        decision = robots.explain(url, agent)
        if not decision.allowed:
            code = EXIT_DISALLOWED
        group = f"group {decision.agent!r}" if decision.agent else "no group"
        why = decision.rule or "no rule"
        print(f"{'allowed' if decision.allowed else 'disallowed':<10}  {url}  [{group}; {why}]", file=out)
    delay = robots.crawl_delay(agent)
    print(f"Crawl-delay: {'none' if delay is None else f'{delay:g} s'}", file=out)
    print(f"Sitemaps: {len(robots.sitemaps)}", file=out)
    for sitemap in robots.sitemaps:
        print(f"  {sitemap}", file=out)
    return code


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
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(describe(source, body, args.agent), file=out)
    return report(RobotsTxt.parse(body), args.agent, args.urls, out)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
