"""CocCocRobotParser: our parser behind Scrapy's parser interface (ROBOTSTXT_PARSER)."""

from __future__ import annotations

from scrapy_robots_coccoc import CocCocRobotParser


def test_the_parser_interface_works_without_a_crawler():
    """Issue 27, finding 10: from_crawler(None, body) raised TypeError (cannot
    create weak reference to 'NoneType' object) on Scrapy 2.14-2.19, where
    Scrapy's own parser-interface tests build parsers with no crawler."""
    parser = CocCocRobotParser.from_crawler(None, b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\n")
    assert parser.allowed("https://example.com/a", "bot")
    assert not parser.allowed(b"https://example.com/private/x", b"bot")
    assert parser.crawl_delay("bot") == 2.0
