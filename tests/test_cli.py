"""The command-line checker: output, and exit codes a script can use."""

from __future__ import annotations

import gzip
import os
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

    from .test_hostile import HostileSite, broken_after, dripping

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
