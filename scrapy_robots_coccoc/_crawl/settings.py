"""Settings that need more than a ``get``: a senseless value stops the crawl at start-up, naming the setting."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: What ``inf`` stands for: more than any crawl or memory needs, yet finite, so times can be added to it.
UNBOUNDED = 1e9


def user_agent(settings: BaseSettings) -> str | None:
    """``ROBOTSTXT_USER_AGENT``, None when unset (each request's User-Agent header names the robot then)."""
    raw = settings.get("ROBOTSTXT_USER_AGENT")
    if raw is not None and not isinstance(raw, str):
        raise ValueError(f"ROBOTSTXT_USER_AGENT must be a string, not {raw!r}")
    return raw or None


def robot_agent(settings: BaseSettings) -> str:
    """The robot whose rules and Crawl-delay the crawl obeys: ``ROBOTSTXT_USER_AGENT``, else ``USER_AGENT``."""
    return user_agent(settings) or str(settings.get("USER_AGENT") or "Scrapy")


def number(settings: BaseSettings, name: str, default: float, *, positive: bool = False) -> float:
    raw = settings.get(name, default)
    try:
        value = math.nan if isinstance(raw, bool) else float(raw)
    except OverflowError:  # an int beyond any float: unbounded, as inf is
        value = math.inf
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a number {'>' if positive else '>='} 0, not {raw!r}")
    return min(value, UNBOUNDED)


def count(settings: BaseSettings, name: str, default: int, *, minimum: int = 0) -> int:
    raw = settings.get(name, default)
    try:
        value = int(raw)
    except (TypeError, ValueError, OverflowError):
        value = minimum - 1
    if value < minimum or isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise ValueError(f"{name} must be a whole number >= {minimum}, not {raw!r}")
    return value


def choice(settings: BaseSettings, name: str, choices: tuple[str, ...]) -> str:
    raw = settings.get(name, choices[0])
    if raw not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {raw!r}")
    return str(raw)
