"""The delay a robots.txt asks of a robot, and the one a crawl keeps: shared by the middleware and the checker."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .robotstxt import RobotsTxt
    from .ruleset import RequestRate

#: Shorter delays (``Request-rate: 1000000/1s``) are not paced: timers cannot keep them.
MIN_DELAY = 0.01


def asked_delay(robots: RobotsTxt, agent: str, at: datetime | None = None) -> tuple[float, RequestRate | None]:
    """The stricter of Crawl-delay and a Request-rate in force (now, or *at*), in seconds (0.0: none), and that rate
    if it won."""
    asked = robots.crawl_delay(agent) or 0.0
    rate = robots.request_rate(agent)
    if rate is not None and rate.requests > 0 and in_window(rate, at) and rate.seconds / rate.requests > asked:
        return rate.seconds / rate.requests, rate
    return asked, None


def kept_delay(asked: float, max_delay: float) -> float:
    delay = min(asked, max_delay)
    return delay if delay >= MIN_DELAY else 0.0


def in_window(rate: RequestRate, at: datetime | None = None) -> bool:
    """Whether now (or *at*) is in a Request-rate's window (UTC, as the extended standard says); no window is
    always."""
    if rate.start is None or rate.end is None:
        return True
    now = (at or datetime.now(timezone.utc)).astimezone(timezone.utc).time()
    return rate.start <= now <= rate.end if rate.start <= rate.end else now >= rate.start or now <= rate.end
