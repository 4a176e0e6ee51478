"""Where the middleware keeps what it learnt of each origin.

A store maps an origin (``scheme://host:port``) to an :class:`OriginState`.
The in-memory store is the default; ``ROBOTSTXT_STORE`` names another class
with the methods of :class:`Store`, built with ``from_crawler``:
:class:`RedisStore` shares the state of a
crawl spread over several workers.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._robotstxt import RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

logger = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class OriginState:
    """The outcome of one robots.txt fetch.

    ``robots`` holds the rules after a 200 answer; it is None both after any
    other answer (``unavailable`` False: everything allowed) and after no
    answer at all (``unavailable`` True: nothing is downloaded until
    ``expires_at``).
    """

    robots: RobotsTxt | None
    unavailable: bool
    expires_at: float


class Store(Protocol):
    def get(self, origin: str) -> OriginState | None:
        """The origin's state, fresh or stale; None if unknown."""

    def set(self, origin: str, state: OriginState, body: bytes) -> None:
        """Keep a fetch's outcome; *body* is the robots.txt read (b"" without rules)."""

    def claim(self, origin: str, seconds: float) -> bool:
        """Whether this process should fetch the origin's robots.txt now:
        False while another worker does (for at most *seconds*)."""

    def reserve(self, origin: str, spacing: float) -> float | None:
        """Reserve the next start time for a request to a paced origin, at
        least *spacing* seconds after the one reserved before it; None
        when the downloader's own slot delay paces the origin."""


class MemoryStore:
    """A bounded, least-recently-used map of origin states, sized by
    ``ROBOTSTXT_MAX_ORIGINS`` (default 100,000)."""

    def __init__(self, max_origins: int) -> None:
        self._states: OrderedDict[str, OriginState] = OrderedDict()
        self._max_origins = max(1, max_origins)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler.settings.getint("ROBOTSTXT_MAX_ORIGINS", 100_000))

    def get(self, origin: str) -> OriginState | None:
        state = self._states.get(origin)
        if state is not None:
            self._states.move_to_end(origin)
        return state

    def set(self, origin: str, state: OriginState, body: bytes = b"") -> None:
        self._states[origin] = state
        self._states.move_to_end(origin)
        while len(self._states) > self._max_origins:
            self._states.popitem(last=False)

    def claim(self, origin: str, seconds: float) -> bool:
        return True  # the middleware never runs two fetches of one origin

    def reserve(self, origin: str, spacing: float) -> None:
        return None  # in one process the downloader slot paces the origin

    def __len__(self) -> int:
        return len(self._states)


# Stored outcome -> (has rules, unavailable).
OUTCOMES = {b"rules": (True, False), b"unrestricted": (False, False), b"unavailable": (False, True)}

# Claim an origin's fetch unless a fresh state is already stored (a peer may
# have stored it between our look and our claim).
CLAIM_SCRIPT = """
local expires_at = redis.call('HGET', KEYS[1], 'expires_at')
if expires_at and tonumber(expires_at) > tonumber(ARGV[1]) then return 0 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""

# Reserve the next start time of a paced origin, on Redis's clock so that
# workers on different machines agree; returns seconds to wait from now.
RESERVE_SCRIPT = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1e6
local start = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0'))
redis.call('SET', KEYS[1], tostring(start + tonumber(ARGV[1])), 'PX', math.ceil((start - now) * 1000) + 60000)
return tostring(start - now)
"""


class RedisStore:
    """Shares per-origin state among the workers of a crawl through Redis
    (scrapy-redis's ``REDIS_URL``, else ``REDIS_HOST``/``REDIS_PORT``).

    Each origin is a hash of its outcome (``rules``, ``unrestricted`` or
    ``unavailable``), the raw robots.txt body and when it expires; Redis drops
    it by itself some time after that. A short-lived lock lets one worker
    fetch while the others wait for what it stores, and a per-origin "next
    start" time paces Crawl-delay across workers. Every worker keeps a local
    :class:`MemoryStore` in front, so Redis is asked once per origin and
    period; when Redis fails the worker warns and goes on with that local
    store alone, retrying Redis after ``RETRY_SECONDS``.
    """

    RETRY_SECONDS = 5.0

    def __init__(self, client: Any, local: MemoryStore, prefix: str = "robotstxt") -> None:
        import redis

        self._client = client
        self._local = local
        self._prefix = prefix
        self._errors = (redis.RedisError, OSError)
        self._claim = client.register_script(CLAIM_SCRIPT)
        self._reserve = client.register_script(RESERVE_SCRIPT)
        self._down_until = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        import redis

        settings = crawler.settings
        options = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
        url = settings.get("REDIS_URL")
        if url:
            client = redis.Redis.from_url(url, **options)
        else:
            host, port = settings.get("REDIS_HOST", "localhost"), settings.getint("REDIS_PORT", 6379)
            client = redis.Redis(host=host, port=port, **options)
        prefix = settings.get("ROBOTSTXT_REDIS_PREFIX", "robotstxt")
        return cls(client, MemoryStore.from_crawler(crawler), prefix)

    def get(self, origin: str) -> OriginState | None:
        local = self._local.get(origin)
        if local is not None and local.expires_at > time.time():
            return local
        fields = self._call(self._client.hgetall, self._key("state", origin))
        if not fields or fields.get(b"outcome") not in OUTCOMES:
            return local
        expires_at = float(fields.get(b"expires_at", 0))
        if local is not None and local.expires_at == expires_at:
            return local  # the same fetch: no need to parse it again
        has_rules, unavailable = OUTCOMES[fields[b"outcome"]]
        robots = RobotsTxt.parse(fields.get(b"body", b"")) if has_rules else None
        state = OriginState(robots, unavailable, expires_at)
        self._local.set(origin, state)
        return state

    def set(self, origin: str, state: OriginState, body: bytes = b"") -> None:
        self._local.set(origin, state)
        outcome = b"unavailable" if state.unavailable else b"rules" if state.robots is not None else b"unrestricted"
        key = self._key("state", origin)
        # Kept past expiry, so that workers refresh while deciding by it.
        ttl = math.ceil(max(1.0, state.expires_at - time.time()) * 2)
        pipe = self._client.pipeline()
        pipe.hset(key, mapping={"outcome": outcome, "body": body, "expires_at": repr(state.expires_at)})
        pipe.expire(key, ttl)
        pipe.delete(self._key("fetching", origin))
        self._call(pipe.execute)

    def claim(self, origin: str, seconds: float) -> bool:
        keys = [self._key("state", origin), self._key("fetching", origin)]
        claimed = self._call(self._claim, keys=keys, args=[repr(time.time()), int(seconds * 1000)])
        return claimed != 0  # None (Redis down): fetch here

    def reserve(self, origin: str, spacing: float) -> float | None:
        wait = self._call(self._reserve, keys=[self._key("next", origin)], args=[repr(spacing)])
        return None if wait is None else time.time() + float(wait)

    def _key(self, kind: str, origin: str) -> str:
        return f"{self._prefix}:{kind}:{origin}"

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one Redis command; None (and one warning per outage) when Redis fails."""
        if time.time() < self._down_until:
            return None
        try:
            result = method(*args, **kwargs)
        except self._errors as exc:
            if not self._down_until:
                logger.warning("Redis store unreachable (%s): going on with this worker's own store", exc)
            self._down_until = time.time() + self.RETRY_SECONDS
            return None
        if self._down_until:
            logger.warning("Redis store reachable again: sharing robots.txt state with the other workers")
            self._down_until = 0.0
        return result
