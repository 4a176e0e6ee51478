"""Signals of ours, sent through ``crawler.signals`` like Scrapy's own."""

#: Sent the first time this process decides by a robots.txt that lists sitemaps (fetched here, or read from a store
#: another worker filled), with ``origin`` (``scheme://host:port``), ``sitemaps`` (absolute URLs, duplicates removed,
#: in file order) and ``request`` (the one that used it). :class:`~scrapy_robots_coccoc.RobotsSitemapMixin` crawls them.
robotstxt_sitemaps_found = object()

#: Sent for each request robots.txt ends without a download, with ``request``, ``kind`` (``"forbidden"``,
#: ``"usage"``, ``"unavailable"`` or ``"fault"``) and ``reason`` (the :mod:`~scrapy_robots_coccoc.exceptions`
#: instance it fails with; a forbidden one names the group and the rule, a usage one the preference).
robotstxt_request_dropped = object()
