"""Where the middleware keeps what it learnt of each origin.

A store maps an origin (``scheme://host:port``) to an :class:`OriginState`.
The in-memory store is the default; ``ROBOTSTXT_STORE`` names another class
with the methods of :class:`Store`, built with ``from_crawler``:
:class:`RedisStore` shares the state of a crawl spread over several workers.
"""

from __future__ import annotations

import logging
import math
import re
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, cast

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer
from twisted.internet.defer import Deferred, DeferredList

from . import _loop, _settings
from ._robotstxt import MAX_BYTES, RobotsTxt
from .body import parsed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from twisted.internet.interfaces import IReactorFromThreads
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: What an OriginState and its entry in the map take, the rules aside.
_STATE_BYTES = 200


def turns_horizon(spacing: float) -> float:
    """How far ahead a reserved start may be and still be believed: every
    request waiting for an origin, in every worker, holds a turn (an hour,
    or 1,000 turns, whichever is longer); a start farther off is nonsense."""
    return max(3600.0, 1000 * spacing)


T = TypeVar("T")
#: What a store method returns: its answer, or an awaitable of it.
MaybeAwaitable: TypeAlias = T | Awaitable[T]


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
    """What the middleware asks of a store.

    Each method may return its answer, or an awaitable of it that the
    middleware awaits: a store that talks to a server must not block the
    reactor. Synchronous stores (like :class:`MemoryStore`, the fast path)
    are accepted as they are. An asynchronous store returns awaitables the
    crawl's loop can drive: coroutines or asyncio futures under Scrapy's
    default asyncio reactor (or with no reactor), coroutines or Deferreds
    under another Twisted reactor.

    A store may also offer ``peek(origin) -> OriginState | None``: what this
    process knows without any I/O, so that a known origin's requests are
    decided at once; None sends the middleware to ``get``. And
    ``release(origin)``: the fetch this process claimed ended with nothing
    to store (the spider closed, or a fault of this machine), so another
    worker may fetch the origin now rather than when the claim expires; a
    claim this process does not hold (any more) stays.
    """

    def get(self, origin: str) -> MaybeAwaitable[OriginState | None]:
        """The origin's state, fresh or stale; None if unknown."""

    def set(self, origin: str, state: OriginState, body: bytes | None) -> MaybeAwaitable[None]:
        """Keep a fetch's outcome; *body* is the robots.txt read (b"" without
        rules; None when a failed refresh keeps the rules already stored)."""

    def claim(self, origin: str, seconds: float) -> MaybeAwaitable[bool]:
        """Whether this process should fetch the origin's robots.txt now:
        False while another worker does (for at most *seconds*)."""

    def reserve(self, origin: str, spacing: float) -> MaybeAwaitable[float | None]:
        """Reserve a start time (a ``time.time()`` value) for the next
        request to a paced origin, at least *spacing* seconds after every
        start reserved before it, by any worker, and no earlier than the
        answer (a store whose answer came too late reserves again). None
        from a store that does not pace.

        The caller sleeps until that time and starts the request at once. A
        caller that wakes (or finds the request ready) more than *grace*
        seconds late gives the turn up and reserves again: a turn used late
        would squeeze the next one, a turn given up only widens a gap. So
        consecutive requests start at least ``spacing - grace`` apart,
        whatever stalls, restarts or slow answers happen: spacing = the
        Crawl-delay and grace = 5% of it keep them 0.95 x the Crawl-delay
        apart.
        """


class Turns:
    """The next start reserved for each paced origin: a turn starts no
    earlier than the last one allows.

    Bounded by *max_origins*: past it the least recently paced origin goes,
    unless its next start is still ahead (a turn promised to a waiting
    request): such an origin goes to the back, a few per call, so the map
    may exceed the bound by the origins with requests waiting.
    """

    #: Origins looked at per reservation when the map is full.
    EVICTION_TRIES = 4

    def __init__(self, max_origins: int) -> None:
        self._next_starts: OrderedDict[str, float] = OrderedDict()
        self.max_origins = max(1, max_origins)

    def reserve(self, origin: str, spacing: float) -> float:
        start = max(time.time(), self._next_starts.get(origin, 0.0))
        self.reserved_until(origin, start + spacing)
        return start

    def next_start(self, origin: str) -> float:
        """The earliest start of *origin*'s next turn (0.0 when none was reserved)."""
        return self._next_starts.get(origin, 0.0)

    def reserved_until(self, origin: str, next_start: float) -> None:
        """Let the next turn start no earlier than *next_start*."""
        next_starts = self._next_starts
        next_starts[origin] = max(next_start, next_starts.pop(origin, 0.0))
        now = time.time()
        for _ in range(self.EVICTION_TRIES):
            if len(next_starts) <= self.max_origins:
                break
            oldest, start = next_starts.popitem(last=False)
            if start > now:
                next_starts[oldest] = start


# Every crawler of the process takes its turns from these: the sites see one
# client, whichever spider asks (three spiders of one CrawlerProcess crawling
# a site each paced alone: requests 0.0 s apart).
_PROCESS_TURNS = Turns(1)


def process_turns(max_origins: int) -> Turns:
    """The turns of this process, bounded by the largest *max_origins* asked for."""
    _PROCESS_TURNS.max_origins = max(_PROCESS_TURNS.max_origins, max_origins)
    return _PROCESS_TURNS


class MemoryStore:
    """A bounded, least-recently-used map of origin states, and the turns of
    paced origins (those of the whole process, when built by ``from_crawler``).

    Bounded twice, whichever is reached first evicting the least recently
    used origin: ``ROBOTSTXT_MAX_ORIGINS`` origins (default 100,000) and
    ``ROBOTSTXT_MAX_ORIGINS_MB`` megabytes of parsed rules (default 512,
    what 100,000 typical origins need; a site's 480 KiB robots.txt counts
    for what it holds). Only what a decision needs is kept, not the text.
    An origin whose fetch is running is safe from eviction: the middleware
    holds the state it refreshes, and stores the new one when it comes.
    """

    def __init__(self, max_origins: int, max_bytes: int = 512 * 2**20, turns: Turns | None = None) -> None:
        self._states: OrderedDict[str, tuple[OriginState, int]] = OrderedDict()
        self._max_origins = max(1, max_origins)
        self._max_bytes = max_bytes
        self._turns = turns or Turns(max_origins)
        self.nbytes = 0  # the bytes the states held are reckoned to take

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        max_origins = _settings.count(settings, "ROBOTSTXT_MAX_ORIGINS", 100_000, minimum=1)
        return cls(
            max_origins,
            int(_settings.number(settings, "ROBOTSTXT_MAX_ORIGINS_MB", 512, positive=True) * 2**20),
            process_turns(max_origins),
        )

    def get(self, origin: str) -> OriginState | None:
        held = self._states.get(origin)
        if held is None:
            return None
        self._states.move_to_end(origin)
        return held[0]

    #: All a memory store knows, it knows without I/O.
    peek = get

    def set(self, origin: str, state: OriginState, body: bytes | None = b"") -> None:
        old = self._states.pop(origin, None)
        if old is not None:
            self.nbytes -= old[1]
        size = _STATE_BYTES + len(origin) + (state.robots.footprint() if state.robots is not None else 0)
        self._states[origin] = (state, size)
        self.nbytes += size
        while len(self._states) > self._max_origins or (self.nbytes > self._max_bytes and len(self._states) > 1):
            self.nbytes -= self._states.popitem(last=False)[1][1]

    def claim(self, origin: str, seconds: float) -> bool:
        return True  # the middleware never runs two fetches of one origin

    def reserve(self, origin: str, spacing: float) -> float:
        return self._turns.reserve(origin, spacing)

    def next_start(self, origin: str) -> float:
        """The earliest start of *origin*'s next turn here (0.0 when none was reserved)."""
        return self._turns.next_start(origin)

    def reserved_until(self, origin: str, next_start: float) -> None:
        """Let the next turn here start no earlier than *next_start* (a
        shared store notes its reservations, to pace alone from them)."""
        self._turns.reserved_until(origin, next_start)

    def __len__(self) -> int:
        return len(self._states)


# Stored outcome -> (has rules, unavailable).
OUTCOMES = {b"rules": (True, False), b"unrestricted": (False, False), b"unavailable": (False, True)}

# A stored number is read only when written as ours are, in decimal: Lua's
# tonumber() takes "0x6b0787" where Python's float() takes "1_000", and the
# two sides must agree on what a value means.
_DECIMAL = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?")
_LUA_NUMBER = """
local function number(text)
  if type(text) == 'string' and (string.find(text, '^%-?%d+$') or string.find(text, '^%-?%d+%.%d+$')) then
    return tonumber(text)
  end
end
"""
# Whether the state hash *key* holds no field larger than any worker writes
# (*limit* bytes): "read" and "claim" must agree on which states count (a
# fresh expiry padded with 600,000 zeros was oversized to one, fresh to the
# other, and held every worker back until the fetch lock expired).
_LUA_FITS = """
local function fits(key, limit)
  for _, field in ipairs({'outcome', 'body', 'expires_at'}) do
    if redis.call('HSTRLEN', key, field) > limit then return false end
  end
  return true
end
"""
# The Lua scripts below read nothing they did not check: another version, a
# bug or a hand in redis-cli may have left anything under our keys.
SCRIPTS = {
    # Redis's clock (seconds, microseconds), the key's type and, for a
    # hash, the origin's outcome, body and expiry; a hash whose fields are
    # larger than any worker writes is 'oversized', never sent whole.
    # ARGV: the most bytes a field may hold.
    "read": _LUA_FITS
    + """
local t = redis.call('TIME')
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' then return {t[1], t[2], kind} end
if not fits(KEYS[1], tonumber(ARGV[1])) then return {t[1], t[2], 'oversized'} end
return {t[1], t[2], kind, redis.call('HMGET', KEYS[1], 'outcome', 'body', 'expires_at')}
""",
    # Replace the state (whatever type the key had) and drop the fetch lock.
    "store": """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'outcome', ARGV[1], 'body', ARGV[2], 'expires_at', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[2])
return 1
""",
    # A failed refresh keeps the stored rules: only the expiry moves (and
    # the fetch lock goes). Nothing stored: nothing to keep.
    "keep": """
redis.call('DEL', KEYS[2])
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
redis.call('HSET', KEYS[1], 'expires_at', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
""",
    # Claim the origin's fetch (1) unless a readable, fresh state is stored
    # (a peer may have stored it between our look and our claim) or a peer
    # holds the lock (0). A lock without expiry is taken over (2); one longer
    # than ours is cut to ours, so that every lock ends. Returns {that,
    # Redis's clock (seconds, microseconds)}.
    # ARGV: now, lock milliseconds, the longest believable lifetime, the
    # most bytes a field may hold (see "read"), the worker's token (the
    # lock's value, so that a worker releases only its own lock).
    "claim": _LUA_NUMBER
    + _LUA_FITS
    + """
local t = redis.call('TIME')
local function claim()
  local now = tonumber(ARGV[1])
  if redis.call('TYPE', KEYS[1]).ok == 'hash' and fits(KEYS[1], tonumber(ARGV[4])) then
    local f = redis.call('HMGET', KEYS[1], 'outcome', 'expires_at')
    local expires = number(f[2])
    local known = f[1] == 'rules' or f[1] == 'unrestricted' or f[1] == 'unavailable'
    if known and redis.call('HEXISTS', KEYS[1], 'body') == 1
        and expires and expires > now and expires <= now + tonumber(ARGV[3]) then
      return 0
    end
  end
  if redis.call('SET', KEYS[2], ARGV[5], 'NX', 'PX', ARGV[2]) then return 1 end
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl == -1 then
    redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[2])
    return 2
  end
  if ttl > tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
  return 0
end
return {claim(), t[1], t[2]}
""",
    # Reserve the next start of a paced origin on Redis's clock, so that
    # workers on different machines agree: no earlier than *lead* seconds
    # from now (the answer's way back), at least *spacing* after the last
    # reserved start, and no earlier than the worker's own next start (its
    # floor: a "next" lost to a flush or a restart, unreadable, or behind
    # the turns the worker paced alone while Redis failed, must not give
    # it a turn at once); *count* turns in a row, *spacing* apart. Returns
    # {first start, Redis's now, problem with the stored value or ''}; an
    # unreadable or unbelievably far "next" is ignored.
    # ARGV: spacing, lead, the farthest believable next start from now,
    # count, floor.
    "reserve": _LUA_NUMBER
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local spacing, lead, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count, floor = tonumber(ARGV[4]) or 1, tonumber(ARGV[5]) or 0
local raw = redis.pcall('GET', KEYS[1])
local after, problem = 0, ''
if type(raw) == 'table' then
  problem = 'next start is not a string; ignored'
elseif raw then
  after = number(raw)
  if not after or after > now + horizon then
    problem = 'next start ' .. string.sub(raw, 1, 40) .. ' is not a believable time; ignored'
    after = 0
  end
end
local start = math.max(now + lead, after, floor)
local next = start + count * spacing
redis.call('SET', KEYS[1], string.format('%.6f', next), 'PX', math.ceil((next - now) * 1000) + 60000)
return {string.format('%.6f', start), string.format('%.6f', now), problem}
""",
    "clock": "return redis.call('TIME')",
    # A fetch ended with nothing to store: its lock goes, if it is still
    # this worker's (ARGV: its token): it may have expired during the
    # fetch and been taken by a peer, or never been ours (a claim that
    # failed counts as granted).
    "release": """
if redis.call('TYPE', KEYS[1]).ok ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
""",
}


class RedisStore:
    """Shares per-origin state among the workers of a crawl through Redis
    (``ROBOTSTXT_REDIS_URL``, else scrapy-redis's ``REDIS_URL``, else
    ``REDIS_HOST``/``REDIS_PORT``).

    Each origin is a hash of its outcome (``rules``, ``unrestricted`` or
    ``unavailable``), the raw robots.txt body and when it expires; Redis drops
    it by itself some time after that. A short-lived lock lets one worker
    fetch while the others wait for what it stores, and a per-origin "next
    start" time paces Crawl-delay across workers. An origin's keys carry it
    as a hash tag (``robotstxt:{https://example.com:443}:state``), so that
    they share one Redis Cluster slot (the store itself talks to one Redis
    server, as scrapy-redis does). Every worker keeps a local
    :class:`MemoryStore` in front, so Redis is asked once per origin and
    period; when Redis fails the worker warns and goes on with that local
    store alone, retrying Redis after ``RETRY_SECONDS``.

    Redis is never awaited on the reactor thread: with ``redis.asyncio``
    when an asyncio loop runs the crawl (Scrapy's default asyncio reactor,
    or no reactor), else with the blocking client in a small thread pool of
    the store's own. A value read back that makes no sense is ignored, with
    one WARNING per origin and problem. Calls slower than
    ``ROBOTSTXT_REDIS_SLOW_SECONDS`` (default 0.1), three in a row, get one
    WARNING per crawl: every new or paced origin waits for Redis.
    """

    RETRY_SECONDS = 5.0
    #: The longest close waits for the calls and fetch locks under way (a
    #: fetch that the close ended releases its lock within a turn or two).
    CLOSE_SECONDS = 3.0
    #: Threads of the pool that runs the blocking client (other reactors).
    THREADS = 8
    #: Reservations tried before a late one is returned all the same.
    RESERVE_ATTEMPTS = 5
    #: Connections opened at once before the crawl starts (script uploads
    #: and clock readings).
    WARM_CONNECTIONS = 8
    #: At most this many readings of Redis's clock before the first reservation.
    CLOCK_READINGS = 5
    #: Redis is slow when this many calls, each made after the last one
    #: ended, took longer than ``ROBOTSTXT_REDIS_SLOW_SECONDS``.
    SLOW_IN_A_ROW = 3
    #: Origins whose unreadable values were reported (bounds that memory).
    WARNED_ORIGINS = 10_000

    def __init__(
        self,
        client: Any,
        local: MemoryStore,
        prefix: str = "robotstxt",
        *,
        max_age: float = 2 * 86400,
        slow_seconds: float = 0.1,
        agent: str = "Scrapy",
    ) -> None:
        """*client* is a ``redis.asyncio.Redis`` (awaited on the asyncio
        loop) or a ``redis.Redis`` (run in the store's threads); *max_age*
        is the longest lifetime of a state that is believed; *agent* the
        robot whose rules a body read back is parsed for."""
        import redis
        import redis.asyncio

        self._redis: _AsyncioRedis | _ThreadedRedis = (
            _AsyncioRedis(client) if isinstance(client, redis.asyncio.Redis) else _ThreadedRedis(client, self.THREADS)
        )
        self._local = local
        self._prefix = prefix
        self._max_age = max_age
        self._slow_seconds = slow_seconds
        self._agent = agent
        self._errors = (redis.RedisError, OSError)
        self._down_until = 0.0
        self._round_trip = 0.0  # smoothed duration of a call, seconds
        self._clock = RedisClock()
        self._clock_known = False
        self._slow_in_a_row = 0  # slow calls, each made after the last ended
        self._slow_until = 0.0  # when the last of them ended
        self._warned_slow = False
        self._warned: OrderedDict[tuple[str, str], None] = OrderedDict()
        # Origin -> (spacing, callers) of the turns the next call for it
        # reserves, and the origins with a call under way.
        self._queued: dict[str, tuple[float, list[Deferred[float]]]] = {}
        self._reserving: set[str] = set()
        # Calls under way, and fetch locks Redis gave this worker that no
        # set or release ended yet: close waits for them, so that the
        # connections do not go first (the middleware waits for no write).
        self._under_way = _UnderWay()
        self._held: set[str] = set()
        self._token = uuid.uuid4().hex  # the value of this worker's fetch locks

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        longest = max(
            _settings.number(settings, "ROBOTSTXT_CACHE_SECONDS", 86400),
            _settings.number(settings, "ROBOTSTXT_UNAVAILABLE_SECONDS", 3600),
        )
        store = cls(
            redis_client(settings),
            MemoryStore.from_crawler(crawler),
            settings.get("ROBOTSTXT_REDIS_PREFIX", "robotstxt"),
            max_age=2 * longest,
            slow_seconds=_settings.number(settings, "ROBOTSTXT_REDIS_SLOW_SECONDS", 0.1),
            agent=_settings.robot_agent(settings),
        )
        crawler.signals.connect(store.warm_up, signal=signals.engine_started)
        crawler.signals.connect(store.close, signal=signals.engine_stopped)
        return store

    async def warm_up(self) -> None:
        """Before the first request: load the scripts, open a few
        connections and read Redis's clock, so that the first origins wait
        one round trip per call, not for uploads, connection handshakes and
        clock readings too (with Redis 50 ms away, half a second)."""
        calls = [self._load(source) for source in SCRIPTS.values()]
        calls += [self._read_clock_once() for _ in range(self.WARM_CONNECTIONS - len(calls))]
        loaded = await maybe_deferred_to_future(DeferredList(list(map(deferred_from_coro, calls))))
        if all(success and result for success, result in loaded):
            await self._know_clock()

    async def _load(self, script: str) -> bool:
        """Upload a script (else its first call does); False if Redis fails
        (the first call warns)."""
        try:
            await self._redis.load_script(script)
        except self._errors:
            return False
        return True

    def peek(self, origin: str) -> OriginState | None:
        """The origin's state if this worker holds it fresh, without I/O."""
        local = self._local.get(origin)
        return local if local is not None and local.expires_at > time.time() else None

    def get(self, origin: str) -> MaybeAwaitable[OriginState | None]:
        local = self._local.get(origin)
        if (local is not None and local.expires_at > time.time()) or self._down():
            return local
        return self._get_shared(origin, local)

    def set(self, origin: str, state: OriginState, body: bytes | None = b"") -> MaybeAwaitable[None]:
        self._local.set(origin, state)
        return self._ending_claim(origin, lambda: self._set_shared(origin, state, body))

    def claim(self, origin: str, seconds: float) -> MaybeAwaitable[bool]:
        if self._down():
            return True  # no one to share with: fetch here
        return self._claim_shared(origin, seconds)

    def reserve(self, origin: str, spacing: float) -> MaybeAwaitable[float | None]:
        if self._down():
            return self._local.reserve(origin, spacing)  # this worker alone, until Redis is back
        return self._reserve_shared(origin, spacing)

    def release(self, origin: str) -> MaybeAwaitable[None]:
        return self._ending_claim(origin, lambda: self._run("release", [self._key(origin, "fetching")], [self._token]))

    async def close(self) -> None:
        """Release the connections (and threads) when the engine stops, once
        the calls under way are done and the fetch locks held are let go:
        a write made as the spider closed may not have reached Redis yet
        (Scrapy 2.13 starts it a loop turn later), or not be made yet (under
        a non-asyncio reactor, a fetch ended by the close resumes after
        engine_stopped was sent, so a turn goes first; a claim granted as
        the spider closed is released after it). At most CLOSE_SECONDS: a
        lock held longer expires on its own."""
        await _loop.sleep(0)
        with suppress(defer.TimeoutError):
            await maybe_deferred_to_future(self._under_way.done().addTimeout(self.CLOSE_SECONDS, _loop.clock()))
        if self._under_way:
            logger.warning(
                "Redis store closed with %d calls or fetch locks still under way after %s s",
                len(self._under_way),
                self.CLOSE_SECONDS,
            )
        await self._redis.close()

    def _written(self, write: Coroutine[Any, Any, Any]) -> Deferred[None]:
        """Start *write*, and have close wait for it. The caller's Deferred
        cancels the write (a timeout) but does not hold close's."""
        self._under_way.begin()
        started: Deferred[Any] = deferred_from_coro(write)
        started.addBoth(self._under_way.end)
        answer: Deferred[None] = Deferred(lambda _: started.cancel())

        def relay(result: Any) -> None:
            # Cancelled, the answer has failed already (CancelledError), and
            # the write may end later (a task on the asyncio loop ends a
            # turn after its cancellation): that end is nobody's business.
            if not answer.called:
                answer.callback(result)

        started.addBoth(relay)
        return answer

    def _ending_claim(self, origin: str, write: Callable[[], Coroutine[Any, Any, Any]]) -> MaybeAwaitable[None]:
        """Start *write* (unless Redis is down), which ends this worker's
        claim of *origin*; only then is the lock held for it let go, so that
        a close waiting for the lock waits for the write too."""
        try:
            return None if self._down() else self._written(write())
        finally:
            if origin in self._held:
                self._held.remove(origin)
                self._under_way.end()

    async def _get_shared(self, origin: str, local: OriginState | None) -> OriginState | None:
        sent = time.time()
        answer = await self._run("read", [self._key(origin, "state")], [MAX_BYTES])
        if answer is None:
            return local
        seconds, microseconds, kind, *found = answer
        self._read_clock(sent, int(seconds) + int(microseconds) / 1e6)
        if kind == b"none":
            return local
        if kind == b"oversized":
            return self._unreadable(origin, "size", "a state larger than any robots.txt; ignored", local)
        if not found:
            return self._unreadable(
                origin, "type", f"the state is a Redis {kind.decode(errors='replace')}, not a hash; ignored", local
            )
        raw_outcome, body, raw_expiry = found[0]
        outcome = OUTCOMES.get(raw_outcome)
        if outcome is None:
            return self._unreadable(origin, "outcome", f"outcome {raw_outcome!r}; ignored", local)
        expires_at = _finite(raw_expiry)
        if expires_at is None or expires_at > time.time() + self._max_age:
            return self._unreadable(origin, "expiry", f"expiry {raw_expiry!r}; ignored", local)
        if body is None:
            return self._unreadable(origin, "body", "a state without body; ignored", local)
        if local is not None and local.expires_at == expires_at:
            return local  # the same fetch: no need to parse it again
        has_rules, unavailable = outcome
        state = OriginState(await parsed(body, self._agent) if has_rules else None, unavailable, expires_at)
        self._local.set(origin, state)
        return state

    async def _set_shared(self, origin: str, state: OriginState, body: bytes | None) -> None:
        # Kept past expiry, so that workers refresh while deciding by it; a
        # nonsensical expiry is kept no longer than a believable one.
        ttl = math.ceil(min(max(1.0, state.expires_at - time.time()), self._max_age) * 2)
        keys = [self._key(origin, "state"), self._key(origin, "fetching")]
        if body is None:
            await self._run("keep", keys, [repr(state.expires_at), ttl])
            return
        outcome = "unavailable" if state.unavailable else "rules" if state.robots is not None else "unrestricted"
        await self._run("store", keys, [outcome, body, repr(state.expires_at), ttl])

    async def _claim_shared(self, origin: str, seconds: float) -> bool:
        keys = [self._key(origin, "state"), self._key(origin, "fetching")]
        sent = time.time()
        args = [repr(sent), max(1, int(seconds * 1000)), repr(self._max_age), MAX_BYTES, self._token]
        # Under way from the call to the lock held (or refused): between the
        # two, a close resumed at once (non-asyncio reactors) saw nothing.
        self._under_way.begin()
        held = False
        try:
            answer = await self._run("claim", keys, args)
            if answer is None:
                return True  # Redis failed: fetch here
            claimed, redis_seconds, redis_microseconds = answer
            self._read_clock(sent, int(redis_seconds) + int(redis_microseconds) / 1e6)
            if claimed == 2:
                self._unreadable(origin, "lock", "a fetch lock without expiry, taken over", None)
            held = bool(claimed) and origin not in self._held
            if held:
                self._held.add(origin)  # under way until set or release lets go
            return claimed != 0
        finally:
            if not held:
                self._under_way.end()

    async def _reserve_shared(self, origin: str, spacing: float) -> float:
        """A turn from Redis. Turns asked for at once are reserved together,
        one call per origin at a time: a burst of an origin's requests (a
        page's links) costs a round trip or two, not a connection each."""
        turn: Deferred[float] = Deferred()
        queued_spacing, turns = self._queued.get(origin, (spacing, []))
        turns.append(turn)
        self._queued[origin] = (max(spacing, queued_spacing), turns)
        if origin not in self._reserving:
            self._reserving.add(origin)
            deferred_from_coro(self._reserve_queued(origin))
        return await maybe_deferred_to_future(turn)

    async def _reserve_queued(self, origin: str) -> None:
        """Reserve the turns queued for *origin*, batch after batch, until none is left."""
        try:
            while origin in self._queued:
                spacing, turns = self._queued.pop(origin)
                try:
                    start = await self._reserve_turns(origin, spacing, len(turns))
                except Exception as exc:
                    for turn in turns:
                        if not turn.called:  # a caller may have given up (cancelled) its turn
                            turn.errback(exc)
                else:
                    for index, turn in enumerate(turns):
                        if not turn.called:
                            turn.callback(start + index * spacing)
        finally:
            self._reserving.discard(origin)

    async def _reserve_turns(self, origin: str, spacing: float, count: int) -> float:
        """The first of *count* consecutive turns, *spacing* apart."""
        if not self._clock_known and not await self._know_clock():
            return self._local.reserve(origin, count * spacing)
        horizon = turns_horizon(spacing)
        for _ in range(self.RESERVE_ATTEMPTS):
            # Ask for a start the answer can reach in time: its way back
            # (half a round trip) with as much again to spare, plus 5 ms.
            lead = min(self._round_trip + 0.005, 1.0)
            floor = self._local.next_start(origin)
            sent = time.time()
            args = [repr(spacing), repr(lead), repr(horizon), count, repr(floor + self._clock.turn_offset())]
            answer = await self._run("reserve", [self._key(origin, "next")], args)
            if answer is None:
                return self._local.reserve(origin, count * spacing)
            redis_start, redis_now, problem = answer
            if problem:
                self._unreadable(origin, "next", problem.decode(errors="replace"), None)
            self._read_clock(sent, float(redis_now))
            start = float(redis_start) - self._clock.turn_offset()
            self._local.reserved_until(origin, start + count * spacing)  # should Redis fail
            if start >= time.time() or count > 1:
                break
            # The answer came after the turn began: using it late would
            # squeeze the next turn, so it is given up. (Of a batch, only
            # the turns already begun are given up, by their callers.)
        return start

    async def _know_clock(self) -> bool:
        """Read Redis's clock (every answer of ``read`` and ``claim`` did
        too) until readings stop getting better: the first ones may wait
        for new connections. False if Redis fails."""
        for _ in range(self.CLOCK_READINGS):
            if self._clock.settled:
                break
            if not await self._read_clock_once():
                return False
        self._clock_known = True
        return True

    async def _read_clock_once(self) -> bool:
        sent = time.time()
        reading = await self._run("clock", [], [])
        if reading is not None:
            self._read_clock(sent, int(reading[0]) + int(reading[1]) / 1e6)
        return reading is not None

    def _read_clock(self, sent: float, redis_now: float) -> None:
        self._clock.read(sent, time.time(), redis_now)

    def _key(self, origin: str, kind: str) -> str:
        return f"{self._prefix}:{{{origin}}}:{kind}"

    def _down(self) -> bool:
        return time.time() < self._down_until

    async def _run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run one script; None (and one warning per outage) when Redis fails."""
        self._under_way.begin()
        try:
            return await self._run_now(script, keys, args)
        finally:
            self._under_way.end()

    async def _run_now(self, script: str, keys: list[str], args: list[Any]) -> Any:
        began = time.monotonic()
        try:
            answer = await self._redis.run(script, keys, args)
        except self._errors as exc:
            if not self._down_until:
                logger.warning("Redis store unreachable (%s): going on with this worker's own store", exc)
            self._down_until = time.time() + self.RETRY_SECONDS
            return None
        self._timed(began, time.monotonic())
        if self._down_until:
            logger.warning("Redis store reachable again: sharing robots.txt state with the other workers")
            self._down_until = 0.0
        return answer

    def _timed(self, began: float, ended: float) -> None:
        """Track how long calls take; warn once when calls made one after
        the other were all slow (a stall of this process slows the calls
        it holds up, but not the ones made after it)."""
        seconds = ended - began
        self._round_trip = 0.8 * self._round_trip + 0.2 * seconds if self._round_trip else seconds
        if seconds <= self._slow_seconds:
            self._slow_in_a_row, self._slow_until = 0, 0.0
            return
        if began < self._slow_until:
            return  # made while the last slow one was under way: one of a batch
        self._slow_in_a_row += 1
        self._slow_until = ended
        if self._slow_in_a_row == self.SLOW_IN_A_ROW and not self._warned_slow:
            self._warned_slow = True
            logger.warning(
                "Redis store is slow: %d calls in a row took over ROBOTSTXT_REDIS_SLOW_SECONDS = %s s "
                "(%.3f s on average); requests of new and paced origins wait for it",
                self.SLOW_IN_A_ROW,
                self._slow_seconds,
                self._round_trip,
            )

    def _unreadable(self, origin: str, kind: str, problem: str, local: OriginState | None) -> OriginState | None:
        """Report a stored value that makes no sense (once per origin and
        kind); the caller goes on as if it were absent, with *local*."""
        if (origin, kind) not in self._warned:
            self._warned[origin, kind] = None
            if len(self._warned) > self.WARNED_ORIGINS:
                self._warned.popitem(last=False)
            logger.warning("Redis store holds a bad value for %s: %s", origin, problem)
        return local


class RedisClock:
    """How far Redis's clock is ahead of ours, read as NTP reads a server's.

    A reading (a call sent at *sent* whose answer says Redis's time) is off
    by at most half its round trip. The best reading is kept, its bound
    growing as the clocks may drift apart, and a new one replaces it only
    when its bound is as tight: a reply that waited for a busy reactor, a
    queue of calls or a new connection never moves the offset. Once a
    turn has been timed by it, the offset in use follows the best reading
    slowly (slews, as NTP does): a step would move every reserved start at
    once and squeeze the gap between two turns.
    """

    #: How fast two clocks may drift apart, seconds per second (100 ppm).
    DRIFT = 1e-4
    #: How fast the offset in use may move once turns use it, seconds per second.
    SLEW = 2e-3
    #: A reading this much looser than the best (plus half a millisecond)
    #: still counts as "as good": readings have reached their floor.
    SETTLED = 1.2

    def __init__(self) -> None:
        self._error = math.inf  # the best reading's bound when it was read
        self._best = 0.0  # its offset
        self._read_at = 0.0
        self._offset = 0.0  # the offset in use
        self._moved_at = 0.0
        self._last_error = math.inf
        self._readings = 0
        self._timing_turns = False

    def read(self, sent: float, received: float, redis_now: float) -> None:
        """Take a reading: a call sent and answered at these times of ours."""
        error = (received - sent) / 2
        self._last_error = error
        self._readings += 1
        if error <= self._error + (received - self._read_at) * self.DRIFT:
            self._error, self._best, self._read_at = error, redis_now - (sent + received) / 2, received
        step = self.SLEW * (received - self._moved_at) if self._timing_turns else math.inf
        self._offset += max(-step, min(step, self._best - self._offset))
        self._moved_at = received

    def turn_offset(self) -> float:
        """The offset to time a turn by; from now on it only slews."""
        self._timing_turns = True
        return self._offset

    @property
    def settled(self) -> bool:
        """Whether two readings were taken and the last was about as good as the best."""
        return self._readings > 1 and self._last_error <= self.SETTLED * self._error + 0.0005


def _finite(raw: bytes | None) -> float | None:
    """A stored number, if written in decimal as ours are (see _DECIMAL)."""
    if raw is None or _DECIMAL.fullmatch(raw) is None:
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


class _UnderWay:
    """How many things are under way, and Deferreds that fire when none is."""

    def __init__(self) -> None:
        self._count = 0
        self._waiting: list[Deferred[None]] = []

    def __len__(self) -> int:
        return self._count

    def begin(self) -> None:
        self._count += 1

    def end(self, result: Any = None) -> Any:
        """One thing ended (a Deferred's callback: *result* passes through)."""
        self._count -= 1
        if not self._count and self._waiting:
            # A turn later, if nothing started meanwhile: the caller this end
            # resumes may make its next call at once (a read, then a claim).
            _loop.call_later(0, self._settle)
        return result

    def _settle(self) -> None:
        if self._count:
            return
        waiting, self._waiting = self._waiting, []
        for done in waiting:
            if not done.called:  # cancelled by its timeout
                done.callback(None)

    def done(self) -> Deferred[None]:
        """A Deferred that fires once nothing is under way."""
        done: Deferred[None] = Deferred()
        if self._count:
            self._waiting.append(done)
        else:
            done.callback(None)
        return done


class _AsyncioRedis:
    """``redis.asyncio`` on the loop that runs the crawl."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._scripts = {name: client.register_script(source) for name, source in SCRIPTS.items()}

    async def run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        return await self._scripts[script](keys=keys, args=args)

    async def load_script(self, script: str) -> None:
        await self._client.script_load(script)

    async def close(self) -> None:
        await self._client.aclose()


class _ThreadedRedis:
    """The blocking client in threads of its own (not the reactor's pool,
    which the default DNS resolver uses); answers come back as Deferreds on
    the reactor thread."""

    def __init__(self, client: Any, threads: int) -> None:
        from twisted.internet import reactor

        self._client = client
        self._reactor = cast("IReactorFromThreads", reactor)
        self._scripts = {name: client.register_script(source) for name, source in SCRIPTS.items()}
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="robotstxt-redis")

    def run(self, script: str, keys: list[str], args: list[Any]) -> Deferred[Any]:
        return self._in_thread(self._scripts[script], keys=keys, args=args)

    def load_script(self, script: str) -> Deferred[Any]:
        return self._in_thread(self._client.script_load, script)

    def _in_thread(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred[Any]:
        answer: Deferred[Any] = Deferred()

        def settle(future: Future[Any]) -> None:
            error = future.exception()
            if error is None:
                answer.callback(future.result())
            else:
                answer.errback(error)

        future = self._pool.submit(call, *args, **kwargs)
        future.add_done_callback(lambda done: self._reactor.callFromThread(settle, done))
        return answer

    async def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()


def redis_client(settings: BaseSettings) -> Any:
    """A Redis client for the loop that runs this crawl, chosen at start-up:
    ``redis.asyncio`` under an asyncio loop, else the blocking one (that
    :class:`RedisStore` runs in threads); a clear error when neither can
    work."""
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        raise RuntimeError(
            f"RedisStore needs redis-py 4.2 or newer ({exc}): pip install 'scrapy-robots-coccoc[redis]'"
        ) from exc
    module: Any = redis.asyncio if _asyncio_runs_the_crawl(settings) else redis
    options = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
    url = settings.get("ROBOTSTXT_REDIS_URL") or settings.get("REDIS_URL")
    if url:
        # The URL's options win over ours, but the store reads bytes: with
        # decode_responses=True every read failed and nothing was shared.
        pool = module.ConnectionPool.from_url(url, **options)
        pool.connection_kwargs["decode_responses"] = False
        return module.Redis.from_pool(pool)  # closed with the client
    return module.Redis(
        host=settings.get("REDIS_HOST", "localhost"), port=settings.getint("REDIS_PORT", 6379), **options
    )


def _asyncio_runs_the_crawl(settings: BaseSettings) -> bool:
    """Whether an asyncio loop runs the crawl: Scrapy's asyncio reactor, or
    no reactor at all (``TWISTED_REACTOR_ENABLED = False``, Scrapy 2.15+)."""
    if not settings.getbool("TWISTED_REACTOR_ENABLED", True):
        return True
    if "twisted.internet.reactor" not in sys.modules:
        raise RuntimeError(
            "RedisStore was built before a Twisted reactor was installed: it cannot tell whether to use "
            "redis.asyncio (asyncio reactor) or its own threads (another reactor)"
        )
    from twisted.internet import reactor
    from twisted.internet.asyncioreactor import AsyncioSelectorReactor

    return isinstance(reactor, AsyncioSelectorReactor)
