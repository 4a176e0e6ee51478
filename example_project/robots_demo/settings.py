"""Settings of the example project: the add-on line that enables
scrapy-robots-coccoc, plus what a polite crawl usually sets."""

BOT_NAME = "robots_demo"
SPIDER_MODULES = ["robots_demo.spiders"]
NEWSPIDER_MODULE = "robots_demo.spiders"

# Obey robots.txt with Coc Coc's rules: the add-on sets ROBOTSTXT_OBEY and
# swaps Scrapy's middleware for ours (see the README for the settings it
# stands for).
ADDONS = {"scrapy_robots_coccoc.Addon": 0}
# The robot whose group we obey; without it, the robot name is taken from
# each request's User-Agent header.
ROBOTSTXT_USER_AGENT = "coccocbot-web"
USER_AGENT = "Mozilla/5.0 (compatible; coccocbot-web/1.1; +http://help.coccoc.com/searchengine)"

# A site's Crawl-delay spaces the starts of its requests, capped here.
ROBOTSTXT_MAX_CRAWL_DELAY = 10
# Rules are kept a day; a site whose robots.txt does not answer is skipped
# for an hour (see the README for every setting).
ROBOTSTXT_CACHE_SECONDS = 86400
ROBOTSTXT_UNAVAILABLE_SECONDS = 3600

CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 4
DOWNLOAD_TIMEOUT = 15
TELNETCONSOLE_ENABLED = False
