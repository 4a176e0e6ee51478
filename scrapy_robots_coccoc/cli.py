"""``python -m scrapy_robots_coccoc``: check URLs against a robots.txt as the middleware would, and say which group
and rule decided (exit codes: EPILOG). Runs without Scrapy."""

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
from urllib.parse import urljoin, urlsplit

from . import __version__
from ._parser import MAX_BYTES, Decision, RobotsTxt, UsagePreferences
from ._parser.body import MAX_DOWNLOAD_BYTES, complete_lines, decoded, encodings_of
from ._parser.delay import MIN_DELAY, asked_delay, kept_delay
from ._parser.lexer import MEMBER_FIELDS, field_line
from ._parser.useragent import robot_name

EXIT_ALLOWED, EXIT_DISALLOWED, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3
DEFAULT_AGENT = "coccocbot-web"
FETCH_TIMEOUT = 10
HTTP_SCHEMES = ("http://", "https://")
DEFAULT_PORTS = {"http": 80, "https": 443}
#: ROBOTSTXT_MAX_CRAWL_DELAY's default.
MAX_CRAWL_DELAY = 10.0
# What no request line can carry.
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")
# A URL's scheme: two characters at least, so that C:\robots.txt stays a file.
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]+:", re.IGNORECASE)
# What a terminal may take for a command (cursor moves, a new title).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A line the parser reads as a field (any case, a misspelt Disallow, no colon before a one-word value).
_FIELD = re.compile(field_line(b"|".join([rb"user[- ]?agent", rb"site-?map", *map(re.escape, MEMBER_FIELDS)])))
# A line that is neither blank nor a comment: a body of such lines only is an empty robots.txt.
_CONTENT = re.compile(rb"^[ \t\x0b\x0c]*[^\s#]", re.MULTILINE)
# A web page or an XML document rather than a robots.txt, after any BOM and white space.
_MARKUP = re.compile(rb"(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html|head|body|(\?xml))[\s>]", re.IGNORECASE)
_HTML_TYPES = ("text/html", "application/xhtml+xml")


class Unreadable(Exception):
    """robots.txt could not be read: the message says why."""


def is_other_url(argument: str) -> bool:
    """Whether *argument* is a non-http(s) URL (``ftp://``, ``data:`` …), which the middleware never fetches."""
    return bool(_SCHEME.match(argument)) and not argument.lower().startswith(HTTP_SCHEMES)


def read_robots(source: str) -> tuple[bytes, str, str]:
    """Body (a byte past what the parser reads, to tell a cut), source and Content-Type of a file, ``-`` or URL."""
    if source == "-":
        return read_bounded(sys.stdin.buffer), "stdin", ""
    if source.lower().startswith(HTTP_SCHEMES):
        return fetch(source)
    try:
        with open(source, "rb") as file:
            return read_bounded(file), source, ""
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
    """Whether *url* is http(s) with a host, a valid port, no user name (as the middleware) and no unsendable byte."""
    if not url.lower().startswith(HTTP_SCHEMES) or _UNSENDABLE.search(url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port out of range
    except ValueError:
        return False
    return bool(parts.hostname) and port != 0 and parts.username is None


def fetch(url: str) -> tuple[bytes, str, str]:
    """GET a robots.txt as the middleware reads it: 200 gives rules, another answer unrestricted access,
    and no HTTP answer within ``FETCH_TIMEOUT`` seconds in all, however slowly the site sends, is an error."""
    outcome: list[tuple[bytes, str, str] | Unreadable] = []

    def run() -> None:
        try:
            outcome.append(_get(url))
        except Unreadable as exc:
            outcome.append(exc)

    # One bound over the whole fetch, as a timeout bounds each socket read only; a thread left dies with the process.
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(FETCH_TIMEOUT)
    if not outcome:
        raise Unreadable(f"robots.txt did not arrive within {FETCH_TIMEOUT} s")
    if isinstance(outcome[0], Unreadable):
        raise outcome[0]
    return outcome[0]


def _get(url: str) -> tuple[bytes, str, str]:
    opener = urllib.request.build_opener(FiveRedirects)
    try:
        request = urllib.request.Request(url, headers={"User-Agent": f"{DEFAULT_AGENT} (robots.txt checker)"})
        with opener.open(request, timeout=FETCH_TIMEOUT) as response:
            if response.status != 200:
                return b"", f"{response.url} (HTTP {response.status}: everything allowed)", ""
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
                return b"", f"{response.url} (HTTP 200, unreadable Content-Encoding {named!r}: everything allowed)", ""
            # Broken off mid-way: as for the middleware, its complete lines count.
            text = complete_lines(text, cut=True) if broken else text
            content_type = response.headers.get("Content-Type", "")
            return text, f"{response.url} (HTTP 200{', ' + named if named else ''})", content_type
    except urllib.error.HTTPError as exc:
        return b"", f"{url} (HTTP {exc.code}: everything allowed)", ""
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
            # Closed before its Content-Length is broken off too (read1 gives b"" where read raises IncompleteRead).
            return b"".join(chunks), bool(stream.length)
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def site_robots_url(url: str) -> str | None:
    """For an http(s) URL of a page (its file name is not robots.txt), the URL of its site's ``/robots.txt``;
    None for a robots.txt URL, anything else, or a URL that cannot be split (fetched as given, to fail there)."""
    if not url.lower().startswith(HTTP_SCHEMES):
        return None
    try:
        path = urlsplit(url).path
        robots_url = urljoin(url, "/robots.txt")
    except ValueError:
        return None
    return None if path.rpartition("/")[2].lower() == "robots.txt" else robots_url


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL, as the middleware keys robots.txt; None for a path."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in DEFAULT_PORTS or not host:
        return None
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port or DEFAULT_PORTS[scheme]}"


def not_robots_txt(body: bytes, content_type: str) -> str | None:
    """Why *body* is no robots.txt (a web page, or text without a single field), or None: a crawl would read
    such a body as robots.txt all the same, so the checker must not report its "rules" as the site's."""
    markup = _MARKUP.match(body)
    if markup:
        return "it is an XML document" if markup[1] else "it is an HTML page"
    body = body.removeprefix(b"\xef\xbb\xbf")
    # Blank lines and comments only are an empty robots.txt: everything allowed.
    if _FIELD.search(b"\n" + body.replace(b"\r", b"\n")) or not _CONTENT.search(body):
        return None
    if content_type.partition(";")[0].strip().lower() in _HTML_TYPES:
        return f"it is an HTML page (Content-Type: {content_type[:100]}) and holds no robots.txt field"
    return "it holds no robots.txt field (User-agent, Allow, Disallow, Crawl-delay, Sitemap)"


def describe(source: str, body: bytes, agent: str) -> str:
    """The report's first line: robots.txt's source, size (and any cut) and the robot name *agent* stands for."""
    if len(body) > MAX_BYTES:
        size = f"more than {MAX_BYTES:,} bytes: cut at 500 KiB, the rest is ignored"
    else:
        size = f"{len(body)} bytes"
    name = robot_name(agent)
    robot = agent if name == agent.lower() else f"{agent} (robot name {name!r})"
    return f"robots.txt: {source}, {size}; agent: {robot}"


def report(
    robots: RobotsTxt,
    agent: str,
    decisions: Sequence[tuple[str, Decision]],
    out: TextIO,
    robots_url: str | None = None,
    max_delay: float = MAX_CRAWL_DELAY,
    purposes: Sequence[str] = (),
) -> None:
    """Print each URL's decision, its usage preferences and their verdict for *purposes*, then the delay the
    middleware keeps and the sitemaps; a URL of another origin than *robots_url*'s is noted, and relative sitemaps
    are resolved against it."""
    home = origin_of(robots_url) if robots_url else None
    for url, decision in decisions:
        group = f"group {decision.agent!r}" if decision.agent else "no group"
        why = decision.rule or "no rule"
        line = f"{'allowed' if decision.allowed else 'disallowed':<10}  {url}  [{group}; {why}]"
        other = origin_of(url)
        if home and other and other != home:
            line += f"  note: another origin than {home}, whose robots.txt this is (one per scheme, host and port)"
        print(printable(line), file=out)
        for usage_line in usage_lines(robots.usage(url, agent), purposes):
            print(printable(f"{'':10}  {usage_line}"), file=out)
    print(f"Crawl-delay: {paced_delay(robots, agent, max_delay)}", file=out)
    sitemaps = resolved_sitemaps(robots.sitemaps, robots_url)
    print(f"Sitemaps: {len(sitemaps)}", file=out)
    for sitemap, written in sitemaps.items():
        if robots_url is None and not urlsplit(sitemap).scheme:
            sitemap += "  (relative: a crawl resolves it against the robots.txt URL)"
        elif sitemap != written:
            sitemap += f"  (written {written})"
        print(f"  {printable(sitemap)}", file=out)


def usage_lines(preferences: UsagePreferences, purposes: Sequence[str]) -> list[str]:
    """A URL's usage preferences and where they were stated, then the verdict for each of *purposes*."""
    lines = []
    if preferences:
        sources = dict.fromkeys(str(preferences.source(label)) for label in preferences)
        lines.append(f"usage: {preferences}  [{'; '.join(sources)}]")
    for purpose in purposes:
        allowed = preferences.allows(purpose)
        verdict = "no preference stated" if allowed is None else "allowed" if allowed else "disallowed"
        lines.append(f"purpose {purpose}: {verdict}")
    return lines


def paced_delay(robots: RobotsTxt, agent: str, max_delay: float) -> str:
    """The delay the middleware keeps between requests, with where it comes from."""
    written, rate = asked_delay(robots, agent)
    delay = kept_delay(written, max_delay)
    notes = [f"from Request-rate: {rate.requests}/{rate.seconds:g}s"] if rate is not None else []
    if written > max_delay:
        notes.append(f"asked {written:g} s, capped by ROBOTSTXT_MAX_CRAWL_DELAY")
    if 0 < min(written, max_delay) < MIN_DELAY:
        return f"none (asked {written:g} s, shorter than {MIN_DELAY:g} s: not paced)"
    shown = f"{delay:g} s" if delay else "none"
    return f"{shown} ({'; '.join(notes)})" if notes else shown


def resolved_sitemaps(written: list[str], robots_url: str | None) -> dict[str, str]:
    """Sitemap URL as a crawl takes it (resolved against *robots_url*, duplicates dropped) -> as written."""
    resolved: dict[str, str] = {}
    for sitemap in written:
        try:
            url = urljoin(robots_url, sitemap) if robots_url else sitemap
        except ValueError:  # an unclosed IPv6 bracket, say
            url = sitemap
        resolved.setdefault(url, sitemap)
    return resolved


def printable(text: str) -> str:
    """*text* with control characters percent-encoded: a site's bytes must not move the terminal's cursor."""
    return _CONTROL.sub(lambda found: f"%{ord(found[0]):02X}", text)


def seconds(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    return value


EPILOG = """\
PAGE_URL is an http(s) URL whose file name is not robots.txt: its site's
/robots.txt is fetched and decides the page and any URLs after it; a site
(https://site.vn/) is its home page, decided too.

exit codes:
  0  every URL allowed (or none given), and no --purpose disallowed
  1  some URL disallowed, or a --purpose disallowed for one
  2  bad arguments
  3  no robots.txt to go by: unreadable (missing file, no answer, not HTTP),
     or not a robots.txt (an HTML page, or no robots.txt field in it)

verify DIR [DIR ...] checks a compliance record (ROBOTSTXT_RECORD_DIR)
instead: see verify --help. A robots.txt file named verify: give ./verify.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scrapy-robots-coccoc",
        usage=(
            "%(prog)s [options] ROBOTS [URL ...]\n       %(prog)s [options] PAGE_URL\n"
            "       %(prog)s verify DIR [DIR ...]"
        ),
        description="Check URLs against a robots.txt with Coc Coc's rules, as the middleware would.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "robots",
        nargs="?",
        metavar="ROBOTS",
        help="robots.txt: a file, - for stdin, or an http(s) URL whose file name is robots.txt",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("urls", nargs="*", metavar="URL", help="URLs or paths (with ?query) to check")
    parser.add_argument(
        "-a",
        "--agent",
        default=DEFAULT_AGENT,
        help=f"robot name or User-Agent header (default {DEFAULT_AGENT})",
    )
    parser.add_argument(
        "--max-crawl-delay",
        type=seconds,
        default=MAX_CRAWL_DELAY,
        metavar="SECONDS",
        help=f"the cap on the delay, as ROBOTSTXT_MAX_CRAWL_DELAY (default {MAX_CRAWL_DELAY:g})",
    )
    parser.add_argument(
        "--purpose",
        action="append",
        default=[],
        metavar="LABEL",
        help="a use of the content (train-ai, search, ...), as ROBOTSTXT_USAGE_PURPOSES: its verdict for each URL; "
        "exit 1 when a URL's usage preferences disallow it (repeatable)",
    )
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "verify":  # python -m scrapy_robots_coccoc verify DIR ...: the compliance record's check
        from . import verify

        return verify.main(argv[1:], out)
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)
    if args.robots is None:
        parser.error("give a robots.txt (a file, - or a URL) and URLs to check, or the URL of a page")
    if is_other_url(args.robots):
        print(f"error: cannot fetch {args.robots}: give an http:// or https:// URL, a file or -", file=sys.stderr)
        return EXIT_USAGE
    for url in args.urls:
        if is_other_url(url):
            print(f"error: cannot check {url}: give http:// or https:// URLs, or paths", file=sys.stderr)
            return EXIT_USAGE
    robots_source, urls = args.robots, list(args.urls)
    # A page is judged by its site's robots.txt, never read as one.
    site_robots = site_robots_url(args.robots)
    if site_robots is not None:
        robots_source = site_robots
        urls.insert(0, args.robots)
    try:
        body, source, content_type = read_robots(robots_source)
    except Unreadable as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)  # may quote the site's own bytes
        return EXIT_UNREADABLE
    reason = not_robots_txt(body, content_type)
    if reason:
        print(f"error: {printable(source)} is not a robots.txt: {printable(reason)}", file=sys.stderr)
        return EXIT_UNREADABLE
    robots = RobotsTxt.parse(body)
    decisions = [(url, robots.explain(url, args.agent)) for url in urls]
    purposes = list(dict.fromkeys(purpose.strip().lower() for purpose in args.purpose))
    robots_url = robots_source if robots_source.lower().startswith(HTTP_SCHEMES) else None
    try:
        print(describe(source, body, args.agent), file=out)
        report(robots, args.agent, decisions, out, robots_url, args.max_crawl_delay, purposes)
        out.flush()  # here, not at exit, where a closed pipe would make the exit code 120
    except BrokenPipeError:
        # The reader left (``| head -1``): the decisions still give the exit code; the flush at exit must not fail.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    refused = any(robots.usage(url, args.agent).allows(purpose) is False for url in urls for purpose in purposes)
    allowed = all(decision.allowed for _, decision in decisions) and not refused
    return EXIT_ALLOWED if allowed else EXIT_DISALLOWED


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
