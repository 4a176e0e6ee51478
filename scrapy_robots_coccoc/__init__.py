"""Obey robots.txt in Scrapy the way Coc Coc's search robots do."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._parser import Decision, RequestRate, RobotsTxt, Rule, UsagePreferences, UsageSource, VisitTime

if TYPE_CHECKING:
    from .addon import Addon
    from .body import RobotsTxtBodyMiddleware
    from .middleware import RobotsTxtMiddleware
    from .robotparser import CocCocRobotParser
    from .sitemaps import RobotsSitemapMixin
    from .spidermiddleware import RobotsTxtSpiderMiddleware

__version__ = "0.2.0.dev0"

__all__ = [
    "Addon",
    "CocCocRobotParser",
    "Decision",
    "RequestRate",
    "RobotsSitemapMixin",
    "RobotsTxt",
    "RobotsTxtBodyMiddleware",
    "RobotsTxtMiddleware",
    "RobotsTxtSpiderMiddleware",
    "Rule",
    "UsagePreferences",
    "UsageSource",
    "VisitTime",
]

# Scrapy-facing classes are imported on first use, so that the parser, the
# checker and setuptools reading __version__ load without Scrapy.
_LAZY = {
    "Addon": ".addon",
    "CocCocRobotParser": ".robotparser",
    "RobotsTxtMiddleware": ".middleware",
    "RobotsSitemapMixin": ".sitemaps",
    "RobotsTxtBodyMiddleware": ".body",
    "RobotsTxtSpiderMiddleware": ".spidermiddleware",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
