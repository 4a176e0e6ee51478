"""The :class:`Store` protocol the middleware calls, and the :class:`OriginState` a store keeps per origin."""

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
    """One robots.txt fetch's outcome: ``robots`` holds the rules after a 200 answer; None after another answer
    (``unavailable`` False: all allowed) or none (``unavailable`` True: nothing downloaded until ``expires_at``).
    ``answer`` is what decides, as the compliance record names it: the SHA-256 (hex) of the body the rules were
    parsed from, else the answer's status or failure (``"status 404"``, ``"no answer: …"``); "" when unknown."""

    robots: RobotsTxt | None
    unavailable: bool
    expires_at: float
    answer: str = ""


class Store(Protocol):
    """What the middleware asks of a store. Each method returns its answer or an awaitable the crawl's loop drives
    (coroutines; asyncio futures under the asyncio reactor or none, Deferreds under another), so that a store that
    talks to a server does not block the reactor.

    Optional: ``peek(origin) -> OriginState | None``, what this process knows without I/O (None: ask ``get``);
    ``release(origin)``, the fetch this process claimed ended with nothing to store, so another worker may fetch now
    (never drop a claim this process no longer holds); ``pause(origin, until)``, the origin asked every worker to
    pause until that ``time.time()`` (429, 503, ``Retry-After``); ``paused_until(origin) -> float``, when the pause
    known here ends, without I/O (0.0: none). A store without the last two pauses nothing.
    """

    def get(self, origin: str) -> MaybeAwaitable[OriginState | None]:
        """The origin's state, fresh or stale; None if unknown."""

    def set(self, origin: str, state: OriginState, body: bytes | None) -> MaybeAwaitable[None]:
        """Keep a fetch's outcome and *body* (b"" without rules; None: a failed refresh keeps the stored rules)."""

    def claim(self, origin: str, seconds: float) -> MaybeAwaitable[bool]:
        """Whether to fetch the origin's robots.txt now: False while another worker does (for at most *seconds*)."""

    def reserve(self, origin: str, spacing: float) -> MaybeAwaitable[float | None]:
        """A ``time.time()`` start for the next request to a paced origin, *spacing* after every start any worker
        reserved before it and not before the answer arrives (reserve again if it came late); None: no pacing.

        The caller sleeps until then; waking over a grace late, it reserves again, as a late turn would squeeze the
        next. So starts stay ``spacing - grace`` apart whatever stalls (the middleware asks 1.05 x the Crawl-delay,
        grace 5% of it)."""


class StoreSetupError(RuntimeError):
    """The store cannot work in this crawl (a package missing, an unusable loop): the crawl stops before any request."""
