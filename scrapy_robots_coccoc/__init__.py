"""Obey robots.txt in Scrapy the way Coc Coc's search robots do."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._robotstxt import Decision, RobotsTxt
from ._ruleset import RequestRate, Rule, VisitTime

if TYPE_CHECKING:
    from .middleware import RobotsTxtMiddleware
    from .robotparser import CocCocRobotParser
    from .sitemaps import RobotsSitemapMixin

__all__ = [
    "CocCocRobotParser",
    "Decision",
    "RequestRate",
    "RobotsSitemapMixin",
    "RobotsTxt",
    "RobotsTxtMiddleware",
    "Rule",
    "VisitTime",
]

# The Scrapy-facing classes are imported on first use, so that the parser
# (and the command-line checker) load without importing Scrapy.
_LAZY = {
    "CocCocRobotParser": ".robotparser",
    "RobotsTxtMiddleware": ".middleware",
    "RobotsSitemapMixin": ".sitemaps",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
