"""A store that cannot work in this crawl stops it at start-up, in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CRAWL_WITHOUT_REDIS = """
import sys
sys.modules["redis"] = None  # the redis package not installed
from scrapy import Spider
from scrapy.crawler import CrawlerProcess

class Pages(Spider):
    name = "pages"
    start_urls = ["http://127.0.0.9:1/"]

process = CrawlerProcess({
    "ADDONS": {"scrapy_robots_coccoc.Addon": 0},
    "ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore",
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "INFO",
})
process.crawl(Pages)
process.start()
"""


def test_redisstore_without_the_redis_package_stops_the_crawl_in_one_error_line():
    """Issue 27, finding 7: ROBOTSTXT_STORE = RedisStore without the redis
    package ended in asyncio's "Task exception was never retrieved" and a
    40-line traceback, asking for "redis-py 4.2 or newer" where the [redis]
    extra requires 5.0.1."""
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", CRAWL_WITHOUT_REDIS], cwd=root, capture_output=True, text=True, timeout=60
    )
    log = run.stderr
    errors = [line for line in log.splitlines() if "] ERROR: " in line]
    assert len(errors) == 1, log[-3000:]
    assert "pip install 'scrapy-robots-coccoc[redis]'" in errors[0] and "redis 5.0.1 or newer" in errors[0]
    assert "Traceback" not in log and "never retrieved" not in log, log[-3000:]
    assert "Spider closed (robotstxt_store_unusable)" in log, log[-3000:]
    assert "downloader/request_count" not in log, "nothing may be requested"
