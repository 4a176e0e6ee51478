"""The Redis store: robots.txt state and Crawl-delay turns shared by the workers of a crawl."""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer
from twisted.internet.defer import Deferred, DeferredList

from .._crawl import loop
from .._crawl import settings as _settings
from .._crawl.pacing import turns_horizon
from .._crawl.parse import PARSE_IN_THREAD_BYTES, _body_shared, parsed
from .._record.entries import digest
from . import redisstate
from .base import OriginState
from .memory import MemoryStore
from .redisclient import SCRIPTS, AsyncioRedis, ThreadedRedis, redis_client, redis_failures
from .redisclock import RedisClock
from .redisstate import MAX_STORED, finite

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.signalmanager import SignalManager
    from typing_extensions import Self

    from .base import MaybeAwaitable

logger = logging.getLogger(__name__)


class RedisStore:
    """Shares per-origin state among a crawl's workers through one Redis server (``ROBOTSTXT_REDIS_URL``, else
    scrapy-redis's ``REDIS_URL``, else ``REDIS_HOST``/``REDIS_PORT``).

    Per origin, Redis holds the outcome, raw body and expiry; a short-lived lock, so that one worker fetches while
    the others wait; and the next start that paces the Crawl-delay across workers. A local :class:`MemoryStore` in
    front asks Redis once per origin and period; when Redis fails, the worker warns, goes on alone and retries after
    ``RETRY_SECONDS``. Redis is never awaited on the reactor thread (``redis.asyncio`` under asyncio, else threads).
    Nonsense read back is ignored with one WARNING per origin and problem; three calls in a row slower than
    ``ROBOTSTXT_REDIS_SLOW_SECONDS`` get one WARNING per crawl.
    """

    RETRY_SECONDS = 5.0
    #: How often, at most, a worker reads its peers' pauses: they are announced on a channel, so this only
    #: catches what a worker missed (a reconnection).
    PAUSE_POLL_SECONDS = 0.2
    MAX_PAUSES = 10_000
    #: The longest close waits for calls and fetch locks under way (an ended fetch lets go in a turn or two).
    CLOSE_SECONDS = 3.0
    #: Threads of the pool that runs the blocking client (other reactors).
    THREADS = 8
    #: Reservations tried before a late one is returned all the same.
    RESERVE_ATTEMPTS = 5
    #: Connections opened before the crawl starts, by script uploads and clock readings.
    WARM_CONNECTIONS = 10
    #: At most this many readings of Redis's clock before the first reservation.
    CLOCK_READINGS = 5
    #: On a cluster, how often Redis's clock is read again while turns are reserved (other answers do not count).
    CLUSTER_CLOCK_SECONDS = 10.0
    #: Redis is slow when this many calls in a row took over ``ROBOTSTXT_REDIS_SLOW_SECONDS``.
    SLOW_IN_A_ROW = 3
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
        signals: SignalManager | None = None,
    ) -> None:
        """*max_age*: the longest believable lifetime of a state; *agent*: the robot bodies are parsed for;
        *signals*: the crawler's, told of each body read from Redis (``_body_shared``: the compliance record)."""
        import redis
        import redis.asyncio

        asyncio_client = isinstance(client, (redis.asyncio.Redis, redis.asyncio.RedisCluster))
        self._redis: AsyncioRedis | ThreadedRedis = (
            AsyncioRedis(client) if asyncio_client else ThreadedRedis(client, self.THREADS)
        )
        self._local = local
        self._prefix = prefix
        self._pauses = f"{prefix}:pauses"
        # Redis's channels ignore its databases, unlike its keys: the channel names the database of the pauses. Its
        # hash tag puts it in the slot of the pauses, where a cluster lets pause.lua publish it (SPUBLISH).
        db = 0 if self._redis.cluster else client.connection_pool.connection_kwargs.get("db", 0)
        self._channel = f"{{{self._pauses}}}:{db}"
        self._publish = "SPUBLISH" if self._redis.cluster else "PUBLISH"
        self._max_age = max_age
        self._slow_seconds = slow_seconds
        self._agent = agent
        self._signals = signals
        self._errors = redis_failures()
        self._down_until = 0.0
        self._round_trip = 0.0  # smoothed duration of a call, seconds
        self._clock = RedisClock()
        self._clock_known = False
        self._clock_read_at = 0.0
        self._slow_in_a_row = 0
        self._slow_until = 0.0
        self._warned_slow = False
        self._warned: OrderedDict[tuple[str, str], None] = OrderedDict()
        # Origins whose shared state this worker could not read: its claim does not take that state for fresh.
        self._distrusted: OrderedDict[str, None] = OrderedDict()
        # Origin -> (spacing, callers) of the turns its next call reserves; origins with a call under way.
        self._queued: dict[str, tuple[float, list[Deferred[float]]]] = {}
        self._reserving: set[str] = set()
        # Calls and fetch locks under way: close waits for them (the middleware awaits no write), then closes.
        self._under_way = _UnderWay()
        self._held: set[str] = set()
        self._polled_at = 0.0
        self._unshared: dict[str, float] = {}  # pauses to write once Redis answers again
        self._stop_listening: Callable[[], Any] | None = None
        self._closing = False  # a warm-up ending after close starts no listener
        self._token = uuid.uuid4().hex  # in this worker's fetch locks: release drops only its own

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
            signals=crawler.signals,
        )
        crawler.signals.connect(store.warm_up, signal=signals.engine_started)
        crawler.signals.connect(store.close, signal=signals.engine_stopped)
        return store

    async def warm_up(self) -> None:
        """Upload scripts, open connections and read the clock ahead, so first calls wait a round trip, no more."""
        calls = [self._load(source) for source in SCRIPTS.values()]
        calls += [self._read_clock_once() for _ in range(self.WARM_CONNECTIONS - len(calls))]
        loaded = await maybe_deferred_to_future(DeferredList(list(map(deferred_from_coro, calls))))
        if all(success and result for success, result in loaded):
            await self._know_clock()
        self.listen()

    def listen(self) -> None:
        """Learn the peers' pauses as they are announced, not at the next read of them."""
        if self._stop_listening is None and not self._closing:
            self._stop_listening = self._redis.listen(self._channel, self._announced, self.RETRY_SECONDS)

    def _announced(self, message: Any) -> None:
        """A pause a worker announced: b"origin until" (on Redis's clock)."""
        if not isinstance(message, bytes):
            return
        origin, _, until = message.rpartition(b" ")
        end = finite(until)
        if not origin or end is None:
            return
        end -= self._clock.turn_offset()
        if end <= time.time() + self._max_age:
            self._local.pause(origin.decode(errors="replace"), end)

    async def _load(self, script: str) -> bool:
        """Upload *script* ahead of its first call; False if Redis fails (that call warns)."""
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
        if body is not None:
            self._distrusted.pop(origin, None)
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

    def pause(self, origin: str, until: float) -> MaybeAwaitable[None]:
        """Pause *origin* here at once, and for the peers through Redis (on its clock): written even while Redis
        is taken for down, since no request waits for it, and again once Redis answers if the write failed."""
        self._local.pause(origin, until)
        return self._written(self._share_pause(origin, until))

    async def _share_pause(self, origin: str, until: float) -> None:
        now = time.time()
        ttl = math.ceil(min(max(1.0, until - now), self._max_age)) + 60
        offset = self._clock.turn_offset()
        args = [repr(until + offset), origin, repr(now + offset), ttl, self._channel, self._publish]
        written = None
        try:
            written = await self._run("pause", [self._pauses], args)
        finally:
            if written is None:  # failed, or cancelled by the middleware's store timeout: Redis did not answer
                self._unshared_pause(origin, until)

    def _unshared_pause(self, origin: str, until: float) -> None:
        self._unshared[origin] = max(until, self._unshared.pop(origin, 0.0))
        while len(self._unshared) > self.MAX_PAUSES:
            del self._unshared[next(iter(self._unshared))]

    def _share_unshared_pauses(self) -> None:
        unshared, self._unshared = self._unshared, {}
        now = time.time()
        for origin, until in unshared.items():
            if until > now:
                self._written(self._share_pause(origin, until))

    def paused_until(self, origin: str) -> float:
        """When *origin*'s pause ends as known here; peers' pauses are polled in the background: no request waits."""
        now = time.time()
        if now - self._polled_at >= self.PAUSE_POLL_SECONDS and not self._down():
            self._polled_at = now
            deferred_from_coro(self._read_pauses(now))
        return self._local.paused_until(origin)

    async def _read_pauses(self, now: float) -> None:
        offset = self._clock.turn_offset()
        answer = await self._run("pauses", [self._pauses], [repr(now + offset), self.MAX_PAUSES])
        if not isinstance(answer, list):
            return
        for origin, until in zip(answer[::2], answer[1::2], strict=False):
            end = finite(until) if isinstance(until, bytes) else None
            if isinstance(origin, bytes) and end is not None and end - offset <= now + self._max_age:
                self._local.pause(origin.decode(errors="replace"), end - offset)

    async def close(self) -> None:
        """Close once calls and fetch locks under way end (at most CLOSE_SECONDS), a loop turn first: a write made as
        the spider closed may start late (Scrapy 2.13; other reactors resume a fetch the close ended after it)."""
        self._closing = True
        await loop.sleep(0)
        with suppress(defer.TimeoutError):
            await maybe_deferred_to_future(self._under_way.done().addTimeout(self.CLOSE_SECONDS, loop.clock()))
        if self._under_way:
            logger.warning(
                "Redis store closed with %d calls or fetch locks still under way after %s s",
                len(self._under_way),
                self.CLOSE_SECONDS,
            )
        if self._stop_listening is not None:
            await self._stop_listening()
        await self._redis.close()

    def _written(self, write: Coroutine[Any, Any, Any]) -> Deferred[None]:
        """Start *write*, which close waits for (not for the answer); cancelling the answer (a timeout) cancels it."""
        self._under_way.begin()
        started: Deferred[Any] = deferred_from_coro(write)
        started.addBoth(self._under_way.end)
        answer: Deferred[None] = Deferred(lambda _: started.cancel())

        def relay(result: Any) -> None:
            # Once cancelled, the answer has failed: the write's end a turn later (an asyncio task's) is ignored.
            if not answer.called:
                answer.callback(result)

        started.addBoth(relay)
        return answer

    def _ending_claim(self, origin: str, write: Callable[[], Coroutine[Any, Any, Any]]) -> MaybeAwaitable[None]:
        """Start *write* (unless Redis is down), which ends this worker's claim, then let the lock go."""
        try:
            return None if self._down() else self._written(write())
        finally:
            if origin in self._held:
                self._held.remove(origin)
                self._under_way.end()

    async def _get_shared(self, origin: str, local: OriginState | None) -> OriginState | None:
        sent = time.time()
        answer = await self._run("read", [self._key(origin, "state")], [MAX_STORED])
        if answer is None:
            return local
        seconds, microseconds, kind, *found = answer
        self._read_clock(sent, int(seconds) + int(microseconds) / 1e6, shared=False)
        if kind == b"none":
            return local
        if kind == b"oversized":
            return self._unreadable_state(origin, "size", "a state larger than any robots.txt; ignored", local)
        if not found:
            return self._unreadable_state(
                origin, "type", f"the state is a Redis {kind.decode(errors='replace')}, not a string; ignored", local
            )
        stored = redisstate.decode(found[0])
        if isinstance(stored, redisstate.Unreadable):
            return self._unreadable_state(origin, stored.kind, stored.problem, local)
        if stored.expires_at > time.time() + self._max_age:
            return self._unreadable_state(origin, "expiry", f"expiry {stored.expires_at!r}; ignored", local)
        self._distrusted.pop(origin, None)
        if local is not None and local.expires_at == stored.expires_at:
            return local  # the same fetch: no need to parse it again
        if not stored.has_rules:
            state = OriginState(None, stored.unavailable, stored.expires_at, stored.body.decode("utf-8", "replace"))
        else:
            robots = await parsed(stored.body, self._agent)
            state = OriginState(robots, stored.unavailable, stored.expires_at, digest(stored.body))
            if self._signals is not None:
                self._signals.send_catch_log(_body_shared, origin=origin, body=stored.body)
        self._local.set(origin, state)
        return state

    async def _set_shared(self, origin: str, state: OriginState, body: bytes | None) -> None:
        # Kept past expiry so workers decide by it while refreshing; a nonsense expiry no longer than a sane one.
        ttl = math.ceil(min(max(1.0, state.expires_at - time.time()), self._max_age) * 2)
        keys = [self._key(origin, "state"), self._key(origin, "fetching")]
        if body is None:
            await self._run("keep", keys, [repr(state.expires_at), ttl, MAX_STORED])
            return
        if state.robots is None:
            outcome, payload = "unavailable" if state.unavailable else "unrestricted", state.answer.encode()
        elif len(body) > PARSE_IN_THREAD_BYTES:  # compressing 500 KB takes tens of milliseconds
            outcome, payload = "rules", await loop.in_thread(redisstate.compress, body)
        else:
            outcome, payload = "rules", redisstate.compress(body)
        await self._run("store", keys, [redisstate.encode(outcome, state.expires_at, payload), ttl])

    async def _claim_shared(self, origin: str, seconds: float) -> bool:
        keys = [self._key(origin, "state"), self._key(origin, "fetching")]
        sent = time.time()
        distrusted = "1" if origin in self._distrusted else ""
        args = [repr(sent), max(1, int(seconds * 1000)), repr(self._max_age), MAX_STORED, self._token, distrusted]
        # Under way until the lock is held or refused: a close resuming in between (non-asyncio) waits.
        self._under_way.begin()
        held = False
        try:
            answer = await self._run("claim", keys, args)
            if answer is None:
                return True  # Redis failed: fetch here
            claimed, redis_seconds, redis_microseconds = answer
            self._read_clock(sent, int(redis_seconds) + int(redis_microseconds) / 1e6, shared=False)
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
        """A turn from Redis; turns asked at once are reserved in one call per origin at a time, not a call each."""
        turn: Deferred[float] = Deferred()
        queued_spacing, turns = self._queued.get(origin, (spacing, []))
        turns.append(turn)
        self._queued[origin] = (max(spacing, queued_spacing), turns)
        if origin not in self._reserving:
            self._reserving.add(origin)
            deferred_from_coro(self._reserve_queued(origin))
        return await maybe_deferred_to_future(turn)

    async def _reserve_queued(self, origin: str) -> None:
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
        if self._redis.cluster and time.time() - self._clock_read_at >= self.CLUSTER_CLOCK_SECONDS:
            deferred_from_coro(self._read_clock_once())  # in the background: the clock slews
        horizon = turns_horizon(spacing)
        for _ in range(self.RESERVE_ATTEMPTS):
            # Ask for a start the answer can reach in time: its way back (half a round trip), as much again, 5 ms.
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
            self._read_clock(sent, float(redis_now), shared=False)
            start = float(redis_start) - self._clock.turn_offset()
            self._local.reserved_until(origin, start + count * spacing)  # should Redis fail
            if start >= time.time() or count > 1:
                break
            # Begun before the answer came: used late, it would squeeze the next turn, so it is given up.
        return start

    async def _know_clock(self) -> bool:
        """Read Redis's clock until readings stop improving (the first wait for connections); False if Redis fails."""
        for _ in range(self.CLOCK_READINGS):
            if self._clock.settled:
                break
            if not await self._read_clock_once():
                return False
        self._clock_known = True
        return True

    async def _read_clock_once(self) -> bool:
        sent = self._clock_read_at = time.time()
        reading = await self._run("clock", [self._pauses], [])  # on a cluster: the node holding the pauses
        if reading is not None:
            self._read_clock(sent, int(reading[0]) + int(reading[1]) / 1e6)
        return reading is not None

    def _read_clock(self, sent: float, redis_now: float, *, shared: bool = True) -> None:
        """Learn Redis's clock from an answer; on a cluster only from the one node every worker reads it from
        (*shared*): an origin's turns, on its own master's clock, are then offset alike by every worker."""
        if shared or not self._redis.cluster:
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
        if self._unshared:  # a write failed, or was given up (a timeout) while Redis was not taken for down
            self._share_unshared_pauses()
        return answer

    def _timed(self, began: float, ended: float) -> None:
        """Track call times; warn once when calls made one after another were all slow (a batch held up counts once)."""
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

    def _unreadable_state(self, origin: str, kind: str, problem: str, local: OriginState | None) -> OriginState | None:
        self._distrusted[origin] = None
        if len(self._distrusted) > self.WARNED_ORIGINS:
            self._distrusted.popitem(last=False)
        return self._unreadable(origin, kind, problem, local)

    def _unreadable(self, origin: str, kind: str, problem: str, local: OriginState | None) -> OriginState | None:
        if (origin, kind) not in self._warned:
            self._warned[origin, kind] = None
            if len(self._warned) > self.WARNED_ORIGINS:
                self._warned.popitem(last=False)
            logger.warning("Redis store holds a bad value for %s: %s", origin, problem)
        return local


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
            # A turn later, if nothing started: the caller this end resumes may call again (read, then claim).
            loop.call_later(0, self._settle)
        return result

    def _settle(self) -> None:
        if self._count:
            return
        waiting, self._waiting = self._waiting, []
        for done in waiting:
            if not done.called:  # cancelled by its timeout
                done.callback(None)

    def done(self) -> Deferred[None]:
        done: Deferred[None] = Deferred()
        if self._count:
            self._waiting.append(done)
        else:
            done.callback(None)
        return done
