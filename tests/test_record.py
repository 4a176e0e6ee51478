"""The compliance record (docs/usage/compliance-record.md): what a real crawl writes under ROBOTSTXT_RECORD_DIR, that
``verify`` reproduces it, and that a record that cannot be written stops the crawl with nothing downloaded
unrecorded."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.web.server import NOT_DONE_YET
from warcio.archiveiterator import ArchiveIterator

from scrapy_robots_coccoc import verify
from scrapy_robots_coccoc._record import pipe
from scrapy_robots_coccoc._record.writer import FRAME as writer_frame

from .crawling import (
    REACTORLESS_SCRAPY,
    bad_records,
    bounded_crawl,
    collector_frozen,
    crawl,
    run_python,
    run_reactorless,
    stat,
    unaccounted,
)
from .redis_worker import SELECT_REACTOR, SETTINGS_VARIABLE
from .redisserver import ROOT, sleep, workers
from .sites import HostileSite, LoopbackSite, Page, robots, site_with, unused_port
from .test_fetch_bodies import gzip_bomb

EPOLL_REACTOR = "twisted.internet.epollreactor.EPollReactor"
RULES_V1 = "User-agent: *\nDisallow: /private\nCrawl-delay: 0.1\n"
RULES_V2 = "User-agent: *\nDisallow: /private\nDisallow: /p4\nCrawl-delay: 0.1\n"


def decisions(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(directory.glob("decisions-*.jsonl.gz")) for line in gzip.open(path)]


def warc_records(directory: Path) -> list[tuple[str, str | None, int | None]]:
    """(type, target URI, HTTP status) of every WARC record under *directory*."""
    found = []
    for path in sorted(directory.glob("robots-*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                status = int(record.http_headers.get_statuscode()) if record.http_headers else None
                found.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI"), status))
    return found


def recorded_urls(directory: Path) -> set[str]:
    """The URLs of the decisions the record holds, up to where a file ends mid-write."""
    urls: set[str] = set()
    for path in directory.glob("decisions-*.jsonl.gz"):
        with gzip.open(path) as lines, contextlib.suppress(EOFError):
            urls.update(json.loads(line)["url"] for line in lines)
    return urls


def finished(path: Path) -> bool:
    """Whether the gzip stream of *path* is whole (its writer ended it)."""
    try:
        with gzip.open(path) as stream:
            while stream.read(1 << 16):
                pass
    except (EOFError, OSError):
        return False
    return True


def writing_processes() -> list[int]:
    """The process ids of this process's compliance record writers."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        parent = int(status[status.rindex(")") + 2 :].split()[1])
        if parent == os.getpid() and b"scrapy_robots_coccoc._record.writer" in command:
            found.append(int(entry.name))
    return found


def verified(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = verify.main([str(directory)])
    return code, capsys.readouterr().out


@pytest_twisted.ensureDeferred
async def test_a_crawl_records_every_answer_and_decision_and_verifies(sites, tmp_path, caplog, capsys):
    """Redirected, missing, unanswered and refreshed robots.txt; allowed and forbidden pages: each answer is in the
    WARC, each decision in the JSON lines, and verify reproduces them all."""
    changing = LoopbackSite(
        pages={"/robots.txt": [robots(RULES_V1), robots(RULES_V2)]},
        links={f"/p{i}": [f"/p{i + 1}", "/private/x"] for i in range(6)},
    )
    target, hops, missing, _ = sites(site_with(), LoopbackSite(), LoopbackSite(), changing)
    hops.pages["/robots.txt"] = Page(status=301, headers={"Location": target.url("/robots.txt")})
    missing.pages["/robots.txt"] = Page(b"not here", status=404)
    silent = f"http://127.0.0.1:{unused_port('127.0.0.1')}"
    urls = [
        target.url("/"),
        hops.url("/private/x"),
        hops.url("/a"),
        missing.url("/"),
        f"{silent}/",
        changing.url("/p0"),
    ]
    crawler = await crawl(
        {"ROBOTSTXT_RECORD_DIR": str(tmp_path), "ROBOTSTXT_CACHE_SECONDS": 0.25, "ROBOTSTXT_CACHE_MIN_SECONDS": 0},
        urls=urls,
    )
    assert not bad_records(caplog)
    assert changing.paths().count("/robots.txt") >= 2, "the rules were refreshed"

    entries = decisions(tmp_path)
    by_url = {entry["url"]: entry for entry in entries}
    downloaded = set(crawler.spider.crawled)
    assert downloaded <= {entry["url"] for entry in entries if entry["decision"] == "allowed"}
    assert by_url[hops.url("/private/x")]["decision"] == "forbidden"
    assert by_url[hops.url("/private/x")]["rule"] == "Disallow: /private"
    assert by_url[hops.url("/private/x")]["line"] == 2
    assert by_url[missing.url("/")]["robots"] == "status 404"
    assert by_url[f"{silent}/"]["decision"] == "unavailable"
    assert by_url[f"{silent}/"]["robots"].startswith("no answer: ")
    assert len({entry["robots"] for entry in entries if entry["origin"] == changing.url("")}) == 2

    records = warc_records(tmp_path)
    assert records[0][0] == "warcinfo"
    assert ("response", hops.url("/robots.txt"), 301) in records
    assert ("response", target.url("/robots.txt"), 200) in records
    assert ("revisit", target.url("/robots.txt"), 200) in records  # the redirect led to a body already recorded
    assert ("response", missing.url("/robots.txt"), 404) in records
    assert ("metadata", f"{silent}/robots.txt", None) in records
    assert [kind for kind, uri, _ in records if uri == changing.url("/robots.txt")].count("response") == 2

    code, out = verified(tmp_path, capsys)
    assert code == 0, out
    assert str(len(entries)) in out


@pytest_twisted.ensureDeferred
async def test_usage_and_crawl_delay_decisions_are_recorded(sites, tmp_path, capsys):
    usage, slow = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nContent-Usage: train-ai=n\nAllow: /\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 30\n")}),
    )
    await crawl(
        {
            "ROBOTSTXT_RECORD_DIR": str(tmp_path),
            "ROBOTSTXT_USAGE_PURPOSES": ["train-ai"],
            "ROBOTSTXT_CRAWL_DELAY_OVER_CAP": "skip",
        },
        urls=[usage.url("/x"), slow.url("/y")],
    )
    by_url = {entry["url"]: entry for entry in decisions(tmp_path)}
    assert by_url[usage.url("/x")]["decision"] == "usage_disallowed"
    assert by_url[usage.url("/x")]["usage"] == {"preferences": {"train-ai": False}, "purposes": ["train-ai"]}
    assert (by_url[usage.url("/x")]["rule"], by_url[usage.url("/x")]["line"]) == ("Content-Usage: train-ai=n", 2)
    assert by_url[slow.url("/y")]["decision"] == "over_cap"
    assert by_url[slow.url("/y")]["rule"] == "Crawl-delay: 30"
    assert verified(tmp_path, capsys)[0] == 0


@pytest.mark.parametrize("cluster", [False, True], ids=["server", "cluster"])
@pytest_twisted.ensureDeferred
async def test_hostile_sites_and_a_failing_store_leave_every_request_ended_and_a_record_that_verifies(
    cluster, sites, tmp_path, caplog, capsys
):
    """A 1.2 MB robots.txt (cut at the bound), a gzip bomb, a redirect off the web, a robots.txt that never
    answers, all through a RedisStore whose server (or cluster) is not there: every request ends, downloaded or
    dropped with an exception its errback sees, and the record of it all verifies. An unreachable cluster raised
    RedisClusterException, which is no RedisError: the store took it for a fault, not for Redis down."""
    huge, bomb, off_web, silent = sites(
        LoopbackSite(pages={"/robots.txt": robots(RULES_V1 + "# filler\n" * 150_000)}),
        LoopbackSite(pages={"/robots.txt": Page(gzip_bomb(), headers={"Content-Encoding": "gzip"})}),
        LoopbackSite(pages={"/robots.txt": Page(status=301, headers={"Location": "file:///etc/passwd"})}),
        HostileSite(),
    )
    silent.handlers["/robots.txt"] = lambda request: NOT_DONE_YET
    urls = [site.url(path) for site in (huge, bomb, off_web, silent) for path in ("/a", "/private/x")]
    settings = {
        "ROBOTSTXT_RECORD_DIR": str(tmp_path),
        "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
        "ROBOTSTXT_REDIS_URL": f"redis://127.0.0.1:{unused_port('127.0.0.1')}/0",
        "ROBOTSTXT_REDIS_CLUSTER": cluster,
        "DOWNLOAD_TIMEOUT": 1,
    }
    crawler = await bounded_crawl(settings, urls=urls, follow=False)
    assert not unaccounted(crawler, urls)
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []
    assert any("Redis store unreachable" in r.getMessage() for r in caplog.records)  # the worker went on alone
    failures = {url: type(exc).__name__ for url, exc in crawler.spider.failures.items()}
    assert failures[huge.url("/private/x")] == failures[bomb.url("/private/x")] == "RobotsTxtForbidden"
    assert off_web.url("/private/x") in crawler.spider.crawled  # a redirect not followed: unrestricted
    assert failures[silent.url("/a")] == "OriginUnavailable"
    assert {entry["url"] for entry in decisions(tmp_path)} == set(urls)
    code, out = verified(tmp_path, capsys)
    assert code == 0, out


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
@pytest_twisted.ensureDeferred
async def test_two_scrapy_redis_workers_each_write_a_record_that_verifies(sites, redis_server, tmp_path, capsys):
    """Each worker writes its own files. The second, started once the first is done, decides by the robots.txt the
    first fetched, from the shared store: its WARC holds that body as a resource record, so that each worker's
    files verify alone, and together."""
    (site,) = sites(
        LoopbackSite(
            pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")},
            links={"/": [f"/p{i}" for i in range(8)] + [f"/private/{i}" for i in range(4)]},
        )
    )
    settings = {"ROBOTSTXT_RECORD_DIR": str(tmp_path)}
    results = [*await workers(redis_server.url, [site.url("/")], settings=settings)]
    results += await workers(redis_server.url, [site.url("/q"), site.url("/private/q")], settings=settings)
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    assert site.paths().count("/robots.txt") == 1
    crawled = {url for out, _, _ in results for url in json.loads(out.decode().splitlines()[-1])["crawled"]}
    allowed = {entry["url"] for entry in decisions(tmp_path) if entry["decision"] == "allowed"}
    assert crawled <= allowed and site.url("/q") in crawled

    kinds = []
    for path in tmp_path.glob("decisions-*"):
        stem = path.name.split("-", 1)[1].removesuffix(".jsonl.gz")
        alone = tmp_path / stem
        alone.mkdir()
        for part in tmp_path.glob(f"*-{stem}.*"):
            shutil.copy(part, alone)
        kinds.append([kind for kind, _, _ in warc_records(alone)])
        assert verified(alone, capsys)[0] == 0
    assert sorted(kinds) == [["warcinfo", "resource"], ["warcinfo", "response"]]
    assert verified(tmp_path, capsys)[0] == 0


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
@pytest.mark.parametrize("reactor", [SELECT_REACTOR, EPOLL_REACTOR])
@pytest_twisted.ensureDeferred
async def test_a_crawl_under_another_reactor_writes_a_record_that_verifies(
    sites, redis_server, tmp_path, capsys, reactor
):
    """Under a reactor that is not asyncio's the writing process's replies are read through the reactor: the crawl
    ends (its last requests dropped, the journal still writing, once spun for ever at close; epoll reports the
    process's exit as a hang-up, without a read) and the record verifies."""
    (site,) = sites(
        LoopbackSite(
            pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")},
            links={"/": [f"/p{i}" for i in range(4)] + [f"/private/{i}" for i in range(20)]},
        )
    )
    from twisted.internet import reactor as tests_reactor

    settings = {"ROBOTSTXT_RECORD_DIR": str(tmp_path), "TWISTED_REACTOR": reactor}
    worker = workers(redis_server.url, [site.url("/")], settings=settings)
    ((out, err, code),) = await worker.addTimeout(60, tests_reactor)  # a crawl that never ends fails
    assert code == 0, err.decode()[-3000:]
    assert len(json.loads(out.decode().splitlines()[-1])["crawled"]) == 5
    assert len(decisions(tmp_path)) == 25
    assert verified(tmp_path, capsys)[0] == 0


@pytest_twisted.ensureDeferred
async def test_a_record_that_cannot_be_written_stops_the_crawl_with_nothing_unrecorded(sites, tmp_path, caplog):
    """A full disk, as the kernel reports it to a process over its file size limit (EFBIG, SIGXFSZ ignored): the
    crawl stops with its own finish reason and one ERROR line; every page the sites served has its decision in
    what the record holds, and none was downloaded after the failure."""
    # Each robots.txt takes 20 KB in the WARC, and answers 0.1 s after the one before: the pages of the first
    # sites are downloaded before the WARC outgrows the limit.
    bulky = [
        LoopbackSite(
            pages={"/robots.txt": robots(f"User-agent: *\n# {os.urandom(20_000).hex()}\n", delay=0.1 * i)},
            links={"/": [f"/p{j}" for j in range(30)]},
        )
        for i in range(10)
    ]
    sites(*bulky)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    try:
        crawler = await crawl({"ROBOTSTXT_RECORD_DIR": str(tmp_path)}, urls=[site.url("/") for site in bulky])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert stat(crawler, "finish_reason") == "robotstxt_record_unwritable"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "compliance record" in errors[0], errors
    served = {site.url(path) for site in bulky for _, path in site.log if path != "/robots.txt"}
    recorded: set[str] = set()
    with gzip.open(next(tmp_path.glob("decisions-*"))) as lines, contextlib.suppress(EOFError):
        for line in lines:  # up to where the writing failed
            recorded.add(json.loads(line)["url"])
    assert served, "pages were downloaded before the disk was full"
    assert served <= recorded
    assert len(served) < 10 * 31, "the crawl stopped"
    assert stat(crawler, "robotstxt/fault/dropped") > 0


class SignallingSite(LoopbackSite):
    """Sends *signal_number* to this process's record writers when *path* is requested (SIGSTOP: then SIGCONT
    *stopped* seconds later)."""

    def __init__(self, path: str, signal_number: int, stopped: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.signal_at, self.signal_number, self.stopped = path, signal_number, stopped

    def render_GET(self, request):
        if request.uri.decode() == self.signal_at:
            from twisted.internet import reactor

            for pid in writing_processes():
                os.kill(pid, self.signal_number)
                if self.signal_number == signal.SIGSTOP:
                    reactor.callLater(self.stopped, os.kill, pid, signal.SIGCONT)
        return super().render_GET(request)


@pytest_twisted.ensureDeferred
async def test_a_writing_process_that_dies_stops_the_crawl_with_nothing_unrecorded(sites, tmp_path, caplog):
    """The record's writing process killed mid-crawl: the crawl stops with its own finish reason and one ERROR line,
    and every page the site served had its decision written before it was requested."""
    site = SignallingSite(
        "/p5",
        signal.SIGKILL,
        pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.02\n")},
        links={"/": [f"/p{i}" for i in range(40)]},
    )
    sites(site)
    crawler = await crawl({"ROBOTSTXT_RECORD_DIR": str(tmp_path)}, urls=[site.url("/")])
    assert stat(crawler, "finish_reason") == "robotstxt_record_unwritable"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "writing process" in errors[0], errors
    served = {site.url(path) for _, path in site.log if path != "/robots.txt"}
    assert site.url("/p5") in served  # decided before the kill, links may still be downloaded: they are on record
    assert served <= recorded_urls(tmp_path)


@pytest_twisted.ensureDeferred
async def test_a_stalled_record_keeps_the_crawl_delay_between_requests(sites, tmp_path):
    """The writing process stopped for 0.5 s mid-crawl, as a stalled disk stops it: the links found meanwhile wait
    for their decisions to be written, then go one Crawl-delay apart. Decisions were once written after the turn,
    so that one late batch released every turn that had passed meanwhile at once."""
    site = SignallingSite(
        "/p1",
        signal.SIGSTOP,
        stopped=0.5,
        pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.1\n")},
        links={"/": [f"/p{i}" for i in range(4)], "/p1": [f"/q{i}" for i in range(8)]},
    )
    sites(site)
    with collector_frozen():
        crawler = await crawl({"ROBOTSTXT_RECORD_DIR": str(tmp_path)}, urls=[site.url("/")])
    assert len(crawler.spider.crawled) == 13
    gaps = site.gaps()
    assert max(gaps) >= 0.25, gaps  # the links of /p1 waited for the stalled writer
    # Released together, they came a few ms apart; the server, on the crawl's reactor, notes arrivals late by up
    # to a busy turn of it.
    assert min(gaps) >= 0.05, gaps


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
@pytest_twisted.ensureDeferred
async def test_a_crawl_killed_mid_way_leaves_a_finished_record_that_verifies(sites, redis_server, tmp_path, capsys):
    """SIGKILL of the crawl's process: its writing process still writes every batch it was sent, ends the gzip
    stream and syncs, so the record holds the decision of every page served and verifies whole, no torn tail."""
    (site,) = sites(
        LoopbackSite(
            pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\nCrawl-delay: 0.05\n")},
            links={"/": [f"/p{i}" for i in range(60)] + ["/private/a"]},
        )
    )
    settings = json.dumps({"ROBOTSTXT_RECORD_DIR": str(tmp_path)})
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.redis_worker", redis_server.url, site.url("/")],
        cwd=ROOT,
        env={**os.environ, SETTINGS_VARIABLE: settings},
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):  # until 10 pages are served, 30 s at most
            if len(site.log) > 10:
                break
            await sleep(0.1)
    finally:
        worker.kill()
        worker.wait()
    (path,) = tmp_path.glob("decisions-*.jsonl.gz")
    for _ in range(100):
        if finished(path):
            break
        await sleep(0.1)
    served = {site.url(path) for _, path in site.log if path != "/robots.txt"}
    assert 10 <= len(served) < 61
    assert finished(path)
    assert served <= recorded_urls(tmp_path)
    code, out = verified(tmp_path, capsys)
    assert code == 0, out


def test_a_writing_process_whose_crawl_died_with_a_batch_unacknowledged_still_finishes_the_record(tmp_path):
    """The crawl killed between sending a batch and reading its acknowledgement: the acknowledgement's write fails
    (EPIPE), which once ended the process before it finished the files (no gzip trailer, verify exit 3)."""
    paths = [tmp_path / "robots.warc.gz", tmp_path / "decisions.jsonl.gz"]
    fds = [os.open(path, os.O_WRONLY | os.O_CREAT) for path in paths]
    writer = subprocess.Popen(pipe.command(fds, 10), stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=fds)
    for fd in fds:
        os.close(fd)
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdout.close()  # the crawl is gone
    batch = pickle.dumps(([], '{"url":"a"}\n'))
    writer.stdin.write(writer_frame.pack(len(batch)) + batch)
    writer.stdin.close()
    assert writer.wait(timeout=10) == 0
    assert finished(paths[1])
    with gzip.open(paths[1]) as lines:
        assert [json.loads(line) for line in lines] == [{"url": "a"}]


def test_entries_waiting_behind_a_batch_at_close_are_written_under_another_reactor(tmp_path):
    """Closed while a batch is being written and another entry waits: under a reactor whose waits resume at once
    (Deferreds, not asyncio's futures), close once ended the process's input before that entry was sent, losing
    it and reporting a failure of a record that had none."""
    script = f"""
import asyncio, gzip, json, sys
from pathlib import Path
from twisted.internet import selectreactor
selectreactor.install()
from twisted.internet import defer, reactor
from scrapy_robots_coccoc._record.journal import Journal

async def main():
    failures = []
    directory = Path({str(tmp_path)!r})
    paths = (directory / "robots.warc.gz", directory / "decisions.jsonl.gz")
    journal = Journal(paths, {{}}, 10, failures.append, 100)
    journal.add({{"url": "a"}})  # its batch is sent at once
    journal.add({{"url": "b"}})  # waits behind it
    await journal.close()
    lines = [json.loads(line)["url"] for line in gzip.open(paths[1])]
    print(json.dumps({{"failures": [str(failure) for failure in failures], "lines": lines}}))

defer.ensureDeferred(main()).addBoth(lambda result: (reactor.stop(), result)[1])
reactor.run()
"""
    assert run_python("-c", script) == {"failures": [], "lines": ["a", "b"]}


@pytest.mark.skipif(not REACTORLESS_SCRAPY, reason="Scrapy 2.15+ crawls without a reactor")
def test_a_crawl_without_a_reactor_writes_a_record_that_verifies(tmp_path, capsys):
    result = run_reactorless("0", "--record", str(tmp_path))
    assert result["crawled"] == ["/a", "/b", "/c"]
    assert sorted(entry["decision"] for entry in decisions(tmp_path)) == ["allowed"] * 3 + ["forbidden"]
    assert verified(tmp_path, capsys)[0] == 0


@pytest_twisted.ensureDeferred
async def test_a_directory_that_cannot_hold_the_record_stops_the_crawl_before_any_request(sites, tmp_path, caplog):
    (site,) = sites(site_with())
    blocked = tmp_path / "file"
    blocked.write_text("")
    crawler = await crawl({"ROBOTSTXT_RECORD_DIR": str(blocked / "record")}, urls=[site.url("/")])
    assert stat(crawler, "finish_reason") == "robotstxt_record_unwritable"
    assert site.paths() == []
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
