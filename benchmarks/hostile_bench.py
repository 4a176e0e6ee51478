"""Hostile-site benchmark: peak memory and reactor stalls of real crawls whose
robots.txt is hostile, with our middlewares and with Scrapy's stock
RobotsTxtMiddleware (Protego).

Each crawl starts from the home pages of two origins: a normal one (50 linked
pages) and a hostile one (10 linked pages), whose robots.txt is, by kind:

- ``gzip-bomb``: ``Content-Encoding: gzip`` (despite ``Accept-Encoding:
  identity``) that inflates to 1.25 GiB; generated once, streaming, and
  cached in the temporary directory;
- ``plain-10mb``: 10 MB of plain rules;
- ``shape-agents``: 500 KiB of 30,000 User-agent lines in one group;
- ``shape-line``: one 500 KiB line of ``user-agent:`` repeated;
- ``shape-stars``: 500 KiB of identical rules with 20 ``*`` each, against
  pages whose URLs hold 40 ``a``;
- ``lying-length``: ``Content-Length`` of 1 TB with a 33-byte body;
- ``redirect-zero``: two http redirects, then one to ``file:///dev/zero``
  (Scrapy 2.19's RedirectMiddleware does not follow it either; older ones do);
- ``no-answer``: never answers (``DOWNLOAD_TIMEOUT`` 2).

The sites run in a child process on 127.0.0.x; each crawl in a fresh process
under ``RLIMIT_AS`` of 4 GiB, killed when its RSS passes 3 GiB or when it has
not ended after 60 s. The crawling process measures its peak RSS growth
(``VmHWM`` minus its value before the crawl), the longest reactor stall (the
largest lateness of a 10 ms ``LoopingCall``) with the CPU time the process
spent during it (on a shared machine, the rest is waiting for a core), the
time from engine start to spider close, and the pages parsed. Figures are
medians of the rounds; the goals (RSS growth <= 100 MB, no stall over
0.25 s) are checked against our worst round.

    python benchmarks/hostile_bench.py [--rounds N] [--kinds gzip-bomb,no-answer] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import benchjson

KINDS = (
    "gzip-bomb",
    "plain-10mb",
    "shape-agents",
    "shape-line",
    "shape-stars",
    "lying-length",
    "redirect-zero",
    "no-answer",
)
MIDDLEWARES: dict[str, dict[str, int | None]] = {
    "ours": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_robots_coccoc.RobotsTxtMiddleware": 100,
        "scrapy_robots_coccoc.RobotsTxtBodyMiddleware": 595,
    },
    "stock": {},
}
NORMAL_HOST = "127.0.0.2"
NORMAL_PAGES, HOSTILE_PAGES = 50, 10
#: The one rule every hostile robots.txt that can be read carries: obeyed,
#: it leaves the hostile origin 9 pages.
RULES_HEAD = b"User-agent: *\nDisallow: /h9.html\n"
BOMB_BYTES = 5 * 2**28  # 1.25 GiB inflated: more than Scrapy's default DOWNLOAD_MAXSIZE
TEXT_BYTES = 500 * 1024
RSS_GOAL_MB, STALL_GOAL_S = 100.0, 0.25
PROBE_INTERVAL = 0.01
ADDRESS_SPACE_LIMIT = 4 * 2**30
RSS_KILL_BYTES = 3 * 2**30
CRAWL_TIMEOUT = 60.0


def hostile_host(kind: str) -> str:
    return f"127.0.0.{10 + KINDS.index(kind)}"


def bomb_file() -> Path:
    """The gzip bomb, generated on first use as a stream (1 MiB at a time)."""
    path = Path(tempfile.gettempdir()) / "scrapy-robots-coccoc-bench" / f"robots-bomb-{BOMB_BYTES}.gz"
    if path.exists():
        return path
    path.parent.mkdir(exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(2**20)
    with partial.open("wb") as out:
        out.write(compressor.compress(RULES_HEAD))
        for _ in range((BOMB_BYTES - len(RULES_HEAD)) // len(zeros)):
            out.write(compressor.compress(zeros))
        out.write(compressor.flush())
    partial.replace(path)
    return path


def fill(line: bytes, size: int, head: bytes = RULES_HEAD) -> bytes:
    """*head* followed by *line* repeated up to *size* bytes in all."""
    return head + line * ((size - len(head)) // len(line))


def robots_bodies() -> dict[str, bytes]:
    """The robots.txt body of each kind that sends one with a 200."""
    return {
        "gzip-bomb": bomb_file().read_bytes(),
        "plain-10mb": RULES_HEAD + b"".join(b"Disallow: /private/%07d/\n" % i for i in range(10**7 // 26)),
        "shape-agents": b"".join(b"User-agent:%05d\n" % i for i in range(30_000)) + RULES_HEAD,
        "shape-line": fill(b"user-agent:", TEXT_BYTES, b"") + b"\n",
        "shape-stars": fill(b"Disallow: /" + b"*a" * 20 + b"*b\n", TEXT_BYTES),
        "lying-length": RULES_HEAD,
    }


def response(status: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Connection: close", *(f"{name}: {value}" for name, value in headers.items())]
    if "Content-Length" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def page(path: str, pages: int, prefix: str, query: str) -> bytes:
    links = [f"/{prefix}{i}.html{query}" for i in range(1, pages)] if path == "/" else []
    hrefs = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return response("200 OK", {"Content-Type": "text/html"}, f"<html><body>{path}{hrefs}</body></html>".encode())


def answer(kind: str, path: str, base: str, bodies: dict[str, bytes]) -> bytes | None:
    """The bytes an origin of *kind* sends for *path*; None for no answer."""
    if kind == "normal":
        if path == "/robots.txt":
            return response("200 OK", {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
        return page(path, NORMAL_PAGES, "p", "")
    hops = {"/robots.txt": f"{base}/hop1", "/hop1": f"{base}/hop2", "/hop2": "file:///dev/zero"}
    if kind == "redirect-zero" and path in hops:
        return response("302 Found", {"Location": hops[path]}, b"")
    if path != "/robots.txt":
        return page(path, HOSTILE_PAGES, "h", "?q=" + "a" * 40)
    if kind == "no-answer":
        return None
    headers = {"Content-Type": "text/plain"}
    if kind == "gzip-bomb":
        headers["Content-Encoding"] = "gzip"
    elif kind == "lying-length":
        headers["Content-Length"] = str(10**12)
    return response("200 OK", headers, bodies[kind])


def serve() -> None:
    """Serve the normal origin and one hostile origin per kind, each on its
    own loopback address, until stdin closes; print their URLs as JSON."""
    from twisted.internet import reactor, stdio
    from twisted.internet.protocol import Factory, Protocol

    bodies = robots_bodies()

    class Origin(Protocol):
        def __init__(self, kind: str, base: str) -> None:
            self.kind, self.base = kind, base
            self.received = b""

        def dataReceived(self, data: bytes) -> None:
            if self.received.endswith(b"\r\n\r\n"):
                return  # one request per connection
            self.received += data
            if b"\r\n\r\n" not in self.received:
                return
            self.received = self.received[: self.received.index(b"\r\n\r\n") + 4]
            path = self.received.split(b" ", 2)[1].decode()
            reply = answer(self.kind, path, self.base, bodies)
            if reply is not None:
                self.transport.write(reply)
                self.transport.loseConnection()

    urls = {}
    for kind, host in [("normal", NORMAL_HOST), *((kind, hostile_host(kind)) for kind in KINDS)]:
        factory = Factory()
        port = reactor.listenTCP(0, factory, interface=host)
        urls[kind] = f"http://{host}:{port.getHost().port}"
        factory.protocol = lambda kind=kind, base=urls[kind]: Origin(kind, base)

    class StopOnClose(Protocol):
        def connectionLost(self, reason: object = None) -> None:
            reactor.stop()

    stdio.StandardIO(StopOnClose())
    print(json.dumps(urls), flush=True)
    reactor.run()


def high_water_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def crawl(middleware: str, kind: str, normal: str, hostile: str) -> None:
    """Run one crawl and print its figures as JSON."""
    from scrapy import Spider, signals
    from scrapy.crawler import CrawlerProcess
    from twisted.internet.task import LoopingCall

    class Bench(Spider):
        name = "hostile"
        start_urls = (f"{hostile}/", f"{normal}/")
        pages = 0

        def parse(self, response):
            self.pages += 1
            yield from response.follow_all(css="a")

    process = CrawlerProcess(
        {
            "ROBOTSTXT_OBEY": True,
            "DOWNLOADER_MIDDLEWARES": MIDDLEWARES[middleware],
            "DOWNLOAD_TIMEOUT": 2 if kind == "no-answer" else 10,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
        }
    )
    crawler = process.create_crawler(Bench)
    times = {"stall": 0.0, "stall_cpu": 0.0}
    probes: list[LoopingCall] = []  # made once the reactor Scrapy wants is installed

    def probe() -> None:
        now, cpu = time.perf_counter(), time.process_time()
        times["stall"] = max(times["stall"], now - times["last"] - PROBE_INTERVAL)
        times["stall_cpu"] = max(times["stall_cpu"], cpu - times["last_cpu"] - PROBE_INTERVAL)
        times["last"], times["last_cpu"] = now, cpu

    def started() -> None:
        times["started"] = times["last"] = time.perf_counter()
        times["last_cpu"] = time.process_time()
        probes.append(LoopingCall(probe))
        probes[0].start(PROBE_INTERVAL, now=False)

    def closed() -> None:
        times["closed"] = time.perf_counter()
        probes[0].stop()

    crawler.signals.connect(started, signal=signals.engine_started)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    baseline = high_water_kb()
    process.crawl(crawler)
    process.start()
    assert crawler.stats is not None and crawler.spider is not None
    print(
        json.dumps(
            {
                "rss_mb": (high_water_kb() - baseline) / 1024,
                "stall": times["stall"],
                "stall_cpu": times["stall_cpu"],
                "seconds": times["closed"] - times["started"],
                "pages": crawler.spider.pages,
                "finished": crawler.stats.get_value("finish_reason") == "finished",
            }
        )
    )


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:")), 0)
    except FileNotFoundError:
        return 0


@dataclass
class Result:
    rss_mb: float = 0.0
    stall: float = 0.0
    stall_cpu: float = 0.0
    seconds: float = 0.0
    pages: int = 0
    finished: bool = False
    #: Why the crawl has no figures of its own (killed, crashed); empty if it has.
    failure: str = ""


def run_one(middleware: str, kind: str, urls: dict[str, str]) -> Result:
    """Run one crawl in a fresh process, killed past the RSS or time bound."""
    command = [sys.executable, __file__, "crawl", middleware, kind, urls["normal"], urls[kind]]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, preexec_fn=limit_address_space)
        started = time.perf_counter()
        while child.poll() is None:
            elapsed, rss = time.perf_counter() - started, rss_bytes(child.pid)
            if rss > RSS_KILL_BYTES or elapsed > CRAWL_TIMEOUT:
                child.kill()
                child.wait()
                if rss > RSS_KILL_BYTES:
                    return Result(failure=f"killed at {rss / 2**30:.1f} GiB after {elapsed:.1f} s")
                return Result(failure=f"killed: no end after {CRAWL_TIMEOUT:.0f} s")
            time.sleep(0.05)
        out.seek(0)
        lines = out.read().decode().strip().splitlines()
        if child.returncode or not lines:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
            return Result(failure=f"crashed (exit {child.returncode}): {' '.join(tail)[:120]}")
        return Result(**json.loads(lines[-1]))


def summary(results: list[Result]) -> str:
    """Medians of the rounds with figures, and the failures of the others."""
    measured = [r for r in results if not r.failure]
    parts = []
    if measured:

        def median(key: str) -> float:
            return statistics.median(getattr(r, key) for r in measured)

        parts.append(
            f"{median('rss_mb'):6.1f} {median('stall'):5.2f}/{median('stall_cpu'):4.2f} {median('seconds'):5.2f}"
            f" {median('pages'):3.0f} {sum(r.finished for r in measured)}/{len(results)}"
        )
    parts.extend(sorted({r.failure for r in results if r.failure}))
    return "; ".join(parts)


def figures(results: list[Result]) -> dict[str, Any]:
    """The JSON of one kind and middleware: medians of the rounds with
    figures (None if none has), the failures, and every round."""
    measured = [r for r in results if not r.failure]
    keys = ("rss_mb", "stall", "stall_cpu", "seconds", "pages")
    return {
        "median": {key: statistics.median(getattr(r, key) for r in measured) for key in keys} if measured else None,
        "finished": sum(r.finished for r in measured),
        "failures": sorted({r.failure for r in results if r.failure}),
        "rounds": [asdict(r) for r in results],
    }


def goals(results: list[Result]) -> str:
    """Our worst round against the goals. A stall counts as ours when the
    process was busy for more than the goal during it; the rest of a longer
    stall is the process waiting for a core of the shared machine."""
    if any(r.failure for r in results):
        return "MISSED: no figures"
    rss = max(r.rss_mb for r in results)
    stall, stall_cpu = max(r.stall for r in results), max(r.stall_cpu for r in results)
    memory = "met" if rss <= RSS_GOAL_MB else "MISSED"
    if stall <= STALL_GOAL_S:
        reactor = "met"
    elif stall_cpu <= STALL_GOAL_S:
        reactor = "met (CPU)"
    else:
        reactor = "MISSED"
    return f"RSS {memory} ({rss:.0f} MB), stall {reactor} ({stall:.2f}/{stall_cpu:.2f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of: " + ", ".join(KINDS))
    benchjson.add_option(parser, "hostile_bench")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")

    server = subprocess.Popen([sys.executable, __file__, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    urls = json.loads(server.stdout.readline())
    results: dict[tuple[str, str], list[Result]] = {}
    begun = time.perf_counter()
    try:
        for round_ in range(args.rounds):
            order = list(MIDDLEWARES) if round_ % 2 == 0 else list(reversed(MIDDLEWARES))
            for kind in kinds:
                for middleware in order:
                    result = run_one(middleware, kind, urls)
                    results.setdefault((kind, middleware), []).append(result)
                    print(f"round {round_ + 1} {kind:13} {middleware:5} {summary([result])}", flush=True)
    finally:
        server.stdin.close()
        server.wait()

    print(
        f"\nmedians of {args.rounds} rounds ({time.perf_counter() - begun:.0f} s in all). Per middleware: RSS growth"
        " MB, longest reactor stall s / CPU s the process spent in it, time s, pages, crawls that ended by themselves."
        f" Goals (RSS growth <= {RSS_GOAL_MB:.0f} MB, stall <= {STALL_GOAL_S} s) against our worst round;"
        " 'met (CPU)': the stall was longer, but the process was busy for less than the goal during it."
    )
    print(f"{'kind':13} | {'ours':32} | {'stock':32} | ours vs goals")
    for kind in kinds:
        ours, stock = results[(kind, "ours")], results[(kind, "stock")]
        print(f"{kind:13} | {summary(ours):32} | {summary(stock):32} | {goals(ours)}")
    benchjson.write(
        args.json,
        "hostile_bench",
        {
            "rounds": args.rounds,
            "rss_goal_mb": RSS_GOAL_MB,
            "stall_goal_s": STALL_GOAL_S,
            "rss_kill_mb": RSS_KILL_BYTES / 2**20,
            "crawl_timeout_s": CRAWL_TIMEOUT,
        },
        {"kinds": {kind: {m: figures(results[(kind, m)]) for m in MIDDLEWARES} for kind in kinds}},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve()
    elif sys.argv[1:2] == ["crawl"]:
        crawl(*sys.argv[2:6])
    else:
        main()
