"""Signals of ours, sent through ``crawler.signals`` like Scrapy's own."""

#: Sent when a fetched robots.txt lists sitemaps, with ``origin``
#: (``scheme://host:port``), ``sitemaps`` (the URLs, in file order) and
#: ``request`` (the request that made the middleware fetch robots.txt).
#: :class:`~scrapy_robots_coccoc.RobotsSitemapMixin` crawls them.
robotstxt_sitemaps_found = object()
