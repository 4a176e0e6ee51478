"""Calls to the store, guarded: a store's code or server may not strand a waiting request or stop the crawl."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from inspect import isawaitable
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure

from ..stores import OriginState
from . import loop
from .fetcher import describe
from .pacing import Pauses, Turns, turns_horizon

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from scrapy.crawler import Crawler

    from ..stores import Store

logger = logging.getLogger(__name__)

#: What a store's failed answer is replaced with, told apart from None.
_FAILED = object()


class GuardedStore:
    """The store as the crawl calls it: each call bounded by ``ROBOTSTXT_STORE_TIMEOUT``, each answer checked,
    each failure a WARNING, a ``robotstxt/store_errors`` stat and a safe default."""

    def __init__(self, store: Store, crawler: Crawler, timeout: float, max_origins: int) -> None:
        self._store = store
        self._crawler = crawler
        self._stats = crawler.stats
        self._timeout = timeout
        # Turns and pauses of this process alone, for when the store cannot give them.
        self._paced_here = Turns(max_origins)
        self._paused_here = Pauses(max_origins)

    def peek(self, origin: str) -> OriginState | None:
        """What the store knows without I/O; None when it cannot tell."""
        if not hasattr(self._store, "peek"):
            return None
        try:
            return self._readable(origin, self._store.peek(origin))
        except Exception as exc:
            return self._failed("peek", origin, exc, None)

    async def get(self, origin: str) -> OriginState | None:
        """The stored state, fresh or stale; None if unknown or unreadable."""
        return self._readable(origin, await self._call("get", None, origin))

    async def claim(self, origin: str, seconds: float) -> bool:
        """Whether to fetch *origin* here; True when the store fails."""
        return await self._call("claim", True, origin, seconds)

    def set_later(self, origin: str, state: OriginState, body: bytes | None) -> None:
        """Store a fetch's outcome without waiting for the store's answer."""
        self._call_later("set", origin, state, body)

    def release_later(self, origin: str) -> None:
        """Let another worker fetch *origin* now, if the store shares fetches."""
        if hasattr(self._store, "release"):
            self._call_later("release", origin)

    def pause_later(self, origin: str, until: float) -> None:
        """Pause *origin* until *until*, for every worker the store serves; here at once, whatever the store."""
        self._paused_here.pause(origin, until)
        if hasattr(self._store, "pause"):
            self._call_later("pause", origin, until)

    def paused_until(self, origin: str) -> float:
        """When *origin*'s pause ends, as the store knows it without I/O (0.0 for none)."""
        here = self._paused_here.until(origin)
        if not hasattr(self._store, "paused_until"):
            return here
        try:
            until = self._store.paused_until(origin)
        except Exception as exc:
            return self._failed("paused_until", origin, exc, here)
        if not _finite(until):
            return here
        return max(here, until)

    def reserve(self, origin: str, spacing: float) -> float | Deferred[float | None] | None:
        """The start of *origin*'s next turn (see ``Store.reserve``), a Deferred from an asynchronous store. A
        failed or unbelievable answer gives a turn of this process's own: the origin stays paced."""
        try:
            answer = self._store.reserve(origin, spacing)
        except Exception as exc:
            return self._failed("reserve", origin, exc, self._paced_here.reserve(origin, spacing))
        if isawaitable(answer):
            later = deferred_from_coro(self._answer("reserve", origin, answer, _FAILED))
            return later.addCallback(lambda start: self._believable(origin, spacing, start))
        return self._believable(origin, spacing, answer)

    def _believable(self, origin: str, spacing: float, start: Any) -> float | None:
        if start is None:
            return None
        if not (_finite(start) and start <= time.time() + turns_horizon(spacing)):
            if start is not _FAILED:  # a failure was reported already
                self._failed("reserve", origin, ValueError(f"unbelievable start {start!r}"), None)
            return self._paced_here.reserve(origin, spacing)
        # No turn before the last one noted here: a store that lost its record, or missed the turns paced here
        # while it failed, must not give a turn right after one of ours.
        start = max(start, self._paced_here.next_start(origin))
        self._paced_here.reserved_until(origin, start + spacing)
        return start

    async def _call(self, method: str, default: Any, *args: Any) -> Any:
        try:
            result = getattr(self._store, method)(*args)
        except Exception as exc:
            return self._failed(method, args[0], exc, default)
        if isawaitable(result):
            return await self._answer(method, args[0], result, default)
        return result

    def _call_later(self, method: str, *args: Any) -> None:
        try:
            result = getattr(self._store, method)(*args)
        except Exception as exc:
            self._failed(method, args[0], exc, None)
            return
        if isawaitable(result):
            deferred_from_coro(self._answer(method, args[0], result, None))

    async def _answer(self, method: str, origin: str, answer: Awaitable[Any], default: Any) -> Any:
        """An asynchronous answer, awaited at most the timeout; a cancellation (the request leaving) is no failure."""
        bounded = deferred_from_coro(answer).addTimeout(self._timeout, loop.clock(), onTimeoutCancel=_timed_out)
        try:
            return await maybe_deferred_to_future(bounded)
        except CancelledError:
            raise
        except Exception as exc:
            return self._failed(method, origin, exc, default)

    def _failed(self, method: str, origin: str, exc: Exception, default: Any) -> Any:
        self._stats.inc_value("robotstxt/store_errors")
        logger.warning(
            "robots.txt store failed in %s(%s): %s",
            method,
            origin,
            describe(exc),
            extra={"spider": self._crawler.spider},
        )
        return default

    def _readable(self, origin: str, state: Any) -> OriginState | None:
        """*state* if it can be used; a store's garbage is None."""
        if state is None or (isinstance(state, OriginState) and _finite(state.expires_at)):
            return state
        self._stats.inc_value("robotstxt/store_errors")
        logger.warning(
            "robots.txt store returned an unreadable state for %s: ignored",
            origin,
            extra={"spider": self._crawler.spider},
        )
        return None


def _timed_out(result: Any, timeout: float) -> Any:
    """End a call cancelled by its timeout with TimeoutError, whether the cancellation is Twisted's or asyncio's."""
    if isinstance(result, Failure) and result.check(CancelledError, asyncio.CancelledError):
        raise TimeoutError(f"the store did not answer within {timeout} s")
    return result


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
