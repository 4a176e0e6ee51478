"""Stores that fail, lie or never answer, for the tests of store faults:
a crawl names them in ROBOTSTXT_STORE (``tests.fakestores.FlakyGetStore``)."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.defer import Deferred

from scrapy_robots_coccoc.stores import MemoryStore, OriginState


class FlakyGetStore(MemoryStore):
    """get() raises the first time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed = False

    def _once(self) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("store down (test)")

    def get(self, origin: str) -> OriginState | None:
        self._once()
        return super().get(origin)


class FlakySetStore(FlakyGetStore):
    def get(self, origin: str) -> OriginState | None:
        return MemoryStore.get(self, origin)

    def set(self, origin: str, state: OriginState, body: bytes = b"") -> None:
        self._once()
        super().set(origin, state, body)


class FlakyClaimStore(FlakySetStore):
    def set(self, origin: str, state: OriginState, body: bytes = b"") -> None:
        MemoryStore.set(self, origin, state, body)

    def claim(self, origin: str, seconds: float) -> bool:
        self._once()
        return super().claim(origin, seconds)


class FlakyPeekStore(FlakyGetStore):
    def get(self, origin: str) -> OriginState | None:
        return MemoryStore.get(self, origin)

    def peek(self, origin: str) -> OriginState | None:
        self._once()
        return MemoryStore.get(self, origin)


class GarbageGetStore(FlakyGetStore):
    """get() returns something that is not a state, once."""

    def get(self, origin: str) -> Any:
        if not self.failed:
            self.failed = True
            return "garbage"
        return MemoryStore.get(self, origin)

    def peek(self, origin: str) -> OriginState | None:
        return None


class NanExpiryStore(GarbageGetStore):
    """get() returns a state with a NaN expiry, once."""

    def get(self, origin: str) -> Any:
        if not self.failed:
            self.failed = True
            return OriginState(None, True, float("nan"))
        return MemoryStore.get(self, origin)


class GarbagePeekStore(FlakyGetStore):
    """peek() returns something that is not a state, once."""

    def get(self, origin: str) -> OriginState | None:
        return MemoryStore.get(self, origin)

    def peek(self, origin: str) -> Any:
        if not self.failed:
            self.failed = True
            return "garbage"
        return MemoryStore.get(self, origin)


class FlakyAsyncSetStore(FlakyGetStore):
    """An asynchronous store whose set() raises (in its coroutine) once."""

    def get(self, origin: str) -> OriginState | None:
        return MemoryStore.get(self, origin)

    async def set(self, origin: str, state: OriginState, body: bytes = b"") -> None:
        self._once()
        MemoryStore.set(self, origin, state, body)


class HangingGetStore(FlakyGetStore):
    """An asynchronous store whose first get() never answers (a server that
    accepted the connection and went silent)."""

    async def get(self, origin: str) -> OriginState | None:
        if not self.failed:
            self.failed = True
            import asyncio

            await asyncio.Future()  # never set
        return MemoryStore.get(self, origin)

    def peek(self, origin: str) -> None:
        return None


class AlwaysClaimedStore(MemoryStore):
    """A shared store in which a (crashed) peer seems to fetch every origin forever."""

    def peek(self, origin: str) -> None:
        return None

    def claim(self, origin: str, seconds: float) -> bool:
        return False


class ForgetfulStore(MemoryStore):
    """A shared store that lost its record of turns before every call (a
    Redis flushed or restarted): each turn it gives starts at once."""

    def reserve(self, origin: str, spacing: float) -> float:
        return time.time()


class NanReserveStore(MemoryStore):
    """A store whose pacing answers make no sense."""

    def reserve(self, origin: str, spacing: float) -> float:
        return float("nan")


class FarReserveStore(MemoryStore):
    def reserve(self, origin: str, spacing: float) -> float:
        return 1e12


class RaisingReserveStore(MemoryStore):
    def reserve(self, origin: str, spacing: float) -> float:
        raise RuntimeError("reserve failed (test)")


class SlowReserveStore(MemoryStore):
    """A store whose pacing answers come after ROBOTSTXT_STORE_TIMEOUT."""

    def reserve(self, origin: str, spacing: float) -> Deferred[float]:
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        return deferLater(reactor, 5, time.time)


class SilentReserveStore(MemoryStore):
    """A store whose pacing answer never comes (until cancelled)."""

    def reserve(self, origin: str, spacing: float) -> Deferred[float]:
        return Deferred()
