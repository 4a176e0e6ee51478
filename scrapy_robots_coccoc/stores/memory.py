"""The in-memory store: the default, one process's own."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from .._crawl import settings as _settings
from .._crawl.pacing import Pauses, Turns, process_pauses, process_turns

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from .base import OriginState

#: What an OriginState and its entry in the map take, the rules aside.
_STATE_BYTES = 200


class MemoryStore:
    """A least-recently-used map of origin states, bounded by ``ROBOTSTXT_MAX_ORIGINS`` and
    ``ROBOTSTXT_MAX_ORIGINS_MB``, with the turns of paced origins (the whole process's, from ``from_crawler``).
    Evicting an origin being fetched is harmless: the middleware holds its state and stores the new one."""

    def __init__(
        self,
        max_origins: int,
        max_bytes: int = 512 * 2**20,
        turns: Turns | None = None,
        pauses: Pauses | None = None,
    ) -> None:
        self._states: OrderedDict[str, tuple[OriginState, int]] = OrderedDict()
        self._max_origins = max(1, max_origins)
        self._max_bytes = max_bytes
        self._turns = turns or Turns(max_origins)
        self._pauses = pauses or Pauses(max_origins)
        self.nbytes = 0  # estimated size of the states held

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        max_origins = _settings.count(settings, "ROBOTSTXT_MAX_ORIGINS", 100_000, minimum=1)
        return cls(
            max_origins,
            int(_settings.number(settings, "ROBOTSTXT_MAX_ORIGINS_MB", 512, positive=True) * 2**20),
            process_turns(max_origins),
            process_pauses(max_origins),
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
        return self._turns.next_start(origin)

    def reserved_until(self, origin: str, next_start: float) -> None:
        """Start no turn here before *next_start*: a shared store's reservation, kept to pace alone from."""
        self._turns.reserved_until(origin, next_start)

    def pause(self, origin: str, until: float) -> None:
        self._pauses.pause(origin, until)

    def paused_until(self, origin: str) -> float:
        return self._pauses.until(origin)

    def __len__(self) -> int:
        return len(self._states)
