"""The :class:`Store` protocol the middleware calls, and the
:class:`OriginState` a store keeps per origin."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from .._parser import RobotsTxt

T = TypeVar("T")
#: What a store method returns: its answer, or an awaitable of it.
MaybeAwaitable: TypeAlias = T | Awaitable[T]


@dataclass(slots=True, frozen=True)
class OriginState:
    """The outcome of one robots.txt fetch.

    ``robots`` holds the rules after a 200 answer. It is None after any other
    answer (``unavailable`` False: everything allowed) and after no answer at
    all (``unavailable`` True: nothing is downloaded until ``expires_at``).
    """

    robots: RobotsTxt | None
    unavailable: bool
    expires_at: float


class Store(Protocol):
    """What the middleware asks of a store.

    Each method returns its answer or an awaitable of it, which the
    middleware awaits: a store that talks to a server must not block the
    reactor. Synchronous stores, like :class:`MemoryStore`, are the fast
    path. Awaitables must be ones the crawl's loop drives: coroutines or
    asyncio futures under Scrapy's default asyncio reactor (or no reactor),
    coroutines or Deferreds under another Twisted reactor.

    Two methods are optional. ``peek(origin) -> OriginState | None`` returns
    what this process knows without I/O, so that a known origin's requests
    are decided at once; None sends the middleware to ``get``.
    ``release(origin)`` says the fetch this process claimed ended with
    nothing to store (the spider closed, a local fault), so that another
    worker may fetch now rather than when the claim expires; it must leave
    a claim this process no longer holds. ``pause(origin, until)`` notes
    that the origin asked for a pause (a 429 or 503 answer, a
    ``Retry-After``) until that ``time.time()`` value, for every worker; and
    ``paused_until(origin) -> float`` answers, without I/O, when the pause
    this process knows of ends (0.0 for none). A store without them pauses
    nothing.
    """

    def get(self, origin: str) -> MaybeAwaitable[OriginState | None]:
        """The origin's state, fresh or stale; None if unknown."""

    def set(self, origin: str, state: OriginState, body: bytes | None) -> MaybeAwaitable[None]:
        """Keep a fetch's outcome. *body* is the robots.txt read (b"" without
        rules), or None when a failed refresh keeps the rules already stored."""

    def claim(self, origin: str, seconds: float) -> MaybeAwaitable[bool]:
        """Whether this process should fetch the origin's robots.txt now:
        False while another worker does (for at most *seconds*)."""

    def reserve(self, origin: str, spacing: float) -> MaybeAwaitable[float | None]:
        """Reserve a start time (a ``time.time()`` value) for the next request
        to a paced origin: at least *spacing* seconds after every start any
        worker reserved before it, and no earlier than the answer arrives (a
        store whose answer came too late reserves again). None from a store
        that does not pace.

        The caller sleeps until that time and starts the request; waking
        more than a grace late, it gives the turn up and reserves again: a
        turn used late would squeeze the next one, a turn given up only
        widens a gap. So requests start at least ``spacing - grace`` apart,
        whatever stalls, restarts or slow answers happen (the middleware asks
        for 1.05 x the Crawl-delay with a grace of 5% of it: a full delay).
        """


class StoreSetupError(RuntimeError):
    """The store cannot work in this crawl (a package missing, a loop it cannot use): the crawl stops at
    start-up with one ERROR line, before any request."""
