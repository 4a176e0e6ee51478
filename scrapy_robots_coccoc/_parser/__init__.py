"""The robots.txt parser: pure Python, importing neither Scrapy nor Twisted."""

from .robotstxt import MAX_BYTES, Decision, RobotsTxt
from .ruleset import RequestRate, Rule, VisitTime
from .usage import UsagePreferences, UsageSource

__all__ = [
    "MAX_BYTES",
    "Decision",
    "RequestRate",
    "RobotsTxt",
    "Rule",
    "UsagePreferences",
    "UsageSource",
    "VisitTime",
]
