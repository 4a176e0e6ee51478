"""Politeness benchmark: the targets of issue 28 measured in real crawls of
loopback sites, with scrapy-redis workers sharing a real redis-server.

- ``backoff``: 3 scrapy-redis workers sharing a RedisStore crawl 13 sites of
  150 pages, every URL seeded and split among them. In the ``incident``
  crawl the first site (the busy one) answers its 20th page request with 429
  and ``Retry-After: 3``; in the ``calm`` crawl it never does. Figures, from
  the sites' own log: the requests of the busy site that reached it within
  3 s after the 429, from any worker (and, from the workers, when each
  learned of the pause, which of those requests it sent before and after,
  and when its reactor stalled), and the other 12 sites' pages per second,
  incident / calm.
- ``before-queue``: one site of 200 pages, each linking to 2 allowed pages
  and to 50 URLs that its robots.txt forbids (50 new ones on each page),
  crawled from its first pages with RobotsTxtSpiderMiddleware (which the
  add-on enables) and without it (``SPIDER_MIDDLEWARES`` None): by one
  process with Scrapy's own scheduler, and by 3 scrapy-redis workers.
  Figures: requests enqueued, forbidden ones among them, the peak size of
  the scheduler (exact for Scrapy's; the shared queue's ZCARD sampled every
  5 ms for scrapy-redis), and the Redis commands issued (INFO commandstats
  before and after, less the sampler's own).
- ``store-cost``: 3 scrapy-redis workers crawl 40 origins x 100 pages
  without Crawl-delay (crawl_bench.py's sites, every URL seeded), with the
  Redis store and with the in-memory store, from the package under test and,
  with ``--baseline DIR``, from the package of another work tree (such as a
  commit from before the backoff: ``git worktree add /tmp/bench-old
  87ae051``). Figures: pages per second of the whole cluster, and pages per
  CPU second of the workers and the redis-server together (steadier on a
  machine shared with other work).

Every crawl enables ``scrapy_robots_coccoc.Addon``, each worker runs in a
fresh process, and the sites run in a child process of their own. Rounds
rotate the configurations; figures are medians, with the spread of the
rounds. ``--package DIR`` imports the package under test from DIR (a clean
work tree of the commit to measure) instead of the installed one; each
worker reports the file it imported, and the run stops if it is not the
one asked for. Needs redis-server on the PATH.

    python benchmarks/politeness_bench.py [--rounds N] [--targets backoff,before-queue,store-cost]
        [--package DIR] [--baseline DIR] [--corpus DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import benchjson
import corpus
from crawl_bench import ALL_PATHS, links_of
from redis_bench import wait_for_redis

WORKERS = 3
TARGETS = ("backoff", "before-queue", "store-cost")
SPIDER = "politeness"
QUEUE_KEY = f"{SPIDER}:requests"  # scrapy-redis's default SCHEDULER_QUEUE_KEY for this spider

# backoff: one busy site and the others, each of PAGES pages.
BUSY_HOST = "127.0.28.1"
OTHER_HOSTS = [f"127.0.28.{n}" for n in range(2, 14)]
PAGES = 150
INCIDENT_AT = 20  # the busy site's page request answered with 429
RETRY_AFTER = 3

# before-queue: one site whose pages each link to 2 allowed pages and 50 forbidden URLs.
LINKS_HOST = "127.0.29.1"
LINK_PAGES = 200
FORBIDDEN_LINKS = 50

# store-cost: crawl_bench.py's sites, 40 origins x 100 pages.
COST_HOSTS = [f"127.0.30.{n}" for n in range(1, 41)]

STORES = {"memory": "scrapy_robots_coccoc.stores.MemoryStore", "redis": "scrapy_robots_coccoc.stores.RedisStore"}
SPIDER_MIDDLEWARE = "scrapy_robots_coccoc.RobotsTxtSpiderMiddleware"
ROBOTS_TXT = b"User-agent: *\nDisallow: /private/\n"
_PAGE = re.compile(r"/p([0-9]+)\.html")


# ---------------------------------------------------------------- the sites


def serve(port: int, folder: Path | None) -> None:
    """Serve every site on *port* of its own loopback address until stdin closes. Commands on stdin, one a
    line, each answered by one line: ``round {json}`` starts a crawl's log afresh (``incident_at``: the busy
    site's page request answered with 429, 0 for none; ``log``: whether to log requests; ``done_file``: a file
    written once every page of the links site has been asked for), ``log`` answers with the log as JSON."""
    from twisted.internet import reactor, stdio
    from twisted.protocols.basic import LineReceiver
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    bodies = [corpus.unpaced(body) for _, body in corpus.load(folder)]
    state: dict[str, Any] = {}

    def new_round(options: dict[str, Any]) -> None:
        state.update(
            incident_at=options.get("incident_at", 0),
            logging=options.get("log", False),
            done_file=options.get("done_file"),
            busy_pages=0,
            t429=None,
            log=[],
            link_pages=set(),
        )

    new_round({})

    def page(title: str, links: list[str]) -> bytes:
        hrefs = "".join(f'<a href="{link}">{link}</a>' for link in links)
        return f"<html><body><h1>{title}</h1>{hrefs}</body></html>".encode()

    class Pages(Resource):
        isLeaf = True

        def __init__(self, kind: str, robots_txt: bytes) -> None:
            super().__init__()
            self.kind = kind
            self.robots_txt = robots_txt

        def render_GET(self, request):
            now = time.time()
            path = request.path.decode()
            status = 200
            if path == "/robots.txt":
                request.setHeader(b"Content-Type", b"text/plain")
                body = self.robots_txt
            elif self.kind == "links":
                body = self.links_page(path)
            elif self.kind == "cost":
                body = page(path, links_of(path))
            else:
                body = page(path, [])
                if self.kind == "busy":
                    state["busy_pages"] += 1
                    if state["busy_pages"] == state["incident_at"]:
                        status, state["t429"] = 429, now
                        request.setResponseCode(429)
                        request.setHeader(b"Retry-After", str(RETRY_AFTER).encode())
            if state["logging"]:
                worker = request.getHeader("X-Bench-Worker")
                state["log"].append((round(now, 4), self.kind, path, status, worker))
            return body

        def links_page(self, path: str) -> bytes:
            match = _PAGE.fullmatch(path)
            if match is None:
                return page(path, [])  # a forbidden URL fetched: the log shows it
            index = int(match[1])
            state["link_pages"].add(index)
            if len(state["link_pages"]) == LINK_PAGES and state["done_file"]:
                Path(state["done_file"]).touch()
            allowed = [f"/p{(2 * index + n) % LINK_PAGES}.html" for n in (1, 2)]
            forbidden = [f"/private/{index}/{n}.html" for n in range(FORBIDDEN_LINKS)]
            return page(path, allowed + forbidden)

    sites = [(BUSY_HOST, Pages("busy", ROBOTS_TXT)), (LINKS_HOST, Pages("links", ROBOTS_TXT))]
    sites += [(host, Pages("other", ROBOTS_TXT)) for host in OTHER_HOSTS]
    sites += [(host, Pages("cost", bodies[index % len(bodies)])) for index, host in enumerate(COST_HOSTS)]
    for host, resource in sites:
        reactor.listenTCP(port, Site(resource), interface=host)

    class Control(LineReceiver):
        delimiter = b"\n"

        def lineReceived(self, line: bytes) -> None:
            command, _, argument = line.decode().partition(" ")
            if command == "round":
                new_round(json.loads(argument))
                self.sendLine(b"ok")
            elif command == "log":
                self.sendLine(json.dumps({"t429": state["t429"], "log": state["log"]}).encode())

        def connectionLost(self, reason=None) -> None:
            reactor.stop()

    stdio.StandardIO(Control())
    print("ready", flush=True)
    reactor.run()


class Sites:
    """The sites' process, and the commands it takes."""

    def __init__(self, port: int, folder: Path | None) -> None:
        command = [sys.executable, __file__, "serve", str(port), *([str(folder)] if folder else [])]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = port
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("the sites did not start")

    def _ask(self, line: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline()

    def new_round(self, **options: Any) -> None:
        self._ask("round " + json.dumps(options))

    def log(self) -> dict[str, Any]:
        return json.loads(self._ask("log"))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"


# ---------------------------------------------------------------- a worker


def worker(config_text: str) -> None:
    """Run one crawl as *config_text* (JSON) asks and print its figures as JSON on the last line."""
    config = json.loads(config_text)
    from scrapy import Request, Spider, signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.exceptions import DontCloseSpider

    import scrapy_robots_coccoc

    busy = config.get("busy_host")
    busy_origin = f"http://{busy}" if busy else None
    counts: dict[str, list[float]] = {}  # group -> [pages, first response, last response]
    sends: list[float] = []  # when this worker handed a busy-site request to the download handler
    seen: dict[str, Any] = {
        "t429": None,
        "paused_at": None,
        "known_at": None,
        "scheduled": 0,
        "forbidden_scheduled": 0,
        "stalls": [],
    }

    class Bench(Spider):
        name = SPIDER

        async def start(self):
            for url in config["urls"]:
                yield Request(url)  # dont_filter False: the shared dupefilter sees start URLs too

        def parse(self, response):
            now = time.time()
            group = "busy" if busy and response.url.startswith(busy_origin) else "other"
            count = counts.setdefault(group, [0, now, now])
            count[0] += 1
            count[2] = now
            if config.get("follow"):
                yield from response.follow_all(css="a")

    class SendLog:
        """Last of the downloader middlewares: when each busy-site request enters Scrapy's downloader (its slot
        may still queue it)."""

        def process_request(self, request, spider=None):
            if request.url.startswith(busy_origin):
                sends.append(time.time())
                # Whether Scrapy's slot will queue it: no transfer place free, or its delay not run out.
                downloader = crawler.engine.downloader
                slot = downloader.slots.get(downloader.get_slot_key(request))
                busy_slot = slot is not None and (
                    slot.latercall is not None or len(slot.transferring) + len(slot.queue) >= slot.concurrency
                )
                trace.setdefault(request.url, []).append({"mw": time.time(), "slot_busy": busy_slot})

    # Per busy-site URL, one entry per attempt: "mw" when it passed the last downloader middleware, "wire" when
    # the download handler was called (it left the slot: in flight), "answer" when its response was downloaded.
    trace: dict[str, list[dict[str, float]]] = {}

    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

    def traced(request) -> None:
        if busy_origin and request.url.startswith(busy_origin):
            attempts = trace.setdefault(request.url, [{}])
            attempts[-1]["wire"] = time.time()

    if inspect.iscoroutinefunction(HTTP11DownloadHandler.download_request):

        class TracedHandler(HTTP11DownloadHandler):
            async def download_request(self, request):
                traced(request)
                return await super().download_request(request)

    else:  # Scrapy before 2.14: download_request(request, spider) returns a Deferred

        class TracedHandler(HTTP11DownloadHandler):
            def download_request(self, request, spider):
                traced(request)
                return super().download_request(request, spider)

    if busy:
        # The first time this process learns of the busy site's pause (its own 429, or a peer's through Redis).
        from scrapy_robots_coccoc._crawl import pacing as _pacing

        original_pause = _pacing.Pauses.pause

        def noting_pause(self, origin, until):
            if origin.startswith(busy_origin) and seen["known_at"] is None:
                seen["known_at"] = time.time()
            return original_pause(self, origin, until)

        _pacing.Pauses.pause = noting_pause

    settings: dict[str, Any] = {
        "ADDONS": {"scrapy_robots_coccoc.Addon": 0},
        "ROBOTSTXT_USER_AGENT": "coccocbot-web",
        "ROBOTSTXT_STORE": STORES[config["store"]],
        "CONCURRENT_REQUESTS": 32,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 30,
        "DEFAULT_REQUEST_HEADERS": {
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "Accept-Language": "en",
            "X-Bench-Worker": str(config["worker"]),
        },
    }
    if config["redis_url"]:
        settings.update(
            SCHEDULER="scrapy_redis.scheduler.Scheduler",
            DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter",
            SCHEDULER_PERSIST=True,
            REDIS_URL=config["redis_url"],
        )
    else:
        from scrapy.core.scheduler import Scheduler

        class PeakScheduler(Scheduler):
            """Scrapy's scheduler, noting the most requests it held at once."""

            peak = 0

            def enqueue_request(self, request):
                queued = super().enqueue_request(request)
                PeakScheduler.peak = max(PeakScheduler.peak, len(self))
                return queued

        settings["SCHEDULER"] = PeakScheduler
    if not config.get("spider_middleware", True):
        settings["SPIDER_MIDDLEWARES"] = {SPIDER_MIDDLEWARE: None}
    settings.update(config.get("extra_settings") or {})
    if busy:
        settings["DOWNLOADER_MIDDLEWARES"] = {SendLog: 1000}
        settings["DOWNLOAD_HANDLERS"] = {"http": TracedHandler}

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Bench)

    def scheduled(request, spider=None):
        seen["scheduled"] += 1
        seen["forbidden_scheduled"] += "/private/" in request.url

    crawler.signals.connect(scheduled, signal=signals.request_scheduled)

    if busy:

        def downloaded(response, request, spider=None):
            if response.status == 429 and seen["t429"] is None:
                seen["t429"] = time.time()
            if request.url.startswith(busy_origin) and trace.get(request.url):
                trace[request.url][-1]["answer"] = time.time()

        crawler.signals.connect(downloaded, signal=signals.response_downloaded)

        ticks = [0.0]

        def probe() -> None:
            """Note when this worker first sees the busy site paused (asked of the middleware's backoff), and
            when its reactor ran this 10 ms call over 0.1 s late (a stall: a loaded machine, a long turn)."""
            from scrapy_robots_coccoc.middleware import of_crawler

            now = time.time()
            if ticks[0] and now - ticks[0] > 0.1:
                seen["stalls"].append([ticks[0], now])
            ticks[0] = now
            backoff = getattr(of_crawler(crawler), "_backoff", None)
            if seen["paused_at"] is None and backoff is not None and backoff.paused(busy_origin):
                seen["paused_at"] = time.time()

        probing: list[Any] = []

        def start_probing() -> None:
            from twisted.internet.task import LoopingCall

            # Made now: made before the crawl, it would install Twisted's default reactor.
            probing.append(LoopingCall(probe))
            probing[0].start(0.01)  # its Deferred fires at stop: not returned, or the engine would wait for it

        def stop_probing() -> None:
            if probing and probing[0].running:
                probing[0].stop()

        crawler.signals.connect(start_probing, signal=signals.engine_started, weak=False)
        crawler.signals.connect(stop_probing, signal=signals.engine_stopped, weak=False)

    done_file = config.get("done_file")
    if done_file:

        def keep_open(spider=None):
            # Until every page of the site was asked for: an idle worker polls the queue at each heartbeat.
            if not os.path.exists(done_file):
                raise DontCloseSpider

        crawler.signals.connect(keep_open, signal=signals.spider_idle, weak=False)

    cpu_started: list[float] = []
    crawler.signals.connect(lambda: cpu_started.append(time.process_time()), signal=signals.engine_started, weak=False)
    started = time.time()
    process.crawl(crawler)
    process.start()
    cpu = time.process_time() - cpu_started[0]  # every thread of the worker, from the engine's start to its end
    stats = {key: value for key, value in crawler.stats.get_stats().items() if isinstance(value, int | float)}
    print(
        json.dumps(
            {
                "package": scrapy_robots_coccoc.__file__,
                "worker": config["worker"],
                "counts": counts,
                "seconds": time.time() - started,
                "cpu": cpu,
                "stats": stats,
                "sends": sends,
                "peak": settings["SCHEDULER"].peak if not config["redis_url"] else None,
                "trace": trace,
                **seen,
            }
        )
    )


# ---------------------------------------------------------------- running crawls


class Cluster:
    """Runs the workers of one crawl, from the package of a given work tree."""

    def __init__(self, sites: Sites, redis_url: str, redis_pid: int | None = None) -> None:
        self.sites = sites
        self.redis_url = redis_url
        self.redis_pid = redis_pid
        self.stall: tuple[float, float] | None = None  # (after, seconds): redis-server stopped that long
        self.stalled_at: float | None = None

    def run(self, configs: list[dict[str, Any]], tree: Path | None) -> list[dict[str, Any]]:
        env = dict(os.environ)
        if tree is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
        self.stalled_at = None
        if self.stall is not None and self.redis_pid is not None:
            threading.Thread(target=self._stall_redis, args=self.stall, daemon=True).start()
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "worker", json.dumps(config)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for config in configs
        ]
        results = []
        for proc in procs:
            out, err = proc.communicate()
            if proc.returncode:
                raise SystemExit(f"a worker failed:\n{err[-3000:]}")
            result = json.loads(out.strip().splitlines()[-1])
            # Our WARNING lines (a Redis store unreachable or slow, a store call failed), not scrapy-redis's own.
            result["warnings"] = [line for line in err.splitlines() if "WARNING" in line and "scrapy_redis" not in line]
            if tree is not None and not result["package"].startswith(str(tree)):
                raise SystemExit(f"the worker imported {result['package']}, not the package of {tree}")
            results.append(result)
        return results

    def _stall_redis(self, after: float, seconds: float) -> None:
        """Stop the redis-server (ours) for *seconds*, *after* seconds from now: a server starved of CPU."""
        import signal

        time.sleep(after)
        self.stalled_at = time.time()
        os.kill(self.redis_pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(self.redis_pid, signal.SIGCONT)


def redis_client(url: str):
    import redis

    return redis.Redis.from_url(url)


def redis_cpu(url: str) -> float:
    """CPU seconds the redis-server has used so far."""
    info = redis_client(url).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def command_calls(url: str) -> dict[str, int]:
    stats = redis_client(url).info("commandstats")
    return {key.removeprefix("cmdstat_"): value["calls"] for key, value in stats.items()}


class QueueSampler(threading.Thread):
    """The most requests the shared scrapy-redis queue held, by ZCARD every *interval* seconds."""

    def __init__(self, url: str, interval: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.client = redis_client(url)
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.peak = max(self.peak, self.client.zcard(QUEUE_KEY))
            self.samples += 1
            self.stopping.wait(self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join()


def summary(values: list[float], digits: int = 3) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "rounds": [round(value, digits) for value in values],
    }


def rotated(names: list[str], round_: int) -> list[str]:
    shift = round_ % len(names)
    return names[shift:] + names[:shift]


def split(urls: list[str]) -> list[list[str]]:
    return [urls[n::WORKERS] for n in range(WORKERS)]


# ---------------------------------------------------------------- backoff


def backoff_crawl(
    cluster: Cluster, tree: Path | None, incident: bool, pages: int, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    sites = cluster.sites
    redis_client(cluster.redis_url).flushall()
    sites.new_round(incident_at=INCIDENT_AT if incident else 0, log=True)
    hosts = [BUSY_HOST, *OTHER_HOSTS]
    urls = [sites.url(host, f"/p{page}.html") for page in range(pages) for host in hosts]
    busy_host = f"{BUSY_HOST}:{sites.port}"
    configs = [
        {
            "worker": n,
            "store": "redis",
            "redis_url": cluster.redis_url,
            "urls": share,
            "busy_host": busy_host,
            "extra_settings": extra,
        }
        for n, share in enumerate(split(urls))
    ]
    results = cluster.run(configs, tree)
    served = sites.log()
    log, t429 = served["log"], served["t429"]
    others = [t for t, kind, path, status, _ in log if kind == "other" and path != "/robots.txt" and status == 200]
    figures: dict[str, Any] = {
        "other_pages": len(others),
        "other_rate": len(others) / (max(others) - min(others)),
        "pages": sum(count[0] for result in results for count in result["counts"].values()),
        "incidents": sum(result["stats"].get("robotstxt/backoff/incidents", 0) for result in results),
        "waited": sum(result["stats"].get("robotstxt/backoff/waited", 0) for result in results),
    }
    if not incident:
        return figures
    if t429 is None:
        raise SystemExit("the busy site sent no 429")
    busy = [(t, path, status, who) for t, kind, path, status, who in log if kind == "busy" and path != "/robots.txt"]
    at = next(index for index, entry in enumerate(busy) if entry[2] == 429)
    answered = busy[at][3]
    after = busy[at + 1 :]
    within = [(t - t429, who) for t, _, _, who in after if t - t429 < RETRY_AFTER]
    later = [t - t429 for t, *_ in after if t - t429 >= RETRY_AFTER]
    # From the workers: when each learned of the pause (its backoff, probed every 10 ms), and the busy
    # site's requests it sent within the pause, before and after it learned.
    learned: dict[str, float | None] = {}
    sent_before_learning, sent_after_learning = [], []
    stalls: dict[str, list[list[float]]] = {}
    warnings: dict[str, list[str]] = {}
    for result in results:
        who = str(result["worker"])
        warnings[who] = result["warnings"]
        stalls[who] = [
            [round(begin - t429, 3), round(end - t429, 3)]
            for begin, end in result["stalls"]
            if end > t429 - 0.5 and begin < t429 + RETRY_AFTER
        ]
        known = None if result["paused_at"] is None else result["paused_at"] - t429
        learned[who] = None if known is None else round(known, 4)
        for sent in result["sends"]:
            offset = sent - t429
            if 0 < offset < RETRY_AFTER:
                late = known is not None and offset > known
                (sent_after_learning if late else sent_before_learning).append([round(offset, 4), who])
    # Each request the site saw within the pause, from the sending worker's trace: in flight before that worker
    # knew of the pause (unavoidable), or left it after it knew ("late": from Scrapy's slot queue if it entered
    # the downloader before, else let through by the middleware after).
    by_worker = {str(result["worker"]): result for result in results}
    classified = []
    for t, path, _, who in after:
        if t - t429 >= RETRY_AFTER:
            continue
        result = by_worker.get(str(who))
        known = None if result is None else result.get("known_at")
        attempts = [] if result is None else result["trace"].get(sites.url(BUSY_HOST, path), [])
        wired = [a for a in attempts if "wire" in a and a["wire"] <= t + 0.001]
        attempt = max(wired, key=lambda a: a["wire"]) if wired else {}
        wire, mw, slot_busy = attempt.get("wire"), attempt.get("mw"), attempt.get("slot_busy")
        if wire is None or known is None:
            kind = "unknown"
        elif wire < known:
            kind = "in_flight"
        elif mw is not None and mw < known:
            kind = "late_from_slot_queue"
        else:
            kind = "late_from_middleware"
        classified.append(
            {
                "at": round(t - t429, 4),
                "worker": who,
                "path": path,
                "kind": kind,
                "mw": None if mw is None else round(mw - t429, 4),
                "wire": None if wire is None else round(wire - t429, 4),
                "known": None if known is None else round(known - t429, 4),
                "slot_busy": slot_busy,
            }
        )
    figures.update(
        {
            "classified": classified,
            "redis_stalled_at": None if cluster.stalled_at is None else round(cluster.stalled_at - t429, 3),
            "t429_since_start": round(t429 - min(t for t, *_ in log), 3),
            "late": sum(entry["kind"].startswith("late") for entry in classified),
            "known_offsets": {
                str(r["worker"]): None if r.get("known_at") is None else round(r["known_at"] - t429, 4) for r in results
            },
            "within": len(within),
            "within_from_answered_worker": sum(who == answered for _, who in within),
            "within_offsets": [round(offset, 4) for offset, _ in within],
            "within_workers": [who for _, who in within],
            "answered_worker": answered,
            "first_after_seconds": round(min(later), 4) if later else None,
            "learned_offsets": learned,
            "stalls": stalls,
            "warnings": warnings,
            "sent_before_learning": sorted(sent_before_learning),
            "sent_after_learning": sorted(sent_after_learning),
            "received_offset": next(
                (round(result["t429"] - t429, 4) for result in results if result["t429"] is not None), None
            ),
        }
    )
    return figures


def run_backoff(
    cluster: Cluster, tree: Path | None, rounds: int, pages: int, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    names = ["incident", "calm"]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in rotated(names, round_):
            result = backoff_crawl(cluster, tree, name == "incident", pages, extra)
            runs[name].append(result)
            line = f"backoff round {round_ + 1} {name:8} other sites {result['other_rate']:4.0f} pages/s"
            if name == "incident":
                line += (
                    f"; busy site requests within {RETRY_AFTER} s after the 429: {result['within']} "
                    f"at {result['within_offsets']} s (workers {result['within_workers']}, the 429 went to "
                    f"{result['answered_worker']}); workers learned at {result['learned_offsets']} s; "
                    f"sent within it before learning {result['sent_before_learning']}, "
                    f"after {result['sent_after_learning']}; next request at {result['first_after_seconds']} s; "
                    f"reactor stalls over 0.1 s around it {result['stalls']}; warnings {result['warnings']}"
                )
                if result["redis_stalled_at"] is not None:
                    line += f"\n    redis-server stopped at {result['redis_stalled_at']} s from the 429"
                line += (
                    f"\n    429 at {result['t429_since_start']} s into the crawl; knew at {result['known_offsets']};"
                    f" late (left after knowing): {result['late']}"
                )
                for entry in result["classified"]:
                    line += f"\n    {entry}"
            print(line, flush=True)
    incident = [r["other_rate"] for r in runs["incident"]]
    calm = [r["other_rate"] for r in runs["calm"]]
    paired = [a / b for a, b in zip(incident, calm, strict=True)]
    within = [r["within"] for r in runs["incident"]]
    learned = [v for r in runs["incident"] for v in r["learned_offsets"].values() if v is not None]
    figures = {
        "requests_within": summary(within, 0),
        "requests_within_from_other_workers": summary(
            [r["within"] - r["within_from_answered_worker"] for r in runs["incident"]], 0
        ),
        "sent_after_learning": sum(len(r["sent_after_learning"]) for r in runs["incident"]),
        "late": summary([r["late"] for r in runs["incident"]], 0),
        "in_flight": summary([sum(e["kind"] == "in_flight" for e in r["classified"]) for r in runs["incident"]], 0),
        "known_seconds": summary(
            [
                v
                for r in runs["incident"]
                for w, v in r["known_offsets"].items()
                if v is not None and w != r["answered_worker"]
            ]
        ),
        "learned_seconds": summary(learned),
        "first_after_seconds": summary([r["first_after_seconds"] for r in runs["incident"]]),
        "other_rate_incident": summary(incident, 1),
        "other_rate_calm": summary(calm, 1),
        "other_rate_ratio": round(statistics.median(incident) / statistics.median(calm), 3),
        "other_rate_ratio_paired": summary(paired),
        "runs": runs,
    }
    print(
        f"backoff: requests of the busy site within {RETRY_AFTER} s after the 429 (median of {rounds}): "
        f"{statistics.median(within):.0f} (rounds {within}), {figures['sent_after_learning']} sent by a worker "
        f"that knew of the pause; left a worker that knew: {figures['late']['rounds']}; in flight: "
        f"{figures['in_flight']['rounds']}; peers knew after {figures['known_seconds']['median']} s;"
        f" other sites' pages/s incident / calm: {figures['other_rate_ratio']:.3f} "
        f"(rounds' own ratios {[round(p, 3) for p in paired]})",
        flush=True,
    )
    return figures


# ---------------------------------------------------------------- before-queue


def before_queue_crawl(cluster: Cluster, tree: Path | None, shared: bool, filtering: bool) -> dict[str, Any]:
    sites = cluster.sites
    redis_client(cluster.redis_url).flushall()
    with tempfile.TemporaryDirectory() as folder:
        done_file = os.path.join(folder, "done")
        sites.new_round(log=True, done_file=done_file if shared else None)
        base = {"store": "redis" if shared else "memory", "follow": True, "spider_middleware": filtering}
        if shared:
            # Each worker starts from one of the first pages; idle, it keeps polling the queue until every
            # page of the site was asked for.
            configs = [
                {
                    **base,
                    "worker": n,
                    "redis_url": cluster.redis_url,
                    "done_file": done_file,
                    "urls": [sites.url(LINKS_HOST, f"/p{n}.html")],
                }
                for n in range(WORKERS)
            ]
        else:
            configs = [{**base, "worker": 0, "redis_url": None, "urls": [sites.url(LINKS_HOST, "/p0.html")]}]
        sampler = QueueSampler(cluster.redis_url) if shared else None
        before = command_calls(cluster.redis_url)
        if sampler:
            sampler.start()
        started = time.time()
        results = cluster.run(configs, tree)
        seconds = time.time() - started
        if sampler:
            sampler.stop()
        calls = command_calls(cluster.redis_url)
    commands = {name: calls[name] - before.get(name, 0) for name in calls}
    commands = {name: count for name, count in commands.items() if count and name != "info"}
    if sampler:
        commands["zcard"] = commands.get("zcard", 0) - sampler.samples
    log = sites.log()["log"]

    def total(key: str) -> int:
        return sum(result["stats"].get(key, 0) for result in results)

    forbidden = total("robotstxt/forbidden")
    before_queue = total("robotstxt/forbidden/before_queue")
    return {
        "pages": sum(count[0] for result in results for count in result["counts"].values()),
        "seconds": round(seconds, 3),
        "cpu": round(sum(result["cpu"] for result in results), 3),
        "enqueued": total("scheduler/enqueued/redis") if shared else total("scheduler/enqueued"),
        "scheduled": sum(result["scheduled"] for result in results),
        "forbidden_enqueued": sum(result["forbidden_scheduled"] for result in results),
        "forbidden_before_queue": before_queue,
        "forbidden_at_downloader": forbidden - before_queue,
        "forbidden_fetched": sum("/private/" in path for _, kind, path, _, _ in log if kind == "links"),
        "peak_queue": sampler.peak if sampler else max(result["peak"] for result in results),
        "redis_commands": sum(commands.values()) if shared else None,
        "redis_command_calls": commands if shared else None,
    }


def run_before_queue(cluster: Cluster, tree: Path | None, rounds: int) -> dict[str, Any]:
    names = ["single/filter", "single/no-filter", "redis/filter", "redis/no-filter"]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in rotated(names, round_):
            mode, _, filtering = name.partition("/")
            result = before_queue_crawl(cluster, tree, mode == "redis", filtering == "filter")
            runs[name].append(result)
            print(
                f"before-queue round {round_ + 1} {name:16} {result['pages']} pages, {result['enqueued']} enqueued "
                f"({result['forbidden_enqueued']} forbidden), peak queue {result['peak_queue']}, "
                f"{result['forbidden_before_queue']} dropped before queueing, "
                f"{result['forbidden_at_downloader']} at the downloader, {result['forbidden_fetched']} fetched, "
                f"Redis commands {result['redis_commands']}, {result['seconds']:.1f} s, {result['cpu']:.1f} s CPU",
                flush=True,
            )
    keys = (
        "pages",
        "enqueued",
        "forbidden_enqueued",
        "forbidden_before_queue",
        "forbidden_at_downloader",
        "forbidden_fetched",
        "peak_queue",
        "redis_commands",
        "seconds",
        "cpu",
    )
    medians: dict[str, dict[str, Any]] = {
        name: {key: statistics.median(r[key] for r in runs[name]) for key in keys if runs[name][0][key] is not None}
        for name in names
    }
    for name in ("redis/filter", "redis/no-filter"):
        commands = sorted({command for r in runs[name] for command in r["redis_command_calls"]})
        medians[name]["redis_command_calls"] = {
            command: statistics.median(r["redis_command_calls"].get(command, 0) for r in runs[name])
            for command in commands
        }
    for mode in ("single", "redis"):
        on, off = medians[f"{mode}/filter"], medians[f"{mode}/no-filter"]
        commands = (
            f"; Redis commands {on['redis_commands']:.0f} / {off['redis_commands']:.0f}" if mode == "redis" else ""
        )
        print(
            f"before-queue {mode}: with / without the filter: enqueued {on['enqueued']:.0f} / {off['enqueued']:.0f}; "
            f"forbidden enqueued {on['forbidden_enqueued']:.0f} / {off['forbidden_enqueued']:.0f}; "
            f"peak queue {on['peak_queue']:.0f} / {off['peak_queue']:.0f}{commands}",
            flush=True,
        )
    return {"medians": medians, "runs": runs}


# ---------------------------------------------------------------- store-cost


def cost_crawl(cluster: Cluster, tree: Path | None, store: str, pages: int) -> dict[str, float]:
    sites = cluster.sites
    redis_client(cluster.redis_url).flushall()
    sites.new_round()
    urls = [sites.url(host, path) for path in ALL_PATHS[:pages] for host in COST_HOSTS]
    configs = [
        {"worker": n, "store": store, "redis_url": cluster.redis_url, "urls": share}
        for n, share in enumerate(split(urls))
    ]
    redis_before = redis_cpu(cluster.redis_url)
    results = cluster.run(configs, tree)
    redis_seconds = redis_cpu(cluster.redis_url) - redis_before
    counts = [result["counts"]["other"] for result in results if "other" in result["counts"]]
    crawled = sum(count[0] for count in counts)
    span = max(count[2] for count in counts) - min(count[1] for count in counts)
    cpu = sum(result["cpu"] for result in results)
    return {
        "pages": crawled,
        "rate": crawled / span,
        "seconds": span,
        "workers_cpu": cpu,
        "redis_cpu": redis_seconds,
        "per_cpu": crawled / (cpu + redis_seconds),
        "robots": sum(result["stats"].get("robotstxt/request_count", 0) for result in results),
    }


def run_store_cost(cluster: Cluster, trees: dict[str, Path | None], rounds: int, pages: int) -> dict[str, Any]:
    names = [f"{store}@{tree}" for tree in trees for store in ("redis", "memory")]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in rotated(names, round_):
            store, _, tree = name.partition("@")
            result = cost_crawl(cluster, trees[tree], store, pages)
            runs[name].append(result)
            print(
                f"store-cost round {round_ + 1} {name:15} {result['pages']:.0f} pages, {result['rate']:4.0f} pages/s, "
                f"{result['per_cpu']:4.0f} pages per CPU second (workers {result['workers_cpu']:.1f} s, "
                f"redis-server {result['redis_cpu']:.1f} s), {result['robots']:.0f} robots.txt fetches",
                flush=True,
            )
    figures: dict[str, Any] = {}
    pairs = [("redis@head", "memory@head")]
    if "baseline" in trees:
        pairs += [
            ("redis@head", "redis@baseline"),
            ("redis@baseline", "memory@baseline"),
            ("memory@head", "memory@baseline"),
        ]
    for measure, label in (("rate", "pages per second"), ("per_cpu", "pages per CPU second")):
        values = {name: [r[measure] for r in runs[name]] for name in names}
        ratios: dict[str, Any] = {}
        for a, b in pairs:
            paired = [x / y for x, y in zip(values[a], values[b], strict=True)]
            ratio = round(statistics.median(values[a]) / statistics.median(values[b]), 3)
            ratios[f"{a} / {b}"] = {"of_medians": ratio, "paired": summary(paired)}
            print(
                f"store-cost: {a} / {b} {label}: {ratio:.3f} (rounds' own ratios {[round(p, 3) for p in paired]})",
                flush=True,
            )
        figures[measure] = {"values": {name: summary(v, 1) for name, v in values.items()}, "ratios": ratios}
    figures["runs"] = runs
    return figures


# ---------------------------------------------------------------- main


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tree_commit(tree: Path | None) -> str | None:
    """The short commit of *tree* (this repository without one), "+dirty" when its package differs from it."""
    folder = str(tree or Path(__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "-C", folder, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", folder, "status", "--porcelain", "--untracked-files=no", "--", ":/scrapy_robots_coccoc"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if head.returncode:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of backoff and store-cost (default 5)")
    parser.add_argument(
        "--queue-rounds", type=int, default=3, help="rounds of before-queue, whose counts vary little (default 3)"
    )
    parser.add_argument("--backoff-pages", type=int, default=PAGES, help=f"pages per site in backoff (default {PAGES})")
    parser.add_argument(
        "--cost-pages",
        type=int,
        default=len(ALL_PATHS),
        help=f"pages per origin in store-cost (default {len(ALL_PATHS)})",
    )
    parser.add_argument(
        "--backoff-settings", help="Scrapy settings (JSON) added to the backoff workers', e.g. DOWNLOAD_DELAY"
    )
    parser.add_argument(
        "--redis-stall", help="AFTER,SECONDS: stop the redis-server that long, that long after each crawl starts"
    )
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"some of {','.join(TARGETS)}")
    parser.add_argument(
        "--package", type=Path, help="a work tree whose package to measure (default: the installed one)"
    )
    parser.add_argument("--baseline", type=Path, help="a work tree whose package store-cost compares with")
    corpus.add_option(parser)
    benchjson.add_option(parser, "politeness_bench")
    args = parser.parse_args()
    targets = args.targets.split(",")
    if unknown := set(targets) - set(TARGETS):
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")
    package = args.package.resolve() if args.package else None
    baseline = args.baseline.resolve() if args.baseline else None

    redis_port = free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    figures: dict[str, Any] = {}
    started = time.time()
    sites = None
    try:
        wait_for_redis(redis_url)
        sites = Sites(free_port(), args.corpus)
        cluster = Cluster(sites, redis_url, redis_server.pid)
        if args.redis_stall:
            after, seconds = map(float, args.redis_stall.split(","))
            cluster.stall = (after, seconds)
        if "backoff" in targets:
            figures["backoff"] = run_backoff(
                cluster, package, args.rounds, args.backoff_pages, json.loads(args.backoff_settings or "{}")
            )
        if "before-queue" in targets:
            figures["before_queue"] = run_before_queue(cluster, package, args.queue_rounds)
        if "store-cost" in targets:
            trees = {"head": package, **({"baseline": baseline} if baseline else {})}
            figures["store_cost"] = run_store_cost(cluster, trees, args.rounds, args.cost_pages)
    finally:
        if sites is not None:
            sites.close()
        redis_server.terminate()
        redis_server.wait()
    print(f"\n{time.time() - started:.0f} s in all")
    settings = {
        "targets": targets,
        "rounds": args.rounds,
        "queue_rounds": args.queue_rounds,
        "workers": WORKERS,
        "concurrent_requests": 32,
        "package": {"tree": str(package) if package else "installed", "commit": tree_commit(package)},
        "baseline": {"tree": str(baseline), "commit": tree_commit(baseline)} if baseline else None,
        "corpus": benchjson.corpus_name(args.corpus, len(corpus.load(args.corpus))),
        "backoff": {
            "extra_settings": json.loads(args.backoff_settings or "{}"),
            "sites": 1 + len(OTHER_HOSTS),
            "pages_per_site": args.backoff_pages,
            "incident_at": INCIDENT_AT,
            "retry_after": RETRY_AFTER,
        },
        "before_queue": {"pages": LINK_PAGES, "allowed_links": 2, "forbidden_links": FORBIDDEN_LINKS},
        "store_cost": {"origins": len(COST_HOSTS), "pages_per_origin": args.cost_pages},
    }
    benchjson.write(args.json, "politeness_bench", settings, figures)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), Path(sys.argv[3]) if sys.argv[3:] else None)
    elif sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2])
    else:
        main()
