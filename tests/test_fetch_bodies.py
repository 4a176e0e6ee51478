"""The robots.txt body and its bounds (docs/contract.md, section 3, "Fetching
robots.txt"): the first 500 KiB of text are read whatever DOWNLOAD_MAXSIZE or
Content-Length say, a compressed body is inflated no further, a body not in
its encoding is unreadable; connections broken mid-body, or bodies that never
end, end every request."""

from __future__ import annotations

import gzip
import logging
import struct
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest
from twisted.web.server import NOT_DONE_YET

from scrapy_robots_coccoc._crawl import compat as _compat
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc._parser.body import inflate

from .crawling import SETTINGS, bad_records, bounded_crawl, crawl, ours, stat, unaccounted
from .sites import RULES, HostileSite, LoopbackSite, Page, broken_after, dripping, robots, site_with

# --- Bounds of their own ---


@pytest_twisted.ensureDeferred
async def test_huge_robotstxt_is_cut_at_500_kib(sites):
    body = "User-agent: *\nDisallow: /private\n" + "# filler\n" * 1_200_000  # ~10 MB
    (site,) = sites(site_with(body))
    crawler = await crawl(urls=[site.url("/private/x"), site.url("/a")], follow=False)
    assert crawler.spider.crawled == [site.url("/a")]
    assert stat(crawler, "robotstxt/truncated") == 1
    # Asked uncompressed, so that the cut applies to the text.
    assert site.request_headers["/robots.txt"].getRawHeaders("accept-encoding") == ["identity"]


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
@pytest_twisted.ensureDeferred
async def test_robotstxt_larger_than_download_maxsize_still_gives_rules(sites, caplog, encoding):
    caplog.set_level(logging.INFO)
    body = RULES + "# filler line of a large robots.txt\n" * (300 * 1024 // 36)
    assert len(body) > 300 * 1024
    page = robots(body)
    if encoding == "gzip":
        page = Page(gzip.compress(body.encode()), headers={"Content-Encoding": "gzip"})
    (site,) = sites(LoopbackSite(pages={"/robots.txt": page}))
    settings = {"DOWNLOAD_MAXSIZE": 64 * 1024, "DOWNLOAD_WARNSIZE": 32 * 1024}
    crawler = await bounded_crawl(settings, urls=[site.url("/private/x"), site.url("/a")], follow=False)
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert stat(crawler, "robotstxt/unavailable/origins") is None
    assert bad_records(caplog) == []


@pytest.mark.skipif(_compat.SCRAPY_VERSION < (2, 15), reason="Scrapy 2.13-2.14 cancel with Twisted's CancelledError")
@pytest_twisted.ensureDeferred
async def test_without_the_body_middleware_a_body_over_download_maxsize_is_unrestricted(sites, caplog):
    # As with Scrapy's own middleware; it was a local fault, retried every
    # minute, the site's pages dropped for the whole crawl.
    body = RULES + "# filler line of a large robots.txt\n" * 2000
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(body)}))
    middlewares = {**SETTINGS["DOWNLOADER_MIDDLEWARES"], "scrapy_robots_coccoc.RobotsTxtBodyMiddleware": None}
    settings = {"DOWNLOADER_MIDDLEWARES": middlewares, "DOWNLOAD_MAXSIZE": 16 * 1024, "DOWNLOAD_WARNSIZE": 0}
    urls = [site.url("/private/x"), site.url("/a")]
    crawler = await bounded_crawl(settings, urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/local_faults") is None


def lying_content_length(body: bytes):
    def handler(request):
        request.setHeader("Content-Type", "text/plain")
        request.setHeader("Content-Length", str(10**12))
        request.write(body)
        request.transport.loseConnection()
        return NOT_DONE_YET

    return handler


@pytest.mark.parametrize("maxsize", [64 * 1024, 1024**3])
@pytest_twisted.ensureDeferred
async def test_lying_huge_content_length_does_not_fail_the_fetch(sites, caplog, maxsize):
    caplog.set_level(logging.INFO)
    (site,) = sites(HostileSite())
    site.handlers["/robots.txt"] = lying_content_length(RULES.encode())
    settings = {"DOWNLOAD_MAXSIZE": maxsize, "DOWNLOAD_WARNSIZE": 0, "DOWNLOAD_TIMEOUT": 2}
    crawler = await bounded_crawl(settings, urls=[site.url("/private/x"), site.url("/a")], follow=False)
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert stat(crawler, "robotstxt/unavailable/origins") is None
    assert bad_records(caplog) == []


# --- Compressed bodies ---


_BOMBS: dict[str, bytes] = {}


def gzip_bomb() -> bytes:
    """A valid gzip member: RULES then 1.1 GB of zeros, ~1.1 MB compressed,
    built as a stream (identical full-flushed deflate blocks)."""
    if "gzip" not in _BOMBS:
        chunk, count = bytes(1 << 20), 1100
        head = RULES.encode()
        deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
        first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
        block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
        tail = deflate.flush()
        crc = zlib.crc32(head)
        for _ in range(count):
            crc = zlib.crc32(chunk, crc)
        size = len(head) + count * len(chunk)
        assert size > 1024**3
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
        _BOMBS["gzip"] = header + first + block * count + tail + struct.pack("<II", crc, size & 0xFFFFFFFF)
    return _BOMBS["gzip"]


def peak_rss_reset() -> bool:
    """Reset this process's peak RSS (Linux 4.0+); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for peak RSS")
@pytest.mark.parametrize("encoding", ["gzip", "gzip, gzip"])
@pytest_twisted.ensureDeferred
async def test_gzip_bomb_is_inflated_no_further_than_the_bound(sites, caplog, encoding):
    caplog.set_level(logging.INFO)
    body = gzip_bomb() if encoding == "gzip" else gzip.compress(gzip_bomb())
    (site,) = sites(LoopbackSite(pages={"/robots.txt": Page(body, headers={"Content-Encoding": encoding})}))
    if not peak_rss_reset():
        pytest.skip("cannot reset the peak RSS of this process")
    before = peak_rss_bytes()
    crawler = await bounded_crawl(urls=[site.url("/private/x"), site.url("/a")], follow=False)
    growth = peak_rss_bytes() - before
    assert growth < 150 * 1024 * 1024, f"peak RSS grew by {growth / 2**20:.0f} MB"
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert site.request_headers["/robots.txt"].getRawHeaders("accept-encoding") == ["identity"]
    assert bad_records(caplog) == []


def compressed(encoding: str, text: bytes) -> bytes:
    if encoding == "br":
        return pytest.importorskip("brotli").compress(text)
    if encoding == "zstd":
        return pytest.importorskip("zstandard").ZstdCompressor().compress(text)
    if encoding == "deflate":
        return zlib.compress(text)
    # Two members, as a server appending to a gzip file sends: the rules
    # are in the second.
    assert encoding == "gzip"
    return gzip.compress(b"# members\n") + gzip.compress(text)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
@pytest_twisted.ensureDeferred
async def test_small_compressed_robotstxt_gives_its_rules(sites, encoding):
    # Sent despite our Accept-Encoding: identity, in every encoding Scrapy reads.
    page = Page(
        compressed(encoding, RULES.encode()), headers={"Content-Encoding": encoding, "Content-Type": "text/plain"}
    )
    (site,) = sites(LoopbackSite(pages={"/robots.txt": page}))
    crawler = await bounded_crawl(urls=[site.url("/private/x"), site.url("/a")], follow=False)
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert stat(crawler, "robotstxt/compressed") == 1


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd", "compress"])
@pytest_twisted.ensureDeferred
async def test_body_that_is_not_in_its_encoding_is_unrestricted_with_a_warning(sites, caplog, encoding):
    caplog.set_level(logging.INFO)
    page = Page(RULES.encode(), headers={"Content-Encoding": encoding})  # says so, is not (or unknown)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": page}))
    urls = [site.url("/private/x"), site.url("/a")]
    crawler = await bounded_crawl(urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/unreadable") == 1
    (warning,) = [m for m in ours(caplog, logging.WARNING) if "unreadable" in m]
    assert site.url("/robots.txt") in warning and encoding in warning
    assert bad_records(caplog) == []


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_a_br_or_zstd_bomb_is_inflated_no_further_than_the_bound(encoding):
    bomb = {
        "br": lambda: pytest.importorskip("brotli").compress(bytes(64 << 20), quality=1),
        "zstd": lambda: pytest.importorskip("zstandard").ZstdCompressor().compress(bytes(64 << 20)),
    }[encoding]()
    assert len(bomb) < 20_000
    tracemalloc.start()
    try:
        inflated = inflate(bomb, encoding.encode(), MAX_BYTES + 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(inflated) == MAX_BYTES + 1
    assert peak < 4 * MAX_BYTES


def test_a_gzip_body_of_many_empty_members_is_read_in_bounded_time():
    # Each member's leftover input is a copy: 50,000 members of 1 MiB would
    # copy 26 GB. Members past the 16th are not read.
    body = gzip.compress(b"") * 50_000 + gzip.compress(RULES.encode())
    started = time.perf_counter()
    assert inflate(body, b"gzip", MAX_BYTES + 1) == b""
    assert time.perf_counter() - started < 0.1


# --- Connections broken mid-body ---


@pytest.mark.parametrize("how", ["short", "abort"])
@pytest_twisted.ensureDeferred
async def test_connection_broken_mid_body(sites, caplog, how):
    caplog.set_level(logging.INFO)
    (site,) = sites(HostileSite())
    # The cut leaves "Disallow: /" of "Disallow: /secret": a partial line
    # that would forbid the whole site if it were read.
    site.handlers["/robots.txt"] = broken_after(b"User-agent: *\nDisallow: /private\nDisallow: /", how)
    site.handlers["/broken"] = broken_after(b"<html><body>half a pa", how)
    urls = [site.url("/private/x"), site.url("/a"), site.url("/broken"), site.url("/b")]
    crawler = await bounded_crawl({"DOWNLOAD_TIMEOUT": 2}, urls=urls, follow=False, timeout=15)
    assert unaccounted(crawler, urls) == set()
    assert sorted(crawler.spider.crawled) == sorted([site.url("/a"), site.url("/b")]), crawler.spider.failures
    assert isinstance(crawler.spider.failures[site.url("/private/x")], IgnoreRequest)
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert stat(crawler, "robotstxt/unavailable/origins") is None


@pytest_twisted.ensureDeferred
async def test_connection_reset_before_any_answer_ends_every_request(sites, caplog):
    caplog.set_level(logging.INFO)
    (site,) = sites(HostileSite())
    site.handlers["/robots.txt"] = lambda request: request.transport.abortConnection() or NOT_DONE_YET
    urls = [site.url(f"/p{i}") for i in range(5)]
    crawler = await bounded_crawl({"DOWNLOAD_TIMEOUT": 2}, urls=urls, follow=False, timeout=15)
    assert unaccounted(crawler, urls) == set()
    assert crawler.spider.crawled == []
    assert all(isinstance(e, IgnoreRequest) for e in crawler.spider.failures.values())
    assert stat(crawler, "robotstxt/unavailable/origins") == 1
    assert not [m for m in bad_records(caplog) if "Gave up retrying" in m or "ERROR" in m]


@pytest_twisted.ensureDeferred
async def test_robotstxt_that_never_ends_ends_every_request(sites, caplog):
    caplog.set_level(logging.INFO)
    (site,) = sites(HostileSite())
    site.handlers["/robots.txt"] = dripping(b"Disallow: /private\n", 0.1)
    urls = [site.url(f"/p{i}") for i in range(3)] + [site.url("/private/x")]
    settings = {"DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 0}
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=10)
    assert unaccounted(crawler, urls) == set()
    # Either the cut text's rules or no answer: /private/x is never downloaded.
    assert site.url("/private/x") not in crawler.spider.crawled
    assert all(isinstance(e, IgnoreRequest) for e in crawler.spider.failures.values())
    assert bad_records(caplog) == []
