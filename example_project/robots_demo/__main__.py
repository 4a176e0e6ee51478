"""``make demo``: crawl the embedded demo site with the three example
spiders, offline, and report what robots.txt decided.

    python -m robots_demo            # the embedded site, on loopback
    python -m robots_demo SITE_URL   # a real site (first pages only)

Run from ``example_project/``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

SPIDERS = ("pages", "sitemap", "images")
REAL_SITE_PAGE_LIMIT = 25


@dataclass
class Report:
    """What the crawl did, gathered from our loggers, signals and stats."""

    forbidden: list[tuple[str, str, str]] = field(default_factory=list)  # spider, url, reason
    delays: dict[str, str] = field(default_factory=dict)  # origin -> how it is paced
    robots: dict[str, list[str]] = field(default_factory=dict)  # origin -> sitemaps listed
    unavailable: dict[str, str] = field(default_factory=dict)  # origin -> why its robots.txt got no answer
    stats: dict[str, dict] = field(default_factory=dict)


class ReportHandler(logging.Handler):
    """Collects the Crawl-delay of each origin and the origins whose
    robots.txt did not answer; the console shows warnings only."""

    def __init__(self, report: Report) -> None:
        super().__init__(logging.DEBUG)
        self.report = report

    def emit(self, record: logging.LogRecord) -> None:
        if "did not answer" in record.msg:
            origin, error, _ = record.args
            self.report.unavailable[origin] = str(error)
        elif record.msg.startswith("robots.txt of %s: %s; Crawl-delay %s"):
            origin, _, delay, *_ = record.args
            if delay != "none":
                self.report.delays[origin] = f"Crawl-delay: requests {delay} apart"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Crawl the demo site (or SITE) with the example spiders.")
    parser.add_argument("site", nargs="?", help="a real site to crawl instead of the embedded one")
    args = parser.parse_args(argv)

    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", "robots_demo.settings")
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings
    from scrapy.utils.reactor import install_reactor
    from twisted.internet.task import LoopingCall

    from scrapy_robots_coccoc.signals import robotstxt_request_dropped, robotstxt_sitemaps_found

    settings = get_project_settings()
    install_reactor(settings["TWISTED_REACTOR"])  # before the demo site starts listening
    settings.set("LOG_LEVEL", "WARNING")
    if args.site:
        settings.set("CLOSESPIDER_PAGECOUNT", REAL_SITE_PAGE_LIMIT)
    process = CrawlerProcess(settings)

    if args.site:
        site = args.site
        print(f"Crawling {site} (first {REAL_SITE_PAGE_LIMIT} pages per spider)")
    else:
        from .demo_site import serve_demo_sites

        site, images = serve_demo_sites()
        print(f"Demo shop at {site}, its images at {images}; robots.txt at {site}/robots.txt")

    report = Report()
    handler = ReportHandler(report)
    ours = logging.getLogger("scrapy_robots_coccoc")
    ours.setLevel(logging.DEBUG)
    ours.addHandler(handler)

    crawlers = []
    for name in SPIDERS:
        crawler = process.create_crawler(name)

        def crawled(response, request, **kwargs) -> None:
            url = urlsplit(request.url)
            port = url.port or {"http": 80, "https": 443}[url.scheme]
            report.robots.setdefault(f"{url.scheme}://{url.hostname}:{port}", [])

        def sitemaps_found(origin, sitemaps, **kwargs) -> None:
            report.robots[origin] = list(sitemaps)

        def dropped(request, kind, reason, name=name, **kwargs) -> None:
            if kind == "forbidden":
                why = str(reason).removeprefix("Forbidden by robots.txt (").removesuffix(")")
                report.forbidden.append((name, request.url, why))

        # Our own signal: Scrapy's robots_parsed exists only from Scrapy 2.18.
        crawler.signals.connect(crawled, signal=signals.response_received, weak=False)
        crawler.signals.connect(sitemaps_found, signal=robotstxt_sitemaps_found, weak=False)
        crawler.signals.connect(dropped, signal=robotstxt_request_dropped, weak=False)
        process.crawl(crawler, site=site)
        crawlers.append(crawler)

    def progress() -> None:
        pages = sum(c.stats.get_value("response_received_count", 0) for c in crawlers if c.stats)
        forbidden = sum(c.stats.get_value("robotstxt/forbidden", 0) for c in crawlers if c.stats)
        end = "\r" if sys.stderr.isatty() else "\n"
        print(f"crawling: {pages} responses, {forbidden} forbidden by robots.txt", end=end, file=sys.stderr, flush=True)

    ticker = LoopingCall(progress)
    ticker.start(1.0 if sys.stderr.isatty() else 2.0)
    process.start()
    if ticker.running:
        ticker.stop()
    progress()
    for crawler in crawlers:
        report.stats[crawler.spider.name] = crawler.stats.get_stats()
    print_report(report)
    return 0


def print_report(report: Report) -> None:
    print("\n== Report ==")
    # responses: pages and sitemaps (robots.txt aside); items: what the spider kept.
    print(f"{'spider':<9}{'responses':>10}{'items':>7}{'forbidden':>10}")
    for name in SPIDERS:
        stats = report.stats[name]
        responses = stats.get("response_received_count", 0) - stats.get("robotstxt/response_count", 0)
        forbidden = stats.get("robotstxt/forbidden", 0)
        print(f"{name:<9}{responses:>10}{stats.get('item_scraped_count', 0):>7}{forbidden:>10}")

    print("\nForbidden, and by which rule:")
    by_rule: dict[str, set[str]] = defaultdict(set)
    for _, url, reason in report.forbidden:
        by_rule[reason].add(url)
    for reason, urls in sorted(by_rule.items()):
        print(f"  {reason}")
        for url in sorted(urls):
            print(f"      {url}")

    print("\nDelays per site:")
    for origin in sorted(report.robots):
        print(f"  {origin}: {report.delays.get(origin, 'no Crawl-delay: not slowed down')}")

    if report.unavailable:
        print("\nSites whose robots.txt did not answer (their requests were dropped):")
        for origin, error in sorted(report.unavailable.items()):
            print(f"  {origin}: {error}")

    print("\nSitemaps found in robots.txt:")
    sitemaps = sorted({url for urls in report.robots.values() for url in urls})
    for url in sitemaps:
        print(f"  {url}")
    stats = report.stats["sitemap"]
    print(
        f"  sitemap spider: {stats.get('robotstxt/sitemaps/scheduled', 0)} scheduled from robots.txt, "
        f"{stats.get('robotstxt/response_count', 0)} robots.txt fetched"
    )


if __name__ == "__main__":
    sys.exit(main())
