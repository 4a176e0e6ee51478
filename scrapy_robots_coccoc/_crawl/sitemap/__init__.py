"""The sitemap machinery of the crawl: the sitemaps robots.txt lists, which URLs of them are used, and the
reading of sitemap bodies within the protocol's bounds."""
