"""The command-line checker: output, and exit codes a script can use."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import zlib

import pytest
import pytest_twisted
from twisted.internet import task
from twisted.web.server import NOT_DONE_YET

from scrapy_robots_coccoc import __version__
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc.cli import main

from .sites import LoopbackSite, Page, robots

ROBOTS = """\
User-agent: *
Disallow: /

User-agent: coccocbot
Disallow: /cats
Allow: /cats/wild
Crawl-delay: 2.5

Sitemap: https://shop.example/sitemap.xml
"""


@pytest.fixture
def robots_file(tmp_path):
    path = tmp_path / "robots.txt"
    path.write_text(ROBOTS)
    return str(path)


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy_robots_coccoc", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def test_prints_decision_group_rule_delay_and_sitemaps(robots_file, capsys):
    code = main([robots_file, "/cats/tame", "https://shop.example/cats/wild/tiger", "/dogs"])
    out = capsys.readouterr().out
    assert code == 1
    assert "disallowed  /cats/tame  [group 'coccocbot'; Disallow: /cats (line 5)]" in out
    assert "allowed     https://shop.example/cats/wild/tiger  [group 'coccocbot'; Allow: /cats/wild (line 6)]" in out
    assert "allowed     /dogs  [group 'coccocbot'; no rule]" in out
    assert "Crawl-delay: 2.5 s" in out
    assert "Sitemaps: 1\n  https://shop.example/sitemap.xml" in out


def test_all_allowed_exits_0_and_agent_option_picks_the_group(robots_file, capsys):
    assert main([robots_file, "/dogs"]) == 0
    assert main([robots_file, "-a", "otherbot", "/dogs"]) == 1
    assert "[group '*'; Disallow: / (line 2)]" in capsys.readouterr().out


def test_stdin_and_module_entry_point():
    result = run("-", "/cats/x", "--agent", "Mozilla/5.0 (compatible; coccocbot-web/1.0)", stdin=ROBOTS)
    assert result.returncode == 1
    assert "robots.txt: stdin" in result.stdout and "Disallow: /cats (line 5)" in result.stdout


def test_shows_the_robot_name_a_full_user_agent_stands_for(robots_file, capsys):
    agent = "Mozilla/5.0 (compatible; coccocbot-image/1.0; +http://help.coccoc.com/searchengine)"
    main([robots_file, "-a", agent, "/cats/x"])
    assert f"agent: {agent} (robot name 'coccocbot-image')\n" in capsys.readouterr().out
    main([robots_file, "-a", "coccocbot-web", "/cats/x"])
    assert "agent: coccocbot-web\n" in capsys.readouterr().out  # a bare name needs no translation


def test_says_when_robots_txt_was_cut_at_500_kib(tmp_path, capsys):
    # The Disallow line starts past the limit: it is ignored, as the middleware ignores it.
    path = tmp_path / "robots.txt"
    path.write_bytes(b"User-agent: *\n" + b"#" * MAX_BYTES + b"\nDisallow: /\n")
    assert main([str(path), "/a"]) == 0
    assert f"more than {MAX_BYTES:,} bytes: cut at 500 KiB, the rest is ignored" in capsys.readouterr().out
    path.write_bytes(b"User-agent: *\nDisallow: /b\n".ljust(MAX_BYTES, b"#"))
    assert main([str(path), "/a"]) == 0
    out = capsys.readouterr().out
    assert f"{MAX_BYTES} bytes;" in out and "cut" not in out


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout == f"scrapy-robots-coccoc {__version__}\n"


@pytest.mark.parametrize(
    "argument", ["ftp://example.com/robots.txt", "file:///etc/robots.txt", "data:text/plain,Disallow:%20/", "FTP://x/"]
)
def test_urls_other_than_http_are_a_one_line_error(argument, robots_file):
    as_robots = run(argument, "/a")
    assert as_robots.returncode == 2
    assert as_robots.stderr == f"error: cannot fetch {argument}: give an http:// or https:// URL, a file or -\n"
    as_url = run(robots_file, "/a", argument)
    assert as_url.returncode == 2
    assert as_url.stderr == f"error: cannot check {argument}: give http:// or https:// URLs, or paths\n"


def test_missing_file_and_unreachable_url_are_clear_errors(tmp_path):
    missing = run(str(tmp_path / "nope.txt"), "/a")
    assert missing.returncode == 3
    assert "error: cannot read" in missing.stderr and "Traceback" not in missing.stderr
    unreachable = run("http://127.0.0.1:9/robots.txt", "/a")
    assert unreachable.returncode == 3
    assert "error: cannot fetch http://127.0.0.1:9/robots.txt" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


def test_bad_arguments_exit_2_with_usage():
    result = run()
    assert result.returncode == 2
    assert result.stderr.startswith("usage:") and "Traceback" not in result.stderr


@pytest_twisted.ensureDeferred
async def test_fetches_a_url_as_the_middleware_reads_it(sites):
    from twisted.internet.utils import getProcessOutputAndValue

    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(ROBOTS)
    site.pages["/missing/robots.txt"] = Page(b"gone", status=404)
    for hop in range(6):  # 6 redirects: one more than the middleware follows
        site.pages[f"/loop{hop}/robots.txt"] = Page(status=302, headers={"Location": f"/loop{hop + 1}/robots.txt"})
    site.pages["/loop6/robots.txt"] = robots(ROBOTS)
    site.pages["/ftp/robots.txt"] = Page(status=301, headers={"Location": "ftp://127.0.0.1:9/robots.txt"})
    site.pages["/bad/robots.txt"] = Page(status=301, headers={"Location": "http://exa mple.com:99999/robots.txt"})
    site.pages["/user/robots.txt"] = Page(status=301, headers={"Location": "http://u:p@127.0.0.1:9/robots.txt"})
    # Compressed although we did not ask: inflated, as the middleware does.
    site.pages["/gzip/robots.txt"] = Page(gzip.compress(ROBOTS.encode()), headers={"Content-Encoding": "gzip"})
    site.pages["/odd/robots.txt"] = Page(ROBOTS.encode(), headers={"Content-Encoding": "x-odd"})
    site.pages["/long/robots.txt"] = Page(gzip_to_the_download_limit(), headers={"Content-Encoding": "gzip"})

    async def check(path: str) -> tuple[str, int]:
        args = ["-m", "scrapy_robots_coccoc", site.url(path), "/cats/x"]
        out, _, code = await getProcessOutputAndValue(sys.executable, args)
        return out.decode(), code

    out, code = await check("/robots.txt")
    assert code == 1 and "(HTTP 200)" in out and "Disallow: /cats (line 5)" in out
    out, code = await check("/missing/robots.txt")
    assert code == 0 and "HTTP 404: everything allowed" in out
    out, code = await check("/loop0/robots.txt")
    assert code == 0 and "HTTP 302: everything allowed" in out
    out, code = await check("/ftp/robots.txt")  # a redirect the middleware does not follow either
    assert code == 0 and "HTTP 301: everything allowed" in out
    out, code = await check("/bad/robots.txt")  # nor one to a URL that cannot be requested
    assert code == 0 and "HTTP 301: everything allowed" in out
    out, code = await check("/user/robots.txt")  # nor one to a URL with a user name
    assert code == 0 and "HTTP 301: everything allowed" in out
    out, code = await check("/gzip/robots.txt")
    assert code == 1 and "(HTTP 200, gzip)" in out and "Disallow: /cats (line 5)" in out, out
    out, code = await check("/odd/robots.txt")
    assert code == 0 and "unreadable Content-Encoding 'x-odd': everything allowed" in out, out
    # Its text stopped mid-line by the download limit: "Disallow: /ca" is not read.
    out, code = await check("/long/robots.txt")
    assert code == 0 and "/cats/x  [group '*'; no rule]" in out, out


def gzip_to_the_download_limit() -> bytes:
    """A gzip body whose text, at the raw download limit (1 MiB), stops in
    the middle of ``Disallow: /cats``: bytes of one character each."""
    from scrapy_robots_coccoc._parser.body import MAX_DOWNLOAD_BYTES

    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = bytearray(compressor.compress(b"User-agent: *\n#") + compressor.flush(zlib.Z_SYNC_FLUSH))
    while len(out) < MAX_DOWNLOAD_BYTES - 94:
        out += compressor.compress(b"x") + compressor.flush(zlib.Z_SYNC_FLUSH)
    for byte in b"\nDisallow: /cats/x-y-z\n":
        out += compressor.compress(bytes([byte])) + compressor.flush(zlib.Z_SYNC_FLUSH)
    body = bytes(out + compressor.flush())
    assert zlib.decompressobj(31).decompress(body[:MAX_DOWNLOAD_BYTES]).endswith(b"\nDisallow: /ca")
    return body


def stalled(head: bytes):
    """A robots.txt that promises more than *head* and then says nothing:
    no answer, as for the middleware, not the rules received so far."""

    def handler(request):
        request.setHeader("Content-Length", str(len(head) + 1000))
        request.write(head)
        return NOT_DONE_YET

    return handler


@pytest_twisted.ensureDeferred
async def test_an_answer_that_is_not_http_breaks_off_or_never_ends_is_exit_3_without_traceback(sites):
    from twisted.internet import protocol, reactor
    from twisted.internet.utils import getProcessOutputAndValue

    from .sites import HostileSite, broken_after, dripping

    class NotHttp(protocol.Protocol):
        def connectionMade(self):
            self.transport.write(b"\x1b]0;owned\x07garbage\r\n\r\n")  # terminal commands in the error
            self.transport.loseConnection()

    class SlowHeaders(protocol.Protocol):
        """A status line, then a header a byte at a time: each read is quick."""

        def connectionMade(self):
            self.transport.write(b"HTTP/1.1 200 OK\r\n")
            self.drip = task.LoopingCall(self.transport.write, b"X")
            self.drip.start(0.1)

        def connectionLost(self, reason):
            self.drip.stop()

    port = reactor.listenTCP(0, protocol.Factory.forProtocol(NotHttp), interface="127.0.0.9")
    slow = reactor.listenTCP(0, protocol.Factory.forProtocol(SlowHeaders), interface="127.0.0.9")
    (site,) = sites(HostileSite())
    site.handlers["/broken/robots.txt"] = broken_after(b"User-agent: *\nDisallow: /cats\n", "abort", after=0.5)
    # Closed early under a larger Content-Length: the cut last line is dropped.
    site.handlers["/short/robots.txt"] = broken_after(b"User-agent: *\nDisallow: /x\nDisallow: /cats", "short")
    site.handlers["/drip/robots.txt"] = dripping(b"# more\n", 0.2)
    site.handlers["/stalled/robots.txt"] = stalled(b"User-agent: *\nAllow: /\n")
    # As the middleware: a 203 is not a 200, its body gives no rules.
    site.pages["/203/robots.txt"] = Page(ROBOTS.encode(), status=203)
    # A short timeout, so that the dripping body is given up soon.
    command = "import sys; from scrapy_robots_coccoc import cli; cli.FETCH_TIMEOUT = 1; sys.exit(cli.main())"

    async def check(url: str) -> tuple[str, str, int]:
        out, err, code = await getProcessOutputAndValue(sys.executable, ["-c", command, url, "/cats/x"])
        return out.decode(), err.decode(), code

    try:
        not_http = f"http://127.0.0.9:{port.getHost().port}/robots.txt"
        slow_headers = f"http://127.0.0.9:{slow.getHost().port}/robots.txt"
        urls = (not_http, slow_headers, site.url("/drip/robots.txt"), site.url("/stalled/robots.txt"), "http://[::1/x")
        for url in urls:
            out, err, code = await check(url)
            reasons = (f"error: cannot fetch {url}", "robots.txt did not arrive", "robots.txt stopped arriving")
            assert code == 3 and any(reason in err for reason in reasons), err
            assert "Traceback" not in err and "\x1b" not in err, err
        out, err, code = await check(site.url("/broken/robots.txt"))
        assert code == 1 and "Disallow: /cats (line 2)" in out, (out, err)  # the complete lines count
        out, err, code = await check(site.url("/short/robots.txt"))
        assert code == 0 and "/cats/x  [group '*'; no rule]" in out, (out, err)
        out, err, code = await check(site.url("/203/robots.txt"))
        assert code == 0 and "HTTP 203: everything allowed" in out, (out, err)
    finally:
        await port.stopListening()
        await slow.stopListening()


def test_sitemaps_cannot_drive_the_terminal(tmp_path):
    path = tmp_path / "robots.txt"
    path.write_bytes(b"Sitemap: https://a.example/\x1b[1A\x1b[2Kallowed /private\x07\nDisallow: /private\n")
    result = run(str(path), "/private")
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "  https://a.example/%1B[1A%1B[2Kallowed /private%07\n" in result.stdout, result.stdout


@pytest.mark.parametrize("paths", [300, 5000])  # less and more output than a pipe holds
@pytest.mark.parametrize("buffered", [True, False])
def test_a_reader_that_stops_reading_leaves_the_exit_code_to_the_decisions(robots_file, paths, buffered):
    command = [sys.executable, "-m", "scrapy_robots_coccoc", robots_file, "/cats/x"]
    command += [f"/dogs/{i}" for i in range(paths)] + ["-a", "coccocbot"]
    script = '"$@" | head -1 > /dev/null; exit ${PIPESTATUS[0]}'
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    result = subprocess.run(["bash", "-c", script, "bash", *command], capture_output=True, text=True, env=env)
    assert result.returncode == 1 and result.stderr == "", result.stderr  # /cats/x is disallowed


# -- a checker that cannot mislead (issue 27, finding 4) ------------------------------


async def checker(*args: str) -> tuple[str, str, int]:
    """Run the checker in a process, the reactor serving the sites meanwhile."""
    from twisted.internet.utils import getProcessOutputAndValue

    out, err, code = await getProcessOutputAndValue(sys.executable, ["-m", "scrapy_robots_coccoc", *args])
    return out.decode(), err.decode(), code


SITE_ROBOTS = """\
User-agent: *
Disallow: /private
"""


@pytest_twisted.ensureDeferred
async def test_a_page_url_is_decided_by_its_sites_robots_txt_not_read_as_one(sites):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(SITE_ROBOTS)}))
    out, err, code = await checker(site.url("/private/x"), "-a", "mybot")
    assert code == 1, (out, err)
    assert out.startswith(f"robots.txt: {site.url('/robots.txt')} (HTTP 200), 33 bytes; agent: mybot\n"), out
    assert f"disallowed  {site.url('/private/x')}  [group '*'; Disallow: /private (line 2)]\n" in out
    assert site.paths() == ["/robots.txt"]  # the page itself is not fetched
    out, err, code = await checker(site.url("/about?lang=vi"))
    assert code == 0 and f"allowed     {site.url('/about?lang=vi')}  [group '*'; no rule]\n" in out, (out, err)
    # Issue 34: a site root before paths was not decided, and the output did not say so. It is, like any page.
    out, err, code = await checker(site.url("/"), "/private/x", "/a")
    assert code == 1, (out, err)
    assert out.splitlines()[1:4] == [
        f"allowed     {site.url('/')}  [group '*'; no rule]",
        "disallowed  /private/x  [group '*'; Disallow: /private (line 2)]",
        "allowed     /a  [group '*'; no rule]",
    ]
    assert site.paths() == ["/robots.txt"] * 3


@pytest_twisted.ensureDeferred
async def test_a_body_that_is_not_a_robots_txt_is_reported_and_exits_3(sites):
    page = b"<!DOCTYPE html>\n<html><body>User-agent: *<br>Disallow: /</body></html>"
    site, soft_404 = sites(
        LoopbackSite(
            pages={
                "/html/robots.txt": Page(b"\xef\xbb\xbf\n  " + page, headers={"Content-Type": "text/plain"}),
                "/typed/robots.txt": Page(b"Page not found", headers={"Content-Type": "text/html; charset=utf-8"}),
                "/text/robots.txt": robots("Welcome to our shop!\nOpen 9-5.\n"),
                "/xml/robots.txt": robots('<?xml version="1.0"?><urlset></urlset>'),
                # Served as text/html, but a robots.txt all the same: a crawl obeys it.
                "/mistyped/robots.txt": Page(SITE_ROBOTS.encode(), headers={"Content-Type": "text/html"}),
                "/empty/robots.txt": robots(""),
                "/comments/robots.txt": robots("# nothing to forbid\n\n"),
            }
        ),
        LoopbackSite(pages={"/robots.txt": Page(page, headers={"Content-Type": "text/html"})}),
    )
    reasons = {
        "/html/robots.txt": "it is an HTML page",
        "/typed/robots.txt": "it is an HTML page (Content-Type: text/html; charset=utf-8)"
        " and holds no robots.txt field",
        "/text/robots.txt": "it holds no robots.txt field (User-agent, Allow, Disallow, Crawl-delay, Sitemap)",
        "/xml/robots.txt": "it is an XML document",
    }
    for path, reason in reasons.items():
        out, err, code = await checker(site.url(path), "/private/x")
        assert (code, out) == (3, ""), (path, out, err)
        assert err == f"error: {site.url(path)} (HTTP 200) is not a robots.txt: {reason}\n", err
    out, err, code = await checker(site.url("/mistyped/robots.txt"), "/private/x")
    assert code == 1 and "Disallow: /private (line 2)" in out, (out, err)
    for path in ("/empty/robots.txt", "/comments/robots.txt"):  # an empty robots.txt allows everything
        out, err, code = await checker(site.url(path), "/private/x")
        assert code == 0 and "allowed     /private/x  [no group; no rule]" in out, (path, out, err)
    # A site whose /robots.txt is a web page (a "soft 404").
    out, err, code = await checker(soft_404.url("/private/x"))
    assert (code, out) == (3, "")
    assert err == f"error: {soft_404.url('/robots.txt')} (HTTP 200) is not a robots.txt: it is an HTML page\n"


def test_a_file_that_is_not_a_robots_txt_is_reported_and_exits_3(tmp_path, capsys):
    page = tmp_path / "index.html"
    page.write_text("<html lang='vi'><head><title>Shop</title></head></html>")
    assert main([str(page), "/x"]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"error: {page} is not a robots.txt: it is an HTML page\n"
    notes = tmp_path / "notes.txt"
    notes.write_text("remember: buy milk\n")  # a colon, but no field name
    assert main([str(notes), "/x"]) == 3
    assert "holds no robots.txt field" in capsys.readouterr().err
    # Fields in any case, misspelt or without their colon are fields: the parser reads them.
    for body in ("DISALLOW: /x\n", "disalow: /x\n", "user-agent *\n", "\ufeffSitemap: /s.xml\r", "Crawl-delay: 5\n"):
        notes.write_text(body, encoding="utf-8")
        assert main([str(notes), "/y"]) == 0, body
    capsys.readouterr()


@pytest.mark.parametrize(
    ("fields", "options", "shown"),
    [
        ("Crawl-delay: 30", [], "10 s (asked 30 s, capped by ROBOTSTXT_MAX_CRAWL_DELAY)"),
        ("Crawl-delay: 30", ["--max-crawl-delay", "60"], "30 s"),
        ("Crawl-delay: 10", [], "10 s"),
        ("Crawl-delay: 2\nRequest-rate: 1/5s", [], "5 s (from Request-rate: 1/5s)"),
        (
            "Request-rate: 1/60s",
            [],
            "10 s (from Request-rate: 1/60s; asked 60 s, capped by ROBOTSTXT_MAX_CRAWL_DELAY)",
        ),
        ("Crawl-delay: 0.001", [], "none (asked 0.001 s, shorter than 0.01 s: not paced)"),
        ("Allow: /", [], "none"),
    ],
)
def test_the_crawl_delay_is_shown_as_the_middleware_keeps_it(fields, options, shown, tmp_path, capsys):
    path = tmp_path / "robots.txt"
    path.write_text(f"User-agent: *\n{fields}\n")
    assert main([str(path), "/x", *options]) == 0
    assert f"\nCrawl-delay: {shown}\n" in capsys.readouterr().out


@pytest.mark.parametrize(
    "fields",
    [
        "Crawl-delay: 30",
        "Crawl-delay: 3",
        "Crawl-delay: 2\nRequest-rate: 1/5s",
        "Request-rate: 1/60",
        "Crawl-delay: 0.001",
    ],
)
def test_the_delay_shown_is_the_one_the_middleware_keeps(fields, tmp_path, capsys):
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from scrapy_robots_coccoc import RobotsTxt, RobotsTxtMiddleware

    middleware = RobotsTxtMiddleware.from_crawler(get_crawler(Spider, {"ROBOTSTXT_OBEY": True}))
    text = f"User-agent: *\n{fields}\n"
    _, delay = middleware._delays.delay_for(RobotsTxt.parse(text), "coccocbot-web")
    path = tmp_path / "robots.txt"
    path.write_text(text)
    main([str(path), "/x"])
    shown = re.search(r"^Crawl-delay: (\S+)", capsys.readouterr().out, re.MULTILINE)[1]
    assert shown == (f"{delay:g}" if delay else "none")


def test_a_bad_delay_cap_is_a_usage_error():
    result = run("-", "/x", "--max-crawl-delay", "-1")
    assert result.returncode == 2 and "not a number of seconds: '-1'" in result.stderr


@pytest_twisted.ensureDeferred
async def test_sitemaps_are_resolved_against_the_robots_txt_url(sites, tmp_path):
    text = "Sitemap: /sitemap.xml\nSitemap: maps/b.xml\nSitemap: https://cdn.example/s.xml\nSitemap: /sitemap.xml\n"
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(text)}))
    out, err, code = await checker(site.url("/robots.txt"))
    assert code == 0, (out, err)
    assert out.endswith(
        "Sitemaps: 3\n"
        f"  {site.url('/sitemap.xml')}  (written /sitemap.xml)\n"
        f"  {site.url('/maps/b.xml')}  (written maps/b.xml)\n"
        "  https://cdn.example/s.xml\n"
    ), out
    # From a file there is no URL to resolve them against: said so.
    path = tmp_path / "robots.txt"
    path.write_text(text)
    out, err, code = await checker(str(path))
    assert "  /sitemap.xml  (relative: a crawl resolves it against the robots.txt URL)\n" in out, out
    assert "  https://cdn.example/s.xml\n" in out


@pytest_twisted.ensureDeferred
async def test_a_url_of_another_origin_is_noted(sites):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(SITE_ROBOTS)}))
    host, port = site.port.getHost().host, site.port.getHost().port
    other_host, other_scheme, other_port = (
        f"http://127.0.0.99:{port}/private/x",
        f"https://{host}:{port}/private/x",
        f"http://{host}:{port + 1}/private/x",
    )
    same = [f"HTTP://{host}:{port}/private/y", "/private/z", site.url("/a")]
    out, err, code = await checker(site.url("/robots.txt"), other_host, other_scheme, other_port, *same)
    assert code == 1, (out, err)
    note = f"  note: another origin than {site.address}, whose robots.txt this is (one per scheme, host and port)"
    lines = out.splitlines()
    assert lines[1:4] == [
        f"disallowed  {url}  [group '*'; Disallow: /private (line 2)]{note}"
        for url in (other_host, other_scheme, other_port)
    ]
    assert not any("note:" in line for line in lines[4:7]), lines


def test_usage_shows_both_forms_and_help_the_exit_codes():
    result = run()
    assert result.returncode == 2
    assert result.stderr.startswith(
        "usage: scrapy-robots-coccoc [options] ROBOTS [URL ...]\n       scrapy-robots-coccoc [options] PAGE_URL\n"
    ), result.stderr
    assert "give a robots.txt (a file, - or a URL) and URLs to check, or the URL of a page" in result.stderr
    assert "required" not in result.stderr
    helped = run("--help")
    assert helped.returncode == 0
    for line in ("0  every URL allowed", "1  some URL disallowed", "2  bad arguments", "3  no robots.txt to go by"):
        assert f"\n  {line}" in helped.stdout, helped.stdout


@pytest_twisted.ensureDeferred
async def test_exit_codes_allowed_disallowed_bad_arguments_no_robots_txt(sites):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(SITE_ROBOTS)}))
    assert (await checker(site.url("/a")))[2] == 0
    assert (await checker(site.url("/"), "/a", "/private/b"))[2] == 1
    assert (await checker(site.url("/a"), "ftp://127.0.0.2/x"))[2] == 2
    assert (await checker("http://127.0.0.1:9/page.html"))[2] == 3  # nobody answers


def test_usage_preferences_are_shown_and_a_disallowed_purpose_exits_1(tmp_path, capsys):
    path = tmp_path / "robots.txt"
    path.write_text(
        "User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: /open/ train-ai=y\nContent-Signal: search=yes\n"
    )
    assert main([str(path), "/open/a"]) == 0
    out = capsys.readouterr().out
    assert "usage: train-ai=y, search=y  [Content-Usage: /open/ train-ai=y (robots.txt line 3); " in out
    assert "purpose" not in out
    assert main([str(path), "/open/a", "--purpose", "train-ai", "--purpose", "search"]) == 0
    assert main([str(path), "/open/a", "/closed", "--purpose", "train-ai"]) == 1
    out = capsys.readouterr().out
    assert out.count("purpose train-ai: allowed") == 2 and out.count("purpose train-ai: disallowed") == 1
    assert main([str(path), "/closed", "--purpose", "ai-input"]) == 0, "unknown is not disallowed"
    assert "purpose ai-input: no preference stated" in capsys.readouterr().out
