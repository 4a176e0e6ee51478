"""One worker of a crawl spread over processes with scrapy-redis, sharing
robots.txt state and Crawl-delay pacing through our RedisStore.

    python -m tests.redis_worker REDIS_URL URL [URL ...]

The worker starts from its URLs; every request goes through the shared
scrapy-redis queue and dupefilter, so any worker may download it. Prints its
stats as JSON on the last line.
"""

from __future__ import annotations

import json
import sys

from scrapy.crawler import CrawlerProcess

from .crawling import SETTINGS, RecordingSpider


def main(redis_url: str, *urls: str) -> None:
    process = CrawlerProcess(
        {
            **SETTINGS,
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "SCHEDULER_PERSIST": True,
            "REDIS_URL": redis_url,
            "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
            "LOG_LEVEL": "INFO",
        }
    )
    crawler = process.create_crawler(RecordingSpider)
    process.crawl(crawler, urls=list(urls))
    process.start()
    print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, int | float | str)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
