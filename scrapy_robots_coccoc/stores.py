"""Where the middleware keeps what it learnt of each origin.

A store maps an origin (``scheme://host:port``) to an :class:`OriginState`.
The in-memory store is the default; ``ROBOTSTXT_STORE`` names another class
with the same two methods, built with ``from_crawler``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._robotstxt import RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self


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
    def get(self, origin: str) -> OriginState | None: ...

    def set(self, origin: str, state: OriginState) -> None: ...


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

    def set(self, origin: str, state: OriginState) -> None:
        self._states[origin] = state
        self._states.move_to_end(origin)
        while len(self._states) > self._max_origins:
            self._states.popitem(last=False)

    def __len__(self) -> int:
        return len(self._states)
