"""The crawl machinery behind the middleware (private): robots.txt fetches, parking, pacing."""
