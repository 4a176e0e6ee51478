"""The crawl machinery behind the middleware: fetching robots.txt, one
fetch per origin, parking waiting requests, pacing. Private: the public
names are those of the package."""
