"""Redis's clock as seen from a worker, for turns that workers agree on."""

from __future__ import annotations

import math


class RedisClock:
    """Redis's clock offset from ours, estimated as NTP does: the tightest reading (off by half its round trip, plus
    drift) is kept, so a delayed reply never moves it; once turns use it, it slews: a step would squeeze two turns."""

    #: How fast two clocks may drift apart, seconds per second (100 ppm).
    DRIFT = 1e-4
    SLEW = 2e-3
    #: A reading this much looser than the best (plus 0.5 ms) shows readings have reached their floor.
    SETTLED = 1.2

    def __init__(self) -> None:
        self._error = math.inf
        self._best = 0.0
        self._read_at = 0.0
        self._offset = 0.0
        self._moved_at = 0.0
        self._last_error = math.inf
        self._readings = 0
        self._timing_turns = False

    def read(self, sent: float, received: float, redis_now: float) -> None:
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
        return self._readings > 1 and self._last_error <= self.SETTLED * self._error + 0.0005
